"""Estimating independent chat calls (RAPTOR's summaries, GraphReader's extractions).

Pure arithmetic over prompts already rendered with the model's own tokenizer:
what the backend's usage counters will count, and what it will actually encode
when ``generate_batch`` shares a batch's common prefix.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from lcr.estimate.figures import LLMWork, Range
from lcr.models.base import Message, Tokenizer

BATCH_LANES = 4  # conversations decoded together (llama.cpp's parallel, a server's concurrency)


def shared_prefix(tokenizer: Tokenizer, messages_of: Sequence[list[Message]]) -> int:
    """Tokens every prompt of ``messages_of`` begins with (the instructions before the text)."""
    rendered = [tokenizer.render(m) for m in messages_of]
    if len(rendered) < 2:
        return 0
    first = rendered[0]
    n = min(len(r) for r in rendered)
    for i in range(n):
        if any(r[i] != first[i] for r in rendered[1:]):
            return i
    return n


def encoded_tokens(prompt_tokens: float, calls: float, prefix: int) -> float:
    """Prompt tokens computed when each batch of :data:`BATCH_LANES` encodes its common
    prefix once (the rest of each prompt is its own)."""
    if calls <= 0:
        return 0.0
    batches = math.ceil(calls / BATCH_LANES)
    return max(prompt_tokens - prefix * (calls - batches), 0.0)


def decode_context(prompt: float, reply: float) -> float:
    """The contexts a reply's tokens are decoded after, summed (see ``LLMWork``)."""
    return reply * (prompt + reply / 2)


def one_attention_call(prompt: int, reply: int, model: str = "", probe: int = 0) -> LLMWork:
    """The work of one call that returns its attention weights (PECAN's batches): a
    ``prompt``-token prompt priced with its square, ``reply`` tokens decoded after it."""
    return LLMWork(
        role="llm",
        model=model,
        calls=Range.exact(1),
        prompt_tokens=Range.exact(prompt),
        completion_tokens=Range.exact(reply),
        encoded_tokens=Range.exact(prompt),
        batched=False,
        kind="attention",
        decode_context=Range.exact(decode_context(prompt, reply)),
        prompt_square=Range.exact(prompt * prompt),
        probe_length=probe,
    )


def replies(
    prompts: Sequence[int], max_new_tokens: int, window: int, per_prompt_token: float
) -> tuple[Range, Range]:
    """Reply tokens of calls with these prompt sizes: expected ``per_prompt_token`` of the
    prompt (capped by the budget), at most the whole budget (and the room the window
    leaves); and their decode contexts."""
    expected = high = context_e = context_h = 0.0
    for p in prompts:
        room = max(1, min(max_new_tokens, window - p))
        reply = min(room, per_prompt_token * p)
        expected += reply
        high += room
        context_e += decode_context(p, reply)
        context_h += decode_context(p, room)
    return Range(expected, high), Range(context_e, context_h)
