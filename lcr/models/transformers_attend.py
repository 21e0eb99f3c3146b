"""Greedy generation that captures attention, for one prompt or several decoded together.

:meth:`TransformersLLM.generate_with_attention` (one prompt) and
:meth:`TransformersLLM.generate_with_attention_batch` (several) both run
:func:`generate_attended`, the one home of the decode loop PECAN's build uses.

Several prompts of different lengths are left-padded to the longest: every prompt
ends at the same column, the attention mask hides the padding and each row's
position ids count its own tokens from 0, so a row's keys, queries and logits are
its one-prompt call's (to float rounding). Each generated token's attention row is
read over its own prompt's columns only (the padding's weights are 0 under the
mask and are dropped). A row whose reply has ended, or whose budget is spent,
leaves the batch at the next read-back of the tokens (every step on a CPU, every
few on a GPU): its KV cache, mask and positions are dropped, so it costs no more
steps, and its tokens, attention rows and counts stop where the one-prompt call
stops. The loop ends when every row has ended or spent its budget.

``LCR_ATTENTION_CAPTURE`` (:func:`capture_setting`) chooses when the rows are read:
``during`` (the default) captures each row as its token is fed back in the decode loop
above; ``after`` lets the backend's own decoding write the replies (``generate``'s plan:
on CUDA a static cache and compiled steps where they apply, which the capture loop
cannot use) and then reads every reply's rows in one pass over its prompt's cache
(:func:`write_then_read`). Causal attention gives each reply position the same row
either way (measured: 2.6e-10 apart in fp32), so ``after`` changes the cost, not the
result, wherever the two decodings pick the same tokens (always in fp32 on a CPU).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from lcr.errors import ModelError, UsageError
from lcr.models.base import AttendedGeneration

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    import torch

    from lcr.evidence import Usage

Spans = Sequence[tuple[int, int]]
CAPTURE_CHOICES = ("during", "after")
READ_CHUNK_TOKENS = 256  # reply tokens read back per pass (bounds one layer's weights)


def capture_setting() -> str:
    """``LCR_ATTENTION_CAPTURE`` (``during`` or ``after``; default ``during``); a bad
    value is a usage error."""
    raw = os.environ.get("LCR_ATTENTION_CAPTURE", "").strip().lower() or "during"
    if raw not in CAPTURE_CHOICES:
        raise UsageError(
            f"LCR_ATTENTION_CAPTURE must be one of {', '.join(CAPTURE_CHOICES)}, got {raw!r}"
        )
    return raw


class TransformersLLM(Protocol):
    """What this module reads of :class:`lcr.models.transformers_llm.TransformersLLM`
    (named here, not imported: that module imports this one)."""

    model: Any
    model_id: str
    tokenizer: Any
    usage: Usage
    device: str
    end_ids: set[int]
    _pad_id: int

    @property
    def context_window(self) -> int: ...

    @property
    def end_check_steps(self) -> int: ...

    def attention_modules(self) -> list[Any]: ...

    def weights_attention(self) -> AbstractContextManager[None]: ...

    def greedy_token_replies(
        self, prompts: list[list[int]], max_new_tokens: int
    ) -> list[list[int]]: ...


def span_mean_matrix(spans: Spans, length: int) -> torch.Tensor:
    """``(length, spans)`` matrix whose product with a token row averages each span."""
    import torch

    m = torch.zeros((length, len(spans)), dtype=torch.float32)
    for j, (a, b) in enumerate(spans):
        if not 0 <= a < b <= length:
            raise ModelError(f"span {a}:{b} lies outside a prompt of {length} tokens")
        m[a:b, j] = 1.0 / (b - a)
    return m


def attention_weights(output: Any, model_id: str) -> torch.Tensor:
    """The ``(batch, heads, queries, keys)`` weights an attention module returned (it
    returns them only when run eagerly with weights asked for)."""
    weights = output[1] if isinstance(output, tuple) and len(output) > 1 else None
    if weights is None:
        raise ModelError(f"{model_id}: attention weights are not available")
    return weights


@contextmanager
def accumulate_attention(
    llm: TransformersLLM, keep: int, every_query: bool = False
) -> Iterator[list[torch.Tensor]]:
    """Hooks that sum, over layers and heads, each row's last query's weights (or every
    query's: ``(batch, queries, keep)``) to the first ``keep`` key positions; the running
    ``(batch, keep)`` sum is ``total[0]`` after each forward pass."""
    modules = llm.attention_modules()
    total: list[torch.Tensor] = []
    queries = slice(None) if every_query else -1

    def hook(_module: Any, _args: Any, output: Any) -> None:
        weights = attention_weights(output, llm.model_id)
        row = weights[:, :, queries, :keep].float().sum(dim=1)
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


class _Feed:
    """What each forward pass of a left-padded batch is given besides its tokens: the
    attention mask and each row's position ids (nothing when no row is padded, so one
    prompt runs exactly as the model runs it alone)."""

    def __init__(self, lengths: list[int], device: Any) -> None:
        import torch

        self.width = max(lengths)
        self.padded = any(n != self.width for n in lengths)
        self.mask = torch.zeros((len(lengths), self.width), dtype=torch.long)
        for row, n in enumerate(lengths):
            self.mask[row, self.width - n :] = 1
        self.mask = self.mask.to(device)
        self.next = torch.tensor(lengths, dtype=torch.long, device=device).view(-1, 1)

    def prefill(self) -> dict[str, Any]:
        if not self.padded:
            return {}
        positions = (self.mask.cumsum(dim=-1) - 1).clamp(min=0)
        return {"attention_mask": self.mask, "position_ids": positions}

    def select(self, index: torch.Tensor) -> None:
        """Keep only these rows of the batch (the others have finished)."""
        self.mask = self.mask[index]
        self.next = self.next[index]

    def step(self) -> dict[str, Any]:
        """The next decoding step's mask and positions (each row one token further)."""
        import torch

        if not self.padded:
            return {}
        self.mask = torch.cat([self.mask, torch.ones_like(self.mask[:, :1])], dim=-1)
        positions = self.next
        self.next = self.next + 1
        return {"attention_mask": self.mask, "position_ids": positions}


def _check_prompts(
    llm: TransformersLLM, prompts: Sequence[Sequence[int]], spans: Sequence[Spans | None] | None
) -> tuple[list[list[int]], list[Spans | None]]:
    rows = [[int(i) for i in p] for p in prompts]
    every: list[Spans | None] = list(spans) if spans is not None else [None] * len(rows)
    if len(every) != len(rows):
        raise ModelError(f"{len(every)} span lists were given for {len(rows)} prompts")
    for ids in rows:
        if not ids:
            raise ModelError("generation needs a non-empty prompt")
        if len(ids) + 1 > llm.context_window:
            raise ModelError(
                f"a prompt of {len(ids)} tokens does not fit the context window of "
                f"{llm.model_id} ({llm.context_window} tokens)"
            )
    return rows, every


class _Replies:
    """Each row's tokens read back and attention rows kept, while rows leave the batch.

    ``active`` holds the original rows still decoded, in the batch's order; tokens are
    read back only at a check, and rows leave the batch only right after one, so every
    step not read yet was decoded by the rows active now.
    """

    def __init__(self, budgets: list[int], ends: set[int]) -> None:
        self.budgets = budgets
        self.ends = ends
        self.active = list(range(len(budgets)))
        self.tokens: list[list[int]] = [[] for _ in budgets]
        self.rows: list[list[torch.Tensor]] = [[] for _ in budgets]  # on the device
        self.ended = [False] * len(budgets)
        self.picked: list[torch.Tensor] = []  # steps not read back yet, on the device

    def read_back(self) -> None:
        """The steps not read yet, in one read; a row has ended at an end token within
        its budget."""
        import torch

        for step in torch.stack(self.picked).tolist():
            for row, tok in zip(self.active, step, strict=True):
                if len(self.tokens[row]) < self.budgets[row] and not self.ended[row]:
                    self.ended[row] = int(tok) in self.ends
                self.tokens[row].append(int(tok))
        self.picked.clear()

    def finished(self, step: int) -> list[int]:
        """Positions in the batch of the rows that need no more steps after ``step``: their
        reply ended, or their last token was fed at an earlier step."""
        return [
            i for i, row in enumerate(self.active) if self.ended[row] or step >= self.budgets[row]
        ]

    def keep(self, attention: torch.Tensor) -> None:
        """One fed step's attention rows ``(active, width)``, each to its own row."""
        for i, row in enumerate(self.active):
            self.rows[row].append(attention[i])


def _decode(
    llm: TransformersLLM,
    logits: torch.Tensor,
    cache: Any,
    feed: _Feed,
    replies: _Replies,
    every: int,
) -> None:
    """The greedy steps: tokens read back every ``every`` steps; after each read, the rows
    that need no more steps leave the batch (its cache, mask and positions with them)."""
    import torch

    heads = int(getattr(llm.model.config, "num_attention_heads", 1))
    layers = len(llm.attention_modules())
    steps = max(replies.budgets)
    with (
        torch.no_grad(),
        llm.weights_attention(),
        accumulate_attention(llm, feed.width) as total,
    ):
        for step in range(steps):
            tok = torch.argmax(logits, dim=-1)
            replies.picked.append(tok)
            if (step + 1) % every == 0 or step + 1 == steps:
                replies.read_back()
                done = replies.finished(step)
                if len(done) == len(replies.active):
                    break
                if done:
                    stay = [i for i in range(len(replies.active)) if i not in done]
                    index = torch.tensor(stay, device=tok.device)
                    cache.batch_select_indices(index)
                    feed.select(index)
                    tok = tok[index]
                    replies.active = [replies.active[i] for i in stay]
            total.clear()
            out = llm.model(
                input_ids=tok.view(-1, 1),
                cache=cache,
                use_cache=True,
                logits_to_keep=1,
                **feed.step(),
            )
            cache = out.cache
            logits = out.logits[:, -1]
            replies.keep(total[0] / (layers * heads))


def _budgets(llm: TransformersLLM, ids: list[list[int]], max_new_tokens: int) -> list[int]:
    """Each prompt's new tokens: ``max_new_tokens``, or what its context window leaves."""
    return [max(1, min(max_new_tokens, llm.context_window - len(p) - 1)) for p in ids]


def _prefill(llm: TransformersLLM, ids: list[list[int]], feed: _Feed) -> tuple[Any, float]:
    """The left-padded batch's one prompt pass (the fast kernel, no weights) and its
    seconds."""
    import torch

    batch = torch.full((len(ids), feed.width), llm._pad_id, dtype=torch.long)
    for row, p in enumerate(ids):
        batch[row, feed.width - len(p) :] = torch.tensor(p)
    started = time.perf_counter()
    with torch.no_grad():
        out = llm.model(
            input_ids=batch.to(llm.model.device), use_cache=True, logits_to_keep=1, **feed.prefill()
        )
    if llm.device.startswith("cuda"):
        torch.cuda.synchronize()  # the pass is queued on the device until then
    return out, time.perf_counter() - started


def generate_attended(
    llm: TransformersLLM,
    prompts: Sequence[Sequence[int]],
    spans: Sequence[Spans | None] | None,
    max_new_tokens: int,
    every_steps: int | None,
) -> list[AttendedGeneration]:
    """Greedy replies to ``prompts`` decoded together, each generated token's attention to
    its own prompt (or to ``spans[i]`` of it); see the module. ``prefill_seconds`` of each
    is the batch's one prompt pass."""
    import torch

    ids, span_lists = _check_prompts(llm, prompts, spans)
    if not ids:
        return []
    budgets = _budgets(llm, ids, max_new_tokens)
    feed = _Feed([len(p) for p in ids], llm.model.device)
    out, prefill_s = _prefill(llm, ids, feed)
    every = llm.end_check_steps if every_steps is None else every_steps
    replies = _Replies(budgets, llm.end_ids)
    _decode(llm, out.logits[:, -1], out.cache, feed, replies, every)
    rows = [torch.stack(r) if r else None for r in replies.rows]
    return _results(llm, ids, span_lists, replies.tokens, budgets, rows, feed.width, prefill_s)


def _results(
    llm: TransformersLLM,
    ids: list[list[int]],
    span_lists: list[Spans | None],
    tokens: list[list[int]],
    budgets: list[int],
    rows: list[torch.Tensor | None],
    width: int,
    prefill_s: float,
) -> list[AttendedGeneration]:
    """Each prompt's generation: its reply cut at its budget and first end token, and the
    attention rows of the tokens kept (``rows[i]``: ``(fed tokens, width)`` over the
    left-padded batch's columns), read over its own columns (or its spans)."""
    import torch

    results = []
    for row, p in enumerate(ids):
        reply = tokens[row][: budgets[row]]
        end = next((i for i, t in enumerate(reply) if t in llm.end_ids), None)
        kept_tokens = reply if end is None else reply[:end]
        completion = len(reply) if end is None else end + 1
        span_list = span_lists[row]
        captured = rows[row]
        if kept_tokens and captured is not None:  # this row's own columns only
            own = captured[: len(kept_tokens), width - len(p) :].cpu()
            attention = own @ span_mean_matrix(span_list, len(p)) if span_list is not None else own
        else:
            attention = torch.zeros((0, len(span_list) if span_list is not None else len(p)))
        llm.usage.add(len(p), completion)  # as the backend's generate counts it
        text = llm.tokenizer.decode(kept_tokens, skip_special_tokens=True)
        results.append(
            AttendedGeneration(kept_tokens, attention, text, len(p), completion, prefill_s)
        )
    return results


def write_then_read(
    llm: TransformersLLM,
    prompts: Sequence[Sequence[int]],
    spans: Sequence[Spans | None] | None,
    max_new_tokens: int,
) -> list[AttendedGeneration]:
    """:func:`generate_attended`'s result, the replies written by the backend's own
    decoding and their rows read afterwards (``LCR_ATTENTION_CAPTURE=after``; see the
    module). A batch in which a prompt leaves less than ``max_new_tokens`` of the
    context window is decoded by :func:`generate_attended` instead, whose per-row budgets
    ``generate`` has no way to give. ``prefill_seconds`` counts the read's prompt pass
    twice, once for ``generate``'s own (the same work, not timed apart), so a caller that
    takes the rest as decoding (the estimate's probe) prices both passes."""
    ids, span_lists = _check_prompts(llm, prompts, spans)
    if not ids:
        return []
    budgets = _budgets(llm, ids, max_new_tokens)
    if any(b != max_new_tokens for b in budgets):
        return generate_attended(llm, prompts, spans, max_new_tokens, None)
    written = llm.greedy_token_replies(ids, max_new_tokens)
    fed = [_before_end(reply, llm.end_ids) for reply in written]
    feed = _Feed([len(p) for p in ids], llm.model.device)
    out, prefill_s = _prefill(llm, ids, feed)
    rows = _read_rows(llm, out.cache, feed, fed)
    return _results(llm, ids, span_lists, written, budgets, rows, feed.width, 2 * prefill_s)


def _before_end(reply: list[int], ends: set[int]) -> list[int]:
    end = next((i for i, t in enumerate(reply) if t in ends), None)
    return reply if end is None else reply[:end]


def _read_rows(
    llm: TransformersLLM, cache: Any, feed: _Feed, fed: list[list[int]]
) -> list[torch.Tensor | None]:
    """Each reply's tokens fed on its prompt's cache, :data:`READ_CHUNK_TOKENS` at a time:
    every fed token's attention row ``(len(fed[i]), feed.width)``, mean over layers and
    heads. Shorter replies are padded at their end, which no earlier token attends to."""
    import torch

    longest = max((len(r) for r in fed), default=0)
    if longest == 0:
        return [None] * len(fed)
    tokens = torch.full((len(fed), longest), llm._pad_id, dtype=torch.long)
    for row, reply in enumerate(fed):
        tokens[row, : len(reply)] = torch.tensor(reply, dtype=torch.long)
    tokens = tokens.to(llm.model.device)
    heads = int(getattr(llm.model.config, "num_attention_heads", 1))
    layers = len(llm.attention_modules())
    pieces: list[torch.Tensor] = []
    with (
        torch.no_grad(),
        llm.weights_attention(),
        accumulate_attention(llm, feed.width, every_query=True) as total,
    ):
        for start in range(0, longest, READ_CHUNK_TOKENS):
            stop = min(longest, start + READ_CHUNK_TOKENS)
            extra: dict[str, Any] = {}
            if feed.padded:
                ones = torch.ones((len(fed), stop), dtype=feed.mask.dtype, device=tokens.device)
                positions = feed.next + torch.arange(start, stop, device=tokens.device)
                extra = {
                    "attention_mask": torch.cat([feed.mask, ones], 1),
                    "position_ids": positions,
                }
            total.clear()
            out = llm.model(
                input_ids=tokens[:, start:stop],
                cache=cache,
                use_cache=True,
                logits_to_keep=1,
                **extra,
            )
            cache = out.cache
            pieces.append(total[0] / (layers * heads))
    every = torch.cat(pieces, dim=1)
    return [every[row, : len(reply)] if reply else None for row, reply in enumerate(fed)]
