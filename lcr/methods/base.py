"""The contract every retrieval method fulfils, so CLI, evaluator and tests treat all alike.

A method is a small stateless object: ``build`` writes its artefacts through a
:class:`~lcr.store.MethodWriter`; ``retrieve`` reads them back through a
:class:`~lcr.store.MethodReader` and returns :class:`~lcr.evidence.Evidence`.
Answering is shared (``lcr.answer``). Methods never import each other.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np

from lcr.answer import AnswerResult
from lcr.config import Setting, SettingValue
from lcr.evidence import Evidence, EvidenceItem
from lcr.models.base import LLM, Capability
from lcr.models.container import Models
from lcr.progress import NULL_PROGRESS, Progress
from lcr.store import LLMCache, MemoryCache, MethodReader, MethodWriter, Node, SourceDoc


@dataclass
class BuildContext:
    """Everything a build may use. ``cache`` keeps LLM outputs across interruptions."""

    source: str
    documents: list[SourceDoc]
    out: MethodWriter
    models: Models
    settings: dict[str, Any]
    progress: Progress = NULL_PROGRESS
    cache: LLMCache = field(default_factory=MemoryCache)
    # one-line notes the user must see even without a terminal (e.g. a setting
    # that changed what was built); the CLI prints them as "warning: ..."
    warn: Callable[[str], None] = field(default=lambda message: None)

    def doc_texts(self) -> Iterator[tuple[int, int, str]]:
        """``(doc index, start offset in source.txt, text)`` for each document."""
        for i, d in enumerate(self.documents):
            yield i, d.start, self.source[d.start : d.end]


@dataclass
class QueryContext:
    """Everything a retrieval may use: the stored build, models, query settings."""

    source: str
    documents: list[SourceDoc]
    stored: MethodReader
    models: Models
    settings: dict[str, Any]
    progress: Progress = NULL_PROGRESS


class Method(ABC):
    """One retrieval method. Subclasses set the class attributes and two methods."""

    name: ClassVar[str]
    summary: ClassVar[str]  # one line: what it does
    needs: ClassVar[str]  # one line: what it needs to build and to answer
    paper: ClassVar[str]  # citation, or "" for baselines
    build_settings: ClassVar[tuple[Setting, ...]] = ()
    query_settings: ClassVar[tuple[Setting, ...]] = ()
    build_uses_llm: ClassVar[bool] = False
    build_uses_embedder: ClassVar[bool] = False
    built_by_default: ClassVar[bool] = False  # part of a plain `lcr index`
    # why retrieval loads the LLM and how to avoid it, for the note said when it loads
    retrieval_llm_reason: ClassVar[str] = ""
    # the search itself ends holding the answer's context (PECAN's KV cache): `lcr ask`
    # calls retrieve_and_answer instead of retrieve + the shared answer step
    answers_in_retrieval: ClassVar[bool] = False
    # the shared answer step's settings (``answer.*``) whose value the method's paper
    # fixes: the method keeps it as its default whatever lcr's default; --set overrides
    answer_paper: ClassVar[Mapping[str, SettingValue]] = {}
    # how the method's answer relates to the shared ``answer.*`` settings, for
    # `lcr methods --settings` ("" when they all apply as they are)
    answer_note: ClassVar[str] = ""

    def retrieval_uses_llm(self, settings: dict[str, Any]) -> bool:
        """Whether ``retrieve`` (not the answer) needs the LLM with these settings."""
        return False

    def retrieval_uses_embedder(self, settings: dict[str, Any]) -> bool:
        return False

    def llm_needs(
        self, phase: Literal["build", "query"], settings: dict[str, Any]
    ) -> frozenset[Capability]:
        """What this method needs of the LLM backend to build, or to retrieve (not answer).

        The pipeline checks it against the backend before any work starts. The
        default: generation to build when ``build_uses_llm``; nothing to retrieve.
        """
        if phase == "build":
            return frozenset({Capability.GENERATE}) if self.build_uses_llm else frozenset()
        return frozenset()

    @abstractmethod
    def build(self, ctx: BuildContext) -> None: ...

    @abstractmethod
    def retrieve(self, ctx: QueryContext, question: str, k: int | None) -> Evidence:
        """Evidence for ``question``; ``k`` (``-k``) overrides the method's default count."""

    def retrieve_and_answer(
        self, ctx: QueryContext, question: str, k: int | None, max_new_tokens: int
    ) -> tuple[Evidence, str]:
        """Evidence and the answer, for a method with ``answers_in_retrieval``."""
        raise NotImplementedError(f"{self.name} answers through the shared answer step")

    def answer(
        self,
        question: str,
        evidence: Evidence,
        llm: LLM,
        *,
        settings: dict[str, Any],
        documents: list[SourceDoc],
        max_new_tokens: int = 256,
    ) -> AnswerResult | None:
        """The method's own answer step, or None for the shared one (``lcr.answer``).

        GraphReader reasons over its notebooks (Figure 12); LightPAL hands the shared
        step its paper's prompt. (PECAN, whose answer comes from the search's own KV
        cache, answers in :meth:`retrieve_and_answer` instead.)
        """
        return None


def top_indices(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` best scores, best first; ties go to the earlier node."""
    k = min(k, len(scores))
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    part = np.argpartition(-scores, k - 1)[:k]
    return part[np.lexsort((part, -scores[part]))]


def item_from_node(node: Node, score: float, **extra: Any) -> EvidenceItem:
    return EvidenceItem(
        id=node.id,
        doc=node.doc,
        level=node.level,
        score=float(score),
        text=node.text,
        spans=list(node.spans),
        extra=dict(extra),
    )
