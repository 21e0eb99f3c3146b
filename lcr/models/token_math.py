"""Token-sequence and log-probability arithmetic the in-process backends share: common
prefixes (a KV cache reused), log-sum-exp over a logits row, and batches of
continuations grouped by length. Pure: lists and NumPy arrays in, numbers out."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def common_prefix_all(seqs: Sequence[Sequence[int]]) -> int:
    if not seqs:
        return 0
    n = min(len(s) for s in seqs)
    first = seqs[0]
    for s in seqs[1:]:
        n = min(n, common_prefix(first[:n], s[:n]))
    return n


def logsumexp(x: np.ndarray) -> float:
    m = float(np.max(x))
    return m + float(np.log(np.sum(np.exp(x - m))))


def logsumexp_f32(row: np.ndarray) -> float:
    """log-sum-exp of one logits row, accumulated in float64 without a float64 copy."""
    m = float(row.max())
    return m + float(np.log(np.exp(row - np.float32(m)).sum(dtype=np.float64)))


def length_batches(
    members: list[tuple[int, list[int]]],
    max_tokens: int,
    prefix_tokens: int = 0,
    max_kv_tokens: int | None = None,
) -> list[list[tuple[int, list[int]]]]:
    """Continuations grouped by similar length (little padding), each batch's padded
    size at most ``max_tokens`` and, counting the prefix every row repeats, its KV
    cache at most ``max_kv_tokens`` positions (one continuation alone may exceed both)."""
    ordered = sorted(members, key=lambda m: len(m[1]))
    batches: list[list[tuple[int, list[int]]]] = []
    for member in ordered:
        rows = len(batches[-1]) + 1 if batches else 1
        fits_kv = max_kv_tokens is None or (prefix_tokens + len(member[1])) * rows <= max_kv_tokens
        if batches and len(member[1]) * rows <= max_tokens and fits_kv:
            batches[-1].append(member)
        else:
            batches.append([member])
    return batches
