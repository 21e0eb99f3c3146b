"""Accuracy split by whether the answer was in the evidence read ("found but not read"),
on a hand-made results file whose numbers are worked out by hand below."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from lcr.eval import metrics, runner, summary
from lcr.models.container import Models
from tests.fakes import ForbiddenLLM


def test_answer_found_normalises_and_matches_whole_words() -> None:
    assert metrics.answer_found("He flew to PARIS, France.", ["Paris"]) == 1.0
    assert metrics.answer_found("“The Blue Door” was shut", ["blue door"]) == 1.0
    assert metrics.answer_found("It was 1984.", ["4"]) == 0.0  # not inside a number
    assert metrics.answer_found("It was 1984.", ["4", "1984"]) == 1.0  # any answer counts
    assert metrics.answer_found("anything", []) is None
    assert metrics.answer_found("anything", ["the"]) is None  # normalises to nothing
    assert metrics.answer_found("", ["x"]) == 0.0


# (id, answer, metrics as stored, evidence text or None for a record without text)
ROWS: list[tuple[str, str, dict[str, float], str | None]] = [
    ("q1", "kitchen", {"answer_found": 1.0, "em": 1.0, "f1": 1.0, "match_all": 1.0}, "x"),
    ("q2", "kitchen", {"answer_found": 1.0, "em": 0.0, "f1": 0.5, "match_all": 0.0}, "x"),
    ("q3", "kitchen", {"answer_found": 0.0, "em": 0.0, "f1": 0.0, "match_all": 0.0}, "x"),
    # a guess that happens to be right: the answer was not in the evidence
    ("q4", "kitchen", {"answer_found": 0.0, "em": 1.0, "f1": 1.0, "match_all": 1.0}, "x"),
    # older records: no answer_found; computed from the stored text (found) ...
    ("q5", "Paris", {"em": 0.0, "f1": 0.2, "match_all": 0.0}, "He flew to PARIS, France."),
    # ... (not found: "4" is no word of "1984") ...
    ("q6", "4", {"em": 0.0, "f1": 0.0, "match_all": 0.0}, "It was 1984."),
    # ... and oldest: no text either, so it stays out of the split
    ("q7", "kitchen", {"em": 1.0, "f1": 1.0, "match_all": 1.0}, None),
]


def _write_set(tmp_path: Path) -> Path:
    data = tmp_path / "hand.jsonl"
    lines = []
    for i, (qid, ans, _, _) in enumerate(ROWS):
        doc = {"id": f"d{i}", "title": f"d{i}", "text": f"Document {i} about {ans}."}
        q = {"id": qid, "question": f"Where {qid}?", "answers": [ans], "documents": [doc]}
        lines.append(json.dumps(q))
    data.write_text("\n".join(lines) + "\n")
    return data


def _write_results(path: Path, key: str) -> None:
    out = []
    for qid, _, scores, text in ROWS:
        ev: dict[str, Any] = {"id": "c0", "doc": 0, "score": 1.0, "spans": [[0, 5]]}
        if text is not None:
            ev["text"] = text
        out.append({"id": qid, "method": "bm25", "run": key, "metrics": scores, "evidence": [ev]})
    path.write_text("".join(json.dumps(r) + "\n" for r in out))


def test_split_on_a_hand_made_results_file(tmp_path: Path) -> None:
    data = _write_set(tmp_path)
    models = Models.with_objects(llm=ForbiddenLLM())  # nothing is rerun: no LLM call
    opts = runner.RunOptions(methods=["bm25"], out=tmp_path / "hand.results.jsonl")
    key = runner.plan_methods(["bm25"], models, opts)[0].key
    _write_results(opts.out or Path(), key)
    outcome = runner.run(data, models, opts)
    assert outcome.new == 0 and outcome.skipped == 7
    result = summary.summarize(outcome.records, ["bm25"])

    # answer found: q1 q2 q5 of the six with a value (q7 has none) = 0.5
    found = result["methods"]["bm25"]["answer_found"]
    assert found["mean"] == pytest.approx(0.5) and found["n"] == 6
    split = result["split"]["bm25"]
    yes, no = split["found"], split["not_found"]
    # in the evidence: q1 (1, 1, 1), q2 (0, .5, 0), q5 (0, .2, 0)
    assert yes["questions"] == 3
    assert yes["em"]["mean"] == pytest.approx(1 / 3) and yes["em"]["n"] == 3
    assert yes["f1"]["mean"] == pytest.approx(1.7 / 3)
    assert yes["match_all"]["mean"] == pytest.approx(1 / 3)
    # not in it: q3 (0, 0, 0), q4 (1, 1, 1), q6 (0, 0, 0): one right guess in three
    assert no["questions"] == 3
    assert no["em"]["mean"] == pytest.approx(1 / 3) and no["f1"]["mean"] == pytest.approx(1 / 3)
    assert no["match_all"]["mean"] == pytest.approx(1 / 3)
    for half in (yes, no):
        assert 0.0 <= half["em"]["low"] <= half["em"]["mean"] <= half["em"]["high"] <= 1.0
        assert half["em"]["low"] < half["em"]["high"]  # mixed 0/1 values: a real interval

    # the text table carries the split
    console = Console(width=240, record=True)
    summary.render(result, console)
    text = console.export_text()
    assert "found but not read" in text and "EM not in ev." in text
    assert re.search(r"│ bm25 +│ +3 │ +0\.333 │", text), text  # found: 3, EM 1/3


def test_retrieval_only_records_found_but_no_split(tmp_path: Path) -> None:
    records = [
        {"id": "a", "method": "bm25", "metrics": {"answer_found": 1.0, "recall": 1.0}},
        {"id": "b", "method": "bm25", "metrics": {"answer_found": 0.0, "recall": 0.0}},
    ]
    result = summary.summarize(records, ["bm25"], retrieval_only=True)
    assert result["methods"]["bm25"]["answer_found"]["mean"] == 0.5
    assert "split" not in result
