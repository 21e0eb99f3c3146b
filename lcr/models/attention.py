"""Attention-level machinery for PECAN on a :class:`TransformersLLM`, beyond the LLM protocol.

Two pieces, both built on the transformers backend's own helpers (eager
switching, attention-module hooks, KV caches) rather than growing it:

- :func:`generate_with_attention`: greedy generation that records, for every
  generated token, its attention to chosen spans of the prompt (averaged over
  heads and layers, then over each span's tokens). The prompt is prefilled with
  the fast attention kernel; only the one-token decode steps run eager, and a
  hook adds each layer's weights into one row and drops them, so memory is one
  layer's weights plus ``generated x spans`` floats, never all layers at once.
- :class:`NodeKVCache`: PECAN's node-level KV cache (appendix B). A prefix is
  encoded once; nodes are appended one by one (each returning its attention to
  the question's tokens, appendix C); a suffix asking for Yes/No is run on top
  and rolled back (the cache is cropped), so no token is encoded twice.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lcr.errors import ModelError

if TYPE_CHECKING:
    import torch

    from lcr.models.transformers_llm import TransformersLLM


def require_transformers_llm(llm: object, purpose: str) -> TransformersLLM:
    """``llm`` as a TransformersLLM, or a one-line error naming what needed it."""
    from lcr.models.transformers_llm import TransformersLLM

    if not isinstance(llm, TransformersLLM):
        backend = getattr(llm, "backend", type(llm).__name__)
        raise ModelError(
            f"{purpose} reads attention weights and a KV cache from an in-process model: "
            f"it needs the transformers backend, not {backend}"
        )
    return llm


def first_token_ids(llm: TransformersLLM, word: str) -> frozenset[int]:
    """First token of ``word`` and of `` word``: both spellings count as that answer."""
    ids = {toks[0] for v in (word, " " + word.lstrip()) if (toks := llm.encode(v))}
    if not ids:
        raise ModelError(f"the answer {word!r} has no tokens")
    return frozenset(ids)


def yes_probability(logits: torch.Tensor, yes_ids: frozenset[int], no_ids: frozenset[int]) -> float:
    """P(yes) / (P(yes) + P(no)) from one position's logits (normaliser cancels)."""
    import torch

    row = logits.double()
    lse_yes = torch.logsumexp(row[sorted(yes_ids)], dim=0)
    lse_no = torch.logsumexp(row[sorted(no_ids)], dim=0)
    return float(torch.sigmoid(lse_yes - lse_no))


@contextmanager
def _accumulate_attention(llm: TransformersLLM, keep: int) -> Iterator[list[torch.Tensor]]:
    """Hooks that sum, over layers and heads, the last query row's weights to the first
    ``keep`` key positions; the running sum is ``total[0]`` after each forward pass."""
    modules = llm._attention_modules()
    total: list[torch.Tensor] = []

    def hook(_module: Any, _args: Any, output: Any) -> None:
        weights = output[1] if isinstance(output, tuple) and len(output) > 1 else None
        if weights is None:
            raise ModelError(f"{llm.model_id}: attention weights are not available")
        row = weights[0, :, -1, :keep].float().sum(dim=0)
        if total:
            total[0] += row
        else:
            total.append(row)

    handles = [m.register_forward_hook(hook) for m in modules]
    try:
        yield total
    finally:
        for h in handles:
            h.remove()


def span_mean_matrix(spans: Sequence[tuple[int, int]], length: int) -> torch.Tensor:
    """``(length, spans)`` matrix whose product with a token row averages each span."""
    import torch

    m = torch.zeros((length, len(spans)), dtype=torch.float32)
    for j, (a, b) in enumerate(spans):
        if not 0 <= a < b <= length:
            raise ModelError(f"span {a}:{b} lies outside a prompt of {length} tokens")
        m[a:b, j] = 1.0 / (b - a)
    return m


@dataclass
class AttendedGeneration:
    """Generated tokens and, per generated token, its attention to each prompt span.

    ``attention`` is ``(len(tokens), spans)`` (or ``(len(tokens), prompt)`` when
    no spans were given): mean over layers and heads, then over the span's tokens.
    ``completion_tokens`` counts an end token too (it was computed and paid for).
    """

    tokens: list[int]
    attention: torch.Tensor
    text: str
    prompt_tokens: int
    completion_tokens: int


def generate_with_attention(
    llm: TransformersLLM,
    prompt: Sequence[int],
    *,
    spans: Sequence[tuple[int, int]] | None = None,
    max_new_tokens: int = 256,
) -> AttendedGeneration:
    """Greedy generation from ``prompt`` (token ids), capturing attention as it goes.

    Each generated token's row is the attention of the position holding that
    token (its query) to the prompt's tokens, i.e. the row computed when the
    token is fed back in; the last token is fed once more for its row.
    """
    import torch

    ids = [int(i) for i in prompt]
    if not ids:
        raise ModelError("generation needs a non-empty prompt")
    if len(ids) + 1 > llm.context_window:
        raise ModelError(
            f"a prompt of {len(ids)} tokens does not fit the context window of "
            f"{llm.model_id} ({llm.context_window} tokens)"
        )
    budget = max(1, min(max_new_tokens, llm.context_window - len(ids) - 1))
    reduce = span_mean_matrix(spans, len(ids)) if spans is not None else None
    heads = int(getattr(llm.model.config, "num_attention_heads", 1))
    layers = len(llm._attention_modules())
    ends = llm._eos_ids
    with torch.no_grad():
        out = llm.model(input_ids=llm._as_batch(ids), use_cache=True, logits_to_keep=1)
    cache = out.cache
    logits = out.logits[0, -1]
    tokens: list[int] = []
    rows: list[torch.Tensor] = []
    completion = 0
    with (
        torch.no_grad(),
        llm.weights_attention(),
        _accumulate_attention(llm, len(ids)) as total,
    ):
        for _ in range(budget):
            tok = int(torch.argmax(logits))
            completion += 1
            if tok in ends:
                break
            tokens.append(tok)
            total.clear()
            step = llm.model(
                input_ids=llm._as_batch([tok]),
                cache=cache,
                use_cache=True,
                logits_to_keep=1,
            )
            cache = step.cache
            logits = step.logits[0, -1]
            row = total[0].cpu() / (layers * heads)
            rows.append(row @ reduce if reduce is not None else row)
    width = reduce.shape[1] if reduce is not None else len(ids)
    attention = torch.stack(rows) if rows else torch.zeros((0, width))
    llm.usage.add(len(ids), completion)  # as the backend's generate counts it
    text = llm.tokenizer.decode(tokens, skip_special_tokens=True)
    return AttendedGeneration(tokens, attention, text, len(ids), completion)


def token_char_ends(llm: TransformersLLM, tokens: Sequence[int]) -> list[int]:
    """Character offset in the decoded text where each token's text ends."""
    ends: list[int] = []
    for i in range(len(tokens)):
        ends.append(len(llm.tokenizer.decode(list(tokens[: i + 1]), skip_special_tokens=True)))
    return ends


def _roll_back(cache: Any, length: int) -> None:
    """Drop every cached position after the first ``length`` (a negative crop removes
    that many from the end, in old and new transformers alike)."""
    extra = int(cache.get_seq_length()) - length
    if extra > 0:
        cache.crop(-extra)
    if int(cache.get_seq_length()) != length:
        raise ModelError("the KV cache could not be rolled back")


class NodeKVCache:
    """Appendix B's node-level KV cache over one conversation prefix.

    ``prefix`` is encoded once; ``question`` is the ``[start, end)`` token span
    of the question inside it. :meth:`append` adds a node's tokens (their KV
    states stay); :meth:`yes_probability` and :meth:`answer` run a suffix on top
    and then crop the cache back, so the next node continues from the nodes
    alone. Every token encoded is added to ``llm.usage`` exactly once.
    """

    def __init__(
        self, llm: TransformersLLM, prefix: Sequence[int], question: tuple[int, int]
    ) -> None:
        import torch

        self.llm = llm
        self.ids = [int(i) for i in prefix]
        if not self.ids:
            raise ModelError("a node cache needs a non-empty prefix")
        qa, qb = question
        if not 0 <= qa < qb <= len(self.ids):
            raise ModelError("the question's span lies outside the prefix")
        self.question = question
        self._check_fits(0)
        with torch.no_grad():
            out = llm.model(input_ids=llm._as_batch(self.ids), use_cache=True, logits_to_keep=1)
        self.cache = out.cache
        self.last_logits = out.logits[0, -1]
        llm.usage.add(len(self.ids), 0)

    def __len__(self) -> int:
        return len(self.ids)

    def fits(self, more: int) -> bool:
        return len(self.ids) + more <= self.llm.context_window

    def _check_fits(self, more: int) -> None:
        if not self.fits(more):
            raise ModelError(
                f"{len(self.ids) + more} tokens do not fit the context window of "
                f"{self.llm.model_id} ({self.llm.context_window} tokens)"
            )

    def append(self, node: Sequence[int]) -> float:
        """Add a node's tokens; their mean attention to the question's tokens (appendix C).

        Mean over layers and heads (the backend's bounded-memory mean), then over
        the node's tokens and the question's tokens.
        """
        ids = [int(i) for i in node]
        if not ids:
            raise ModelError("cannot append an empty node")
        self._check_fits(len(ids))
        logits, mean, cache = self.llm.forward_mean_attention(
            ids, cache=self.cache, copy_cache=False
        )
        self.cache = cache
        self.last_logits = logits[0, -1]
        self.ids.extend(ids)
        qa, qb = self.question
        return float(mean[:, qa:qb].mean())

    def suffix_logits(self, suffix: Sequence[int]) -> torch.Tensor:
        """Logits ``(len(suffix), vocab)`` of the suffix run on top; the cache is rolled back."""
        import torch

        ids = [int(i) for i in suffix]
        if not ids:
            raise ModelError("the suffix is empty")
        self._check_fits(len(ids))
        length = len(self.ids)
        try:
            with torch.no_grad():
                out = self.llm.model(
                    input_ids=self.llm._as_batch(ids), cache=self.cache, use_cache=True
                )
        finally:
            _roll_back(self.cache, length)
        self.llm.usage.add(len(ids), 0)
        logits: torch.Tensor = out.logits[0]
        return logits

    def yes_probability(
        self, suffix: Sequence[int], yes_ids: frozenset[int], no_ids: frozenset[int]
    ) -> float:
        """P(Yes) after the suffix that closes the turn and opens the answer."""
        return yes_probability(self.suffix_logits(suffix)[-1], yes_ids, no_ids)

    def answer(self, suffix: Sequence[int], max_new_tokens: int) -> tuple[str, int]:
        """Greedy answer after ``suffix``, from the cache; the text and tokens generated.

        The cache is rolled back afterwards, like after a check.
        """
        import torch

        ids = [int(i) for i in suffix]
        self._check_fits(len(ids) + 1)
        length = len(self.ids)
        budget = max(1, min(max_new_tokens, self.llm.context_window - length - len(ids)))
        tokens: list[int] = []
        completion = 0
        try:
            with torch.no_grad():
                out = self.llm.model(
                    input_ids=self.llm._as_batch(ids),
                    cache=self.cache,
                    use_cache=True,
                    logits_to_keep=1,
                )
                logits = out.logits[0, -1]
                for _ in range(budget):
                    tok = int(torch.argmax(logits))
                    completion += 1
                    if tok in self.llm._eos_ids:
                        break
                    tokens.append(tok)
                    if len(tokens) == budget:
                        break
                    out = self.llm.model(
                        input_ids=self.llm._as_batch([tok]),
                        cache=self.cache,
                        use_cache=True,
                        logits_to_keep=1,
                    )
                    logits = out.logits[0, -1]
        finally:
            _roll_back(self.cache, length)
        # encoded: the suffix and every generated token fed back (all but the last)
        self.llm.usage.add(len(ids), completion)
        text = self.llm.tokenizer.decode(tokens, skip_special_tokens=True)
        return text.strip(), completion
