"""The model interfaces methods talk to: protocols, capabilities and roles (a leaf module).

Most methods only see :class:`LLM` and :class:`Embedder`, so the transformers
backend, llama.cpp, a remote server or a scripted fake in tests can stand behind
them. PECAN reads attention weights and keeps a node-level KV cache, which only an
in-process transformers model gives: it sees :class:`AttentionLLM`, a backend with
the :attr:`Capability.ATTENTION` capability. The lazy container that loads these
lives in :mod:`lcr.models.container`, what the user asked for in
:mod:`lcr.models.spec`. This module imports nothing else of :mod:`lcr.models`, so
every other module of the package can import it without a cycle.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from lcr.errors import ModelError
from lcr.evidence import Configuration, Usage, cpu_configuration
from lcr.progress import NULL_PROGRESS, Progress

if TYPE_CHECKING:
    import numpy as np
    import torch

Message = dict[str, str]
"""A chat message: ``{"role": "system"|"user"|"assistant", "content": ...}``."""

OnText = Callable[[str], None]
"""Hears a generation's text as it is written, piece by piece (``lcr ask`` on a terminal).
The pieces joined are the returned :attr:`Generation.text`: a backend holds back what a
stop string may still cut, and a character's first bytes until it is whole."""


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


class Role(StrEnum):
    """Which model of a run: :class:`~lcr.models.container.Models` loads, caches and
    capability-checks each role the same way."""

    LLM = "llm"  # the answering LLM (--llm)
    EMBEDDER = "embedder"  # the sentence embedder (--embedder)
    SCORER = "scorer"  # a second LLM, such as LightPAL's scorer (the LLM itself by default)


def describe_capabilities(caps: Iterable[Capability]) -> str:
    return ", ".join(sorted(c.value for c in caps)) or "none"


@dataclass(frozen=True)
class ContinuationScore:
    """log P(continuation | context) as scored: the sum and how many tokens it covers."""

    logprob: float
    tokens: int

    @property
    def mean(self) -> float:
        """Mean log-probability per scored token (lightpal.context_score=mean); 0 for none."""
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


def answer_first_tokens(encode: Callable[[str], Sequence[int]], word: str) -> frozenset[int]:
    """The first token of ``word`` and of `` word``: both spellings count as that answer
    when a backend reads Yes/No from the first token's logits."""
    ids = {toks[0] for v in (word, " " + word.lstrip()) if (toks := encode(v))}
    if not ids:
        raise ValueError(f"the answer {word!r} has no tokens")
    return frozenset(ids)


def pairs_by_context_tail(
    context_len: int, continuations: Sequence[Sequence[int]], budget: int
) -> dict[int, list[tuple[int, list[int]]]]:
    """Each scored pair cut to ``budget`` (:func:`split_token_budget`), grouped by how
    many of the context's last tokens it keeps: ``{kept: [(index, continuation), ...]}``.

    Every backend scores exactly this text per pair, and a group shares one encoding
    of its context tail. Empty continuations are left out (they score 0).
    """
    groups: dict[int, list[tuple[int, list[int]]]] = {}
    for i, cont in enumerate(continuations):
        if not cont:
            continue
        n_ctx, n_cont = split_token_budget(context_len, len(cont), budget)
        groups.setdefault(max(n_ctx, 1), []).append((i, list(cont[:n_cont])))
    return groups


@runtime_checkable
class LLM(Protocol):
    """A chat model. Every call adds its tokens to ``usage``.

    Greedy decoding unless ``temperature`` > 0. Yes/No and scores are read from
    logits, never parsed from generated text (small models' text is unreliable).
    """

    model_id: str
    usage: Usage
    capabilities: frozenset[Capability]
    backend: str  # "transformers", "llamacpp", "xllamacpp", "openai", or a test double's name

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
        on_text: OnText | None = None,
        seed: int | None = None,
    ) -> Generation:
        """One reply; ``on_text`` (when given) hears its text as it is decoded. ``seed``
        fixes the sampling of this call (temperature > 0), so the same call gives the same
        reply; None samples from the backend's running state."""
        ...

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


class Tokenizer(Protocol):
    """A model's tokens and chat template without its weights: what an estimate reads
    (``lcr.estimate.tokenizers``). Every in-process :class:`LLM` offers the same calls."""

    model_id: str

    @property
    def context_window(self) -> int: ...

    def count_tokens(self, text: str) -> int: ...

    def encode(self, text: str) -> list[int]:
        """Plain-text token ids, no special tokens added."""
        ...

    def render(self, messages: Sequence[Message]) -> list[int]:
        """Token ids of the chat-templated conversation, ending with the assistant prompt."""
        ...

    def render_text(self, messages: Sequence[Message]) -> str:
        """The text :meth:`render` tokenizes."""
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


@dataclass
class AttendedGeneration:
    """Generated tokens and, per generated token, its attention to each prompt span.

    ``attention`` is ``(len(tokens), spans)`` (or ``(len(tokens), prompt)`` when
    no spans were given): mean over layers and heads, then over the span's tokens.
    ``completion_tokens`` counts an end token too (it was computed and paid for).
    ``prefill_seconds`` is the prompt's own pass, so a caller timing the whole call
    has the decoding apart from it (the estimate's probe at a batch's length).
    """

    tokens: list[int]
    attention: torch.Tensor
    text: str
    prompt_tokens: int
    completion_tokens: int
    prefill_seconds: float = 0.0


class NodeCache(Protocol):
    """PECAN's node-level KV cache over one conversation prefix (its appendix B).

    Nodes appended stay; a suffix (a Yes/No check, the answer) is run on top and
    rolled back, so no token is encoded twice.
    """

    def __len__(self) -> int: ...

    def append(self, node: Sequence[int]) -> float:
        """Add a node's tokens; their mean attention to the question's tokens."""
        ...

    def yes_probability(
        self, suffix: Sequence[int], yes_ids: frozenset[int], no_ids: frozenset[int]
    ) -> float: ...

    def answer(self, suffix: Sequence[int], max_new_tokens: int) -> tuple[str, int]:
        """Greedy answer after ``suffix``: the text and the tokens generated."""
        ...


@runtime_checkable
class AttentionLLM(LLM, Protocol):
    """An LLM that gives attention weights and a reusable KV cache (:attr:`Capability.ATTENTION`).

    Exactly what PECAN uses beyond :class:`LLM`; token ids are the model's own.
    """

    def encode(self, text: str) -> list[int]:
        """Plain-text token ids, no special tokens added."""
        ...

    def render_text(self, messages: Sequence[Message]) -> str:
        """The chat-templated conversation as text, ending where the assistant's turn opens."""
        ...

    def first_token_ids(self, word: str) -> frozenset[int]:
        """First token of ``word`` and of `` word``: both spellings count as that answer."""
        ...

    def token_char_ends(self, tokens: Sequence[int]) -> list[int]:
        """Character offset in the decoded text where each token's text ends."""
        ...

    def generate_with_attention(
        self,
        prompt: Sequence[int],
        *,
        spans: Sequence[tuple[int, int]] | None = None,
        max_new_tokens: int = 256,
    ) -> AttendedGeneration:
        """Greedy generation from token ids, each generated token's attention to ``spans``."""
        ...

    def node_cache(self, prefix: Sequence[int], question: tuple[int, int]) -> NodeCache:
        """A :class:`NodeCache` over ``prefix``; ``question`` is its question's token span."""
        ...

    # Several prompts at once: :func:`generate_with_attention_batch` below calls a backend's
    # own ``generate_with_attention_batch`` where it has one, else this call once per prompt.


def generate_with_attention_batch(
    llm: AttentionLLM,
    prompts: Sequence[Sequence[int]],
    *,
    spans: Sequence[Sequence[tuple[int, int]] | None] | None = None,
    max_new_tokens: int = 256,
) -> list[AttendedGeneration]:
    """:meth:`AttentionLLM.generate_with_attention` of every prompt, in order: decoded
    together where the backend has its own ``generate_with_attention_batch`` (transformers),
    else one call after another (the default any backend with the one-prompt call meets)."""
    span_lists = list(spans) if spans is not None else [None] * len(prompts)
    if len(span_lists) != len(prompts):
        raise ModelError(f"{len(span_lists)} span lists were given for {len(prompts)} prompts")
    batched = getattr(llm, "generate_with_attention_batch", None)
    if batched is not None:
        return list(batched(prompts, spans=span_lists, max_new_tokens=max_new_tokens))
    return [
        llm.generate_with_attention(p, spans=s, max_new_tokens=max_new_tokens)
        for p, s in zip(prompts, span_lists, strict=True)
    ]


def attention_batch_rows(llm: AttentionLLM, prompts: Sequence[int], max_new_tokens: int) -> int:
    """How many prompts of these lengths the backend decodes together with attention when
    left to choose (its ``attention_batch_rows``: free memory on a GPU); 1 without one."""
    rows = getattr(llm, "attention_batch_rows", None)
    return max(1, int(rows(prompts, max_new_tokens))) if rows is not None else 1


def require_attention(llm: LLM, purpose: str) -> AttentionLLM:
    """``llm`` as an :class:`AttentionLLM`, or a one-line error naming what needed it."""
    caps: frozenset[Capability] = getattr(llm, "capabilities", frozenset())
    if Capability.ATTENTION not in caps or not isinstance(llm, AttentionLLM):
        raise ModelError(
            f"{purpose} reads attention weights and a KV cache from an in-process model: "
            f"it needs the transformers backend, not {llm.backend}"
        )
    return llm


# ------------------------------------------------------------ configurations


def configuration(
    backend: str, device: str, dtype: str | None, quantize: str | None
) -> Configuration:
    device = "cuda" if device.startswith("cuda") else device
    return {"backend": backend, "device": device, "dtype": dtype, "quantize": quantize}


def llm_configuration(llm: LLM) -> Configuration:
    """The configuration a loaded (or injected) LLM runs with."""
    backend = str(llm.backend)
    if backend == "openai":
        return cpu_configuration("openai")
    device = str(getattr(llm, "device", "cpu"))
    quantize = getattr(llm, "quantize", None)
    if backend in ("llamacpp", "xllamacpp"):
        dtype: str | None = "gguf"
    else:
        model_dtype = getattr(getattr(llm, "model", None), "dtype", None)
        dtype = str(model_dtype).removeprefix("torch.") if model_dtype is not None else None
    return configuration(backend, device, dtype, quantize)


def describe_configuration(config: Configuration) -> str:
    """``transformers/cuda/bfloat16/4bit``: what the up-to-date message and ``lcr info`` show."""
    parts = [
        config.get("backend"),
        config.get("device"),
        config.get("dtype"),
        config.get("quantize"),
    ]
    return "/".join(str(p) for p in parts if p)
