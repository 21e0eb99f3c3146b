"""The stdio transport: the SDK's own (:func:`mcp.server.stdio.stdio_server`, which
keeps the process's stdout for the protocol alone), with one thing added: a line
that is not JSON, or JSON that is not a JSON-RPC message (a batch, an ``id`` that is
neither a string nor an integer: :mod:`lcr.serve.messages`), gets a JSON-RPC error
reply (parse error -32700, invalid request -32600, ``id`` null) and the server reads
on. The SDK reads such a line, turns it into an exception on its read stream and
drops it there without a reply (or takes a request with an object as its id for a
notification, never answered); lcr reads stdin itself (:class:`CheckedLines`, each
line checked before the SDK parses it), and :class:`Answered` sits between the SDK's
read stream and the server's session, so the reply goes out through the SDK's one
writer of stdout.
"""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from types import TracebackType
from typing import Any, BinaryIO, Self

import anyio
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import ErrorData, JSONRPCError
from pydantic import ValidationError

from lcr.serve.messages import INVALID_REQUEST, PARSE_ERROR, refused

REFUSED = "lcr.refused"  # a line lcr refused, as the SDK then reads it: {REFUSED: why}


class CheckedLines:
    """A text stream's lines, each JSON one checked first (:func:`refused`); a refused
    line reaches the SDK as ``{"lcr.refused": why}``, which the SDK cannot take as a
    message, so :class:`Answered` answers it with ``why``."""

    def __init__(self, text: Any) -> None:
        self._text = text

    def readline(self) -> str:
        line = self._text.readline()
        if not line.strip():
            return line
        try:
            message = json.loads(line)
        except ValueError:
            return line  # the SDK's parse error
        why = refused(message)
        return line if why is None else json.dumps({REFUSED: why}) + "\n"


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
    all (parse error), or JSON of the wrong shape (invalid request; lcr's own reason
    where :class:`CheckedLines` refused it)."""
    if isinstance(problem, ValidationError):
        errors = problem.errors()
        if any(e["type"] == "json_invalid" for e in errors):
            return PARSE_ERROR, "parse error: the line is not JSON"
        for error in errors:
            given = error.get("input")
            if isinstance(given, dict) and isinstance(given.get(REFUSED), str):
                return INVALID_REQUEST, given[REFUSED]
    return INVALID_REQUEST, "invalid request: the line is not a JSON-RPC message"


@asynccontextmanager
async def _stdin() -> AsyncIterator[Any]:
    """The process's stdin, read through :class:`CheckedLines`, from a private copy of
    fd 0 while fd 0 itself points at the null device (as the SDK does with stdin it
    reads itself: a child process or a stray read sees end of file, not the protocol)."""
    if not _on_fd_0(sys.stdin):  # stdin replaced in this process (a test's runner)
        yield anyio.wrap_file(CheckedLines(sys.stdin))  # type: ignore[arg-type]
        return
    private = os.dup(0)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    raw: BinaryIO = os.fdopen(private, "rb", closefd=False)  # a worker may block on it
    text = io.TextIOWrapper(raw, encoding="utf-8", errors="replace")
    try:
        yield anyio.wrap_file(CheckedLines(text))  # type: ignore[arg-type]
    finally:
        with suppress(OSError):
            os.dup2(private, 0)


def _on_fd_0(stream: Any) -> bool:
    try:
        return bool(stream.fileno() == 0)
    except (AttributeError, OSError, ValueError):
        return False


async def serve_stdio(lowlevel: Any, log: Any = None) -> None:
    """Serve ``lowlevel`` (the SDK's low-level server) over stdin and stdout until the
    client closes stdin, answering each malformed line."""
    async with _stdin() as stdin, stdio_server(stdin=stdin) as (read_stream, write_stream):
        await lowlevel.run(
            Answered(read_stream, write_stream, log),
            write_stream,
            lowlevel.create_initialization_options(),
        )
