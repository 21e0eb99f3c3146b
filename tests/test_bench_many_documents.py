"""bench/many_documents.py's pure parts (issue 53): the rule that picks the questions,
the other documents' draw, the Wilson interval and the own-story scores."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from lcr.eval.metrics import token_f1
from tests.benches import load_bench


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_bench("many_documents")


def story(text: str, *questions: str) -> dict[str, Any]:
    return {
        "document": text,
        "questions": [
            {
                "question_number": n,
                "question_text": q,
                "responses": [{"response_text": f"answer {n}"}],
            }
            for n, q in enumerate(questions, start=1)
        ],
    }


def test_names_leave_out_the_first_word_and_titles(bench: ModuleType) -> None:
    assert bench.names_in("Who is Mr. Lexington, and what did I see?") == ["Lexington"]
    assert bench.names_in("What is Gavin's attitude to Nagurski?") == ["Gavin", "Nagurski"]
    assert bench.names_in("Describe the setting of the story.") == []


def test_a_question_is_chosen_only_when_its_names_are_its_story_s_alone(
    bench: ModuleType,
) -> None:
    stories = [
        story(
            "Retief met Ivy Hendricks on Mars.",
            "Describe the setting of the story.",  # no name
            "Who is Retief?",  # Retief is in story 1 too
            "Who is Zed?",  # not in its own story
            "Who is Ivy Hendricks and what happens on Mars?",  # Mars is in story 2
            "What does Ivy Hendricks do?",  # the first that holds
            "Who is Ivy?",  # holds, but comes later
        ),
        story("Retief and Magnan.", "Who is Retief?", "Who is Magnan?"),
        story("Dust on Mars.", "What is on Mars?"),
    ]
    chosen = bench.choose_questions(stories, 5)
    assert [(c.story, c.number) for c in chosen] == [(0, 5), (1, 2)]
    assert chosen[0].names == ("Ivy", "Hendricks")
    assert chosen[0].references == ("answer 5",)
    assert [c.story for c in bench.choose_questions(stories, 1)] == [0]


def test_names_match_whole_words_only(bench: ModuleType) -> None:
    stories = [story("Dan met Blote.", "Who is Dan?"), story("Danger ahead.", "Who?")]
    assert [c.number for c in bench.choose_questions(stories, 2)] == [1]


def test_the_other_documents_are_fixed_by_the_seed_and_never_the_own(
    bench: ModuleType,
) -> None:
    drawn = bench.other_documents(3, 10, 25)
    assert drawn == bench.other_documents(3, 10, 25)
    assert len(set(drawn)) == 10 and 3 not in drawn
    assert all(0 <= j < 25 for j in drawn)
    assert drawn != bench.other_documents(3, 10, 25, seed=62)
    assert bench.other_documents(0, 2, 3) == [1, 2]


def test_wilson_matches_the_published_values(bench: ModuleType) -> None:
    # Newcombe (1998), Table I: 81/263 -> 0.2553-0.3662; 0/10 -> 0-0.2775
    p, low, high = bench.wilson(81, 263)
    assert p == pytest.approx(81 / 263)
    assert (low, high) == (pytest.approx(0.2553, abs=1e-4), pytest.approx(0.3662, abs=1e-4))
    assert bench.wilson(0, 10)[1:] == (0.0, pytest.approx(0.2775, abs=1e-4))
    assert bench.wilson(10, 10)[1:] == (pytest.approx(0.7225, abs=1e-4), pytest.approx(1.0))


def test_own_scores_skip_or_zero_the_withheld(bench: ModuleType) -> None:
    own = [
        {"story": 0, "answer": "the red fox"},
        {"story": 0, "answer": bench.NOT_FOUND},
    ]
    refs = {0: ["a red fox ran", "nothing alike"]}
    given = bench.own_scores(own, refs, token_f1, withheld=False)
    assert given == [pytest.approx(token_f1("the red fox", "a red fox ran"))]
    assert bench.own_scores(own, refs, token_f1, withheld=True) == [given[0], 0.0]


def test_only_questions_with_every_answer_are_complete(bench: ModuleType) -> None:
    records: list[dict[str, Any]] = [
        {"story": 0, "check": c} for c in ("support", "both") for _ in range(3)
    ]
    records += [{"story": 1, "check": "support"}] * 3 + [{"story": 1, "check": "both"}]
    assert bench.complete_questions(records, ["support", "both"], 3) == {0}
    assert bench.complete_questions(records, ["support"], 3) == {0, 1}


def test_shares_per_question_weigh_each_question_once(bench: ModuleType) -> None:
    nf = bench.NOT_FOUND
    records = [{"story": 0, "answer": a} for a in (nf, nf, nf, "Wass dies")]
    records += [{"story": 1, "answer": nf}]
    assert sorted(bench.per_question(records)) == [0.75, 1.0]
