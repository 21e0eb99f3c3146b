"""bench/bench_names_floor.py's pure parts: the bound on the support score, the verdict
from a bound or a record, and its table."""

from __future__ import annotations

from tests.benches import load_bench

floor = load_bench("bench_names_floor")


def _question(coverage: float, names: float, qid: str = "q@c1") -> dict[str, object]:
    return {"id": qid, "corpus": "c1", "signals": {"coverage": coverage, "names": names}}


def test_the_bound_is_the_best_answers_score_and_the_floor_zeroes_it() -> None:
    assert floor.bound({"coverage": 1.0, "names": 1.0}, 0.5) > 0.9
    assert floor.bound({"coverage": 0.8, "names": 0.45}, 0.0) > 0.5  # the sum alone gives it
    assert floor.bound({"coverage": 0.8, "names": 0.45}, 0.5) == 0.0


def test_undecided_questions_wait_for_the_models_record() -> None:
    sure = _question(0.2, 0.0)
    open_ = _question(0.9, 0.45)
    assert floor.caught(sure, None, 0.0) is True
    assert floor.caught(open_, None, 0.0) is None
    said = {"answer": "not found in the document", "support_signals": {}}
    assert floor.caught(open_, said, 0.0) is True
    answered = {"answer": "X", "support_signals": {"overlap": 1.0, "coverage": 0.9, "names": 0.45}}
    assert floor.caught(open_, answered, 0.0) is False
    assert floor.caught(open_, answered, 0.5) is True
    table = floor.report([_question(1.0, 0.4, "a")], [sure, open_], {"q@c1": answered})
    rows = table.splitlines()[2:]
    assert rows[0].startswith("| 0.0 | 0 of 1 | 1 of 2") and rows[1].startswith(
        "| 0.5 | 1 of 1 | 2 of 2"
    )
