"""RAPTOR's two ways of reading a built tree, and span bookkeeping; pure functions.

Collapsed tree (the paper's default, Algorithm 2): every node of every layer is
ranked by similarity to the question and nodes are taken best first until the
next one would pass the token budget. Tree traversal (Algorithm 1): top-k at the
root layer, then top-k among the children of those, down to the leaves.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def ranked(scores: np.ndarray, candidates: Sequence[int] | None = None) -> list[int]:
    """Candidate indices best score first; ties broken by index (repeatable)."""
    idx = np.arange(len(scores)) if candidates is None else np.asarray(sorted(set(candidates)))
    if idx.size == 0:
        return []
    order = np.lexsort((idx, -scores[idx]))
    return [int(i) for i in idx[order]]


def collapsed_tree(
    scores: np.ndarray,
    tokens: Sequence[int],
    max_tokens: int,
    max_nodes: int | None = None,
) -> tuple[list[int], int]:
    """Nodes best first until the next would pass ``max_tokens``; and the tokens used.

    As in the paper's Algorithm 2, selection stops at the first node that does
    not fit (it does not skip ahead to smaller ones), so the context is a prefix
    of the ranking. A node fits while the total stays at or under the budget;
    Algorithm 2 writes a strict ``<`` (docs/methods/raptor.md says so).
    ``max_nodes`` (``-k``) optionally caps the count too.
    """
    chosen: list[int] = []
    used = 0
    for i in ranked(scores):
        if max_nodes is not None and len(chosen) >= max_nodes:
            break
        t = int(tokens[i])
        if used + t > max_tokens:
            break
        chosen.append(i)
        used += t
    return chosen, used


def tree_traversal(
    scores: np.ndarray,
    levels: Sequence[int],
    children: Sequence[Sequence[int]],
    top_k: int,
    depth: int = 0,
) -> list[int]:
    """Top-k of the root layer, then top-k among those nodes' children, for ``depth`` layers.

    ``depth`` is the paper's d; 0 goes down to the leaves. Returns every selected
    node, root layer first, each layer best first.
    """
    if len(levels) == 0 or top_k <= 0:
        return []
    top = max(levels)
    current = [i for i, lv in enumerate(levels) if lv == top]
    selected: list[int] = []
    layers = 0
    while current and (depth <= 0 or layers < depth):
        picked = ranked(scores, current)[:top_k]
        selected.extend(picked)
        layers += 1
        current = sorted({c for p in picked for c in children[p]})
    return selected
