"""Collections that grow and shrink (issue 43): `lcr index NEW -o book.idx --add` and
`lcr remove book.idx NAME`, through the CLI, with a scripted LLM counting what each
method pays; spans verified after every change; a kill -9 mid-add leaves the index
as it was, and the rerun pays nothing twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import tests.test_index_writers as writers
from lcr.config import value_text
from lcr.methods import get_method, method_names
from lcr.models.base import ContinuationScore
from lcr.models.container import Models
from lcr.store import Index
from tests.test_index_writers import GR_FAST, REPO, ExtractLLM, run, snapshot
from tests.test_raptor import HashEmbedder

# PECAN reads attention: only a real transformers model builds it (the slow test below)
SCRIPTED_METHODS = [m for m in method_names() if m != "pecan"]


class CountingLLM(ExtractLLM):
    """GraphReader's and RAPTOR's replies (any text parses), and LightPAL's pair scores;
    counts every call and every pair scored."""

    def __init__(self) -> None:
        super().__init__()
        self.pairs = 0

    def continuation_logprobs(
        self, context: str, continuations: Sequence[str], *, max_tokens: int | None = None
    ) -> list[ContinuationScore]:
        self.pairs += len(continuations)
        return super().continuation_logprobs(context, continuations, max_tokens=max_tokens)


def use(monkeypatch: pytest.MonkeyPatch, llm: Any, embedder: Any = None) -> None:
    """The commands' models (`lcr index` and `lcr remove`, through the CLI's seam), with
    ``llm`` loaded."""
    monkeypatch.setattr(
        writers,
        "MODELS",
        lambda spec, progress: Models.with_objects(
            llm=llm, embedder=embedder or HashEmbedder(), spec=spec
        ),
    )


def method_args(method: str) -> list[str]:
    quick = get_method(method).quick_build_settings
    sets = [*(f"{method}.{k}={value_text(v)}" for k, v in quick.items()), *GR_FAST[1:]]
    return ["-m", method, *[w for s in sets for w in ("--set", s)]]


def paid(llm: CountingLLM, method: str) -> int:
    return llm.pairs if method == "lightpal" else llm.calls


@pytest.fixture()
def docs(tmp_path: Path, cinderella: Path) -> tuple[Path, Path]:
    a = tmp_path / "a.txt"
    a.write_text(cinderella.read_text())
    b = tmp_path / "b.txt"
    b.write_text((REPO / "examples" / "lighthouse.txt").read_text()[:6000])
    return a, b


def leaves_are_source(index: Path, method: str) -> int:
    """Every leaf of ``method`` is its span's text (the spans kept their meaning);
    returns how many leaves were checked."""
    opened = Index.open(index)
    source = opened.source
    checked = 0
    for name in ("nodes", "chunks"):
        if f"{name}.jsonl" not in opened.methods[method].files:
            continue
        for node in opened.reader(method).nodes(name):
            if node.level == 0 and len(node.spans) == 1:
                (s, e) = node.spans[0]
                assert source[s:e] == node.text, (method, node.id)
                assert opened.doc_at(s) == node.doc
                checked += 1
    return checked


def verified(index: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["info", str(index), "--verify"], capsys)
    assert code == 0 and "DAMAGED" not in out, (out, err)


@pytest.mark.parametrize("method", SCRIPTED_METHODS)
def test_add_then_remove_pays_only_for_what_changed(
    method: str,
    docs: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    a, b = docs
    book, alone = a.parent / "book.idx", a.parent / "alone.idx"
    llm = CountingLLM()
    use(monkeypatch, llm)
    assert run(["index", str(a), "-o", str(book), *method_args(method), "-q"], capsys)[0] == 0
    first = paid(llm, method)
    before = Index.open(book)
    a_span = (before.documents[0].start, before.documents[0].end)
    a_text = before.source
    # what b costs on its own, and a and b from scratch
    assert run(["index", str(b), "-o", str(alone), *method_args(method), "-q"], capsys)[0] == 0
    b_alone = paid(llm, method) - first
    both = CountingLLM()
    use(monkeypatch, both)
    scratch = a.parent / "scratch.idx"
    args = ["index", str(a), str(b), "-o", str(scratch), *method_args(method), "-q"]
    assert run(args, capsys)[0] == 0
    # add b: a stays where it was, the methods rebuilt through the cache
    llm = CountingLLM()
    use(monkeypatch, llm)
    code, out, err = run(["index", str(b), "-o", str(book), "--add", "-q"], capsys)
    assert code == 0, err
    added = Index.open(book)
    assert [d.name for d in added.documents] == ["a.txt", "b.txt"]
    assert (added.documents[0].start, added.documents[0].end) == a_span
    assert added.source.startswith(a_text) and added.documents[0].added
    assert "book.idx: added b.txt" in out and f"book.idx: {method} " in out, out
    change = added.manifest.last_change
    assert added.documents[1].added == change["at"] >= added.documents[0].added
    assert change["added"] == ["b.txt"] and method in change["methods"]
    cost = paid(llm, method)
    if method in ("graphreader",):  # one extraction per chunk: b's chunks, nothing else
        assert cost == b_alone > 0
    elif method == "lightpal":  # b's passages' pairs, and a's whose candidates changed
        assert b_alone <= cost < paid(both, method)
    elif method == "raptor":  # clusters change: their summaries are paid again
        assert 0 < cost <= paid(both, method)
    else:
        assert cost == 0 == paid(both, method)
    assert leaves_are_source(book, method) > 0 or method == "full"
    verified(book, capsys)
    # the same again: nothing to add, nothing paid
    code, out, err = run(["index", str(b), "-o", str(book), "--add", "-q"], capsys)
    assert code == 0 and "already holds b.txt" in out and paid(llm, method) == cost, (out, err)
    # remove a: b's spans move to the start; GraphReader pays nothing new
    llm = CountingLLM()
    use(monkeypatch, llm)
    code, out, err = run(["remove", str(book), "a.txt", "-q"], capsys)
    assert code == 0, err
    assert "book.idx: removed a.txt" in out and f"book.idx: {method} " in out, out
    left = Index.open(book)
    assert [d.name for d in left.documents] == ["b.txt"]
    assert left.source == b.read_text()
    if method in ("graphreader", "lightpal") or paid(both, method) == 0:
        assert paid(llm, method) == 0
    assert leaves_are_source(book, method) > 0 or method == "full"
    verified(book, capsys)
    code, out, _ = run(["info", str(book)], capsys)
    assert "changed   removed a.txt" in out and f"{method}: " in out


def test_info_json_has_each_source_added_and_the_last_change(
    docs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = docs
    book = a.parent / "book.idx"
    use(monkeypatch, CountingLLM())
    assert run(["index", str(a), "-o", str(book), "-m", "bm25", "-q"], capsys)[0] == 0
    out = run(["info", str(book), "--json"], capsys)[1]
    first = json.loads(out)
    assert first["sources"][0]["added"] == "" and "last_change" not in first
    assert run(["index", str(b), "-o", str(book), "--add", "-q"], capsys)[0] == 0
    _code, out, _ = run(["info", str(book), "--json"], capsys)
    info = json.loads(out)
    assert info["sources"][0]["added"] == first["created"]  # there since the start
    assert info["sources"][1]["added"] == info["last_change"]["at"]
    assert info["last_change"]["methods"]["bm25"]["seconds"] >= 0


# ------------------------------------------------------------ kill -9 in the middle
SLOW_ADD = """
import sys, time
from lcr.cli.main import main
from lcr.models.container import Models
from tests.test_index_writers import ExtractLLM, HashEmbedder
class Slow(ExtractLLM):
    def generate(self, *args, **kwargs):
        time.sleep(0.4)
        return super().generate(*args, **kwargs)
main(sys.argv[1:], models=lambda spec, progress: Models.with_objects(
    llm=Slow(), embedder=HashEmbedder(), spec=spec))
"""


def test_kill_9_mid_add_leaves_the_index_as_it_was_and_the_rerun_pays_nothing_twice(
    docs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = docs
    book = a.parent / "book.idx"
    llm = CountingLLM()
    use(monkeypatch, llm)
    args = ["-m", "bm25", "-m", "graphreader", *GR_FAST, "-q"]
    assert run(["index", str(a), "-o", str(book), *args], capsys)[0] == 0
    alone = a.parent / "alone.idx"
    first = llm.calls
    assert run(["index", str(b), "-o", str(alone), *args], capsys)[0] == 0
    b_needs = llm.calls - first
    before = snapshot(book)
    cache = book / "cache" / "graphreader.jsonl"
    lines_before = cache.read_text().count("\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-c", SLOW_ADD, "index", str(b), "-o", str(book), "--add", "-q"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while cache.read_text().count("\n") < lines_before + 2:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    paid_before_kill = cache.read_text().count("\n") - lines_before
    assert 2 <= paid_before_kill < b_needs
    after = snapshot(book)
    after.pop("cache/graphreader.jsonl")
    after.pop("cache/graphreader.config.json", None)
    before.pop("cache/graphreader.config.json", None)
    before.pop("cache/graphreader.jsonl")
    after.pop("cache/secret", None)  # made with the first paid output (#54)
    before.pop("cache/secret", None)
    assert after == before  # the index as it was; only the cache grew
    assert [d.name for d in Index.open(book).documents] == ["a.txt"]
    verified(book, capsys)
    # the rerun pays only what the killed run had not, and cleans up what it left
    llm = CountingLLM()
    use(monkeypatch, llm)
    code, _out, err = run(["index", str(b), "-o", str(book), "--add", "-q"], capsys)
    assert code == 0, err
    assert llm.calls + paid_before_kill == b_needs
    assert [p.name for p in a.parent.iterdir() if p.name.startswith(".book.idx.")] == []
    assert [d.name for d in Index.open(book).documents] == ["a.txt", "b.txt"]
    verified(book, capsys)


# ------------------------------------------------------------------- bad input
def one_line_usage_error(code: int, err: str) -> None:
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


def test_bad_changes_are_one_line_errors_with_exit_2(
    docs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = docs
    book = a.parent / "book.idx"
    assert run(["index", str(a), "-o", str(book), "-m", "bm25", "-q"], capsys)[0] == 0
    before = snapshot(book)
    thesis = a.parent / "thesis"
    thesis.mkdir()
    (thesis / "thesis.tex").write_text("x")
    code, _, err = run(["index", str(b), "-o", str(thesis), "--add"], capsys)
    one_line_usage_error(code, err)
    assert "not an lcr index" in err and os.listdir(thesis) == ["thesis.tex"]
    code, _, err = run(["index", str(b), "-o", str(a.parent / "none.idx"), "--add"], capsys)
    one_line_usage_error(code, err)
    assert not (a.parent / "none.idx").exists()
    code, _, err = run(["index", str(b), "--add"], capsys)
    one_line_usage_error(code, err)
    code, _, err = run(["index", str(b), "-o", str(book), "--add", "--force"], capsys)
    one_line_usage_error(code, err)
    code, _, err = run(["remove", str(book), "nobody.txt"], capsys)
    one_line_usage_error(code, err)
    assert "no document named 'nobody.txt'" in err
    code, _, err = run(["remove", str(book), "a.txt"], capsys)
    one_line_usage_error(code, err)
    assert "no document" in err
    code, _, err = run(["remove", str(thesis), "a.txt"], capsys)
    one_line_usage_error(code, err)
    code, _, err = run(["remove", str(a), "a.txt"], capsys)  # the document, not its index
    one_line_usage_error(code, err)
    assert "is a file, not an lcr index" in err and "make one" not in err  # none can go there
    other = a.parent / "other" / "a.txt"
    other.parent.mkdir()
    other.write_text("another text under the same name")
    code, _, err = run(["index", str(other), "-o", str(book), "--add"], capsys)
    one_line_usage_error(code, err)
    assert "already holds a document named a.txt" in err and "lcr remove" in err
    assert snapshot(book) == before


def test_pecan_add_and_remove_with_a_real_model(
    docs: tuple[Path, Path],
    smollm: Any,
    embedder: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """PECAN reads attention, so only a real model builds it. Its batches run across
    documents: after the add, a's batches come from the cache, b's are paid; after
    removing b, a's first batches are read back again."""
    a, b = docs
    a.write_text(a.read_text()[:1500])
    b.write_text(b.read_text()[:1500])
    use(monkeypatch, smollm, embedder)
    book = a.parent / "book.idx"
    assert run(["index", str(a), "-o", str(book), *method_args("pecan"), "-q"], capsys)[0] == 0
    first = Index.open(book).methods["pecan"].stats
    code, _, err = run(["index", str(b), "-o", str(book), "--add", "-q"], capsys)
    assert code == 0, err
    stats = Index.open(book).methods["pecan"].stats
    assert stats["llm_cached"] > 0 and stats["llm_batches"] > 0, stats  # a's read, b's paid
    assert stats["llm_batches"] + stats["llm_cached"] > first["llm_batches"]
    assert leaves_are_source(book, "pecan") > 0
    verified(book, capsys)
    code, _out, err = run(["remove", str(book), "b.txt", "-q"], capsys)
    assert code == 0, err
    after = Index.open(book).methods["pecan"].stats
    assert after["llm_cached"] > 0, after
    verified(book, capsys)


def test_concurrent_adds_wait_for_each_other_and_both_land(docs: tuple[Path, Path]) -> None:
    """Two `--add` runs at once on one index: one writer at a time, each building on
    what the other committed; neither document is lost."""
    a, b = docs
    c = a.parent / "c.txt"
    c.write_text("A third story. The fox met the crow by the old mill at dawn.\n")
    book = a.parent / "book.idx"
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def lcr(*args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "lcr", *args, "-q"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip

    first = lcr("index", str(a), "-o", str(book), "-m", "bm25")
    assert first.wait(timeout=300) == 0, first.communicate()
    runs = [lcr("index", str(doc), "-o", str(book), "--add") for doc in (b, c)]
    for proc in runs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    index = Index.open(book)
    assert sorted(d.name for d in index.documents) == ["a.txt", "b.txt", "c.txt"]
    assert index.documents[0].name == "a.txt" and index.verify() == {}
    assert leaves_are_source(book, "bm25") > 0
