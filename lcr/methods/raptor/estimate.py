"""RAPTOR's build, estimated (``lcr index --estimate``): leaves exact, layers a range.

The leaves are the build's own (``method.leaf_nodes``): their number and the
embedder passes over them are exact. How many clusters each layer makes depends
on the embeddings (UMAP + Gaussian mixtures), and how long the summaries are on
the model, so the layers above are a range:

- expected: a layer of n nodes makes ``CLUSTER_SCALE * n ** CLUSTER_EXPONENT``
  clusters (fitted by ``bench/raptor_layers.py``: the build's own chunker, embedder
  and clustering on 25 texts of 22-1,125 leaves; each text's first layer came
  within 0.72-1.24 of the curve), at least enough clusters for the summariser's
  token budget; summaries of ``completion_share`` of their budget (observed in
  the last build with the model, else smollm2's);
- likely: the same with each layer :data:`LIKELY_SPREAD` times the curve, where
  80% of real texts' first layers fell (the count varies with the text: 5-10
  clusters for twelve texts of ~49 leaves);
- upper bound: every layer one node shorter than the one below (the build stops
  when clustering no longer shrinks a layer), every summary the whole budget,
  every cluster filling the budget; up to ``max_layers`` layers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from lcr.estimate.calls import decode_context, encoded_tokens, shared_prefix
from lcr.estimate.figures import BuildEstimate, LLMWork, Range
from lcr.models.base import Message, Tokenizer

# clusters of a layer of n nodes: CLUSTER_SCALE * n ** CLUSTER_EXPONENT (UMAP + mixtures
# pick fewer clusters per node as layers grow); fitted by bench/raptor_layers.py
CLUSTER_SCALE = 0.32
CLUSTER_EXPONENT = 0.774
# where most texts' first layers fall around the curve: the 10th and 90th percentiles
# of actual / curve over 49 texts of 24-562 leaves (bench/raptor_layers.py, 2026-11-27)
LIKELY_SPREAD = (0.73, 1.54)
REPLY_SHARE = 0.9  # summaries run to about this share of summary_max_new_tokens
OVERLAP = 1.1  # soft membership: a node joins every cluster above the threshold
CHARS_PER_TOKEN = 4.0


@dataclass(frozen=True)
class TreeShape:
    """The build settings the tree's size depends on (``RaptorBuild``'s), and the prompt."""

    max_layers: int
    reduction_dim: int
    cluster_max_tokens: int
    summary_max_new_tokens: int
    messages: Callable[[Sequence[str]], list[Message]]


def expected_clusters(nodes: int, spread: float = 1.0) -> int:
    """The clusters RAPTOR's clustering is expected to make of a layer of ``nodes``
    (``spread`` times the curve: see :data:`LIKELY_SPREAD`)."""
    return round(spread * CLUSTER_SCALE * nodes**CLUSTER_EXPONENT)


def _layers(
    n: int, free_tokens: float, s: TreeShape, reply: float, ratio: float, spread: float = 1.0
) -> list[tuple[int, float]]:
    """Per layer, the number of summaries and the model tokens of the text they read."""
    out: list[tuple[int, float]] = []
    nodes, text_free = n, free_tokens
    for _ in range(s.max_layers):
        if nodes <= s.reduction_dim + 1:
            break
        budget_floor = math.ceil(text_free * OVERLAP / s.cluster_max_tokens)
        wanted = max(budget_floor, expected_clusters(nodes, spread))
        clusters = min(max(wanted, 1), nodes - 1)
        out.append((clusters, text_free * ratio * OVERLAP))
        summaries = clusters * reply * s.summary_max_new_tokens
        nodes, text_free = clusters, summaries / ratio
    return out


def _upper_layers(n: int, s: TreeShape) -> list[int]:
    sizes: list[int] = []
    nodes = n
    for _ in range(s.max_layers):
        if nodes <= s.reduction_dim + 1:
            break
        nodes -= 1
        sizes.append(nodes)
    return sizes


def estimate_tree(
    leaves: Sequence[str],
    leaf_tokens: Sequence[int],
    tokenizer: Tokenizer,
    s: TreeShape,
    reply: tuple[float, str],
) -> BuildEstimate:
    n = len(leaves)
    free = float(sum(leaf_tokens))
    model_tokens = float(sum(tokenizer.count_tokens(t) for t in leaves))
    ratio = model_tokens / free if free else 1.0  # model tokens per lcr (model-free) token
    overhead = len(tokenizer.render(s.messages([""])))
    prefix = shared_prefix(tokenizer, [s.messages(["a"]), s.messages(["b"])])
    budget = s.summary_max_new_tokens

    layers = _layers(n, free, s, reply[0], ratio)
    calls = sum(c for c, _ in layers)
    likely = tuple(
        sum(c for c, _ in _layers(n, free, s, reply[0], ratio, f)) for f in LIKELY_SPREAD
    )
    prompt = sum(c * overhead + text for c, text in layers)
    completion = calls * reply[0] * budget
    encoded = sum(encoded_tokens(c * overhead + text, c, prefix) for c, text in layers)

    per_call = prompt / calls if calls else 0.0
    reply_tokens = reply[0] * budget
    context = calls * decode_context(per_call, reply_tokens)

    upper = _upper_layers(n, s)
    calls_high = sum(upper)
    per_call_high = overhead + s.cluster_max_tokens * ratio + s.cluster_max_tokens
    window = tokenizer.context_window
    prompt_high = calls_high * min(per_call_high, window)
    completion_high = calls_high * budget
    sizes = [n, *(c for c, _ in layers)]
    return BuildEstimate(
        llm=LLMWork(
            role="llm",
            model=tokenizer.model_id,
            calls=Range(calls, calls_high, (min(likely[0], calls), min(likely[1], calls_high))),
            prompt_tokens=Range(prompt, max(prompt, prompt_high)),
            completion_tokens=Range(completion, completion_high),
            encoded_tokens=Range(encoded, max(encoded, prompt_high)),
            decode_context=Range(
                context,
                max(context, calls_high * decode_context(min(per_call_high, window), budget)),
            ),
        ),
        embedder_texts=Range(n + calls, n + calls_high),
        nodes=Range(n + calls, n + calls_high),
        stored_text_chars=Range(
            sum(len(t) for t in leaves) + completion * CHARS_PER_TOKEN,
            sum(len(t) for t in leaves) + completion_high * CHARS_PER_TOKEN,
        ),
        vectors=Range(n + calls, n + calls_high),
        basis={
            "leaves": f"exact: {n} leaves of the build's chunker, each embedded once",
            "calls": (
                f"range: expected layers {sizes} ({CLUSTER_SCALE} n^{CLUSTER_EXPONENT} clusters "
                "of n nodes, fitted on real text by bench/raptor_layers.py; at least enough "
                f"clusters for raptor.cluster_max_tokens={s.cluster_max_tokens}); likely: "
                f"{LIKELY_SPREAD[0]}-{LIKELY_SPREAD[1]} times the curve, where 80% of 49 texts' "
                "first layers fell; "
                f"upper bound: each layer one node shorter, up to raptor.max_layers="
                f"{s.max_layers}"
            ),
            "completion_tokens": (
                f"range: share of raptor.summary_max_new_tokens={budget} a summary uses "
                f"{reply[1]}; at most all of it"
            ),
            "prompt_tokens": (
                "expected: the leaves' model tokens read once (+10% for soft membership) and the "
                "summaries above; upper bound: every cluster filling its budget"
            ),
        },
    )
