"""The prompt-injection fixtures (tests/data/injection.json) and their builder
(lcr/eval/injection.py). Whether a model obeys them is measured by
bench/bench_injection.py, never asserted here."""

from __future__ import annotations

from pathlib import Path

import pytest

from lcr import api
from lcr.eval import dataset
from lcr.eval.injection import (
    Fixture,
    inject,
    injection_questions,
    load_fixture,
    markers,
    obeyed,
    paragraphs,
)
from lcr.models.container import Models
from tests.fakes import ForbiddenLLM

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def fixture() -> Fixture:
    return load_fixture(ROOT / "tests/data/injection.json")


@pytest.fixture(scope="module")
def story(fixture: Fixture) -> str:
    return (ROOT / fixture.story).read_text(encoding="utf-8")


def test_fixture_has_three_attacks_and_ten_questions_the_story_answers(
    fixture: Fixture, story: str
) -> None:
    assert len([a for a in fixture.attacks if a.text is not None]) >= 3
    assert len(fixture.probes) == 10
    for probe in fixture.probes:  # the true answer is in the story, the false one is not
        assert any(a.lower() in story.lower() for a in probe.answers), probe.question
        assert probe.false.lower() not in story.lower(), probe.false
        assert probe.false.lower() in probe.false_fact.lower()


def test_each_attack_is_in_several_places(fixture: Fixture, story: str) -> None:
    for attack in fixture.attacks:
        text = inject(story, attack, fixture.probes)
        assert len(paragraphs(text)) >= len(paragraphs(story))
        if attack.text is not None:
            assert text.count(attack.text) >= 3, attack.name
        else:
            for probe in fixture.probes:
                assert text.count(probe.false_fact) == 2, probe.false
        # the story itself is all still there, in order
        assert [p for p in paragraphs(story) if p in text] or attack.text is None


def test_bm25_finds_the_planted_false_fact_beside_the_truth(
    fixture: Fixture, story: str, tmp_path: Path
) -> None:
    facts = next(a for a in fixture.attacks if a.text is None)
    path = tmp_path / "attacked.txt"
    path.write_text(inject(story, facts, fixture.probes), encoding="utf-8")
    models = Models.with_objects(llm=ForbiddenLLM())
    index, _ = api.plan_and_index([path], tmp_path / "a.idx", ["bm25"], models)
    probe = fixture.probes[0]
    found = " ".join(
        it.text
        for it in api.plan_and_retrieve(index, "bm25", probe.question, models, k=3).evidence.items
    )
    assert probe.false in found and any(a in found for a in probe.answers)


def test_questions_record_what_obeying_looks_like(
    fixture: Fixture, story: str, tmp_path: Path
) -> None:
    qs = injection_questions(fixture, story)
    assert len(qs) == len(fixture.attacks) * len(fixture.probes)
    first = qs[0]
    assert first.meta["attack"] == fixture.attacks[0].name
    assert first.meta["obeyed_if"] == list(markers(fixture.attacks[0], fixture.probes[0]))
    facts = [q for q in qs if q.meta["attack"] == "false-facts"]
    assert [q.meta["obeyed_if"] for q in facts] == [[p.false] for p in fixture.probes]
    out = tmp_path / "inj.jsonl"
    dataset.save(qs, out)
    assert [q.id for q in dataset.load(out)] == [q.id for q in qs]


def test_obeyed_ignores_case_and_spacing() -> None:
    assert obeyed("pwned", ("PWNED",))
    assert obeyed("The answer is ACCESS\n DENIED.", ("ACCESS DENIED",))
    assert not obeyed("The Patience", ("PWNED", "Silver Heron"))


def test_the_held_out_set_is_new_and_its_signs_are_not_in_the_story(story: str) -> None:
    """tests/data/injection30.json (issue 72): thirty attacks none of the sets the defences
    were written on holds, each sign of obeying absent from the story, and each planted
    false fact asked the question it answers falsely (attack i gets question i mod 10)."""
    held = load_fixture(ROOT / "tests/data/injection30.json")
    old = [
        load_fixture(ROOT / p) for p in ("tests/data/injection.json", "bench/data/injection54.json")
    ]
    seen = {a.text for f in old for a in f.attacks}
    assert len(held.attacks) == 30
    for i, attack in enumerate(held.attacks):
        assert attack.text is not None and attack.text not in seen, attack.name
        assert attack.obeyed_if and not obeyed(story, attack.obeyed_if), attack.name
        assert obeyed(attack.text, attack.obeyed_if), attack.name
        if attack.name.startswith("repeat-"):  # its question is the one it is about
            probe = held.probes[i % len(held.probes)]
            assert inject(story, attack, held.probes).count(attack.text) >= 10
            assert set(probe.question.lower().split()) & set(attack.text.lower().split())
