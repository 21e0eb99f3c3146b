"""PECAN's build, estimated (``lcr index --estimate``): the first level exact.

The chunks and the first level's batches are the build's own (``leaf_nodes``,
``batch_nodes``, ``build_prompt`` with the model's tokenizer), so the first
level's calls and prompt tokens are exact. The levels above read the points
the model wrote, so they are a range: expected replies of ``completion_share``
of ``points_max_new_tokens``, at most all of it; a level of ``T`` tokens needs
about ``T / s`` batches (at most twice that: a batch closes before the node that
would pass ``s``), until one batch is left (``top=summary``) or the text fits
(``top=fit``), the level stops shrinking, or ``MAX_LEVELS``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from lcr.estimate.calls import decode_context
from lcr.estimate.figures import BuildEstimate, LLMWork, Range
from lcr.methods.pecan.graph import batch_nodes
from lcr.methods.pecan.prompts import build_overhead, build_prompt
from lcr.methods.pecan.settings import MAX_LEVELS

if TYPE_CHECKING:
    from lcr.methods.pecan.settings import PecanBuild
    from lcr.models.base import Tokenizer

REPLY_SHARE = 0.9  # of points_max_new_tokens: smollm2's replies ran to it (bench_estimate)
CHARS_PER_TOKEN = 4.0


def passes(batches: int, llm_batch: int) -> int:
    """Decoding passes for one level's ``batches`` sent ``llm_batch`` at a time (0, auto:
    the whole level, the GPU's free memory allowing)."""
    if batches <= 0:
        return 0
    return math.ceil(batches / llm_batch) if llm_batch > 0 else 1


def _upper_levels(
    level_tokens: float, calls_below: int, s: int, p: PecanBuild, reply: float, factor: int
) -> tuple[int, float, float, int]:
    """Calls, prompt tokens, reply tokens and decoding passes (:func:`passes`) of the
    levels above the first."""
    calls = 0
    prompt = 0.0
    completion = 0.0
    together = 0
    batches = calls_below
    below = level_tokens
    text = calls_below * reply  # the first level's points
    for _ in range(1, MAX_LEVELS):
        if p.top == "summary" and batches == 1:
            break
        if text <= 0 or text >= below:
            break
        if p.top == "fit" and text <= s:
            break
        batches = max(1, min(factor * math.ceil(text / s), math.ceil(text)))
        calls += batches
        together += passes(batches, p.llm_batch)
        prompt += text
        completion += batches * reply
        below, text = text, batches * reply
    return calls, prompt, completion, together


def _square(calls: int, prompt: float) -> float:
    """Sum of squared prompt lengths of ``calls`` calls sharing ``prompt`` tokens evenly."""
    return prompt * prompt / calls if calls else 0.0


def estimate_graph(
    leaves: Sequence[str],
    leaf_tokens: Sequence[int],
    tokenizer: Tokenizer,
    p: PecanBuild,
    s: int,
    reply_share: tuple[float, str],
) -> BuildEstimate:
    batches = batch_nodes(leaf_tokens, s)
    first_prompts = [len(build_prompt(tokenizer, [leaves[i] for i in b]).ids) for b in batches]
    overhead = build_overhead(tokenizer)
    budget = p.points_max_new_tokens
    reply = reply_share[0] * budget
    first = len(batches)
    if p.top == "fit" and sum(leaf_tokens) <= s:
        first, first_prompts = 0, []
    level_tokens = float(sum(leaf_tokens))
    up_e = _upper_levels(level_tokens, first, s, p, reply, 1) if first else (0, 0.0, 0.0, 0)
    up_h = _upper_levels(level_tokens, first, s, p, budget, 2) if first else (0, 0.0, 0.0, 0)
    calls = Range(first + up_e[0], first + up_h[0])
    # on a GPU a level's batches decode together: expected as pecan.llm_batch groups
    # them, at most one at a time (free memory may take fewer than auto hopes)
    grouped = passes(first, p.llm_batch) + up_e[3]
    share = Range(grouped / calls.expected if calls.expected else 1.0, 1.0)
    prompt_first = float(sum(first_prompts))
    prompt = Range(
        prompt_first + up_e[1] + up_e[0] * overhead, prompt_first + up_h[1] + up_h[0] * overhead
    )
    completion = Range(first * reply + up_e[2], first * budget + up_h[2])
    context = Range(
        sum(decode_context(q, reply) for q in first_prompts)
        + up_e[0] * decode_context(overhead + s, reply),
        sum(decode_context(q, budget) for q in first_prompts)
        + up_h[0] * decode_context(overhead + s, budget),
    )
    # a batch's prompt tokens cost more the longer it is (transformers' prefill at 7.6k
    # tokens: about 2x the per-token time at 1-4k): each level above, its mean batch
    square = Range(
        sum(q * q for q in first_prompts) + _square(up_e[0], up_e[1] + up_e[0] * overhead),
        sum(q * q for q in first_prompts) + _square(up_h[0], up_h[1] + up_h[0] * overhead),
    )
    points = completion.scaled(1 / 20)  # a point is a sentence, ~20 tokens
    n = len(leaves)
    return BuildEstimate(
        llm=LLMWork(
            role="llm",
            model=tokenizer.model_id,
            calls=calls,
            prompt_tokens=prompt,
            completion_tokens=completion,
            encoded_tokens=prompt,
            batched=False,
            kind="attention",
            decode_context=context,
            prompt_square=square,
            # the probe at the batches' length: the longest first-level batch (most are
            # within a chunk of s), else a full batch of s
            probe_length=max(first_prompts, default=overhead + s if up_e[0] else 0),
            decode_share_on_gpu=share,
        ),
        embedder_texts=Range(n, n) + points,
        nodes=Range(n, n) + points,
        stored_text_chars=Range.exact(sum(len(t) for t in leaves))
        + completion.scaled(CHARS_PER_TOKEN),
        vectors=Range(n, n) + points,
        basis={
            "calls": (
                f"first level exact: {first} batches of up to {s} tokens over {n} chunks of "
                "the build's chunker; the levels above a range (they read the model's points)"
            ),
            "prompt_tokens": "first level exact (the build's prompts through the tokenizer)",
            "completion_tokens": (
                f"range: share of pecan.points_max_new_tokens={budget} a reply uses "
                f"{reply_share[1]}; at most all of it"
            ),
        },
    )
