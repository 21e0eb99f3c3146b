"""Greedy generation that captures attention, for one prompt or several decoded together.

:meth:`TransformersLLM.generate_with_attention` (one prompt) and
:meth:`TransformersLLM.generate_with_attention_batch` (several) both run
:func:`generate_attended`, the one home of the decode loop PECAN's build uses.

Several prompts of different lengths are left-padded to the longest: every prompt
ends at the same column, the attention mask hides the padding and each row's
position ids count its own tokens from 0, so a row's keys, queries and logits are
its one-prompt call's (to float rounding). Each generated token's attention row is
read over its own prompt's columns only (the padding's weights are 0 under the
mask and are dropped). A row whose reply has ended, or whose budget is spent, is
still carried through the batch's steps (the batch keeps its shape) but nothing it
computes after that is kept: its tokens, attention rows and counts stop where the
one-prompt call stops. The loop ends when every row has ended or spent its budget.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from lcr.errors import ModelError
from lcr.models.base import AttendedGeneration

if TYPE_CHECKING:
    import torch

    from lcr.models.transformers_llm import TransformersLLM

Spans = Sequence[tuple[int, int]]


def span_mean_matrix(spans: Spans, length: int) -> torch.Tensor:
    """``(length, spans)`` matrix whose product with a token row averages each span."""
    import torch

    m = torch.zeros((length, len(spans)), dtype=torch.float32)
    for j, (a, b) in enumerate(spans):
        if not 0 <= a < b <= length:
            raise ModelError(f"span {a}:{b} lies outside a prompt of {length} tokens")
        m[a:b, j] = 1.0 / (b - a)
    return m


@contextmanager
def accumulate_attention(llm: TransformersLLM, keep: int) -> Iterator[list[torch.Tensor]]:
    """Hooks that sum, over layers and heads, each row's last query's weights to the first
    ``keep`` key positions; the running ``(batch, keep)`` sum is ``total[0]`` after each
    forward pass."""
    modules = llm.attention_modules()
    total: list[torch.Tensor] = []

    def hook(_module: Any, _args: Any, output: Any) -> None:
        weights = output[1] if isinstance(output, tuple) and len(output) > 1 else None
        if weights is None:
            raise ModelError(f"{llm.model_id}: attention weights are not available")
        row = weights[:, :, -1, :keep].float().sum(dim=1)
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


def _read_back(picked: list[torch.Tensor], host: list[list[int]]) -> None:
    """Read the steps not read yet back to the host, in one read."""
    import torch

    host.extend([int(t) for t in step] for step in torch.stack(picked[len(host) :]).tolist())


def _row_ended(host: list[list[int]], row: int, budget: int, ends: set[int]) -> int | None:
    """The step whose token ended ``row``'s reply, within its budget; None if none yet."""
    for step in range(min(len(host), budget)):
        if host[step][row] in ends:
            return step
    return None


def _decode(
    llm: TransformersLLM,
    logits: torch.Tensor,
    cache: Any,
    feed: _Feed,
    budgets: list[int],
    every: int,
) -> tuple[list[list[int]], list[torch.Tensor]]:
    """The greedy steps: every step's tokens ``[step][row]`` read back, and every fed
    token's attention row ``(rows, width)`` (mean over layers and heads), on the device."""
    import torch

    heads = int(getattr(llm.model.config, "num_attention_heads", 1))
    layers = len(llm.attention_modules())
    ends = llm.end_ids
    steps = max(budgets)
    picked: list[torch.Tensor] = []  # each step's tokens, left on the device
    host: list[list[int]] = []
    rows: list[torch.Tensor] = []
    ended: list[bool] = [False] * len(budgets)
    with (
        torch.no_grad(),
        llm.weights_attention(),
        accumulate_attention(llm, feed.width) as total,
    ):
        for step in range(steps):
            tok = torch.argmax(logits, dim=-1)
            picked.append(tok)
            if (step + 1) % every == 0 or step + 1 == steps:
                _read_back(picked, host)
                for row, budget in enumerate(budgets):
                    ended[row] = ended[row] or _row_ended(host, row, budget, ends) is not None
                if all(e or step >= b for e, b in zip(ended, budgets, strict=True)):
                    break
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
            rows.append(total[0] / (layers * heads))
    return host, rows


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
    host, rows = _decode(llm, out.logits[:, -1], out.cache, feed, budgets, every)
    results = []
    for row, p in enumerate(ids):
        reply = [step[row] for step in host[: budgets[row]]]
        end = _row_ended(host, row, budgets[row], llm.end_ids)
        tokens = reply if end is None else reply[:end]
        completion = len(reply) if end is None else end + 1
        span_list = span_lists[row]
        width = len(span_list) if span_list is not None else len(p)
        if tokens:  # this row's own columns only, one row at a time (no copy of all rows)
            own = torch.stack([r[row, feed.width - len(p) :] for r in rows[: len(tokens)]]).cpu()
            attention = own @ span_mean_matrix(span_list, len(p)) if span_list is not None else own
        else:
            attention = torch.zeros((0, width))
        llm.usage.add(len(p), completion)  # as the backend's generate counts it
        text = llm.tokenizer.decode(tokens, skip_special_tokens=True)
        results.append(AttendedGeneration(tokens, attention, text, len(p), completion, prefill_s))
    return results
