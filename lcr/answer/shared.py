"""The shared answer step: evidence in, answer out, as one chain of named stages.

Every method without its own answer prompt hands its evidence here; the prompt is the
same for all, so differences in answers come from retrieval alone. :data:`STAGES` is
the chain, written once: each stage a function in its own module, with its own few
``answer.*`` settings declared beside it (``--set answer.KEY=VALUE``);
:class:`AnswerSettings` is their union. The reply length is ``--max-new-tokens``.

1. decide before reading (:mod:`lcr.answer.before`): a rare term the document never
   writes is "not found", with no model asked;
2. read (:mod:`lcr.answer.read`): select, merge and order the evidence, fitted to the
   window;
3. reply (:mod:`lcr.answer.reply`): the one generation;
4. verify (:mod:`lcr.answer.verify`): quotes and support checked against what was read;
5. decide (:mod:`lcr.answer.decide`): the answer given, withheld, or "not found".

A method with its paper's own answer step replaces read and reply; the pipeline runs
stages 1 and 5 around every step (:mod:`lcr.pipeline.answering`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from lcr.answer.before import BeforeSettings, decide_before_reading
from lcr.answer.decide import DecideSettings, decide
from lcr.answer.read import (
    FittedEvidence,
    PromptBuilder,
    ReadSettings,
    fit_to_budget,
    prepare_evidence,
    read,
    select_evidence,
)
from lcr.answer.replies import NOT_FOUND, says_not_found
from lcr.answer.reply import (
    AnswerStream,
    ReplySettings,
    answer,
    normalise_reply,
    quoting,
    shared_prompt,
)
from lcr.answer.result import AnswerResult
from lcr.answer.selection import SentenceScorer
from lcr.answer.verify import VerifySettings, check_reply
from lcr.config import Setting, Settings
from lcr.evidence import EvidenceItem
from lcr.models.base import LLM, Message

__all__ = [  # what callers import from here, whichever stage defines it
    "ANSWER_SETTINGS",
    "ANSWER_TARGET",
    "NOT_FOUND",
    "ORIGINAL",
    "STAGES",
    "AnswerResult",
    "AnswerSettings",
    "AnswerStream",
    "FittedEvidence",
    "PromptBuilder",
    "answer",
    "build_messages",
    "check_reply",
    "fit_to_budget",
    "normalise_reply",
    "prepare_evidence",
    "quoting",
    "says_not_found",
    "select_evidence",
    "shared_answer",
    "shared_prompt",
]

ANSWER_TARGET = "answer"
"""What ``--set`` names instead of a method for these settings: ``answer.KEY=VALUE``."""


@dataclass(frozen=True)
class Stage:
    """One stage of the answer step: its name, the function that runs it, the settings
    it reads that are its own, and what it does, in a line."""

    name: str
    run: Callable[..., Any]
    settings: type[Settings]
    does: str


STAGES: tuple[Stage, ...] = (
    Stage(
        "decide before reading",
        decide_before_reading,
        BeforeSettings,
        'a rare term of the question the document never writes: "not found", no model asked',
    ),
    Stage("read", read, ReadSettings, "the evidence selected, merged and ordered"),
    Stage("reply", answer, ReplySettings, "fitted to the window, the one generation"),
    Stage("verify", check_reply, VerifySettings, "its quotes and support checked"),
    Stage("decide", decide, DecideSettings, 'given, withheld, or "not found"'),
)
"""The answer step's chain, in the order it runs."""


@dataclass(frozen=True)
class AnswerSettings(DecideSettings, VerifySettings, ReplySettings, ReadSettings, BeforeSettings):
    """How the shared answer step reads evidence: ``--set answer.KEY=VALUE``, each declared
    by its stage (:data:`STAGES`), in the chain's order; and the reply length
    (``--max-new-tokens``, an option of its own, so not a setting)."""

    def choices(self) -> dict[str, str]:
        """The ``answer.*`` settings that identify a run (``max_new_tokens`` is an option
        of its own): those that decide something with the others as they are."""
        return {
            s.name: str(getattr(self, s.name))
            for s in ANSWER_SETTINGS
            # the threshold decides only where the support check runs
            if not (s.name == "support" and (self.not_found != "abstain" or self.check == "quote"))
            # the selection's settings only where it selects
            and not (s.name in ("budget", "pool") and self.select == "off")
            and not (s.name == "term_zipf" and self.not_found != "abstain")
        }

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "max_new_tokens": self.max_new_tokens}


ANSWER_SETTINGS: tuple[Setting, ...] = AnswerSettings.declared()

ORIGINAL = AnswerSettings(
    not_found="guess",
    keep_first=False,
    names_floor=0.0,
    located_floor=0.0,
    related_floor=0.0,
    term_zipf=0.0,
    unquoted="show",
    quote_answer_in="quote",
)
"""The answer step before any ``answer.*`` setting: the prompt lcr always used
(:func:`build_messages`), every answer given as the model wrote it."""


def build_messages(question: str, items: list[EvidenceItem]) -> list[Message]:
    """The original shared prompt (:data:`ORIGINAL`: ``instruction=plain``, ``not_found=guess``)."""
    return shared_prompt(ORIGINAL)(question, items)


def shared_answer(
    question: str,
    items: Sequence[EvidenceItem],
    llm: LLM,
    settings: AnswerSettings,
    *,
    source: str,
    names: Sequence[str],
    context_tokens: int | None = None,
    scorer: SentenceScorer | None = None,
    stream: AnswerStream | None = None,
) -> AnswerResult:
    """The shared step's stages read, reply and verify (:data:`STAGES`) with
    ``settings``: select sentences (``answer.select``, scored by ``scorer``), merge and
    order the evidence, answer it (or, abstaining on no evidence at all, reply
    :data:`NOT_FOUND` with no LLM call), and check the reply. ``source`` is the index's
    text and ``names`` its documents' names (for merged passages)."""
    prepared, info = read(
        question,
        items,
        settings,
        source=source,
        names=names,
        scorer=scorer,
        count_tokens=llm.count_tokens,
    )
    if not prepared and settings.not_found != "guess":
        scored = settings.not_found == "abstain" and settings.check != "quote"
        return AnswerResult(NOT_FOUND, [], 0, info=info, support=0.0 if scored else None)
    out = answer(
        question,
        prepared,
        llm,
        max_new_tokens=settings.max_new_tokens,
        context_tokens=context_tokens,
        prompt=shared_prompt(settings),
        abstain_on_nothing=settings.not_found != "guess",
        stream=stream,
        stream_text=not quoting(settings),
    )
    out = dataclasses.replace(out, info={**out.info, **info})
    return check_reply(question, out, llm, settings, source)
