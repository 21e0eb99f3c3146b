"""``lcr serve``: the click command over :mod:`lcr.serve`."""

from __future__ import annotations

import signal
from typing import Any

import click

from lcr.cli.models import command_models, model_options, pop_model_spec
from lcr.errors import MissingExtraError, UsageError

DEFAULT_MAX_REQUEST_BYTES = 1_000_000
DEFAULT_READ_TIMEOUT_S = 30.0


def _address(_ctx: click.Context, _param: click.Parameter, value: str | None) -> Any:
    if value is None:
        return None
    host, colon, port = value.rpartition(":")
    host = host.strip("[]")
    if not colon or not host or not port.isdigit() or int(port) > 65535:
        raise click.BadParameter(f"{value!r} is not HOST:PORT (e.g. 127.0.0.1:8765)")
    return host, int(port)


@click.command("serve")
@click.argument("paths", metavar="[INDEX_OR_FOLDER]...", nargs=-1, type=click.Path())
@click.option(
    "--http",
    "address",
    default=None,
    metavar="HOST:PORT",
    callback=_address,
    help="Serve over streamable HTTP at http://HOST:PORT/mcp instead of stdio (port 0: "
    "any free one, said on stderr). Any HOST but 127.0.0.1, localhost or ::1 needs --token.",
)
@click.option(
    "--token",
    default=None,
    envvar="LCR_SERVE_TOKEN",
    metavar="TOKEN",
    help="HTTP only: every request must carry 'Authorization: Bearer TOKEN'. "
    "[env: LCR_SERVE_TOKEN, read with --http only]",
)
@click.option(
    "--allow-index",
    is_flag=True,
    help="Offer the index and add tools (building inside the served folders, one build "
    "at a time, under the same writer lock as lcr index).",
)
@click.option(
    "--max-request-bytes",
    type=click.IntRange(min=1024),
    default=DEFAULT_MAX_REQUEST_BYTES,
    show_default=True,
    help="HTTP only: a larger request is refused with an error.",
)
@click.option(
    "--read-timeout",
    type=click.FloatRange(min=0.1, max=3600),
    default=DEFAULT_READ_TIMEOUT_S,
    show_default=True,
    metavar="SECONDS",
    help="HTTP only: a request whose headers take longer to arrive is dropped, one whose "
    "body does is refused with an error.",
)
@model_options
def serve_cmd(
    paths: tuple[str, ...],
    address: tuple[str, int] | None,
    token: str | None,
    allow_index: bool,
    max_request_bytes: int,
    read_timeout: float,
    **model: Any,
) -> None:
    """Serve the indexes INDEX_OR_FOLDER... (default: those in the current folder) to
    agents over the Model Context Protocol.

    An index named here, or found in a folder named here, can be listed, retrieved
    from and asked, one index or several at once (tools list_indexes, info, retrieve,
    ask); nothing else on disk is reachable. Models load once, on the first call that
    needs each; model calls run at most --concurrency at once with --base-url, one at
    a time with a local model, the others waiting their turn. Over stdio by default
    (what desktop agents start; a malformed line gets a JSON-RPC error); --http serves
    streamable HTTP. Ctrl-C stops it within seconds. See docs/serve.md.
    """
    try:
        import mcp  # noqa: F401
    except ImportError:
        raise MissingExtraError(
            "lcr serve needs the MCP Python SDK: pip install 'lcr[serve]' (or pip install mcp)"
        ) from None
    from lcr import serve
    from lcr.progress import NULL_PROGRESS

    from_env = click.get_current_context().get_parameter_source("token") is (
        click.core.ParameterSource.ENVIRONMENT
    )
    if address is None and from_env:
        token = None  # LCR_SERVE_TOKEN set for an HTTP server elsewhere: stdio has no use for it
    http = None
    if address is not None:
        host, port = address
        if host not in ("127.0.0.1", "localhost", "::1") and not token:
            raise UsageError(
                f"--http {host}:{port} is reachable from other machines: give --token "
                "(or LCR_SERVE_TOKEN), or serve on 127.0.0.1"
            )
        http = serve.HttpOptions(host, port, token, max_request_bytes, read_timeout)
    elif token:
        raise UsageError("--token applies to --http only (stdio is the agent's own pipe)")
    served = serve.Served.from_arguments(paths)
    spec = pop_model_spec(model)
    models = command_models(spec, NULL_PROGRESS)
    slots = spec.concurrency if spec.base_url else 1  # one local model answers one call
    calls = serve.Calls(slots)
    config = serve.ServeConfig(served, models, calls, allow_index=allow_index)
    try:
        serve.run(config, http)
    except KeyboardInterrupt as exc:  # a signal: the server's own line, not a build's
        code, line = serve.stopped_by(getattr(exc, "signum", signal.SIGINT))
        serve.exit_when_stopped(calls, code, line)
    if not serve.stop(calls):  # the client closed stdin with a call still in flight
        serve.exit_when_stopped(calls, 130, None)
