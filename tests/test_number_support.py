"""An answer made only of numbers needs a quote that speaks of what was asked (#73).

The cases are in ``tests/data/number_support.json``: the first-hour asks of six Debian
manuals (bench/results/first-hour.md) and issue 73's three unsupported quotes, each a
question, an answer, the sentence offered as its quote and the verdict a reader gives.
The verdict is pure text in, verdict out (:func:`lcr.answer.quotes.unsupported`): no
model is asked. A right answer the rule still withholds is marked ``withheld_today`` in
the fixture and runs as a strict expected failure, so the day a change passes it the
test says so.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lcr.answer.quotes import RELATED_SHARE, answer_quote, asked_words, relates, unsupported
from lcr.answer.wording import root
from lcr.evidence import EvidenceItem
from tests.benches import load_bench

CASES: list[dict[str, Any]] = json.loads(
    (Path(__file__).parent / "data" / "number_support.json").read_text(encoding="utf-8")
)["cases"]


def _param(case: dict[str, Any]) -> Any:
    marks = []
    if case.get("withheld_today"):
        marks.append(pytest.mark.xfail(strict=True, reason="withheld today: " + case["why"]))
    return pytest.param(case, id=case["id"], marks=marks)


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_a_number_s_quote_is_judged_as_a_reader_would(case: dict[str, Any]) -> None:
    problem = unsupported(case["answer"], case["question"], [case["quote"]])
    verdict = "withheld" if problem else "supported"
    assert verdict == case["expected"], (case["id"], problem)


def test_the_fixture_keeps_issue_73_s_wrong_quotes() -> None:
    ids = {c["id"] for c in CASES if c["expected"] == "withheld"}
    issue = {"issue73-exit-status-zero", "issue73-elsie-born", "issue73-contents-bare"}
    assert issue <= ids


def test_modal_verbs_and_option_letters_are_not_what_is_asked() -> None:
    assert asked_words("What is the largest payload an IPv4 UDP datagram can carry?") == {
        root(w) for w in ("largest", "payload", "ipv", "udp", "datagram", "carry")
    }
    assert "t" not in asked_words("Which port does ninja -t browse use by default?")


def test_a_verb_s_endings_are_its_word_when_judging_relatedness() -> None:
    assert root("used") == root("use") == root("uses")
    assert root("loaded") == root("load") and root("opened") == root("open")
    assert root("files") == root("file") and root("ranked") == root("ranking")
    assert relates("Which port does ninja use by default?", ["By default port 8000 is used."])


def test_lcr_locates_the_sentence_that_states_the_number() -> None:
    # manual.html's two sentences (chars 9059-9286), as mixpr read them
    text = (
        "By default port 8000 is used and a web browser will be opened. "
        "This can be changed as follows: ninja -t browse --port=8000 --no-browser mytarget"
    )
    item = EvidenceItem("c0", 0, 0, 1.0, text, [(0, len(text))])
    quote = answer_quote("8000", "Which port does ninja -t browse use by default?", [item], text)
    assert quote is not None and quote.text.startswith("By default port 8000 is used")


def test_the_bench_judges_as_the_rule_does_and_never_reads_a_test_set(tmp_path: Path) -> None:
    bench = load_bench("bench_number_support")
    for case in CASES:
        judged = bench.accepted(case["answer"], case["question"], case["quote"], RELATED_SHARE)
        assert judged == (not unsupported(case["answer"], case["question"], [case["quote"]]))
    held_out = tmp_path / "test.jsonl"
    held_out.write_text("", encoding="utf-8")
    assert bench.main([str(held_out)]) == 2
