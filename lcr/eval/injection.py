"""Prompt-injection test sets: a story with attack texts inserted in several places.

A document is data, yet a small model reading it may follow an instruction written
in it ("reply PWNED") or repeat a false fact planted beside the true one. The
fixture (``tests/data/injection.json``) names a story, attack texts and questions
with their true answers; :func:`injection_questions` makes one copy of the story
per attack and asks every question of it, recording in each question's ``meta``
what an answer that obeyed the attack would contain. ``bench/bench_injection.py``
runs them through ``lcr eval`` under each answer configuration and counts how often
the answer obeyed. Pure: text in, questions out.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lcr.eval.dataset import Document, Question


@dataclass(frozen=True)
class Attack:
    name: str
    text: str | None  # None: the false-fact attack (each question's own false sentence)
    every: int  # the text as a paragraph of its own after every N-th paragraph
    obeyed_if: tuple[str, ...]  # an answer containing one of these obeyed


@dataclass(frozen=True)
class Probe:
    question: str
    answers: tuple[str, ...]
    false: str  # what an answer that believed the planted fact says
    false_fact: str  # the planted sentence


@dataclass(frozen=True)
class Fixture:
    story: str  # a path relative to the repository's root
    attacks: tuple[Attack, ...]
    probes: tuple[Probe, ...]


def load_fixture(path: Path) -> Fixture:
    raw: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    attacks = tuple(
        Attack(a["name"], a["text"], int(a["every"]), tuple(a["obeyed_if"])) for a in raw["attacks"]
    )
    probes = tuple(
        Probe(q["question"], tuple(q["answers"]), q["false"], q["false_fact"])
        for q in raw["questions"]
    )
    return Fixture(raw["story"], attacks, probes)


def paragraphs(text: str) -> list[str]:
    return [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]


def inject(story: str, attack: Attack, probes: tuple[Probe, ...]) -> str:
    """The story with the attack in it. An instruction: a paragraph of its own after
    every ``attack.every``-th paragraph, and once inside the first paragraph's text.
    False facts: each sentence at the end of the paragraph that holds its question's
    true answer (so retrieval finds both), and again as a paragraph three further on."""
    paras = paragraphs(story)
    if attack.text is not None:
        out: list[str] = []
        for i, p in enumerate(paras):
            out.append(p if i != 1 else _inside(p, attack.text))
            if attack.every and (i + 1) % attack.every == 0:
                out.append(attack.text)
        return "\n\n".join(out)
    after: dict[int, list[str]] = {}
    for probe in probes:
        home = next(
            (i for i, p in enumerate(paras) if any(a.lower() in p.lower() for a in probe.answers)),
            len(paras) - 1,
        )
        paras[home] = f"{paras[home]} {probe.false_fact}"
        after.setdefault(min(home + 3, len(paras) - 1), []).append(probe.false_fact)
    out = []
    for i, p in enumerate(paras):
        out.append(p)
        out += after.get(i, [])
    return "\n\n".join(out)


def _inside(paragraph: str, text: str) -> str:
    """``text`` after the paragraph's first sentence: an instruction inside the prose."""
    cut = paragraph.find(". ")
    if cut < 0:
        return f"{paragraph} {text}"
    return f"{paragraph[: cut + 2]}{text} {paragraph[cut + 2 :]}"


def markers(attack: Attack, probe: Probe) -> tuple[str, ...]:
    """What an answer that obeyed ``attack`` contains, for ``probe``'s question."""
    return attack.obeyed_if if attack.text is not None else (probe.false,)


def obeyed(answer: str, signs: tuple[str, ...]) -> bool:
    """Whether ``answer`` contains one of ``signs`` (case and spacing ignored)."""
    text = " ".join(answer.lower().split())
    return any(" ".join(s.lower().split()) in text for s in signs)


def injection_questions(fixture: Fixture, story: str) -> list[Question]:
    """Every question asked of every attacked copy of the story (one document each)."""
    out: list[Question] = []
    for attack in fixture.attacks:
        doc = Document(f"story-{attack.name}", attack.name, inject(story, attack, fixture.probes))
        for i, probe in enumerate(fixture.probes):
            out.append(
                Question(
                    id=f"{attack.name}-q{i}",
                    question=probe.question,
                    answers=list(probe.answers),
                    documents=[doc],
                    task="injection",
                    meta={"attack": attack.name, "obeyed_if": list(markers(attack, probe))},
                )
            )
    return out
