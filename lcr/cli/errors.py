"""How the command line ends: the one place an error becomes what the user sees (one
line on stderr) and an exit code, and stdout's last flush. :class:`lcr.cli.main.LcrGroup`
calls these for every command."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator

import click

from lcr.cli.output import err as _err
from lcr.errors import LcrError, OutOfMemoryError, OutputError, from_os_error

OUT_OF_MEMORY = (
    "out of memory (the machine's RAM, or a limit such as ulimit -v): try fewer or smaller "
    "documents at a time, a method that needs less memory (bm25; docs/speed.md gives each "
    "method's peak), or a machine with more memory"
)


PIP_NAMES = {"Stemmer": "PyStemmer", "sklearn": "scikit-learn", "yaml": "PyYAML"}
"""Modules whose package on PyPI has another name."""


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where the process was, as Ctrl-C is: what a build holds
    is let go the same way, and the user reads one line (exit 128 + the signal)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum
        self.name = signal.Signals(signum).name


@contextlib.contextmanager
def terminations_reported() -> Iterator[None]:
    """SIGTERM and SIGHUP raise :class:`Terminated` inside (main thread only), the
    handlers there before coming back after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, _frame: object) -> None:
        raise Terminated(signum)

    # a signal ignored (nohup's SIGHUP) stays ignored
    defaults = [s for s in (signal.SIGTERM, signal.SIGHUP) if signal.getsignal(s) == signal.SIG_DFL]
    before = {sig: signal.signal(sig, stop) for sig in defaults}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def report(exc: BaseException) -> int:
    """What the user sees of ``exc``: one line on stderr (none for a closed pipe) and the
    exit code. Anything lcr does not know is a bug, said as such."""
    if isinstance(exc, LcrError):
        _err(str(exc))
        return exc.exit_code
    if isinstance(exc, Terminated):
        _err(
            f"stopped by {exc.name} (a build in progress keeps what it had; run the command again)"
        )
        return 128 + exc.signum
    if isinstance(exc, KeyboardInterrupt):
        _err("interrupted (a build in progress keeps what it had; run the command again)")
        return 130
    if isinstance(exc, BrokenPipeError):  # the reader has gone (`lcr ... | head -1`)
        _quiet_stdout()
        return 0
    if _out_of_memory(exc):
        return _said(OUT_OF_MEMORY, OutOfMemoryError.exit_code)
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        top = exc.name.split(".")[0]
        package = PIP_NAMES.get(top, top)
        return _said(
            f"the Python package {package} is missing (lcr imports {top}); install it with: "
            f"pip install {package}",
            1,
        )
    if isinstance(exc, OSError):  # the system's doing (permissions, a full disk, a race)?
        mapped = from_os_error(exc)
        if mapped is not None:
            _err(str(mapped))
            return mapped.exit_code
    _err(f"internal error: {exc.__class__.__name__}: {exc} (run with --debug for details)")
    return 1


def _out_of_memory(exc: BaseException) -> bool:
    """Memory ran out, whatever said so: Python (MemoryError), the system (ENOMEM), a thread
    that could not get its stack, a compiled library that could not be mapped."""
    import errno

    if isinstance(exc, MemoryError):
        return True
    if isinstance(exc, OSError) and exc.errno == errno.ENOMEM:
        return True
    text = str(exc).lower()
    if isinstance(exc, RuntimeError) and "can't start new thread" in text:
        return True
    return isinstance(exc, ImportError | OSError) and (
        "failed to map segment" in text or "cannot allocate memory" in text
    )


def _said(message: str, code: int) -> int:
    _err(message)
    return code


def print_traceback(exc: BaseException) -> None:
    """``--debug``: the traceback, before the usual line and exit code."""
    if isinstance(exc, KeyboardInterrupt | BrokenPipeError):
        return
    import traceback
    from contextlib import suppress

    with suppress(OSError, ValueError):  # a stderr closed or full: nowhere to show it
        traceback.print_exception(exc, file=sys.stderr)


def one_line(message: str) -> str:
    """click's messages (some span lines) as one line."""
    return " ".join(part.strip() for part in message.splitlines() if part.strip())


def usage_line(exc: click.UsageError) -> str:
    """click's four-line usage error as lcr's one line, with where to look."""
    message = one_line(exc.format_message()).rstrip(".")
    message = message[:1].lower() + message[1:]
    where = exc.ctx.command_path if exc.ctx is not None else "lcr"
    return f"{message} (see '{where} --help')"


def _quiet_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's last flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def flush_stdout(code: int) -> int:
    """Flush now, so a reader that has gone is noticed here (exit 0), not at exit, and
    output that could not be written fails a run that had succeeded."""
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except BrokenPipeError:
        _quiet_stdout()
    except OutputError as exc:
        if code == 0:
            return _said(str(exc), exc.exit_code)
    except (OSError, ValueError):
        pass
    return code
