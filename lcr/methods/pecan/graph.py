"""PECAN's pure algorithms: batching, Information Points, edge weights, search scores.

Nothing here touches a model or a file, so each rule of the paper is testable
on its own (section 3.1 for the graph, 3.2.2 and appendix C for the search).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp


def batch_nodes(tokens: Sequence[int], s: int) -> list[list[int]]:
    """Consecutive node indices, a batch holding nodes while their tokens total at most ``s``.

    Section 3.1 adds nodes "until the total text content length exceeds a
    threshold s"; the node that would pass ``s`` starts the next batch, so the
    input window stays capped by ``s`` (a single node over ``s`` is a batch alone).
    """
    batches: list[list[int]] = []
    current: list[int] = []
    used = 0
    for i, t in enumerate(tokens):
        if current and used + t > s:
            batches.append(current)
            current, used = [], 0
        current.append(i)
        used += int(t)
    if current:
        batches.append(current)
    return batches


_MARKER = re.compile(r"^\s*(?:[*\-•·]+|\d+[.)])\s+")


@dataclass(frozen=True)
class Point:
    """One Information Point: its text and ``[start, end)`` in the generated text."""

    text: str
    start: int
    end: int


def information_points(text: str) -> list[Point]:
    """The bullet points of a generated reply (Table A1's ``* summary point`` format).

    A line starting with a bullet marker (``*``, ``-``, ``•``, ``1.``) opens a
    point; an unmarked line continues the point before it; unmarked lines before
    the first marker (a preamble) are dropped. A reply with no marker at all
    (small models drift) makes one point per non-empty line. Exact duplicates
    within a reply are kept once.
    """
    lines: list[tuple[int, int, bool]] = []  # content start, end, marked
    pos = 0
    for raw in text.splitlines(keepends=True):
        line = raw.rstrip("\r\n")
        m = _MARKER.match(line)
        body_start = pos + (m.end() if m else len(line) - len(line.lstrip()))
        body_end = pos + len(line.rstrip())
        if body_end > body_start:
            lines.append((body_start, body_end, m is not None))
        pos += len(raw)
    any_marked = any(marked for _, _, marked in lines)
    spans: list[list[int]] = []
    for a, b, marked in lines:
        if marked or not any_marked:
            spans.append([a, b])
        elif spans:
            spans[-1][1] = b
    points: list[Point] = []
    seen: set[str] = set()
    for a, b in spans:
        body = " ".join(text[a:b].split())
        if body and body not in seen:
            seen.add(body)
            points.append(Point(body, a, b))
    return points


def tokens_in(char_ends: Sequence[int], start: int, end: int) -> list[int]:
    """Indices of the tokens whose characters overlap ``[start, end)``."""
    out: list[int] = []
    prev = 0
    for i, e in enumerate(char_ends):
        if e > start and prev < end and e > prev:
            out.append(i)
        prev = e
    return out


def point_weights(attention: np.ndarray, token_rows: Sequence[int]) -> np.ndarray:
    """Section 3.1 (b)-(c): mean of the point's token-to-node rows, normalised to sum to 1.

    ``attention`` is ``(generated tokens, batch nodes)``, each entry already the
    mean over layers, heads and the node's tokens. An all-zero row (no tokens)
    gives uniform weights, so every point still points into its batch.
    """
    n = attention.shape[1]
    if not token_rows or n == 0:
        return np.full(n, 1.0 / n if n else 0.0)
    w = np.asarray(attention[list(token_rows)], dtype=np.float64).mean(axis=0)
    total = float(w.sum())
    if not np.isfinite(total) or total <= 0:
        return np.full(n, 1.0 / n)
    return np.asarray(w / total, dtype=np.float64)


def merge_spans(spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted union of spans; overlapping or touching ones become one."""
    out: list[tuple[int, int]] = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def edge_matrix(edges: Sequence[tuple[int, int, float]], n: int) -> sp.csr_array:
    """E (n x n): ``E[i, j]`` is the weight from higher node i to lower node j."""
    if not edges:
        return sp.csr_array((n, n), dtype=np.float64)
    rows, cols, vals = zip(*edges, strict=True)
    m = sp.coo_array((np.asarray(vals, dtype=np.float64), (rows, cols)), shape=(n, n))
    return sp.csr_array(m)


def attention_scores(edges: sp.csr_array, r: np.ndarray) -> np.ndarray:
    """Equation 1 for every node at once: z = E^T r (r is zero off the visited set)."""
    return np.asarray(edges.T @ r, dtype=np.float64)


def position_weighted(r_raw: float, position: int) -> float:
    """Appendix C: a node's attention to the question times its position (question = 1)."""
    return r_raw * position


def best_candidate(scores: np.ndarray, visited: set[int]) -> int | None:
    """The unvisited node with the highest score; ties go to the earlier node."""
    if len(visited) >= len(scores):
        return None
    masked = np.asarray(scores, dtype=np.float64).copy()
    masked[sorted(visited)] = -np.inf
    masked[np.isnan(masked)] = -np.inf
    best = int(np.argmax(masked))
    return None if best in visited else best
