"""Output: closed pipes, terminal control sequences, line-by-line flushing, evidence order."""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from lcr.cli.main import main
from lcr.cli.output import printable
from lcr.evidence import Evidence, EvidenceItem
from lcr.store import Index

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(args)
    out = capsys.readouterr()
    code = exc.value.code
    return (code if isinstance(code, int) else 1), out.out, out.err


def lcr(*args: str, stdin: int | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "lcr", *args],
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )


def readline_within(proc: subprocess.Popen[str], seconds: float) -> str:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], seconds)
    assert ready, f"no line within {seconds}s"
    return proc.stdout.readline()


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory, cinderella: Path) -> Path:
    folder = tmp_path_factory.mktemp("output")
    story = folder / "cinderella.txt"
    shutil.copy(cinderella, story)
    with pytest.raises(SystemExit) as exc:
        main(["index", str(story), "-q", "-m", "bm25", "-m", "tfidf", "-m", "mixpr", "-m", "full"])
    assert exc.value.code == 0
    return folder / "cinderella.idx"


# ---------------------------------------------------------------------- broken pipes
@pytest.mark.parametrize(
    "args",
    [
        ["retrieve", "{idx}", "Where did the bird sit?"],
        ["retrieve", "{idx}", "Where did the bird sit?", "--json"],
        ["info", "{idx}"],
        ["methods", "--settings"],
    ],
)
def test_a_reader_that_goes_away_is_not_an_error(args: list[str], index: Path) -> None:
    proc = lcr(*[a.replace("{idx}", str(index)) for a in args])
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # like `| true`: nobody reads, the first write meets a closed pipe
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 0
    assert err == ""


def test_head_dash_1_on_a_long_batch_exits_0(index: Path) -> None:
    proc = lcr("retrieve", str(index), "-", stdin=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    proc.stdin.write("Who sat on the hazel tree?\n" * 400)  # far more than a pipe buffer
    proc.stdin.close()
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=300) == 0 and err == ""
    assert first.startswith("Evidence (bm25, ") and " 0 nodes" not in first


# ----------------------------------------------------------- terminal control sequences
def test_printable_strips_every_control_sequence() -> None:
    assert printable("a\x1b]0;title\x07b") == "ab"  # OSC: set the window title
    assert printable("x\x1b[31mred\x1b[0m y") == "xred y"  # CSI: colours
    assert printable("h\x1b]8;;http://e.x\x1b\\link\x1b]8;;\x1b\\") == "hlink"  # hyperlink
    assert printable("p\x1bcq\x1b(Bz") == "pqz"  # reset, charset
    assert printable("cr\rnul\x00del\x7fc1\x9b") == "crnuldelc1"
    assert printable("tab\tnewline\n é 中") == "tab\tnewline\n é 中"


def test_plain_output_strips_controls_and_json_keeps_the_exact_text(
    tmp_path: Path, cinderella: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = cinderella.read_text().replace("hazel-tree", "hazel\x1b]0;pwned\x07-tree\x1b[31m", 3)
    story = tmp_path / "evil\x1b[2Jname.txt"
    story.write_text(text)
    idx = tmp_path / "evil.idx"
    code, out, err = run(["index", str(story), "-o", str(idx), "-q", "-m", "bm25"], capsys)
    assert code == 0 and "\x1b" not in out + err
    code, out, _ = run(["retrieve", str(idx), "hazel tree", "-k", "3"], capsys)
    assert code == 0 and "hazel-tree" in out and "evilname.txt" in out
    assert not any(c in out for c in "\x1b\x07")
    code, out, _ = run(["info", str(idx)], capsys)
    assert code == 0 and "evilname.txt" in out and "\x1b" not in out
    code, out, _ = run(["retrieve", str(idx), "hazel tree", "-k", "3", "--json"], capsys)
    obj = json.loads(out)
    source = (idx / "source.txt").read_text()
    assert any("\x1b]0;pwned\x07" in ev["text"] for ev in obj["evidence"])
    for ev in obj["evidence"]:
        ((s, e),) = ev["spans"]
        assert source[s:e] == ev["text"]


# ---------------------------------------------------------------- one line at a time
def test_each_build_is_printed_when_committed(tmp_path: Path, cinderella: Path) -> None:
    story = tmp_path / "c.txt"
    shutil.copy(cinderella, story)
    # bm25 commits in a second; dense then loads the embedder and embeds, which takes longer
    proc = lcr("index", str(story), "-m", "bm25", "-m", "dense")
    first = readline_within(proc, 120)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert first.startswith(f"{tmp_path / 'c.idx'}: bm25 built in")
    # the line was out while the next build was still running: it never committed
    assert list(Index.open(tmp_path / "c.idx").methods) == ["bm25"]


def test_each_answer_is_printed_as_its_question_is_read(index: Path) -> None:
    proc = lcr("retrieve", str(index), "-", "--json", "-k", "2", stdin=subprocess.PIPE)
    assert proc.stdin is not None
    proc.stdin.write("Where did the bird sit?\n")
    proc.stdin.flush()
    first = json.loads(readline_within(proc, 120))  # stdin is still open
    proc.stdin.write("Who lost a shoe?\n")
    proc.stdin.close()
    second = json.loads(readline_within(proc, 120))
    assert proc.wait(timeout=60) == 0
    assert (
        first["question"] == "Where did the bird sit?" and second["question"] == "Who lost a shoe?"
    )


# ---------------------------------------------------------------------- evidence order
@pytest.mark.parametrize(
    ("method", "extra"),
    [("bm25", []), ("tfidf", []), ("mixpr", ["--mode", "local"]), ("full", [])],
)
def test_json_and_plain_list_evidence_in_the_same_rank_order(
    method: str, extra: list[str], index: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    q = ["retrieve", str(index), "Who tried on the golden shoe?", "-m", method, *extra]
    code, out, _ = run([*q, "--json"], capsys)
    assert code == 0
    evidence = json.loads(out)["evidence"]
    ranks = [ev["rank"] for ev in evidence]
    assert ranks == list(range(1, len(evidence) + 1))
    code, out, _ = run([*q, "--evidence", "all"], capsys)  # plain lists five by default
    lines = [line for line in out.splitlines() if line.startswith("[")]
    source = (index / "source.txt").read_text()
    assert len(lines) == len(evidence)
    for line, ev in zip(lines, evidence, strict=True):
        start, end = ev["spans"][0]
        assert line.startswith(f"[{ev['rank']}] score ") and f"chars {start}-{end}" in line
        assert source[start:end] == ev["text"]
    if method in ("bm25", "tfidf"):  # a plain scorer: rank order is score order
        scores = [ev["score"] for ev in evidence]
        assert scores == sorted(scores, reverse=True)


def test_mixpr_evidence_follows_its_own_ranking_not_document_order(
    index: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    q = ["retrieve", str(index), "Who tried on the golden shoe?", "-m", "mixpr", "--mode"]
    code, out, _ = run([*q, "local", "--json"], capsys)
    evidence = json.loads(out)["evidence"]
    starts = [ev["spans"][0][0] for ev in evidence]
    assert code == 0 and starts != sorted(starts)  # it used to come in document order


def test_rank_order_rule() -> None:
    def item(i: int, score: float, **extra: object) -> EvidenceItem:
        return EvidenceItem(f"n{i}", 0, 0, score, "t", [(i, i + 1)], dict(extra))

    ranked = Evidence("m", [item(0, 0.1, rank=2), item(1, 0.9, rank=3), item(2, 0.5, rank=1)])
    assert [it.id for it in ranked.in_rank_order()] == ["n2", "n0", "n1"]
    unranked = Evidence("m", [item(0, 0.2), item(1, 0.7), item(2, 0.7)])
    assert [it.id for it in unranked.in_rank_order()] == ["n1", "n2", "n0"]
    assert [it.extra["rank"] for it in unranked.in_rank_order()] == [1, 2, 3]
