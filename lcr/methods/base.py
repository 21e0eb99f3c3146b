"""The contract every retrieval method fulfils, so CLI, evaluator and tests treat all alike.

A method declares, once each:

- its settings per phase, as typed frozen dataclasses (``build_settings``,
  ``query_settings``: :class:`lcr.config.Settings` subclasses);
- what each phase needs (:class:`Needs`: which model roles, which LLM
  capabilities), from which the pipeline checks backends before any work,
  loads models, and ``lcr methods`` writes its "needs" line;
- ``build``: writes its artefacts through a :class:`~lcr.store.MethodWriter`;
- ``retrieve``: reads them back and returns :class:`~lcr.evidence.Evidence`;
- ``answer_step``: how its evidence is answered (:mod:`lcr.answer.step`): the
  shared step (the default, with the ``answer.*`` values its paper fixes in
  ``answer_paper``) or its paper's own, with the typed state its search keeps.

Methods never import each other, and never reach into a backend: they see the
model roles of :class:`lcr.models.base.Role` through ``ctx.models``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

import numpy as np

from lcr.answer.shared import AnswerSettings
from lcr.answer.step import SHARED_ANSWER
from lcr.answer.step import AnswerContext as AnswerContext  # the contract: a method's own step
from lcr.answer.step import AnswerState as AnswerState
from lcr.answer.step import AnswerStep as AnswerStep
from lcr.answer.step import NoState as NoState
from lcr.config import NoSettings, Settings, SettingValue
from lcr.estimate.figures import BuildEstimate
from lcr.evidence import Evidence, EvidenceItem
from lcr.methods.toolkit import BuildStages, Generations, LLMCalls, chunk_nodes, embed_pooled
from lcr.models.base import Tokenizer
from lcr.models.needs import ANSWER_WITH_LLM as ANSWER_WITH_LLM
from lcr.models.needs import GENERATE as GENERATE
from lcr.models.needs import NOTHING as NOTHING
from lcr.models.needs import Needs as Needs  # the contract: what a phase needs
from lcr.progress import NULL_PROGRESS, Progress
from lcr.store import LLMCache, MemoryCache, MethodReader, MethodWriter, Node, SourceDoc

if TYPE_CHECKING:
    from lcr.models.container import Models
    from lcr.text.chunking import Chunk
    from lcr.text.layout import DocumentLayout

B = TypeVar("B", bound=Settings)
Q = TypeVar("Q", bound=Settings)


@dataclass(frozen=True)
class KOption:
    """What ``-k`` means for a method: said in ``--help``, and checked by
    :func:`lcr.testing.check_method`.

    ``setting`` names the query setting ``-k`` overrides (``top_k``): the plan writes
    ``-k`` into it once, so ``-k 3`` is ``--set METHOD.top_k=3`` and :meth:`Method.retrieve`
    reads only ``ctx.settings`` (a method whose mode changes what ``-k`` counts overrides
    :meth:`Method.k_setting`). ``counts`` says in words what it counts; ``info_key``
    names a list in ``evidence.info`` that ``-k`` bounds when it does not bound the
    evidence itself (GraphReader's exploration paths start from ``initial_nodes``);
    ``applies`` is False for a method that ignores ``-k`` (``full`` returns the whole text).
    """

    setting: str = ""
    counts: str = "the evidence items returned"
    info_key: str = ""
    applies: bool = True


TOP_K = KOption(setting="top_k")  # -k is the top_k query setting: the evidence items


@dataclass
class BuildContext(Generic[B]):
    """Everything a build may use. ``cache`` keeps LLM outputs across interruptions."""

    source: str
    documents: list[SourceDoc]
    out: MethodWriter
    models: Models
    settings: B
    progress: Progress = NULL_PROGRESS
    cache: LLMCache = field(default_factory=MemoryCache)
    # one-line notes the user must see even without a terminal (e.g. a setting
    # that changed what was built); the CLI prints them as "warning: ..."
    warn: Callable[[str], None] = field(default=lambda message: None)
    # the seconds of each ``build_stage``, for the method's stats (``stages.to_json()``)
    stages: BuildStages = field(default_factory=BuildStages)
    # each document's pages and headings (layout.json), read only by a build that asks
    # for ``layouts`` (a damaged file then fails it); none where a caller has none
    read_layouts: Callable[[], Sequence[DocumentLayout]] = field(default=lambda: ())

    def doc_texts(self) -> Iterator[tuple[int, int, str]]:
        """``(doc index, start offset in source.txt, text)`` for each document."""
        for i, d in enumerate(self.documents):
            yield i, d.start, self.source[d.start : d.end]

    @property
    def layouts(self) -> Sequence[DocumentLayout]:
        """Each document's pages and headings (empty layouts for plain text)."""
        return self.read_layouts()

    # The build toolkit (lcr.methods.toolkit): what every build does alike, one way.
    def chunk_nodes(
        self,
        cut: Callable[[str, int], Iterable[Chunk]],
        *,
        prefix: str = "c",
        tokens: Callable[[str], int] | None = None,
        description: str = "chunking",
    ) -> list[Node]:
        """Level-0 nodes ``<prefix><n>`` of every document, cut by ``cut(text, offset)``
        (a chunker of :mod:`lcr.text.chunking`), each span exactly its chunk's."""
        task = self.progress.task(description, total=len(self.documents))
        return chunk_nodes(
            self.doc_texts(), cut, prefix=prefix, tokens=tokens, each_document=task.advance
        )

    def embed(
        self,
        texts: Sequence[str],
        description: str = "embedding",
        *,
        renormalise_whole: bool = False,
    ) -> np.ndarray:
        """One row per text by the embedder, a text longer than its window pooled over
        pieces that fit (never silently cut): :func:`lcr.methods.toolkit.embed_pooled`."""
        return embed_pooled(
            self.models.embedder,
            texts,
            self.progress,
            description,
            renormalise_whole=renormalise_whole,
        )

    def llm_calls(self, kept: str = "replies") -> LLMCalls:
        """Cache, call, wrap a failure, store: for a method's own kind of call."""
        return LLMCalls(self.cache, kept=kept)

    def generations(
        self,
        *,
        prompt_version: str,
        max_new_tokens: int,
        batch_size: int,
        what: str,
        require_text: bool = False,
    ) -> Generations:
        """Plain generations through the cache, batched, each stored as it arrives."""
        return Generations(
            self.models,
            self.cache,
            prompt_version=prompt_version,
            max_new_tokens=max_new_tokens,
            batch_size=batch_size,
            what=what,
            require_text=require_text,
        )

    def build_stage(self, name: str) -> AbstractContextManager[None]:
        """``with ctx.build_stage("embedding"):`` counts the block's seconds under
        ``name`` in ``ctx.stages`` (build time only)."""
        return self.stages.stage(name)


@dataclass
class EstimateContext(Generic[B]):
    """What an estimate may read (``lcr index --estimate``): the documents, the build
    settings, the tokenizer of a model (never its weights), and what past builds of
    this method with this model observed (``observed``: e.g. ``completion_per_call``),
    for the figures the LLM's replies decide."""

    documents: list[tuple[int, int, str]]  # (doc index, start offset, text), as doc_texts()
    settings: B
    tokenizer: Callable[[str], Tokenizer]  # model name -> its tokenizer, loaded on first use
    llm: str  # the --llm model's name
    embedder_dim: int = 384
    observed: Mapping[str, Any] = field(default_factory=dict)

    def prior(self, key: str, default: float, why: str) -> tuple[float, str]:
        """An observed figure of the last build with this model, else ``default``; and
        where the value came from, for the estimate's basis."""
        value = self.observed.get(key)
        if isinstance(value, (int, float)) and value > 0:
            return float(value), f"{value:.2g}, observed in the last build with this model"
        return default, f"{default:.2g}, lcr's default ({why})"


@dataclass
class QueryContext(Generic[B, Q]):
    """Everything a retrieval may use: the stored build (``built``: the settings it
    was built with), models, the query's settings."""

    source: str
    documents: list[SourceDoc]
    stored: MethodReader
    models: Models
    settings: Q
    built: B
    progress: Progress = NULL_PROGRESS
    # the settings the answer will be read with: its reply length is room a search
    # that shares the answer's window keeps free (PECAN)
    answer: AnswerSettings = field(default_factory=AnswerSettings)


class Method(ABC, Generic[B, Q]):
    """One retrieval method: see the module docstring for the contract."""

    name: ClassVar[str]
    summary: ClassVar[str]  # one line: what it does
    paper: ClassVar[str]  # citation, or "" for baselines
    build_settings: ClassVar[type[Settings]] = NoSettings
    query_settings: ClassVar[type[Settings]] = NoSettings
    built_by_default: ClassVar[bool] = False  # part of a plain `lcr index`
    # the shared answer step's settings (``answer.*``) whose value the method's paper
    # fixes: the method keeps it as its default whatever lcr's default; --set overrides
    answer_paper: ClassVar[Mapping[str, SettingValue]] = {}
    # ``answer.*`` values measured best for this method on real data (docs/answer-step.md)
    # and kept as its default; the paper's values win over them, --set over both
    answer_measured: ClassVar[Mapping[str, SettingValue]] = {}
    # how the method's answer relates to the shared ``answer.*`` settings, for
    # `lcr methods --settings` ("" when they all apply as they are)
    answer_note: ClassVar[str] = ""

    # What the CLI, the man page and the conformance checks (lcr.testing) read, so none
    # of them names a method.
    manual: ClassVar[str] = ""  # its manual: a path in lcr's source tree, or a URL
    k_option: ClassVar[KOption] = TOP_K  # what -k counts, and the setting it overrides
    # CPU seconds a first build in a process pays before its work (imports, first
    # calls), for the estimate of a method without an LLM (docs/speed.md, issue #55)
    setup_cpu_s: ClassVar[float] = 0.65
    traces: ClassVar[bool] = False  # its evidence.info has a step-by-step "trace" (--trace)
    # build settings (by name) that keep a build of a few KB of text quick, for tests
    quick_build_settings: ClassVar[Mapping[str, SettingValue]] = {}
    # True when a scripted LLM cannot exercise it (it reads attention or a KV cache):
    # check_method then runs it on a real small model
    tested_with_real_llm: ClassVar[bool] = False

    # What each phase needs whatever the settings: a method declares these, or
    # overrides the matching ``*_needs`` method where a setting changes what is needed.
    needs_to_build: ClassVar[Needs] = NOTHING
    needs_to_retrieve: ClassVar[Needs] = NOTHING
    needs_to_answer: ClassVar[Needs] = ANSWER_WITH_LLM  # beyond retrieval's needs

    # ------------------------------------------------------------ what it needs
    def build_needs(self, settings: B) -> Needs:
        """What building needs with these settings."""
        return self.needs_to_build

    def retrieve_needs(self, settings: Q) -> Needs:
        """What retrieval (not the answer) needs with these settings."""
        return self.needs_to_retrieve

    def answer_needs(self, settings: Q) -> Needs:
        """What the answer step needs beyond retrieval."""
        return self.needs_to_answer

    def needs_text(self) -> str:
        """The "needs" line of ``lcr methods``, for the default settings."""
        build = self.build_needs(self.build_settings())  # type: ignore[arg-type]
        query = self.query_settings()
        retrieve = self.retrieve_needs(query)  # type: ignore[arg-type]
        answer = retrieve | self.answer_needs(query)  # type: ignore[arg-type]
        return (
            f"build: {build.describe()}; retrieve: {retrieve.describe()}; "
            f"answer: {answer.describe()}"
        )

    # ---------------------------------------------------------------- phases
    @abstractmethod
    def build(self, ctx: BuildContext[B]) -> None: ...

    @abstractmethod
    def retrieve(self, ctx: QueryContext[B, Q], question: str) -> Evidence:
        """Evidence for ``question``; how much is in ``ctx.settings`` (``-k`` included)."""

    def k_setting(self, settings: Q) -> str:
        """The query setting ``-k`` overrides with these settings (empty: ``-k`` does not
        apply). One name for most methods; RAPTOR's mode changes it."""
        return self.k_option.setting if self.k_option.applies else ""

    def check_stored(self, stored: MethodReader, built: B) -> None:
        """Read what :meth:`retrieve` reads and check it agrees (array shapes against
        node counts, references between records, the method's JSON), raising
        :class:`~lcr.errors.IndexDamagedError`: ``lcr info --verify`` runs it on every
        build, after the store has checked every file's checksum, every node's spans
        and every array's structure. Retrieval makes the same checks as it loads."""
        stored.nodes()

    def estimate(self, ctx: EstimateContext[B]) -> BuildEstimate:
        """What building costs, without building (``lcr index --estimate``): a method that
        calls an LLM computes it from its own chunking code, so the counts its input
        decides are exact. The default: no LLM call, nothing else estimated."""
        return BuildEstimate(basis={"llm": "no LLM call"}, setup_cpu_s=self.setup_cpu_s)

    def record_fields(self, info: dict[str, Any]) -> dict[str, Any]:
        """What ``lcr eval``'s records keep from a retrieval's ``info`` (its ``retrieval``
        field): a few counts a method's page reports per question, not the whole
        ``info`` (traces can be long). The default: nothing."""
        return {}

    def answer_step(self, settings: Q) -> AnswerStep[Any, Any]:
        """How this method's evidence is answered with these settings: the shared step
        unless its paper has its own (:mod:`lcr.answer.step`)."""
        return SHARED_ANSWER


def top_indices(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` best scores, best first; ties go to the earlier node."""
    k = min(k, len(scores))
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    cand = top_candidates(scores, k)
    kth = scores[cand].min()
    above = cand[scores[cand] > kth]
    above = above[np.lexsort((above, -scores[above]))]
    tied = cand[scores[cand] == kth][: k - len(above)]  # ascending: the earlier nodes
    return np.concatenate([above, tied]).astype(np.int64, copy=False)


def top_candidates(scores: np.ndarray, k: int) -> np.ndarray:
    """Ascending indices of every score at least the ``k``-th best: all of any top ``k``.

    At a million chunks a full partition costs milliseconds a question; the
    ``k``-th best of a strided sample is a lower bound on the ``k``-th best of
    all, so one comparison pass keeps a few times ``k`` candidates, and the
    exact cut is made among those. NaN scores are never candidates.
    """
    n = len(scores)
    k = min(k, n)
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    pool = np.flatnonzero(~np.isnan(scores)) if np.isnan(scores).any() else None
    if pool is not None:
        if len(pool) <= k:
            return pool
        return pool[top_candidates(scores[pool], k)]
    if n >= 65_536 and n >= 64 * k:
        sample = scores[:: n // (16 * k)]
        bound = np.partition(sample, len(sample) - k)[len(sample) - k]
        cand = np.flatnonzero(scores >= bound)
        if len(cand) <= n // 4:
            vals = scores[cand]
            kth = np.partition(vals, len(vals) - k)[len(vals) - k]
            return cand[vals >= kth]
    kth = np.partition(scores, n - k)[n - k]
    return np.flatnonzero(scores >= kth)


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
