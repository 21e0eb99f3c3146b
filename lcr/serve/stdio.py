"""The stdio transport: the SDK's own (:func:`mcp.server.stdio.stdio_server`, which
keeps the process's stdout for the protocol alone), with one thing added: a line
that is not JSON, or JSON that is not a JSON-RPC message, gets a JSON-RPC error
reply (parse error -32700, invalid request -32600, ``id`` null) and the server reads
on. The SDK reads such a line, turns it into an exception on its read stream and
drops it there without a reply; :class:`Answered` sits between that stream and the
server's session, so the reply goes out through the SDK's one writer of stdout.
"""

from __future__ import annotations

from contextlib import suppress
from types import TracebackType
from typing import Any, Self

import anyio
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError
from pydantic import ValidationError


class Answered:
    """The SDK's read stream, less its malformed messages: each is answered on
    ``write`` with a JSON-RPC error and skipped; everything else passes unchanged."""

    def __init__(self, read: Any, write: Any, log: Any = None) -> None:
        self._read = read
        self._write = write
        self._log = log

    @property
    def last_context(self) -> Any:
        """The sender's context of the last message (the SDK's dispatcher reads it)."""
        return getattr(self._read, "last_context", None)

    async def receive(self) -> SessionMessage:
        while True:
            item = await self._read.receive()
            if not isinstance(item, Exception):
                return item
            await self._answer(item)

    async def _answer(self, problem: Exception) -> None:
        code, message = rejected(problem)
        if self._log is not None:
            self._log(f"a malformed line answered with {code}: {message}")
        reply = JSONRPCError(jsonrpc="2.0", id=None, error=ErrorData(code=code, message=message))
        with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            await self._write.send(SessionMessage(reply))  # unless the client has gone

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._read.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        await self.aclose()
        return None


def rejected(problem: Exception) -> tuple[int, str]:
    """The JSON-RPC error for a line the SDK could not take as a message: not JSON at
    all (parse error), or JSON of the wrong shape (invalid request)."""
    if isinstance(problem, ValidationError) and any(
        e["type"] == "json_invalid" for e in problem.errors()
    ):
        return PARSE_ERROR, "parse error: the line is not JSON"
    return INVALID_REQUEST, "invalid request: the line is not a JSON-RPC message"


async def serve_stdio(lowlevel: Any, log: Any = None) -> None:
    """Serve ``lowlevel`` (the SDK's low-level server) over stdin and stdout until the
    client closes stdin, answering each malformed line."""
    async with stdio_server() as (read_stream, write_stream):
        await lowlevel.run(
            Answered(read_stream, write_stream, log),
            write_stream,
            lowlevel.create_initialization_options(),
        )
