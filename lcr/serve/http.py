"""``lcr serve --http``: MCP's streamable HTTP transport behind a guard.

Each connection is held to limits before any request is read (:func:`guarded_protocol`):
its request's headers must arrive within the read timeout, and at most so many
connections are open at once (fewer than the process may open files), the one that
has waited longest for its headers dropped to make room for a new one. The guard
then answers, before the SDK sees a request: a missing or wrong bearer token (401),
a body over the size limit (413), a body that does not arrive within the read
timeout (408, so a slow client holds no worker), and JSON that is not one JSON-RPC
message (400, invalid request: :mod:`lcr.serve.messages`), each as a JSON-RPC error
object. A body that is not JSON is the SDK's to refuse (a parse error). It also
notices a client that disconnects while its tool call runs, so the call stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import resource
import socket
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio

from lcr.serve.messages import INVALID_REQUEST, refused
from lcr.serve.options import HttpOptions

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    Scope = dict[str, Any]
    Message = dict[str, Any]

CLIENT_GONE = "lcr.client_gone"
PATH = "/mcp"
MAX_CONNECTIONS = 512  # open at once, at most (fewer where the file limit is low)
RESERVED_FILES = 64  # files kept for the server's own use (indexes, models), beyond those open
WANTED_FILES = 8192  # the soft limit on open files is raised this far (if the hard allows)


class Guard:
    """An ASGI middleware: the token, the size limit and the read timeout."""

    def __init__(self, app: Any, options: HttpOptions) -> None:
        self.app = app
        self.options = options

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        token = self.options.token
        if token is not None and not bearer_matches(headers.get("authorization", ""), token):
            await _refuse(send, 401, "a bearer token is required (Authorization: Bearer …)")
            return
        limit = self.options.max_request_bytes
        length = headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            await _refuse(send, 413, f"the request is over {limit} bytes")
            return
        if scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body = bytearray()
        try:
            with anyio.fail_after(self.options.read_timeout_s):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        return
                    body += message.get("body", b"")
                    if len(body) > limit:
                        await _refuse(send, 413, f"the request is over {limit} bytes")
                        return
                    if not message.get("more_body", False):
                        break
        except TimeoutError:
            await _refuse(
                send, 408, f"the request did not arrive within {self.options.read_timeout_s:g} s"
            )
            return
        why = _refused_body(bytes(body))
        if why is not None:
            await _refuse(send, 400, why)
            return
        gone = threading.Event()  # the tool call this request carries stops when set
        scope = {**scope, CLIENT_GONE: gone}
        await self.app(scope, _replay(bytes(body), receive, gone), send)


def bearer_matches(given: str, token: str) -> bool:
    """Whether an Authorization header (as latin-1 text, the bytes it came in) carries
    ``token`` in the Bearer scheme; the scheme's name in any case (RFC 9110 11.1),
    one or more spaces after it. The token is compared in constant time, as bytes."""
    scheme, _, credentials = given.partition(" ")
    if scheme.lower() != "bearer":
        return False
    sent = credentials.lstrip(" ").encode("latin-1")
    return hmac.compare_digest(sent, token.encode("utf-8"))


def _refused_body(body: bytes) -> str | None:
    """Why a POSTed body is not one JSON-RPC message (a batch, an id that is neither a
    string nor an integer, not a message at all), or None: a body that is not JSON
    is the SDK's parse error."""
    try:
        message = json.loads(body)
    except ValueError:
        return None
    why = refused(message)
    if why is not None:
        return why.replace("the line is", "the body is")
    from mcp_types import jsonrpc_message_adapter
    from pydantic import ValidationError

    try:
        jsonrpc_message_adapter.validate_python(message, by_name=False)
    except ValidationError:
        return "invalid request: the body is not a JSON-RPC message"
    return None


def client_gone(request: Any) -> threading.Event | None:
    """The event the guard sets when the client of ``request`` (the HTTP request that
    carried a tool call) disconnects; None over stdio."""
    scope = getattr(request, "scope", None)
    found = scope.get(CLIENT_GONE) if isinstance(scope, dict) else None
    return found if isinstance(found, threading.Event) else None


def _replay(body: bytes, receive: Any, gone: threading.Event) -> Any:
    """The body read already, then the connection's own messages, watched for the
    client's disconnection (the SDK's response stream listens for it)."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        message: Message = await receive()
        if message["type"] == "http.disconnect":
            gone.set()
        return message

    return replayed


async def _refuse(send: Any, status: int, message: str) -> None:
    body = json.dumps(
        {"jsonrpc": "2.0", "id": None, "error": {"code": INVALID_REQUEST, "message": message}}
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def serve_http(
    server: MCPServer[Any], options: HttpOptions, on_signal: Callable[[int], None]
) -> None:
    """Listen on ``options.host:port`` (port 0: one the system picks) and say where on
    stderr, then serve until interrupted (then raise :class:`KeyboardInterrupt`, so
    the command exits 130 as it does over stdio). ``on_signal`` hears the signal at
    once, so calls in flight stop while uvicorn closes its connections."""
    import uvicorn

    app = server.streamable_http_app(
        streamable_http_path=PATH,
        host=options.host,
        max_request_body_size=options.max_request_bytes,
    )
    family = socket.AF_INET6 if ":" in options.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((options.host, options.port))
    sock.set_inheritable(True)
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    connections, backlog = connection_limits(raise_file_limit(), _files_open())
    config = uvicorn.Config(
        Guard(app, options),
        http=guarded_protocol(options.read_timeout_s, connections),
        log_level="warning",
        timeout_graceful_shutdown=1,
        timeout_keep_alive=5,
        backlog=backlog,
        lifespan="on",
    )

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            quiet_resource_errors(asyncio.get_running_loop())
            await super().startup(sockets)
            if self.started:  # the socket listens and the loop accepts: say where
                print(
                    f"lcr serve: listening on http://{shown}:{port}{PATH}",
                    file=sys.stderr,
                    flush=True,
                )

        def handle_exit(self, sig: int, frame: Any) -> None:
            on_signal(sig)
            super().handle_exit(sig, frame)

    http_server = Server(config)
    await http_server.serve(sockets=[sock])
    if http_server.should_exit:  # stopped by a signal (uvicorn's own handler): as stdio is
        raise KeyboardInterrupt


def raise_file_limit() -> int:
    """The soft limit on open files, raised toward :data:`WANTED_FILES` where the hard
    limit allows (each connection holds one)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = WANTED_FILES if hard == resource.RLIM_INFINITY else min(hard, WANTED_FILES)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (OSError, ValueError):
            pass
    return WANTED_FILES if soft == resource.RLIM_INFINITY else soft


def connection_limits(files: int, open_now: int = 0) -> tuple[int, int]:
    """How many connections may be open at once, and how many may wait to be accepted
    (the listen backlog: also how many one turn of the loop accepts), for a process
    that may open ``files`` and has ``open_now`` open: connections accepted in the
    last few turns of the loop (up to three backlogs: accepted, not yet counted,
    being closed) on top of the cap stay under the limit, with files to spare."""
    spare = max(files - open_now - RESERVED_FILES, 64)
    backlog = max(min(spare // 8, 128), 8)
    connections = max(min(MAX_CONNECTIONS, spare - 3 * backlog), 16)
    return connections, backlog


def _files_open() -> int:
    """How many files this process has open now (0 where the system does not say)."""
    import os

    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return 0


def quiet_resource_errors(loop: asyncio.AbstractEventLoop) -> None:
    """asyncio's handler for errors in callbacks, made safe when files run out: an
    accept that fails for want of files (the loop stops accepting for a second, then
    tries again) is said in one line at most once a second, and nothing the handler
    does can end the server (the default handler's logging imports a module, which
    needs a file: that is what killed the server, "Too many open files")."""
    said = [0.0]

    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        with contextlib.suppress(Exception):  # the handler of last resort must not raise
            message = str(context.get("message", ""))
            if "out of system resource" not in message:
                loop.default_exception_handler(context)
            elif loop.time() - said[0] >= 1.0:
                said[0] = loop.time()
                sys.stderr.write("lcr serve: out of open files: new connections wait a second\n")

    loop.set_exception_handler(handle)


def guarded_protocol(header_timeout_s: float, max_connections: int) -> type[asyncio.Protocol]:
    """uvicorn's HTTP/1.1 protocol (h11), held to two limits before a request reaches
    the app: a connection whose request headers have not all arrived within
    ``header_timeout_s`` (counted from its opening, or from its last response) is
    closed, and when a new connection would make more than ``max_connections`` open,
    the one that has waited longest for its headers is closed (the new one itself if
    every other is in a request), so idle or trickling connections cannot use up the
    process's files and crowd out real clients."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class Guarded(H11Protocol):
        _header_timer: asyncio.TimerHandle | None = None
        _waiting_since = 0.0

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)  # type: ignore[arg-type]
            self._wait_for_headers()
            if len(self.connections) > max_connections:
                waiting = [c for c in self.connections if isinstance(c, Guarded) and c._idle()]
                oldest = min(waiting, key=lambda c: c._waiting_since, default=self)
                oldest._drop()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if not self._idle():  # a request's headers are in: its body has the guard's
                self._stop_timer()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._wait_for_headers()

        def connection_lost(self, exc: Exception | None) -> None:
            self._stop_timer()
            super().connection_lost(exc)

        def _idle(self) -> bool:
            """No request in progress: waiting for the next request's headers."""
            return self.cycle is None or self.cycle.response_complete

        def _wait_for_headers(self) -> None:
            self._stop_timer()
            self._waiting_since = self.loop.time()
            self._header_timer = self.loop.call_later(header_timeout_s, self._headers_late)

        def _headers_late(self) -> None:
            self._header_timer = None
            if self._idle():
                self._drop()

        def _stop_timer(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _drop(self) -> None:
            self._stop_timer()
            self.connections.discard(self)  # at once: the count stays under the cap
            if not self.transport.is_closing():
                self.transport.abort()

    return Guarded
