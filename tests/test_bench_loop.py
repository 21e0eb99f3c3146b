"""bench/bench_loop.py's pure parts (issue 53): judging an answer against the one read
in the document, how a "not found" came, and the totals over questions."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from lcr.answer.replies import NOT_FOUND
from tests.benches import load_bench


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_bench("bench_loop")


def record(index: str, answer: str, **fields: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "index": f"/tmp/x/{index}.idx",
        "answer": answer,
        "usage": {"calls": 1, "prompt_tokens": 500, "completion_tokens": 20},
        "timings": {"answer_s": 10.0},
        "answer_settings": {"names_floor": 0.5},
    }
    out.update(fields)
    return out


def question(bench: ModuleType, document: str = "policy") -> Any:
    return bench.Question(
        "How long may the synopsis be?",
        document,
        "under 80 characters",
        ((r"\b80\b",), ("eighty", "characters")),
    )


def test_the_not_found_string_is_lcr_s(bench: ModuleType) -> None:
    assert bench.NOT_FOUND == NOT_FOUND


def test_an_answer_is_right_when_every_pattern_of_some_group_is_in_it(
    bench: ModuleType,
) -> None:
    q = question(bench)
    assert bench.verdict(record("policy", "Under 80 characters."), q) == "right"
    assert bench.verdict(record("policy", "Eighty Characters at most"), q) == "right"
    assert bench.verdict(record("policy", "eighty words"), q) == "wrong"
    assert bench.verdict(record("policy", "1800 characters"), q) == "wrong"
    assert bench.verdict(record("policy", NOT_FOUND), q) == "not found"
    # a case that matters is written as such
    assert bench.judge("use INPUT", [["(?-i:INPUT)"]])
    assert not bench.judge("the input", [["(?-i:INPUT)"]])


def test_how_a_not_found_came(bench: ModuleType) -> None:
    no_call = record("a", NOT_FOUND, usage={"calls": 0})
    assert bench.why_not_found(no_call) == "no evidence"
    assert bench.why_not_found(record("a", NOT_FOUND)) == "the model's reply"
    floor = record("a", NOT_FOUND, withheld_answer="x", support_signals={"names": 0.2})
    assert bench.why_not_found(floor) == "withheld: names floor"
    support = record("a", NOT_FOUND, withheld_answer="x", support_signals={"names": 1.0})
    assert bench.why_not_found(support) == "withheld: support"
    quote = {**support, "quote_check": {"problem": "quote not in the evidence"}}
    assert bench.why_not_found(quote) == "withheld: quote"


def test_index_names_drop_the_suffix_and_a_trailing_slash(bench: ModuleType) -> None:
    assert bench.index_name("/tmp/loop/R-FAQ.idx/") == "R-FAQ"
    assert bench.index_name("fhs-3.0.idx") == "fhs-3.0"
    assert bench.index_name("folder") == "folder"


def test_totals_count_others_and_own_apart(bench: ModuleType) -> None:
    q = question(bench)
    records = [
        record("policy", "under 80 characters"),
        record("R-FAQ", "use the cron command", support=0.9),
        record("gnuplot", NOT_FOUND, withheld_answer="y", support_signals={"names": 0.0}),
        record("fhs", NOT_FOUND, usage={"calls": 0}),
    ]
    t = bench.totals([q], {1: records})
    assert t["flags"] == [False, True, True]
    assert t["verdicts"] == {"right": 1, "wrong": 0, "not found": 0}
    assert t["reasons"]["withheld: names floor"] == 1
    assert t["reasons"]["no evidence"] == 1
    assert sum(t["reasons"].values()) == 2
    assert t["shares"] == [pytest.approx(2 / 3)]
    row = bench.per_question_rows([q], {1: records})[0]
    assert row[4] == "2/3" and row[5] == "R-FAQ"


def test_an_index_that_also_holds_the_answer_is_no_other(bench: ModuleType) -> None:
    q = bench.Question("Q?", "fhs", "a", (("a",),), also=("handbook",))
    records = [record("fhs", "a"), record("handbook", "b"), record("R-FAQ", NOT_FOUND)]
    own, others = bench.own_and_others(records, q)
    assert [bench.index_name(r["index"]) for r in own] == ["fhs"]
    assert [bench.index_name(r["index"]) for r in others] == ["R-FAQ"]
    assert [bench.index_name(r["index"]) for r in bench.also_holding(records, q)] == ["handbook"]
    assert bench.totals([q], {1: records})["flags"] == [True]


def test_a_pooled_answer_names_the_index_of_its_best_evidence(bench: ModuleType) -> None:
    evidence = [{"rank": 2, "index": "/x/b.idx"}, {"rank": 1, "index": "/x/a.idx"}]
    assert bench.evidence_index(record("all", "x", evidence=evidence)) == "a"
    assert bench.evidence_index(record("all", "x", evidence=[])) == "-"


def test_a_question_without_patterns_is_refused(bench: ModuleType, tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text('{"question": "Q?", "document": "d", "answer": "a", "right": [[]]}\n')
    with pytest.raises(SystemExit, match="no answer patterns"):
        bench.load_questions(path)
    path.write_text('{"question": "Q?", "document": "d", "answer": "a", "right": [["a"]]}\n')
    (q,) = bench.load_questions(path)
    assert q.right == (("a",),) and q.document == "d"
