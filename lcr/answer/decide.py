"""Stage 5 of the answer step, deciding: the checked reply is given, withheld, or
"not found in the document", by where its words stand in what was read
(:func:`lcr.answer.grounding.ground`). Its setting, ``answer.not_found``, is declared
here, with the floors it withholds by: constants, each chosen on the measurement its
line names (docs/answer-step.md)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from lcr.answer.covering import LOCATED_FLOOR, RELATED_FLOOR
from lcr.answer.grounding import GroundingSettings, ground
from lcr.answer.replies import NOT_FOUND
from lcr.config import Settings, setting

if TYPE_CHECKING:
    from lcr.answer.result import AnswerResult

UNQUOTED: Literal["withhold", "show"] = "withhold"
"""Withhold an answer lcr finds no quote for: HotpotQA test, 25 of 47 unanswerable "not
found" against 24, F1 -0.006 on 24 answerable
(docs/answer-step.md#a-quote-about-the-question-issue-53)."""


@dataclass(frozen=True)
class DecideSettings(Settings):
    not_found: Literal["guess", "abstain", "instruct"] = setting(
        "abstain",
        f"abstain: reply '{NOT_FOUND}' when the support check finds the answer unsupported; "
        "instruct: the model is told to reply so; guess: always answer",
    )
    # constants, not settings (--set cannot reach them); tests and bench/ vary them
    located_floor: float = LOCATED_FLOOR
    related_floor: float = RELATED_FLOOR
    unquoted: Literal["withhold", "show"] = UNQUOTED


def decide(
    question: str,
    out: AnswerResult,
    settings: GroundingSettings,
    source: str,
    *,
    headings: Sequence[tuple[int, int]] = (),
) -> AnswerResult:
    """The reply given, withheld, or "not found" by where its words stand in what was
    read (:func:`lcr.answer.grounding.ground`); ``headings`` are the index's heading
    lines, which a quote never holds."""
    return ground(question, out, settings, source, headings=headings)
