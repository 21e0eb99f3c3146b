"""The server's queue (lcr/serve/calls.py) with real threads: at most ``concurrency``
model calls at once, the rest waiting their turn; a model's first load under one lock;
a call cancelled while it waits never runs; one build at a time; the served set's
paths (lcr/serve/served.py); a malformed stdio line answered (lcr/serve/stdio.py)."""

from __future__ import annotations

import shutil
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


def _index_at(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "manifest.json").write_text("{}")
    return path


def test_a_served_index_or_folder_that_becomes_a_link_out_is_no_longer_served(
    tmp_path: Path,
) -> None:
    """Issue #72 row 1: an index named on the command line (or a served folder) that is
    replaced, while the server runs, by a symlink to an index outside is checked on
    every call: not listed, and refused by name and by path."""
    named = _index_at(tmp_path / "named.idx")
    folder = tmp_path / "folder"
    _index_at(folder / "inner.idx")
    outside = _index_at(tmp_path / "elsewhere" / "secret.idx")
    _index_at(tmp_path / "elsewhere" / "other.idx")
    served = Served.from_arguments([named, folder])
    assert [s.name for s in served.listed()] == ["named.idx", "inner.idx"]
    assert served.index("named.idx") == named

    shutil.rmtree(named)
    named.symlink_to(outside)  # the name now leads outside
    shutil.rmtree(folder)
    folder.symlink_to(outside.parent)  # the folder too
    assert served.listed() == []
    for given in ("named.idx", str(named), "inner.idx", str(folder / "other.idx")):
        with pytest.raises(NotServedError, match="is not an index this server serves"):
            served.index(given)
    with pytest.raises(NotServedError):
        served.new_index(str(folder / "new.idx"))


def test_a_new_index_inside_an_index_is_refused(tmp_path: Path) -> None:
    """Issue #72 row 2: with --allow-index, an output inside an index (a served one, or
    any folder with a manifest) is refused in one line: the outer index's next build
    would delete it, and it would never be served."""
    folder = tmp_path / "served"
    _index_at(folder / "a.idx")
    _index_at(folder / "deep" / "b.idx")
    served = Served.from_arguments([folder])
    for inside in ("a.idx/inner.idx", "a.idx/cache", "a.idx/cache/x.idx", "deep/b.idx/c.idx"):
        with pytest.raises(NotServedError, match="is inside the index") as caught:
            served.new_index(str(folder / inside))
        assert "\n" not in str(caught.value)
    assert served.new_index(str(folder / "deep" / "c.idx")) == folder / "deep" / "c.idx"


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ('{"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}', "the id is dict"),
        ('{"jsonrpc": "2.0", "id": 1.5, "method": "ping"}', "the id is float"),
        ('{"jsonrpc": "2.0", "id": [1], "method": "ping"}', "the id is list"),
        ('{"jsonrpc": "2.0", "id": true, "method": "ping"}', "the id is bool"),
        ('{"jsonrpc": "2.0", "id": null, "method": "ping"}', "the id is null"),
        ('[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]', "a batch"),
        ("7", "not a JSON-RPC message"),
    ],
)
def test_a_request_id_that_is_not_a_string_or_integer_is_an_invalid_request(
    line: str, why: str
) -> None:
    """Issue #72 row 5: the SDK takes such a request for a notification (no reply ever)
    or a batch for invalid params; lcr's check makes each an invalid request (-32600),
    over stdio (CheckedLines, then Answered's reply) and over HTTP (the guard)."""
    import io

    from mcp_types import jsonrpc_message_adapter

    from lcr.serve.http import _refused_body
    from lcr.serve.stdio import CheckedLines, rejected

    read = CheckedLines(io.StringIO(line + "\n")).readline()
    with pytest.raises(Exception) as caught:  # as the SDK's reader meets it
        jsonrpc_message_adapter.validate_json(read, by_name=False)
    code, message = rejected(caught.value)
    assert code == -32600 and why in message and message.startswith("invalid request")
    body = _refused_body(line.encode())
    assert body is not None and why in body
    ok = '{"jsonrpc": "2.0", "id": "x", "method": "ping"}'
    assert CheckedLines(io.StringIO(ok + "\n")).readline() == ok + "\n"
    assert _refused_body(ok.encode()) is None and _refused_body(b"{not json") is None
    not_rpc = _refused_body(b'{"hello": 1}')
    assert not_rpc == "invalid request: the body is not a JSON-RPC message"


def test_the_bearer_scheme_is_case_insensitive_and_the_token_exact() -> None:
    """Issue #72 row 7b: RFC 9110 auth schemes are case-insensitive."""
    from lcr.serve.http import bearer_matches

    for header in ("Bearer tok", "bearer tok", "BEARER tok", "Bearer   tok"):
        assert bearer_matches(header, "tok"), header
    for header in ("Bearer tok2", "Basic tok", "Bearertok", "", "Bearer", "Bearer  Tok"):
        assert not bearer_matches(header, "tok"), header
    assert bearer_matches("Bearer é".encode().decode("latin-1"), "é")  # the bytes sent


def test_the_connection_cap_stays_under_the_file_limit() -> None:
    """Issue #72 row 3: open connections plus three backlogs (accepted in the last turns
    of the loop, not yet counted or being closed) stay under the files the process may
    open, with those already open and some to spare, whatever that limit."""
    from lcr.serve.http import MAX_CONNECTIONS, connection_limits

    for files, open_now in ((256, 0), (256, 40), (1024, 30), (4096, 60), (1 << 20, 30)):
        connections, backlog = connection_limits(files, open_now)
        assert backlog >= 8 and 16 <= connections <= MAX_CONNECTIONS
        assert open_now + connections + 3 * backlog <= files - 64, files


def test_an_api_key_no_header_can_carry_is_one_line_naming_it(tmp_path: Path) -> None:
    """Issue #72 row 7b: LCR_API_KEY with a CR or a character beyond latin-1 was an
    internal error at the first call; now one line naming the variable, exit 2."""
    from click.testing import CliRunner

    import lcr as lcr_api
    from lcr.cli.main import cli

    (tmp_path / "doc.txt").write_text("The keeper counted forty sacks of barley.\n")
    lcr_api.index([tmp_path / "doc.txt"], tmp_path / "doc.idx", methods=["bm25"])
    for key in ("abc\rdef", "abc\ndef", "kéy€"):
        result = CliRunner().invoke(
            cli,
            ["ask", str(tmp_path / "doc.idx"), "How many sacks?", "--backend", "openai",
             "--base-url", "http://127.0.0.1:9/v1", "--llm", "m", "--context-window", "4096"],
            env={"LCR_API_KEY": key},
        )  # fmt: skip
        assert result.exit_code == 2, result.output
        assert result.stderr.count("\n") == 1 and "LCR_API_KEY" in result.stderr, result.stderr
