"""bench/bench_reduced.py's pure parts: the corpus it cuts from HotpotQA-shaped
paragraphs, and gold recall read at a word budget."""

from __future__ import annotations

from types import ModuleType

import pytest

from tests.benches import load_bench


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_bench("bench_reduced")


PARAGRAPHS = [
    "Alpha Town. Alpha Town is a village in Sussex. It has a mill.",
    "Beta River. The Beta River flows through Alpha Town.",
    "Gamma Hill. Gamma Hill is the highest point of Kent.",
    "Delta Lake. Delta  Lake lies\nnorth of the highest point.",
    "Epsilon. Epsilon is a letter of the Greek alphabet.",
    "Zeta Farm. Zeta Farm grows apples near a river.",
]


def test_gold_paragraphs_are_found_across_whitespace_or_refused(bench: ModuleType) -> None:
    gold = ["Delta Lake lies north of the highest point.", "It has a mill."]
    assert bench.gold_paragraphs(PARAGRAPHS, gold) == [3, 0]
    assert bench.gold_paragraphs(PARAGRAPHS, ["Omega is the last letter."]) is None


def test_the_cut_keeps_gold_and_the_questions_best_other_paragraphs(bench: ModuleType) -> None:
    questions = [
        ("Which village does the Beta River flow through?", ["Omega is not anywhere."]),
        ("Which river flows through Alpha Town?", ["The Beta River flows through Alpha Town."]),
        ("What is the highest point of Kent?", ["Gamma Hill is the highest point of Kent."]),
        ("What grows on Zeta Farm?", ["Zeta Farm grows apples near a river."]),
    ]
    kept, chosen = bench.cut(PARAGRAPHS, questions, 2, 1)
    # the first question's gold is in no paragraph: skipped; two questions kept
    assert chosen == [1, 2]
    assert 1 in kept and 2 in kept
    # one distractor each, never another chosen question's gold paragraph
    assert len(kept) == 4 and kept == sorted(kept)
    assert 0 in kept  # "Alpha Town" best matches the river question after its gold
    assert 3 in kept  # "highest point" the Kent question
    assert 5 not in kept and 4 not in kept  # Zeta's question was not chosen


def test_recall_reads_items_best_first_up_to_the_budget(bench: ModuleType) -> None:
    items = ["one two three four", "The Beta River flows through Alpha Town.", "x y"]
    assert bench.taken(items, 6) == ["one two three four", "The Beta"]
    gold = ["The Beta River flows through Alpha Town.", "x y"]
    assert bench.recall(gold, bench.taken(items, 6)) == 0.0
    assert bench.recall(gold, bench.taken(items, 11)) == 0.5
    assert bench.recall(gold, bench.taken(items, 100)) == 1.0


def test_a_point_is_on_topic_when_most_of_its_words_are_the_sources(bench: ModuleType) -> None:
    source = PARAGRAPHS[0] + PARAGRAPHS[1]
    assert bench.on_topic("* The Beta River flows through Alpha Town.", source)
    assert not bench.on_topic("They are a group of creatures.", source)
    assert not bench.on_topic("The first summary point is:", source)
    assert not bench.on_topic("* ...", source)
