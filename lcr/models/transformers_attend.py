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
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from lcr.errors import ModelError
from lcr.models.base import AttendedGeneration

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    import torch

    from lcr.evidence import Usage

Spans = Sequence[tuple[int, int]]


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
def accumulate_attention(llm: TransformersLLM, keep: int) -> Iterator[list[torch.Tensor]]:
    """Hooks that sum, over layers and heads, each row's last query's weights to the first
    ``keep`` key positions; the running ``(batch, keep)`` sum is ``total[0]`` after each
    forward pass."""
    modules = llm.attention_modules()
    total: list[torch.Tensor] = []

    def hook(_module: Any, _args: Any, output: Any) -> None:
        row = attention_weights(output, llm.model_id)[:, :, -1, :keep].float().sum(dim=1)
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
    lengths = [len(p) for p in ids]
    budgets = [max(1, min(max_new_tokens, llm.context_window - n - 1)) for n in lengths]
    feed = _Feed(lengths, llm.model.device)
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
    prefill_s = time.perf_counter() - started
    every = llm.end_check_steps if every_steps is None else every_steps
    replies = _Replies(budgets, llm.end_ids)
    _decode(llm, out.logits[:, -1], out.cache, feed, replies, every)
    results = []
    for row, p in enumerate(ids):
        reply = replies.tokens[row][: budgets[row]]
        end = next((i for i, t in enumerate(reply) if t in llm.end_ids), None)
        tokens = reply if end is None else reply[:end]
        completion = len(reply) if end is None else end + 1
        span_list = span_lists[row]
        width = len(span_list) if span_list is not None else len(p)
        if tokens:  # this row's own columns only
            kept = replies.rows[row][: len(tokens)]
            own = torch.stack([r[feed.width - len(p) :] for r in kept]).cpu()
            attention = own @ span_mean_matrix(span_list, len(p)) if span_list is not None else own
        else:
            attention = torch.zeros((0, width))
        llm.usage.add(len(p), completion)  # as the backend's generate counts it
        text = llm.tokenizer.decode(tokens, skip_special_tokens=True)
        results.append(AttendedGeneration(tokens, attention, text, len(p), completion, prefill_s))
    return results
