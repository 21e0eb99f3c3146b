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

import functools
import itertools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

__all__ = [
    "GraphOperator",
    "PageRankResult",
    "QueryGraph",
    "StoredGraph",
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

    def __call__(
        self,
        y: np.ndarray,
        out: np.ndarray | None = None,
        then: Callable[[int, int], None] | None = None,
    ) -> np.ndarray:
        """``graph @ y``, written into ``out`` (float64, one entry per row) when given.

        ``then(a, b)`` runs on the thread that made rows ``a:b``, as soon as it
        has: per-row work on a slice still in that core's cache, in parallel.
        """
        y = np.ascontiguousarray(y, dtype=np.float64)
        if out is None:
            out = np.empty(self.shape[0])
        target = out

        def run(rows: _Rows) -> None:
            a, b = rows.start, rows.start + len(rows.indptr) - 1
            _product_into(rows, y, target[a:b])
            if then is not None:
                then(a, b)

        if len(self._parts) == 1:
            run(self._parts[0])
            return out
        if self._pool is None:
            self._pool = ThreadPoolExecutor(len(self._parts))
        list(self._pool.map(run, self._parts))
        return out

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None


def _inverse(sums: np.ndarray) -> np.ndarray:
    """``1 / sums`` where positive, 0 elsewhere (a dangling column moves no mass)."""
    return np.divide(1.0, sums, out=np.zeros_like(sums), where=sums > 0)


class StoredGraph:
    """A stored symmetric chunk graph made ready for many questions, once per index.

    Holds the product operator, the column sums and what every walk derives
    from them (their inverses, the dangling columns), so that a question costs
    its walk's products and little else.
    """

    def __init__(
        self,
        graph: sp.csr_array | sp.csr_matrix | GraphOperator,
        col_sums: np.ndarray,
        workers: int = 1,
    ) -> None:
        self.owned = not isinstance(graph, GraphOperator)
        self.operator = GraphOperator(graph, workers) if self.owned else graph
        self.n = self.operator.shape[0]
        self.sums = np.asarray(col_sums, dtype=np.float64)
        if self.sums.shape != (self.n,):
            raise ValueError(f"col_sums must hold {self.n} sums, got shape {self.sums.shape}")
        self.inverse = _inverse(self.sums)
        self.dangling = self.sums <= 0

    def close(self) -> None:
        """Stop the thread pool of an operator this graph made itself (a shared one stays)."""
        if self.owned:
            self.operator.close()


class QueryGraph:
    """A stored symmetric graph plus one question node, walked without copying the graph.

    The question links to chunk ``j`` with weight ``links[j]`` in both directions,
    and to itself with ``self_weight``. (In the paper the question is the input's last
    chunk(s), already in the graph built with the text; here it comes after the build,
    so it is joined as one more node with the links the caller chose.) Columns are
    normalised on the fly: ``A x = S (x / colsum)``, so the stored matrix is never rewritten. Pass a
    :class:`StoredGraph` (kept across questions) instead of the matrix and its
    column sums to skip the per-question preparation.
    """

    def __init__(
        self,
        graph: sp.csr_array | GraphOperator | StoredGraph,
        col_sums: np.ndarray | None,
        links: np.ndarray,
        self_weight: float = 0.0,
        workers: int = 1,
    ) -> None:
        self._owned = not isinstance(graph, StoredGraph)
        if isinstance(graph, StoredGraph):
            self.stored = graph
        elif col_sums is None:
            raise ValueError("col_sums are needed unless the graph is a StoredGraph")
        else:
            self.stored = StoredGraph(graph, col_sums, workers)
        self.operator = self.stored.operator
        self.n = self.stored.n
        self.links = np.asarray(links, dtype=np.float64)
        self.self_weight = float(self_weight)
        # the question's edges are few: keep them as an index list
        self._linked = np.flatnonzero(self.links)
        self._link_w = self.links[self._linked]
        # column sums with the question's edges added: only the linked columns
        # change (a chunk's sum + 0.0 is itself), so start from the stored ones
        linked_sums = self.stored.sums[self._linked] + self._link_w
        q_sum = self.links.sum() + self.self_weight
        self.dangling = np.empty(self.n + 1, dtype=bool)
        self.dangling[: self.n] = self.stored.dangling
        self.dangling[self._linked] = linked_sums <= 0
        self.dangling[self.n] = q_sum <= 0
        self._inv = np.empty(self.n + 1)
        self._inv[: self.n] = self.stored.inverse
        self._inv[self._linked] = _inverse(linked_sums)
        self._inv[self.n] = _inverse(np.array([q_sum]))[0]

    def matvec(self, x: np.ndarray) -> np.ndarray:
        y = x * self._inv
        out = np.empty(self.n + 1)
        self.operator(y[: self.n], out=out[: self.n])
        yc, yq = y[: self.n], y[self.n]
        out[self._linked] += self._link_w * yq
        # over the linked chunks only: a full-length ``links @ yc`` goes to BLAS,
        # whose threads fight the walk's own on a busy machine (docs/speed.md) and
        # whose sum depends on the BLAS thread count
        out[self.n] = float(np.dot(self._link_w, yc[self._linked])) + self.self_weight * yq
        return out

    def personalised(
        self, alpha: float, *, max_iter: int = PAPER_MAX_ITER, tol: float = NETWORKX_TOL
    ) -> PageRankResult:
        """PPR restarting at the question node (the paper's one-hot personalisation).

        Bitwise :func:`power_iteration` of :meth:`matvec` with that restart, step
        for step. With the restart and the dangling mass both landing on the
        question node alone, a chunk's step is its product, its question edge,
        the damping, and its change; each worker thread finishes its own rows
        (and the next step's ``x / column sums``) while they are in its cache,
        instead of six serial passes over a million-entry vector a step.
        """
        if not 0.0 <= alpha <= 1.0:
            raise ValueError(f"alpha must lie in [0, 1], got {alpha}")
        n, size = self.n, self.n + 1
        damping = 1.0 - alpha
        dangling_at = np.flatnonzero(self.dangling)
        x = np.full(size, 1.0 / size)  # power_iteration's uniform start
        y = x * self._inv
        change = np.empty(size)

        try:
            for it in range(1, max_iter + 1):
                last, x, y_next = x, np.empty(size), np.empty(size)
                yq = y[n]
                finish = functools.partial(
                    self._finish_rows, x=x, last=last, change=change, y_next=y_next,
                    yq=yq, damping=damping,
                )  # fmt: skip
                self.operator(y[:n], out=x[:n], then=finish)
                # the question node, in the order power_iteration applies its terms
                xq = float(np.dot(self._link_w, y[self._linked])) + self.self_weight * yq
                if len(dangling_at):
                    xq += float(last[dangling_at].sum())
                xq *= damping
                xq += alpha
                x[n] = xq
                change[n] = abs(xq - last[n])
                y_next[n] = xq * self._inv[n]
                if change.sum() < size * tol:
                    return PageRankResult(x, it, True)
                y = y_next
            return PageRankResult(x, max_iter, False)
        finally:
            self.close()

    def _finish_rows(
        self,
        a: int,
        b: int,
        *,
        x: np.ndarray,
        last: np.ndarray,
        change: np.ndarray,
        y_next: np.ndarray,
        yq: float,
        damping: float,
    ) -> None:
        """Chunk rows ``a:b`` of one step after their product: the question's edges
        into them, the damping, their change, and the next step's ``x / sums``."""
        lo, hi = np.searchsorted(self._linked, [a, b])
        if hi > lo:  # before the damping, as matvec adds them
            x[self._linked[lo:hi]] += self._link_w[lo:hi] * yq
        rows = x[a:b]
        rows *= damping
        np.subtract(rows, last[a:b], out=change[a:b])
        np.abs(change[a:b], out=change[a:b])
        np.multiply(rows, self._inv[a:b], out=y_next[a:b])

    def close(self) -> None:
        """Stop the thread pool of an operator this graph made itself (a shared one stays)."""
        if self._owned:
            self.stored.close()


def _scipy_matvec() -> Callable[..., None] | None:
    """scipy's own CSR kernel, which accumulates into a given output array.

    ``matrix @ y`` runs the same kernel but into a fresh array that then has to
    be copied into place; at 10M tokens those copies were a tenth of a
    question's time. The kernel is private to scipy, so fall back when it moves.
    """
    try:
        from scipy.sparse import _sparsetools
    except ImportError:  # pragma: no cover - depends on the scipy release
        return None
    kernel = getattr(_sparsetools, "csr_matvec", None)
    return kernel if callable(kernel) else None


_CSR_MATVEC = _scipy_matvec()


class _Rows(NamedTuple):
    """A slice of a CSR matrix's rows as raw arrays (views of the stored ones).

    Not a scipy matrix: scipy copies index and value arrays that are views of
    less than half their base (its ``prune``), which at 10M tokens copied half
    the graph each time an index was opened.
    """

    start: int  # the first row's number in the whole matrix
    indptr: np.ndarray  # from 0
    indices: np.ndarray
    data: np.ndarray
    n_cols: int


def _product_into(rows: _Rows, y: np.ndarray, out: np.ndarray) -> None:
    """``out[:] = rows @ y`` for float64 values and ``y``, bitwise scipy's product."""
    n_rows = len(rows.indptr) - 1
    if _CSR_MATVEC is not None and out.flags.c_contiguous:
        out.fill(0.0)  # the kernel adds each row's sum to what is there, as scipy's zeros
        try:
            _CSR_MATVEC(n_rows, rows.n_cols, rows.indptr, rows.indices, rows.data, y, out)
            return
        except (TypeError, ValueError):  # pragma: no cover - a scipy that changed its kernel
            pass
    matrix = sp.csr_array((rows.data, rows.indices, rows.indptr), shape=(n_rows, rows.n_cols))
    out[:] = matrix @ y


def _row_parts(
    data: np.ndarray,
    indices: np.ndarray,
    indptr: np.ndarray,
    shape: tuple[int, int],
    workers: int,
) -> list[_Rows]:
    """Split rows into ``workers`` slices of about equal nnz (views, no copies)."""
    n = shape[0]
    nnz = len(data)
    if workers <= 1 or nnz < 1_000_000:
        cuts = [0, n]
    else:
        targets = np.linspace(0, nnz, workers + 1)[1:-1]
        cuts = [0, *np.searchsorted(indptr, targets).tolist(), n]
    parts: list[_Rows] = []
    for a, b in itertools.pairwise(cuts):
        if b <= a:
            continue
        pa, pb = int(indptr[a]), int(indptr[b])
        ptr = indptr[a : b + 1] - indptr[a]
        parts.append(_Rows(a, ptr, indices[pa:pb], data[pa:pb], shape[1]))
    return parts
