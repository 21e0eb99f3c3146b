"""``lcr serve``: the indexes on disk as tools an agent calls over the Model Context
Protocol (MCP), with each model loaded once for the server's life.

:mod:`lcr.serve.served` decides what is reachable, :mod:`lcr.serve.calls` how blocking
work is queued and cancelled, :mod:`lcr.serve.tools` the tools themselves and
:mod:`lcr.serve.http` the HTTP transport's guard. This module runs a server over
stdio (what desktop agents start) or streamable HTTP.
"""

from __future__ import annotations

from dataclasses import dataclass

import anyio

from lcr.serve.calls import Calls
from lcr.serve.served import Served
from lcr.serve.tools import ServeConfig, make_server

__all__ = ["Calls", "HttpOptions", "ServeConfig", "Served", "run", "stop"]

STOP_GRACE_S = 3.0  # how long a stopping server waits for work in flight


@dataclass(frozen=True)
class HttpOptions:
    host: str
    port: int
    token: str | None
    max_request_bytes: int
    read_timeout_s: float


def run(config: ServeConfig, http: HttpOptions | None) -> None:
    """Serve until the client closes stdin (stdio) or the process is interrupted."""
    server = make_server(config)
    if http is None:
        anyio.run(server.run_stdio_async)
    else:
        from lcr.serve.http import serve_http

        anyio.run(serve_http, server, http)


def stop(calls: Calls) -> bool:
    """Tell every call in flight to stop; whether all did within :data:`STOP_GRACE_S`
    (if not, the caller ends the process: every index write is atomic, so nothing is
    left half-written)."""
    calls.closing.set()
    return calls.wait_idle(STOP_GRACE_S)
