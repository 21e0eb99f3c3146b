"""``lcr serve``: the indexes on disk as tools an agent calls over the Model Context
Protocol (MCP), with each model loaded once for the server's life.

:mod:`lcr.serve.served` decides what is reachable, :mod:`lcr.serve.calls` how blocking
work is queued and cancelled, :mod:`lcr.serve.tools` the tools themselves and
:mod:`lcr.serve.http` the HTTP transport's guard and :mod:`lcr.serve.stdio` the
answer to a malformed stdio line. This module runs a server over stdio (what desktop
agents start) or streamable HTTP.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

import anyio

from lcr.serve.calls import Calls
from lcr.serve.options import HttpOptions
from lcr.serve.served import Served
from lcr.serve.tools import ServeConfig, make_server

__all__ = ["Calls", "HttpOptions", "ServeConfig", "Served", "exit_when_stopped", "run", "stop"]

STOP_GRACE_S = 3.0  # how long a stopping server waits for work in flight


def run(config: ServeConfig, http: HttpOptions | None) -> None:
    """Serve until the client closes stdin (stdio) or the process is interrupted
    (:class:`KeyboardInterrupt`, over HTTP; over stdio the process ends in
    :func:`exit_when_stopped`, since a read of stdin in progress cannot be interrupted)."""
    server = make_server(config)
    if http is None:
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda _signum, _frame: _stop_in_background(config.calls))
        anyio.run(server.run_stdio_async)
    else:
        from lcr.serve.http import serve_http

        anyio.run(serve_http, server, http, config.calls.closing.set)


def stop(calls: Calls) -> bool:
    """Tell every call in flight to stop; whether all did within :data:`STOP_GRACE_S`."""
    calls.closing.set()
    return calls.wait_idle(STOP_GRACE_S)


def exit_when_stopped(calls: Calls, code: int, message: str | None) -> None:
    """End the process with ``code`` once every call stopped or the grace ran out: the
    lock files it holds are removed, and nothing is half-written (every index write
    is atomic)."""
    from lcr.store.writing import drop_held_lock_files

    if not stop(calls):
        message = "stopped with work in flight (every index write is atomic)"
    drop_held_lock_files()
    if message:
        print(f"lcr: {message}", file=sys.stderr)
    sys.stderr.flush()
    sys.stdout.flush()
    os._exit(code)


def _stop_in_background(calls: Calls) -> None:
    calls.closing.set()
    message = "interrupted (a build in progress keeps what it had; run the command again)"
    threading.Thread(target=exit_when_stopped, args=(calls, 130, message), daemon=True).start()
