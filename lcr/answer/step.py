"""The answer step a method declares: how its evidence becomes an answer.

A method names one step per query settings (``Method.answer_step``): the shared
step (:data:`SHARED_ANSWER`, which reads the evidence with the ``answer.*``
settings, :mod:`lcr.answer.shared`) unless its paper answers its own way. A step that
answers from something its search kept (PECAN's KV cache, GraphReader's
notebooks) declares that state's type (``state_type``, a subclass of
:class:`AnswerState`); the retrieval puts it on ``Evidence.state`` and the
pipeline hands it to :meth:`AnswerStep.answer` checked, so a step never reads
an untyped value.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Generic, TypeVar

from lcr.answer.shared import (
    AnswerResult,
    AnswerSettings,
    AnswerStream,
    check_reply,
    quoting,
    shared_answer,
)
from lcr.config import Settings
from lcr.evidence import AnswerState, Evidence, EvidenceItem

if TYPE_CHECKING:
    from lcr.answer.selection import SentenceScorer
    from lcr.models.base import LLM
    from lcr.store import SourceDoc

Q = TypeVar("Q", bound=Settings)
S = TypeVar("S", bound=AnswerState)


class NoState(AnswerState):
    """What a step that reads only the evidence items answers from: nothing."""


NO_STATE = NoState()


@dataclass
class AnswerContext(Generic[Q]):
    """Everything an answer step may use: the answering LLM, the method's query
    settings, the shared step's settings (``answer.max_new_tokens`` among them), the
    index's text and documents; and what the shared step reads with when a step
    hands evidence to it (:meth:`shared`)."""

    llm: LLM
    settings: Q
    answer: AnswerSettings
    source: str
    documents: list[SourceDoc]
    scorer: SentenceScorer | None = None  # answer.select's sentence scorer
    stream: AnswerStream | None = None  # who watches the reply being written

    def shared(self, question: str, items: Sequence[EvidenceItem]) -> AnswerResult:
        """The shared step over ``items``; the result says it answered (``step``)."""
        out = shared_answer(
            question,
            items,
            self.llm,
            self.answer,
            source=self.source,
            names=[d.name for d in self.documents],
            scorer=self.scorer,
            stream=self.stream,
        )
        return dataclasses.replace(out, step=SharedAnswer.name)

    @property
    def quoting(self) -> bool:
        """Whether ``answer.check`` (quote or both) asks the reply for quotes: a step of a
        method's own then adds :func:`~lcr.answer.quotes.ask_for_quote` to its paper's
        prompt and hands its reply to :meth:`checked`."""
        return quoting(self.answer)

    def checked(self, question: str, out: AnswerResult) -> AnswerResult:
        """A method's own step's reply through the checks the shared step makes
        (:func:`~lcr.answer.shared.check_reply`) when ``answer.check`` asks for quotes:
        ``out.text`` is the model's whole reply, ``out.used`` the evidence its quotes
        must be in (with their spans in source.txt). Otherwise ``out`` as it is: the
        paper's step answers unchecked, as it always did."""
        if not self.quoting:
            return out
        return check_reply(question, out, self.llm, self.answer, self.source)


class AnswerStep(ABC, Generic[Q, S]):
    """One way of answering a method's evidence.

    ``name`` is what ``answer_settings.step`` records (``shared``, or the method's
    name for its paper's step); ``shared_settings`` says whether the shared step's
    ``answer.select`` (and its deeper ``answer.pool``) and support check apply;
    ``state_type`` is what the method's retrieval keeps for it on ``Evidence.state``
    (:class:`NoState` when the items are all it reads).
    """

    name: ClassVar[str]
    shared_settings: ClassVar[bool] = False
    state_type: type[S]

    def state_of(self, evidence: Evidence) -> S:
        """The state the retrieval kept for this step, checked against ``state_type``."""
        state = evidence.state if evidence.state is not None else NO_STATE
        if not isinstance(state, self.state_type):
            raise TypeError(
                f"the {self.name} answer step reads {self.state_type.__name__}; "
                f"the evidence of {evidence.method} kept {type(state).__name__}"
            )
        return state

    @abstractmethod
    def answer(
        self, ctx: AnswerContext[Q], question: str, evidence: Evidence, state: S
    ) -> AnswerResult:
        """Answer ``question`` from ``evidence`` (what the retrieval returned, best first)
        and ``state``; ``AnswerResult.used`` is what was read."""


class SharedAnswer(AnswerStep[Settings, NoState]):
    """The shared step: the evidence read with the ``answer.*`` settings
    (:mod:`lcr.answer.shared`)."""

    name = "shared"
    shared_settings = True
    state_type = NoState

    def answer(
        self, ctx: AnswerContext[Settings], question: str, evidence: Evidence, state: NoState
    ) -> AnswerResult:
        return ctx.shared(question, evidence.items)


SHARED_ANSWER = SharedAnswer()
"""Every method's answer step unless its paper has its own."""
