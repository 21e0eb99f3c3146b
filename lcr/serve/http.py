"""``lcr serve --http``: MCP's streamable HTTP transport behind a guard.

The guard answers, before the SDK sees a request: a missing or wrong bearer token
(401), a body over the size limit (413), and a body that does not arrive within the
read timeout (408, so a slow client holds no worker), each as a JSON-RPC error
object. A malformed JSON-RPC message is the SDK's to refuse (a parse error). It also
notices a client that disconnects while its tool call runs, so the call stops.
"""

from __future__ import annotations

import hmac
import json
import socket
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio

from lcr.serve.options import HttpOptions

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    Scope = dict[str, Any]
    Message = dict[str, Any]

LOOPBACK = ("127.0.0.1", "localhost", "::1")
CLIENT_GONE = "lcr.client_gone"
PATH = "/mcp"
INVALID_REQUEST = -32600


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
        if token is not None:
            given = headers.get("authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
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
        gone = threading.Event()  # the tool call this request carries stops when set
        scope = {**scope, CLIENT_GONE: gone}
        await self.app(scope, _replay(bytes(body), receive, gone), send)


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
    server: MCPServer[Any], options: HttpOptions, on_signal: Callable[[], None]
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
    print(f"lcr serve: listening on http://{shown}:{port}{PATH}", file=sys.stderr, flush=True)
    config = uvicorn.Config(
        Guard(app, options),
        log_level="warning",
        timeout_graceful_shutdown=1,
        timeout_keep_alive=5,
        lifespan="on",
    )

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            on_signal()
            super().handle_exit(sig, frame)

    http_server = Server(config)
    await http_server.serve(sockets=[sock])
    if http_server.should_exit:  # stopped by a signal (uvicorn's own handler): as stdio is
        raise KeyboardInterrupt
