"""LightPAL's build, estimated (``lcr index --estimate``): k' scored pairs per passage.

The passages are the build's own (``passages.cut_passages``), so the pairs are
exact: ``min(k', n - 1)`` per passage. Which candidates a passage gets depends on
the embeddings; when every other passage is a candidate (``n - 1 <= k'``) the
tokens are exact too, else the expected tokens are those of an average candidate
and the upper bound those of the longest ones. Tokens are counted as the
backends count a pair: its context and continuation cut to ``max_tokens``
together (``split_token_budget``), less the one token whose log-prob is read
from the context's logits.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lcr.estimate.figures import BuildEstimate, LLMWork, Range
from lcr.models.base import Tokenizer


def pair_tokens(
    context_lens: Sequence[int], continuation_lens: Sequence[int], candidates: int, budget: int
) -> tuple[Range, Range, Range, bool]:
    """Scored pairs, their prompt tokens and the tokens actually encoded, and whether
    exact (every other passage is a candidate)."""
    n = len(context_lens)
    k = min(candidates, n - 1)
    if k <= 0:
        return Range(0, 0), Range(0, 0), Range(0, 0), True
    ctx = np.maximum(np.asarray(context_lens, dtype=np.int64), 1)  # an empty context: BOS
    cont = np.asarray(continuation_lens, dtype=np.int64)
    exact = k == n - 1
    order = np.sort(cont)
    prefix = np.concatenate([[0], np.cumsum(order)])
    top = order[::-1][:k]  # the longest candidates: the upper bound's
    calls_e = calls_h = prompt_e = prompt_h = enc_e = enc_h = 0.0
    nonempty = int((cont > 0).sum())
    for i in range(n):
        c, own = int(ctx[i]), int(cont[i])
        cut = np.searchsorted(order, budget - c, side="right")  # pairs under the budget
        total = c * cut + prefix[cut] + budget * (n - cut)  # sum over j of min(c + l_j, budget)
        total -= min(c + own, budget)  # not a candidate of itself
        zero = (n - nonempty) - (1 if own == 0 else 0)  # empty candidates are not scored
        others = n - 1
        pairs_here = (others - zero) * k / others
        sum_here = (total - zero * min(c, budget)) * k / others - pairs_here
        calls_e += pairs_here
        prompt_e += sum_here
        enc_e += sum_here - max(pairs_here - 1, 0) * min(c, budget - 1)
        live = top[top > 0]
        high = float(np.minimum(c + live, budget).sum() - len(live))
        calls_h += len(live)
        prompt_h += high
        enc_h += high - max(len(live) - 1, 0) * min(c, budget - 1)
    if exact:
        return (
            Range.exact(round(calls_e)),
            Range.exact(round(prompt_e)),
            Range.exact(round(enc_e)),
            True,
        )
    return (
        Range(calls_e, max(calls_e, calls_h)),
        Range(prompt_e, max(prompt_e, prompt_h)),
        Range(enc_e, max(enc_e, enc_h)),
        False,
    )


def estimate_scoring(
    texts: Sequence[str],
    heads: Sequence[str],
    tokenizer: Tokenizer,
    candidates: int,
    max_tokens: int,
    role: str,
) -> BuildEstimate:
    n = len(texts)
    budget = min(max_tokens, tokenizer.context_window)
    ctx_lens = [len(tokenizer.encode(t)) for t in texts]
    cont_lens = [len(tokenizer.encode(h)) for h in heads]
    calls, prompt, encoded, exact = pair_tokens(ctx_lens, cont_lens, candidates, budget)
    k = max(min(candidates, n - 1), 0)
    how = (
        "exact: every other passage is a candidate"
        if exact
        else f"range: an average candidate expected, the {k} longest as the upper bound"
    )
    return BuildEstimate(
        llm=LLMWork(
            role=role,
            model=tokenizer.model_id,
            calls=calls,
            prompt_tokens=prompt,
            completion_tokens=Range(0, 0),
            encoded_tokens=encoded,
            batched=False,
            kind="score",
        ),
        embedder_texts=Range.exact(n),
        nodes=Range.exact(n),
        stored_text_chars=Range.exact(sum(len(t) for t in texts)),
        vectors=Range.exact(n),
        basis={
            "calls": (
                f"exact: {n} passages of the build's cutter x {k} candidates "
                "(lightpal.candidates); the backend counts each scored pair as a call"
            ),
            "prompt_tokens": f"{how}; each pair cut to lightpal.max_tokens={max_tokens}",
            "completion_tokens": "none: pairs are scored from log-probabilities",
            "embedder_texts": "exact: each passage once (longer ones in pieces)",
        },
    )
