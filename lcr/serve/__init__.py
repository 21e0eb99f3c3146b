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

STOP_GRACE_S = 2.5  # how long a stopping server waits for work in flight, from the signal:
# the process is gone within the documented 3 s, a busy machine's delays included
_exiting = threading.Lock()  # one thread ends the process


def run(config: ServeConfig, http: HttpOptions | None) -> None:
    """Serve until the client closes stdin (stdio) or a signal stops the server: SIGINT
    or SIGTERM starts :func:`exit_when_stopped` in a thread at once (over HTTP from
    uvicorn's handler, which also stops taking connections), so the process ends
    within :data:`STOP_GRACE_S` of the signal whatever its calls are doing (a read of
    stdin in progress, a build's step that cannot stop)."""
    server = make_server(config)
    calls = config.calls
    if http is None:
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda got, _frame: _stop_in_background(calls, got))
        anyio.run(server.run_stdio_async)
    else:
        from lcr.serve.http import serve_http

        anyio.run(serve_http, server, http, lambda got: _stop_in_background(calls, got))


def stop(calls: Calls) -> bool:
    """Tell every call in flight to stop; whether all did within :data:`STOP_GRACE_S`
    of the first call to stop."""
    calls.close()
    return calls.wait_idle(calls.closing_left(STOP_GRACE_S))


def exit_when_stopped(calls: Calls, code: int, message: str | None) -> None:
    """End the process with ``code`` once every call stopped or the grace ran out: the
    lock files it holds are removed, and nothing is half-written (every index write
    is atomic). Said on stderr: ``message``, or where the grace ran out, that work
    in flight was abandoned. Only the first caller ends it (a second waits for that)."""
    from lcr.store.writing import drop_held_lock_files

    with _exiting:
        if not stop(calls):
            message = (
                f"{message or 'stopped'} with a call still running, abandoned (an index it "
                "was building is as it was before; the same call builds it again)"
            )
        drop_held_lock_files()
        if message:
            print(f"lcr: {message}", file=sys.stderr)
        sys.stderr.flush()
        sys.stdout.flush()
        os._exit(code)


def stopped_by(signum: int) -> tuple[int, str]:
    """The exit code and the line a server stopped by ``signum`` ends with (a server,
    not a build: nothing to run again)."""
    if signum == signal.SIGINT:
        return 130, "interrupted"
    return 128 + signum, f"stopped by {signal.Signals(signum).name}"


def _stop_in_background(calls: Calls, signum: int) -> None:
    calls.close()
    code, message = stopped_by(signum)
    threading.Thread(target=exit_when_stopped, args=(calls, code, message), daemon=True).start()
