"""Stage 1 of the answer step, deciding before reading: a term of the question the
document never writes (:mod:`lcr.answer.terms`) means "not found", with no model asked.
Its one setting, ``answer.term_zipf``, is declared here."""

from __future__ import annotations

from dataclasses import dataclass

from lcr.answer.grounding import GroundingSettings, unwritten_terms
from lcr.answer.replies import NOT_FOUND
from lcr.answer.result import AnswerResult
from lcr.answer.terms import TERM_ZIPF
from lcr.config import Settings, setting

_MEASURED = "docs/answer-step.md#a-term-the-document-never-uses-issue-53"


@dataclass(frozen=True)
class BeforeSettings(Settings):
    term_zipf: float = setting(
        TERM_ZIPF,
        "answer.not_found=abstain: a word of the question rarer in English than this (Zipf "
        "scale: 3 is once in a million words) that the document never writes means not "
        "found, with no LLM call; 0 turns it off",
        low=0.0,
        high=8.0,
        measured=_MEASURED,
    )


def decide_before_reading(
    question: str, settings: GroundingSettings, source: str
) -> AnswerResult | None:
    """ "Not found" with no call when ``source`` never writes one of the question's rare
    terms (``info.absent`` names them); None: go on and read."""
    absent = unwritten_terms(question, settings, source)
    if not absent:
        return None
    return AnswerResult(NOT_FOUND, [], 0, info={"absent": ", ".join(absent)})
