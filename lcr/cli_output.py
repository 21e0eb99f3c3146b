"""Text for people: control sequences kept off the terminal, file names shown as they
are on disk, sizes in units; and standard output guarded, so a closed or full stdout
is one clear line. Shared by every command module."""

from __future__ import annotations

import errno
import io
import locale
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

import click

from lcr.errors import OutputError

# terminal control sequences (CSI, OSC, other escapes) and every other C0/C1 control
# character but tab and newline: text shown to people never drives their terminal
_CONTROL = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves, erasing
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC: window title, hyperlinks
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"  # DCS, SOS, PM, APC strings
    r"|\x1b[ -/]*[0-~]?"  # two- and three-byte escapes (reset, charsets), a lone ESC
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f]"
)


def printable(text: str) -> str:
    """``text`` without terminal control sequences, for output read by people (not JSON)."""
    return _CONTROL.sub("", text)


_CONTROL_CHAR = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def visible(text: str) -> str:
    """``text`` on one line with control characters shown escaped (``\\n``, ``\\x1b``):
    for file names and messages, where dropping them would print a name other than the
    one on disk, and a newline in a name would split one message into two lines."""
    return _CONTROL_CHAR.sub(lambda m: _NAMED.get(m.group(), f"\\x{ord(m.group()):02x}"), text)


def say(text: str = "") -> None:
    """One line of plain output, cleaned and flushed at once (click.echo flushes)."""
    click.echo(printable(text))


def err(message: str) -> None:
    """``lcr: message`` on stderr, as one line."""
    note(visible(f"lcr: {message}"))


def note(line: str) -> None:
    """A line on stderr. A stderr that is closed or full leaves nowhere to say anything,
    so that is not an error of its own."""
    with suppress(OSError, ValueError):
        click.echo(line, err=True)


class NonEmptyPath(click.Path):
    """A path option or argument that refuses ``""``: it would mean the current folder,
    which nobody asks for by typing nothing (``-o "$UNSET_VARIABLE"``)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not value:
            self.fail("an empty path; give a file or folder name", param, ctx)
        return super().convert(value, param, ctx)


def human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


# ------------------------------------------------------------------ standard output
_WHY = {
    errno.EBADF: "standard output is closed",
    errno.ENOSPC: "no space left on the device standard output goes to",
    errno.EDQUOT: "disk quota exceeded on the device standard output goes to",
    errno.EFBIG: "standard output's file reached this system's file-size limit (ulimit -f)",
    errno.EIO: "input/output error on standard output",
}


def output_failure(code: int | None) -> OutputError:
    """The one-line error for a write to standard output that failed with ``code``."""
    why = _WHY.get(code or 0) or f"standard output failed ({os.strerror(code or errno.EIO)})"
    return OutputError(f"cannot print the output: {why}")


class _StdoutWriter(io.RawIOBase):
    """File descriptor 1 behind ``sys.stdout``. The first failed write raises
    :class:`OutputError` saying why; later output is dropped, so nothing (the
    interpreter's last flush included) fails a second time. A closed pipe stays
    ``BrokenPipeError``: a reader that has gone is not an error (``lcr ... | head``)."""

    def __init__(self, closed: bool) -> None:
        super().__init__()
        self.failure: OutputError | None = output_failure(errno.EBADF) if closed else None
        self._dropping = False

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return 1

    def isatty(self) -> bool:
        return self.failure is None and os.isatty(1)

    def close(self) -> None:  # fd 1 belongs to the process, not to this object
        self.drop_the_rest()

    def drop_the_rest(self) -> None:
        self._dropping = True

    def write(self, data: bytes | bytearray | memoryview) -> int:  # type: ignore[override]
        if self._dropping:
            return len(data)
        if self.failure is None:
            try:
                return os.write(1, data)
            except BrokenPipeError:
                raise
            except OSError as exc:
                self.failure = output_failure(exc.errno)
        self._dropping = True
        raise self.failure


def check_stdout() -> None:
    """Raise now if stdout is known to be closed: for commands whose whole product is
    their output, before they do (or pay for) any work."""
    raw = getattr(getattr(sys.stdout, "buffer", None), "raw", None)
    if isinstance(raw, _StdoutWriter) and raw.failure is not None:
        raw.drop_the_rest()
        raise raw.failure


def _reopen_closed_std_fds() -> set[int]:
    """Put /dev/null on descriptors 0-2 that the caller closed (``>&-``), so that no file
    lcr opens later lands on them, where a library's print would write into an index."""
    closed = set()
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            closed.add(fd)
    for fd in sorted(closed):
        opened = os.open(os.devnull, os.O_RDWR)
        if opened != fd:
            os.dup2(opened, fd)
            os.close(opened)
    return closed


@contextmanager
def guarded_stdout() -> Iterator[_StdoutWriter | None]:
    """The process's standard streams made safe for one run of ``lcr``: closed ones
    reopened on /dev/null, and stdout behind a :class:`_StdoutWriter`, so a closed or
    full stdout is an :class:`OutputError` where it is written. Yields the writer (None
    when a caller such as pytest has replaced stdout, which is then left alone)."""
    closed = _reopen_closed_std_fds()
    if 0 in closed and sys.stdin is None:
        sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115 - the process's
    if 2 in closed and sys.stderr is None:
        sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    original = sys.stdout
    if original is not None and original is not sys.__stdout__:
        yield None
        return
    if original is not None:
        with suppress(OSError, ValueError):
            original.flush()
    writer = _StdoutWriter(closed=1 in closed)
    sys.stdout = io.TextIOWrapper(
        io.BufferedWriter(writer),
        encoding=getattr(original, "encoding", None) or locale.getpreferredencoding(False),
        errors=getattr(original, "errors", None) or "strict",
        line_buffering=bool(getattr(original, "line_buffering", False)),
    )
    try:
        yield writer
    finally:
        writer.drop_the_rest()
        with suppress(OSError, ValueError):
            sys.stdout.flush()
        sys.stdout = original
