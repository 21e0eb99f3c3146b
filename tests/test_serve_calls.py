"""The server's queue (lcr/serve/calls.py) with real threads: at most ``concurrency``
model calls at once, the rest waiting their turn; a model's first load under one lock;
a call cancelled while it waits never runs; one build at a time; the served set's
paths (lcr/serve/served.py); a malformed stdio line answered (lcr/serve/stdio.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from lcr.serve.calls import CallCancelled, Calls
from lcr.serve.served import NotServedError, Served


def _run_many(
    calls: Calls, n: int, loaded: Callable[[int], bool], hold: float = 0.05
) -> tuple[int, int]:
    """``n`` calls in threads, each holding a model slot for ``hold`` s (``loaded(done)``:
    whether the model counts as loaded once ``done`` calls have finished): the most
    that ran at once, and how many ran."""
    lock = threading.Lock()
    running = peak = done = 0

    def one() -> None:
        nonlocal running, peak, done
        with calls.model_slot(calls.call(None), lambda: loaded(done)):
            with lock:
                running += 1
                peak = max(peak, running)
            time.sleep(hold)
            with lock:
                running -= 1
                done += 1

    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return peak, done


@pytest.mark.parametrize("concurrency", [1, 3])
def test_at_most_concurrency_model_calls_run_at_once(concurrency: int) -> None:
    peak, done = _run_many(Calls(concurrency), 12, lambda done: True)
    assert (peak, done) == (concurrency, 12)


def test_a_first_load_runs_alone_then_the_calls_behind_it_run_together() -> None:
    """Each call here counts as having loaded the model once one has finished: the
    first runs alone, the five queued behind it then run up to three at once."""
    peak, done = _run_many(Calls(3), 6, lambda done: done > 0, hold=0.3)
    assert (peak, done) == (3, 6)


def test_while_nothing_loads_the_model_each_call_waits_for_the_one_before() -> None:
    peak, done = _run_many(Calls(3), 4, lambda done: False)
    assert (peak, done) == (1, 4)


def test_a_call_cancelled_while_it_waits_never_runs() -> None:
    calls = Calls(1)
    ran: list[str] = []
    waiting = calls.call(None)
    release = threading.Event()

    def holder() -> None:
        with calls.model_slot(calls.call(None), lambda: True):
            release.wait(10)

    def waiter() -> None:
        try:
            with calls.model_slot(waiting, lambda: True):
                ran.append("waiter")
        except CallCancelled:
            ran.append("cancelled")

    first = threading.Thread(target=holder)
    first.start()
    time.sleep(0.1)
    second = threading.Thread(target=waiter)
    second.start()
    time.sleep(0.2)
    waiting.cancelled.set()  # its client went away
    second.join(5)
    release.set()
    first.join(5)
    assert ran == ["cancelled"]
    _, done = _run_many(calls, 2, lambda done: True)  # the slot was given back
    assert done == 2


def test_a_stopping_server_stops_calls_and_waits_for_its_workers() -> None:
    calls = Calls(1)
    call = calls.call(None)
    call.check()
    calls.closing.set()
    with pytest.raises(CallCancelled):
        call.check()
    assert calls.wait_idle(0.1)


def test_builds_run_one_at_a_time() -> None:
    calls = Calls(4)
    lock = threading.Lock()
    running = peak = 0

    def build() -> None:
        nonlocal running, peak
        with calls.builder(calls.call(None)):
            with lock:
                running += 1
                peak = max(peak, running)
            time.sleep(0.05)
            with lock:
                running -= 1

    threads = [threading.Thread(target=build) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert peak == 1


def test_only_the_served_indexes_and_folders_are_reachable(tmp_path: Path) -> None:
    folder = tmp_path / "served"
    (folder / "deep" / "book.idx").mkdir(parents=True)
    (folder / "deep" / "book.idx" / "manifest.json").write_text("{}")
    (folder / ".staged.idx.new-1").mkdir()
    (folder / ".staged.idx.new-1" / "manifest.json").write_text("{}")
    (folder / "doc.txt").write_text("text")
    outside = tmp_path / "outside.idx"
    outside.mkdir()
    (outside / "manifest.json").write_text("{}")
    (folder / "link.idx").symlink_to(outside)
    served = Served.from_arguments([folder])

    assert [s.name for s in served.listed()] == ["deep/book.idx"]
    assert served.index("deep/book.idx") == folder / "deep" / "book.idx"
    assert served.index(str(folder / "deep" / ".." / "deep" / "book.idx")) == (
        folder / "deep" / "book.idx"
    )
    for refused in (str(outside), str(folder / "link.idx"), str(folder), "", "book.idx"):
        with pytest.raises(NotServedError):
            served.index(refused)
    assert served.source(str(folder / "doc.txt")) == folder / "doc.txt"
    with pytest.raises(NotServedError, match="outside the folders"):
        served.source(str(tmp_path / "elsewhere.txt"))
    assert served.new_index(str(folder / "new.idx")) == folder / "new.idx"
    with pytest.raises(NotServedError, match="outside the folders"):
        served.new_index(str(tmp_path / "new.idx"))
    with pytest.raises(NotServedError, match="not an lcr index"):
        served.new_index(str(folder / "doc.txt"))

    # a list (ask over several indexes): each served once, in order; every other refused
    book = str(folder / "deep" / "book.idx")
    assert served.named_indexes(["deep/book.idx", book]) == [folder / "deep" / "book.idx"]
    with pytest.raises(NotServedError, match=r"^'/nowhere' is not an index this server"):
        served.named_indexes(["deep/book.idx", "/nowhere"])
    with pytest.raises(NotServedError) as both:
        served.named_indexes([str(outside), "deep/book.idx", str(folder / "link.idx")])
    assert str(both.value).startswith(f"{str(outside)!r}, {str(folder / 'link.idx')!r} are not")

    only_index = Served.from_arguments([outside])  # an index alone: no folder to build in
    assert [s.path for s in only_index.listed()] == [outside]
    with pytest.raises(NotServedError):
        only_index.source(str(tmp_path / "served" / "doc.txt"))


def test_a_malformed_stdio_line_is_answered_and_the_next_passes() -> None:
    """lcr/serve/stdio.py between the SDK's read stream and the session: the exception
    the SDK makes of a bad line becomes a JSON-RPC error on the write stream (parse
    error or invalid request, id null); a message passes through unchanged, in order."""
    import anyio
    from mcp.shared.message import SessionMessage
    from mcp_types import JSONRPCError, jsonrpc_message_adapter

    from lcr.serve.stdio import Answered

    lines = ['{"jsonrpc": "2.0", "id"', '{"hello": 1}', '{"jsonrpc":"2.0","id":3,"method":"ping"}']
    said: list[str] = []

    async def main() -> tuple[list[SessionMessage], list[SessionMessage]]:
        to_read, read = anyio.create_memory_object_stream[SessionMessage | Exception](10)
        write, written = anyio.create_memory_object_stream[SessionMessage](10)
        for line in lines:  # as the SDK's stdio reader does with each line
            try:
                await to_read.send(SessionMessage(jsonrpc_message_adapter.validate_json(line)))
            except Exception as exc:
                await to_read.send(exc)
        to_read.close()
        passed = [m async for m in Answered(read, write, said.append)]
        write.close()
        return passed, [m async for m in written]

    passed, replies = anyio.run(main)
    assert [m.message.model_dump(exclude_unset=True) for m in passed] == [
        {"jsonrpc": "2.0", "id": 3, "method": "ping"}
    ]
    errors = [m.message for m in replies]
    assert all(isinstance(e, JSONRPCError) and e.id is None for e in errors)
    assert [e.error.code for e in errors if isinstance(e, JSONRPCError)] == [-32700, -32600]
    assert len(said) == 2 and all("malformed line" in s for s in said)
