"""The transformers backend as lcr loads it: the core LLM plus attention capture.

:class:`TransformersLLM` is the only backend with :attr:`Capability.ATTENTION`; it
implements :class:`lcr.models.base.AttentionLLM`, which is what PECAN uses:

- :meth:`TransformersLLM.generate_with_attention`: greedy generation that records,
  for every generated token, its attention to chosen spans of the prompt
  (averaged over heads and layers, then over each span's tokens). The prompt is
  prefilled with the fast attention kernel; only the one-token decode steps
  switch to SDPA with weights (:mod:`lcr.models.weights_attention`), and a hook
  adds each layer's weights into one row and drops them, so memory is one
  layer's weights plus ``generated x spans`` floats, never all layers at once.
- :class:`NodeKVCache` (:meth:`TransformersLLM.node_cache`): PECAN's node-level KV
  cache (appendix B). A prefix is encoded once; nodes are appended one by one
  (each returning its attention to the question's tokens, appendix C); a suffix
  asking for Yes/No is run on top and rolled back (the cache is cropped), so no
  token is encoded twice.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Self

from lcr.errors import ModelError
from lcr.models import transformers_decode as decoding
from lcr.models.base import ALL_CAPABILITIES, AttendedGeneration, Capability
from lcr.models.transformers_attend import (
    attention_weights,
    capture_setting,
    generate_attended,
    write_then_read,
)
from lcr.models.transformers_core import TransformersCore

if TYPE_CHECKING:
    import torch


GPU_END_CHECK_STEPS = 8


class AttentionPass(NamedTuple):
    """What an attention-capturing forward pass returns (unpacks as a 3-tuple).

    ``logits``: ``(batch, kept positions, vocab)``; ``attentions``: per layer
    ``(batch, heads, new tokens, past + new tokens)`` from the tests' eager reference
    (``tests/eager.py``), or one ``(new, past + new)``
    matrix averaged over layers and heads from
    :meth:`TransformersLLM.forward_mean_attention`; ``cache``: the KV cache
    extended by the new tokens.
    """

    logits: Any
    attentions: Any
    cache: Any


class TransformersLLM(TransformersCore):
    """:class:`TransformersCore` with attention capture; see the module docstring."""

    capabilities: frozenset[Capability] = ALL_CAPABILITIES

    @classmethod
    def load(cls, source: str | Path, **kwargs: Any) -> Self:
        """:meth:`TransformersCore.load`, with a bad ``LCR_ATTENTION_CAPTURE`` refused
        before anything loads."""
        capture_setting()
        return super().load(source, **kwargs)

    @property
    def end_check_steps(self) -> int:
        """Decoding steps between reads of the tokens back to the host (see
        :meth:`generate_with_attention`)."""
        return 1 if self.device.startswith("cpu") else GPU_END_CHECK_STEPS

    @contextmanager
    def eager_attention(self) -> Iterator[None]:
        """Switch to transformers' eager attention (its own weights) for a block."""
        with self._attention_implementation("eager"):
            yield

    @contextmanager
    def weights_attention(self) -> Iterator[None]:
        """Switch to SDPA that also returns weights (:mod:`lcr.models.weights_attention`):
        eager's weights without its per-head copy of the cache."""
        from lcr.models import weights_attention

        with self._attention_implementation(weights_attention.register()):
            yield

    @contextmanager
    def _attention_implementation(self, name: str) -> Iterator[None]:
        current = getattr(self.model.config, "_attn_implementation", None)
        switch = current != name
        if switch:
            self.model.set_attn_implementation(name)
        try:
            yield
        finally:
            if switch and current is not None:
                self.model.set_attn_implementation(current)

    def forward_mean_attention(
        self,
        input_ids: Sequence[int] | torch.Tensor,
        cache: Any = None,
        *,
        copy_cache: bool = True,
        logits_to_keep: int = 1,
    ) -> AttentionPass:
        """One forward pass with its attention averaged over layers and heads.

        Hooks on each layer's attention module add its weights into one
        ``(new, past + new)`` sum and drop them, so memory stays at one layer's
        weights instead of all of them (PECAN's edge weights are exactly this mean).
        """
        import torch

        ids = self.as_batch(input_ids)
        if ids.shape[0] != 1:
            raise ModelError("forward_mean_attention takes one sequence at a time")
        modules = self.attention_modules()
        total: list[torch.Tensor] = []

        def hook(_module: Any, _args: Any, output: Any) -> None:
            summed = attention_weights(output, self.model_id)[0].float().sum(dim=0)
            if total:
                total[0] += summed
            else:
                total.append(summed)

        kv = copy.deepcopy(cache) if copy_cache else cache
        handles = [m.register_forward_hook(hook) for m in modules]
        try:
            with torch.no_grad(), self.weights_attention():
                out = self.model(
                    input_ids=ids,
                    cache=kv,
                    use_cache=True,
                    logits_to_keep=logits_to_keep,
                )
        finally:
            for h in handles:
                h.remove()
        heads = int(getattr(self.model.config, "num_attention_heads", 1))
        mean = total[0] / (len(modules) * heads)
        self.usage.add(int(ids.shape[1]), 0)
        return AttentionPass(out.logits, mean, out.cache)

    def attention_modules(self) -> list[Any]:
        """Each decoder layer's attention module (where the capture hooks go)."""
        base = getattr(self.model, "model", None)
        layers = getattr(base, "layers", None)
        found = [getattr(layer, "self_attn", None) for layer in layers or ()]
        if not found or any(m is None for m in found):
            raise ModelError(f"attention capture is not supported for {self.model_id}")
        return found

    def generate_with_attention(
        self,
        prompt: Sequence[int],
        *,
        spans: Sequence[tuple[int, int]] | None = None,
        max_new_tokens: int = 256,
        every_steps: int | None = None,
    ) -> AttendedGeneration:
        """Greedy generation from ``prompt`` (token ids), capturing attention as it goes.

        Each generated token's row is the attention of the position holding that
        token (its query) to the prompt's tokens, i.e. the row computed when the
        token is fed back in; the last token is fed once more for its row.

        Tokens and rows stay on the device; whether a token ended the reply is read
        back every ``every_steps`` steps (:attr:`end_check_steps`: every step on a CPU,
        where reading back costs nothing, every 8 on a GPU, where each read waits for
        the device). Steps run past the end are dropped, so the result is the same.
        The batch of one of :meth:`generate_with_attention_batch`.
        """
        span_lists = [spans] if spans is not None else None
        return self.generate_with_attention_batch(
            [prompt], spans=span_lists, max_new_tokens=max_new_tokens, every_steps=every_steps
        )[0]

    def generate_with_attention_batch(
        self,
        prompts: Sequence[Sequence[int]],
        *,
        spans: Sequence[Sequence[tuple[int, int]] | None] | None = None,
        max_new_tokens: int = 256,
        every_steps: int | None = None,
    ) -> list[AttendedGeneration]:
        """:meth:`generate_with_attention` of every prompt, decoded together in one
        left-padded batch (:mod:`lcr.models.transformers_attend`): the same tokens, counts
        and, to float rounding, attention as one call per prompt. ``spans[i]`` are
        ``prompts[i]``'s. The caller sizes the batch (:meth:`attention_batch_rows`).
        ``LCR_ATTENTION_CAPTURE=after``: the replies written by :meth:`generate`'s own
        decoding, their rows read afterwards (:func:`transformers_attend.write_then_read`)."""
        if capture_setting() == "after":
            return write_then_read(self, prompts, spans, max_new_tokens)
        return generate_attended(self, prompts, spans, max_new_tokens, every_steps)

    def greedy_token_replies(
        self, prompts: list[list[int]], max_new_tokens: int
    ) -> list[list[int]]:
        """Each prompt's greedy reply as token ids, decoded as :meth:`generate_batch`
        decodes (the same plan: a static cache and compiled steps where it applies), cut
        after its first end token; counted in no usage (the caller counts what it pays)."""
        replies = self._decode_batch(prompts, max_new_tokens, (), 0.0)
        cut = []
        for new in replies:
            end = next((i for i, t in enumerate(new) if t in self.end_ids), None)
            cut.append(new if end is None else new[: end + 1])
        if len(prompts) == 1:
            self.generated_one_stream += len(cut[0])
        return cut

    def attention_batch_rows(self, prompts: Sequence[int], max_new_tokens: int) -> int:
        """How many of these prompts (their lengths) one attention-capturing batch takes:
        1 on a CPU, where prefill is compute bound and batching gains nothing; on CUDA
        what free memory holds for the longest (:func:`decoding.attention_batch_rows`)."""
        if not self.device.startswith("cuda") or not prompts:
            return 1
        longest = max(prompts)
        new = max(1, min(max_new_tokens, self.context_window - longest - 1))
        need = decoding.attention_row_bytes(self.model, self.kv_bytes_per_token(), longest, new)
        free = decoding.free_gpu_bytes(self.device)
        return decoding.attention_batch_rows(free, need, len(prompts))

    def token_char_ends(self, tokens: Sequence[int]) -> list[int]:
        """Character offset in the decoded text where each token's text ends."""
        ends: list[int] = []
        for i in range(len(tokens)):
            ends.append(len(self.tokenizer.decode(list(tokens[: i + 1]), skip_special_tokens=True)))
        return ends

    def node_cache(self, prefix: Sequence[int], question: tuple[int, int]) -> NodeKVCache:
        """A :class:`NodeKVCache` over ``prefix`` (PECAN's search)."""
        return NodeKVCache(self, prefix, question)


def yes_probability(logits: torch.Tensor, yes_ids: frozenset[int], no_ids: frozenset[int]) -> float:
    """P(yes) / (P(yes) + P(no)) from one position's logits (normaliser cancels)."""
    import torch

    row = logits.double()
    lse_yes = torch.logsumexp(row[sorted(yes_ids)], dim=0)
    lse_no = torch.logsumexp(row[sorted(no_ids)], dim=0)
    return float(torch.sigmoid(lse_yes - lse_no))


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
            out = llm.model(input_ids=llm.as_batch(self.ids), use_cache=True, logits_to_keep=1)
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
                    input_ids=self.llm.as_batch(ids), cache=self.cache, use_cache=True
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
                    input_ids=self.llm.as_batch(ids),
                    cache=self.cache,
                    use_cache=True,
                    logits_to_keep=1,
                )
                logits = out.logits[0, -1]
                for _ in range(budget):
                    self.llm._follow_load()
                    tok = int(torch.argmax(logits))
                    completion += 1
                    if tok in self.llm.end_ids:
                        break
                    tokens.append(tok)
                    if len(tokens) == budget:
                        break
                    out = self.llm.model(
                        input_ids=self.llm.as_batch([tok]),
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
