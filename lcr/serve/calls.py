"""How the server runs the library's blocking work for many clients at once.

Each tool call runs in a worker thread. Calls that use a model take one of
``concurrency`` slots, so at most that many model calls run at once and the rest
wait in turn; the first load of a model happens under one lock (two calls never
load the same model twice); builds run one at a time in the server (and under the
CLI's writer lock against other processes). A call whose client has gone, or a
server that is stopping, is cancelled where the work can stop cleanly: the next
piece of an answer, the next step of a build's progress, or before its turn comes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import anyio
import anyio.from_thread
import anyio.to_thread

from lcr.errors import LcrError

T = TypeVar("T")
Report = Callable[[float, float | None, str | None], Coroutine[Any, Any, None]]

REPORT_EVERY_S = 0.2  # progress notifications at most this often (answer text is joined)


class CallCancelled(LcrError):
    """The client went away (or the server is stopping) before the call finished."""

    exit_code = 130


class Call:
    """One tool call's cancellation flag and its progress channel to the client."""

    def __init__(
        self,
        report: Report | None,
        closing: threading.Event,
        client_gone: threading.Event | None = None,
    ) -> None:
        self._report = report
        self._closing = closing
        self._client_gone = client_gone
        self.cancelled = threading.Event()
        self._sent = 0.0
        self._count = 0.0
        self._pending = ""

    def check(self) -> None:
        """Raise :class:`CallCancelled` if the call should stop now."""
        gone = self._client_gone is not None and self._client_gone.is_set()
        if gone or self.cancelled.is_set() or self._closing.is_set():
            raise CallCancelled("cancelled: the client went away or the server is stopping")

    def progress(self, done: float, total: float | None, message: str | None) -> None:
        """A build's progress, sent from the worker thread (at most every
        :data:`REPORT_EVERY_S`, and when a task completes); also a point to stop at."""
        self.check()
        self._count = done
        self._pending = message or ""
        if self._due() or (total is not None and done >= total):
            self._flush(total)

    def text(self, count: float, piece: str) -> None:
        """The next piece of an answer: the notifications' messages, joined, are the
        reply as written."""
        self.check()
        self._count = count
        self._pending += piece
        if self._due():
            self._flush(None)

    def flush(self) -> None:
        """Send what is pending (the end of an answer)."""
        if self._pending:
            self._flush(None)

    def _due(self) -> bool:
        return self._report is not None and time.monotonic() - self._sent >= REPORT_EVERY_S

    def _flush(self, total: float | None) -> None:
        if self._report is None:
            return
        text, self._pending = self._pending, ""
        self._sent = time.monotonic()
        try:
            anyio.from_thread.run(self._report, self._count, total, text or None)
        except (anyio.get_cancelled_exc_class(), RuntimeError):  # the loop is going
            self.cancelled.set()
        self.check()


class Calls:
    """The server's queue: model slots, the first-load lock, the one-builder lock."""

    def __init__(self, concurrency: int) -> None:
        self.concurrency = concurrency
        self._slots = threading.BoundedSemaphore(concurrency)
        self._loading = threading.Lock()
        self._building = threading.Lock()
        self.closing = threading.Event()
        self._running = 0
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._closed_at: float | None = None

    def close(self) -> None:
        """Tell every call to stop (the server is stopping); the first time is noted."""
        with self._lock:
            if self._closed_at is None:
                self._closed_at = time.monotonic()
        self.closing.set()

    def closing_left(self, grace: float) -> float:
        """What is left of ``grace`` seconds counted from the first :meth:`close`."""
        with self._lock:
            since = self._closed_at
        return grace if since is None else max(0.0, since + grace - time.monotonic())

    def call(self, report: Report | None, client_gone: threading.Event | None = None) -> Call:
        return Call(report, self.closing, client_gone)

    async def run(self, call: Call, work: Callable[[], T]) -> T:
        """``work`` in a worker thread; if the caller is cancelled (its client went
        away), the work is told to stop and the caller returns at once."""

        def counted() -> T:
            with self._lock:
                self._running += 1
            try:
                call.check()
                return work()
            finally:
                with self._lock:
                    self._running -= 1
                    self._idle.notify_all()

        try:
            return await anyio.to_thread.run_sync(counted, abandon_on_cancel=True)
        except anyio.get_cancelled_exc_class():
            call.cancelled.set()
            raise

    @contextmanager
    def model_slot(self, call: Call, loaded: Callable[[], bool]) -> Iterator[None]:
        """One of the ``concurrency`` slots for a call that uses a model (waiting for its
        turn in a queue); under the first-load lock too while a model it needs is not
        loaded yet. ``loaded`` is asked again once that lock is held: calls that queued
        behind the first load run together once it is done, not one by one."""
        self._acquire(call, self._slots)
        try:
            if loaded():
                yield
                return
            self._acquire(call, self._loading)
            if loaded():  # loaded by the call this one waited for
                self._loading.release()
                yield
                return
            try:
                yield
            finally:
                self._loading.release()
        finally:
            self._slots.release()

    @contextmanager
    def builder(self, call: Call) -> Iterator[None]:
        """One build at a time in this server (the writer lock is per process)."""
        self._acquire(call, self._building)
        try:
            yield
        finally:
            self._building.release()

    def _acquire(self, call: Call, lock: threading.Semaphore | threading.Lock) -> None:
        while not lock.acquire(timeout=0.1):
            call.check()
        try:
            call.check()
        except CallCancelled:
            lock.release()
            raise

    def wait_idle(self, seconds: float) -> bool:
        """Whether every worker finished within ``seconds`` (after :attr:`closing`)."""
        deadline = time.monotonic() + seconds
        with self._lock:
            while self._running:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._idle.wait(left)
        return True
