"""PageRank and personalised PageRank by sparse power iteration, with an iteration cap.

The paper (MixPR, appendix A.2) uses networkx's algorithm but stops after at
most 18 iterations instead of raising when it has not converged. We follow
networkx step for step: start from the uniform vector, each step
``x <- (1 - alpha) (A x + (dangling mass) d) + alpha p`` with ``d`` the
dangling-node distribution (``p`` unless given), and stop when the L1 change
falls below ``N * tol``. Note the paper's ``alpha`` is the *restart*
probability: networkx's damping factor is ``1 - alpha``.

:class:`QueryGraph` adds one extra node (a question) to a stored graph without
copying or re-normalising the stored matrix, so a query costs a few sparse
matrix-vector products and nothing else.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

__all__ = [
    "GraphOperator",
    "PageRankResult",
    "QueryGraph",
    "graph_pagerank",
    "pagerank",
    "power_iteration",
    "transition_matrix",
]

PAPER_MAX_ITER = 18
NETWORKX_TOL = 1e-6


@dataclass
class PageRankResult:
    scores: np.ndarray  # one probability per node, summing to 1
    iterations: int  # steps actually taken
    converged: bool  # False when the cap stopped it


def _distribution(vec: np.ndarray | None, n: int, what: str) -> np.ndarray:
    if vec is None:
        return np.full(n, 1.0 / n) if n else np.zeros(0)
    out = np.asarray(vec, dtype=np.float64).ravel()
    if out.shape != (n,) or (out < 0).any() or out.sum() <= 0:
        raise ValueError(f"{what} must be {n} non-negative weights with a positive sum")
    return out / out.sum()


def power_iteration(
    matvec: Callable[[np.ndarray], np.ndarray],
    dangling: np.ndarray,
    *,
    alpha: float,
    personalization: np.ndarray | None = None,
    dangling_weights: np.ndarray | None = None,
    start: np.ndarray | None = None,
    max_iter: int = PAPER_MAX_ITER,
    tol: float = NETWORKX_TOL,
) -> PageRankResult:
    """Personalised PageRank ``pi = (1 - alpha) A pi + alpha p`` for any operator ``A``.

    ``matvec(x)`` returns ``A x`` for a column-stochastic ``A`` whose columns for
    ``dangling`` nodes (a boolean mask) are zero. ``alpha`` = 0 is plain
    PageRank. At most ``max_iter`` steps; converged when the L1 change < N * tol.
    """
    n = len(dangling)
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must lie in [0, 1], got {alpha}")
    if n == 0:
        return PageRankResult(np.zeros(0), 0, True)
    p = _distribution(personalization, n, "personalization")
    dw = p if dangling_weights is None else _distribution(dangling_weights, n, "dangling")
    x = _distribution(start, n, "start")
    damping = 1.0 - alpha
    restart = alpha * p
    change = np.empty(n)
    for it in range(1, max_iter + 1):
        last = x
        # damping * (A x + dangling mass * dw) + alpha * p, in place: the same
        # operations in the same order as written out, without the temporaries
        x = matvec(last)
        if x is last or x.dtype != np.float64:  # never write into the caller's array
            x = np.array(x, dtype=np.float64)
        x += last[dangling].sum() * dw
        x *= damping
        x += restart
        np.subtract(x, last, out=change)
        if np.abs(change, out=change).sum() < n * tol:
            return PageRankResult(x, it, True)
    return PageRankResult(x, max_iter, False)


def transition_matrix(graph: sp.csr_array | sp.csr_matrix) -> tuple[sp.csr_array, np.ndarray]:
    """Column-normalise a non-negative weight matrix (``graph[i, j]`` = weight of j -> i).

    Returns the column-stochastic matrix and the mask of dangling columns (sum 0).
    """
    g = sp.csr_array(graph, dtype=np.float64)
    sums = np.asarray(g.sum(axis=0)).ravel()
    dangling = sums <= 0
    inv = np.divide(1.0, sums, out=np.zeros_like(sums), where=~dangling)
    return sp.csr_array(g @ sp.diags_array(inv)), dangling


def pagerank(
    transition: sp.csr_array,
    dangling: np.ndarray,
    *,
    alpha: float,
    personalization: np.ndarray | None = None,
    dangling_weights: np.ndarray | None = None,
    start: np.ndarray | None = None,
    max_iter: int = PAPER_MAX_ITER,
    tol: float = NETWORKX_TOL,
) -> PageRankResult:
    """(Personalised) PageRank on a matrix from :func:`transition_matrix`."""
    return power_iteration(
        lambda x: np.asarray(transition @ x),
        dangling,
        alpha=alpha,
        personalization=personalization,
        dangling_weights=dangling_weights,
        start=start,
        max_iter=max_iter,
        tol=tol,
    )


def graph_pagerank(
    graph: sp.csr_array,
    *,
    alpha: float,
    max_iter: int = PAPER_MAX_ITER,
    tol: float = NETWORKX_TOL,
    workers: int = 1,
) -> PageRankResult:
    """:func:`pagerank` of ``transition_matrix(graph)``, without writing that matrix:
    each step is ``graph @ (x / column sums)``. A float64 ``graph`` (as MixPR stores
    it) is multiplied as it is, so the build holds one copy of the graph, not three
    (at 10M tokens each copy is over 600 MB)."""
    g = sp.csr_array(graph)
    sums = np.asarray(g.sum(axis=0), dtype=np.float64).ravel()
    dangling = sums <= 0
    inv = np.divide(1.0, sums, out=np.zeros_like(sums), where=~dangling)
    op = GraphOperator(g, workers)
    try:
        return power_iteration(
            lambda x: op(x * inv), dangling, alpha=alpha, max_iter=max_iter, tol=tol
        )
    finally:
        op.close()


class GraphOperator:
    """A stored graph made ready for many products ``graph @ y``, built once per index.

    scipy multiplies a float32 matrix by a float64 vector by first copying the
    whole matrix to float64, on every product; that copy cost more than the
    product itself at a million tokens. Here the float64 data (and int32
    indices, when they fit) are made once, and rows are split into nnz-balanced
    slices for a thread pool. Each row is still summed in the same order, so
    the products are bitwise those of ``graph.astype(float64) @ y``. Meant to be
    memoised on the index reader (:meth:`lcr.store.MethodReader.memoised`).
    """

    def __init__(self, graph: sp.csr_array | sp.csr_matrix, workers: int = 1) -> None:
        g = sp.csr_array(graph)
        n = g.shape[0]
        small = max(n, g.shape[1], g.nnz) < np.iinfo(np.int32).max
        itype = np.int32 if small else np.int64
        data = np.asarray(g.data, dtype=np.float64)
        indices = np.asarray(g.indices, dtype=itype)
        indptr = np.asarray(g.indptr, dtype=itype)
        self.shape = g.shape
        self.nnz = int(g.nnz)
        self._parts = _row_parts(data, indices, indptr, g.shape, workers)
        self._pool: ThreadPoolExecutor | None = None

    def __call__(self, y: np.ndarray) -> np.ndarray:
        if len(self._parts) == 1:
            return np.asarray(self._parts[0][1] @ y)
        if self._pool is None:
            self._pool = ThreadPoolExecutor(len(self._parts))
        out = np.empty(self.shape[0])
        pieces = list(self._pool.map(lambda part: part[1] @ y, self._parts))
        for (a, _), piece in zip(self._parts, pieces, strict=True):
            out[a : a + len(piece)] = piece
        return out

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None


class QueryGraph:
    """A stored symmetric graph plus one question node, walked without copying the graph.

    The question links to chunk ``j`` with weight ``links[j]`` in both directions
    (as in the paper, where the question is one more chunk of the same graph),
    and to itself with ``self_weight``. Columns are normalised on the fly:
    ``A x = S (x / colsum)``, so the stored matrix is never rewritten. Pass a
    :class:`GraphOperator` (kept across questions) instead of the matrix to
    skip its per-question preparation.
    """

    def __init__(
        self,
        graph: sp.csr_array | GraphOperator,
        col_sums: np.ndarray,
        links: np.ndarray,
        self_weight: float = 0.0,
        workers: int = 1,
    ) -> None:
        self._owned = not isinstance(graph, GraphOperator)
        self.operator = GraphOperator(graph, workers) if self._owned else graph
        self.n = self.operator.shape[0]
        self.links = np.asarray(links, dtype=np.float64)
        self.self_weight = float(self_weight)
        sums = np.empty(self.n + 1)
        sums[: self.n] = col_sums + self.links
        sums[self.n] = self.links.sum() + self.self_weight
        self.dangling = sums <= 0
        self._inv = np.divide(1.0, sums, out=np.zeros_like(sums), where=~self.dangling)
        # the question's edges are few: keep them as an index list
        self._linked = np.flatnonzero(self.links)
        self._link_w = self.links[self._linked]

    def matvec(self, x: np.ndarray) -> np.ndarray:
        y = x * self._inv
        yc, yq = y[: self.n], y[self.n]
        out = np.empty(self.n + 1)
        out[: self.n] = self.operator(yc)
        out[self._linked] += self._link_w * yq
        # over the linked chunks only: a full-length ``links @ yc`` goes to BLAS,
        # whose threads fight the walk's own on a busy machine (measured: 0.24 s
        # -> 0.16 s a question) and whose sum depends on the BLAS thread count
        out[self.n] = float(np.dot(self._link_w, yc[self._linked])) + self.self_weight * yq
        return out

    def personalised(
        self, alpha: float, *, max_iter: int = PAPER_MAX_ITER, tol: float = NETWORKX_TOL
    ) -> PageRankResult:
        """PPR restarting at the question node (the paper's one-hot personalisation)."""
        p = np.zeros(self.n + 1)
        p[self.n] = 1.0
        try:
            return power_iteration(
                self.matvec, self.dangling, alpha=alpha, personalization=p,
                max_iter=max_iter, tol=tol,
            )  # fmt: skip
        finally:
            self.close()

    def close(self) -> None:
        """Stop the thread pool of an operator this graph made itself (a shared one stays)."""
        if self._owned:
            self.operator.close()


def _row_parts(
    data: np.ndarray,
    indices: np.ndarray,
    indptr: np.ndarray,
    shape: tuple[int, int],
    workers: int,
) -> list[tuple[int, sp.csr_array]]:
    """Split rows into ``workers`` slices of about equal nnz (views, no copies)."""
    n = shape[0]
    nnz = len(data)
    if workers <= 1 or nnz < 1_000_000:
        cuts = [0, n]
    else:
        targets = np.linspace(0, nnz, workers + 1)[1:-1]
        cuts = [0, *np.searchsorted(indptr, targets).tolist(), n]
    parts: list[tuple[int, sp.csr_array]] = []
    for a, b in itertools.pairwise(cuts):
        if b <= a:
            continue
        pa, pb = int(indptr[a]), int(indptr[b])
        ptr = indptr[a : b + 1] - indptr[a]
        view = sp.csr_array((data[pa:pb], indices[pa:pb], ptr), shape=(b - a, shape[1]), copy=False)
        parts.append((a, view))
    return parts
