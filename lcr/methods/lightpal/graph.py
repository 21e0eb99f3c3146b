"""LightPAL's graph algorithms: candidates, edges, and the context fill at query time.

Pure functions over arrays; the method (``method``) does the I/O.

- :func:`dense_candidates`: each passage's ``k'`` most similar other passages by
  cosine of their embeddings (section 5.1; the paper embeds with bge-large-en-v1.5,
  lcr with the index's embedder, MiniLM by default).
- :func:`top_edges`: keep the ``k`` best-scored candidates as directed edges.
- :func:`context_passages`: personalised PageRank on the graph with uniform
  edge weights, restarting uniformly on D_init, then the best-ranked passages
  not already chosen (section 4, 5.1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from lcr.graph.pagerank import PageRankResult, pagerank, transition_matrix

# networkx's defaults: lcr's choice, since the paper names neither a library nor an
# iteration cap for its PPR
PPR_MAX_ITER = 100
PPR_TOL = 1e-6

# Section 5.1: the walk jumps "uniformly to the top-20 of initial passages D_init": on
# D_init itself (at most restart_top of it). The other reading, the initial ranking's
# top 20, was never better, at any K on either retriever or graph (R@K on ODSum Story):
# bench/results/lightpal-log.md#the-restart-set-on-odsum-story


def dense_candidates(embeddings: np.ndarray, k: int, block: int = 1024) -> list[np.ndarray]:
    """Per passage, the indices of its ``k`` most similar other passages, best first.

    ``embeddings`` rows are L2-normalised; ties go to the earlier passage. Rows
    are done in blocks, so memory is ``block x n`` floats, never ``n x n``.
    """
    n = embeddings.shape[0]
    k = min(k, n - 1)
    if k <= 0:
        return [np.zeros(0, dtype=np.int64) for _ in range(n)]
    emb = np.asarray(embeddings, dtype=np.float32)
    out: list[np.ndarray] = []
    for a in range(0, n, block):
        sims = emb[a : a + block] @ emb.T
        for r in range(sims.shape[0]):
            row = sims[r].astype(np.float64)
            row[a + r] = -np.inf  # never a candidate of itself
            part = np.argpartition(-row, k - 1)[:k]
            out.append(part[np.lexsort((part, -row[part]))].astype(np.int64))
    return out


def top_edges(candidates: np.ndarray, scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best-scored candidates and their scores, best first.

    Ties keep the candidates' own order (their embedding rank).
    """
    scores = np.asarray(scores, dtype=np.float64)
    order = np.argsort(-scores, kind="stable")[:k]
    return np.asarray(candidates)[order], scores[order]


def edge_matrix(
    n: int, targets: Sequence[np.ndarray], weights: Sequence[np.ndarray]
) -> sp.csr_array:
    """Row ``i`` holds passage ``i``'s out-edges (column = target, value = ContextScore)."""
    indptr = np.zeros(n + 1, dtype=np.int64)
    indptr[1:] = np.cumsum([len(t) for t in targets])
    cols = np.zeros(0, dtype=np.int64)
    data = np.zeros(0, dtype=np.float32)
    if n:
        cols = np.concatenate([np.asarray(t, dtype=np.int64) for t in targets])
        data = np.concatenate([np.asarray(w, dtype=np.float32) for w in weights])
    m = sp.csr_array((data, cols, indptr), shape=(n, n))
    m.sort_indices()
    return m


@dataclass
class Walk:
    """The graph made ready for walks: column-stochastic, uniform weights per out-edge."""

    transition: sp.csr_array
    dangling: np.ndarray

    @classmethod
    def from_edges(cls, edges: sp.csr_array) -> Walk:
        # the paper sets edge weights uniformly: the scores chose the edges, nothing more.
        # transition_matrix reads graph[i, j] as j -> i, the transpose of the edge rows.
        uniform = sp.csr_array((np.ones(edges.nnz), edges.indices, edges.indptr), shape=edges.shape)
        transition, dangling = transition_matrix(uniform.T.tocsr())
        return cls(transition, dangling)

    @property
    def n(self) -> int:
        return int(self.transition.shape[0])


@dataclass
class ContextFill:
    initial: list[int]  # D_init, best first
    context: list[int]  # D_context, best first
    ppr: np.ndarray  # the walk's score of every passage
    restart: list[int]  # the passages the walk restarts on
    iterations: int
    from_ranking: int  # context slots filled from the initial ranking (the walk ran dry)


def context_passages(
    walk: Walk,
    ranking: Sequence[int],
    k: int,
    *,
    initial_share: float,
    restart_top: int,
    alpha: float,
) -> ContextFill:
    """D_init = the top ``initial_share`` of ``k`` from ``ranking``; the rest by PPR.

    The walk restarts uniformly with probability ``1 - alpha`` (``alpha`` =
    0.2, the paper's) on the first ``restart_top`` passages of D_init. Context passages
    are the best PPR scores outside D_init; should the walk reach fewer than
    needed, the initial ranking fills the rest, so ``k`` passages come back
    whenever there are that many.
    """
    ranking = [int(i) for i in ranking]
    k = min(k, walk.n)
    n_init = min(len(ranking), max(1, round(initial_share * k))) if k else 0
    initial = ranking[:n_init]
    restart = initial[:restart_top]
    if not restart or k == 0:
        return ContextFill(initial, [], np.zeros(walk.n), restart, 0, 0)
    personal = np.zeros(walk.n)
    personal[restart] = 1.0
    result: PageRankResult = pagerank(
        walk.transition,
        walk.dangling,
        alpha=1.0 - alpha,  # lcr's alpha is the restart probability
        personalization=personal,
        start=personal,  # from the restart set: what it cannot reach stays exactly 0
        max_iter=PPR_MAX_ITER,
        tol=PPR_TOL,
    )
    ppr = result.scores
    chosen = set(initial)
    context: list[int] = []
    for i in np.lexsort((np.arange(walk.n), -ppr)):
        if len(context) >= k - n_init or ppr[i] <= 0:
            break
        if int(i) not in chosen:
            context.append(int(i))
            chosen.add(int(i))
    filled = 0
    for i in ranking[n_init:]:
        if len(context) >= k - n_init:
            break
        if i not in chosen:
            context.append(i)
            chosen.add(i)
            filled += 1
    return ContextFill(initial, context, ppr, restart, result.iterations, filled)
