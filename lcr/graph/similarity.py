"""Thresholded cosine-similarity graphs over sparse embeddings, in bounded memory.

MixPR's graph is ``E^T E`` with every entry below a threshold removed (appendix
A.2 of the paper). The unthresholded product of a million-token text has about
a billion entries, so it is never formed: rows are taken in blocks sized by
their work (the number of multiply-adds they cause), each block's product is
thresholded as soon as it exists, and only the surviving entries are kept.
Because the matrix is symmetric, each block only computes entries ``(i, j)``
with ``j > i`` and the result is mirrored, which halves the work. Blocks run on
a thread pool (scipy's sparse product releases the GIL).

Everything here is exact: no approximate neighbour search, no sampling.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

__all__ = ["GraphStats", "column_sums", "similarity_graph"]

# Multiply-adds per block: bounds the transient memory of one block's product
# (about 12 bytes per product entry before thresholding).
DEFAULT_BLOCK_WORK = 20_000_000
# Directed entries held before the per-row top-``max_degree`` pruning runs.
_PRUNE_EVERY = 40_000_000


@dataclass
class GraphStats:
    """What building the graph saw: shown by ``lcr info``."""

    nodes: int
    nnz: int
    products: int  # multiply-adds spent (the upper-triangle work)
    blocks: int
    capped_rows: int  # rows that had more than ``max_degree`` neighbours


def _row_view(matrix: sp.csr_array, start: int) -> sp.csr_array:
    """Rows ``start:`` of a CSR matrix without copying its arrays."""
    p = int(matrix.indptr[start])
    view = sp.csr_array(
        (matrix.data[p:], matrix.indices[p:], matrix.indptr[start:] - p),
        shape=(matrix.shape[0] - start, matrix.shape[1]),
        copy=False,
    )
    view.has_sorted_indices = True  # the parent is canonical; never re-sort shared arrays
    return view


def _blocks(work: np.ndarray, budget: int) -> list[tuple[int, int]]:
    """Consecutive row ranges whose summed ``work`` stays near ``budget``."""
    cum = np.cumsum(work, dtype=np.int64)
    bounds = [0]
    n = len(work)
    while bounds[-1] < n:
        start = bounds[-1]
        base = cum[start - 1] if start else 0
        end = int(np.searchsorted(cum, base + budget, side="right"))
        bounds.append(max(end, start + 1))
    bounds[-1] = min(bounds[-1], n)
    return list(itertools.pairwise(bounds))


def _block_operands(emb: sp.csr_array, start: int, end: int) -> tuple[sp.csr_array, sp.csr_array]:
    """Rows ``start:`` (a view) and the block's transpose; made on the calling thread only."""
    return _row_view(emb, start), sp.csr_array(emb[start:end].T)


def _upper_entries(
    left: sp.csr_array, right: sp.csr_array, start: int, threshold: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Entries ``(i, j, s)`` of block rows ``i``, with ``j > i`` and ``s >= threshold``."""
    prod = sp.csr_array(left @ right)  # rows j >= start, cols i - start
    # Most products fall under the threshold: find the kept positions first and
    # look up only their rows, instead of expanding a row id for every product.
    kept = np.flatnonzero(prod.data >= threshold)
    rows_j = np.searchsorted(prod.indptr, kept, side="right").astype(np.int64) - 1 + start
    cols_i = prod.indices[kept].astype(np.int64) + start
    vals = prod.data[kept]
    upper = rows_j > cols_i
    return cols_i[upper], rows_j[upper], vals[upper].astype(np.float32)


def _top_per_row(
    rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, m: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Keep each row's ``m`` largest entries (ties: lower column first)."""
    order = np.lexsort((cols, -vals, rows))
    rows, cols, vals = rows[order], cols[order], vals[order]
    first = np.searchsorted(rows, rows, side="left")
    keep = (np.arange(len(rows)) - first) < m
    return rows[keep], cols[keep], vals[keep]


Entries = tuple[np.ndarray, np.ndarray, np.ndarray]


def _iter_blocks(
    emb: sp.csr_array, ranges: list[tuple[int, int]], threshold: float, workers: int
) -> Iterator[Entries]:
    def block(a: int, b: int) -> Entries:
        return _upper_entries(*_block_operands(emb, a, b), a, threshold)

    if workers <= 1 or len(ranges) == 1:
        for a, b in ranges:
            yield block(a, b)
        return
    with ThreadPoolExecutor(max_workers=workers) as pool:
        # a bounded window of blocks in flight keeps memory bounded too; the
        # operands are made on this thread (scipy may sort shared arrays in place)
        window = 2 * workers
        pending = [
            pool.submit(_upper_entries, *_block_operands(emb, a, b), a, threshold)
            for a, b in ranges[:window]
        ]
        nxt = window
        while pending:
            result = pending.pop(0).result()
            if nxt < len(ranges):
                a, b = ranges[nxt]
                pending.append(
                    pool.submit(_upper_entries, *_block_operands(emb, a, b), a, threshold)
                )
                nxt += 1
            yield result


def similarity_graph(
    embeddings: sp.csr_array | sp.csr_matrix,
    threshold: float,
    *,
    self_loops: bool = True,
    max_degree: int = 0,
    workers: int = 2,
    block_work: int = DEFAULT_BLOCK_WORK,
    on_block: Callable[[int], None] | None = None,
) -> tuple[sp.csr_array, GraphStats]:
    """The symmetric matrix of cosine similarities ``>= threshold`` between rows.

    ``embeddings`` must have L2-normalised rows (so products are cosines).
    ``self_loops`` keeps the diagonal (each non-empty row's similarity with
    itself, 1). ``max_degree`` > 0 keeps, for every row, only its
    ``max_degree`` strongest neighbours (self excluded); an edge survives when
    either end keeps it, so the graph stays symmetric and holds at most
    ``2 * n * max_degree`` off-diagonal entries however repetitive the text.
    Returns float32 CSR with sorted indices, and what the build saw.
    ``on_block(total)`` is called after each block (for a progress bar).
    """
    # a copy: sorting indices in place must never touch the caller's arrays
    emb = sp.csr_array(embeddings, dtype=np.float32, copy=True)
    # canonical (sorted) indices up front: scipy sorts an operand in place when
    # it is not, which would race between the threads sharing these arrays
    emb.sum_duplicates()
    emb.sort_indices()
    n = emb.shape[0]
    df = np.bincount(emb.indices, minlength=emb.shape[1]).astype(np.int64)
    # multiply-adds row i causes against all rows (an upper bound of its upper-triangle work)
    row_work = np.add.reduceat(df[emb.indices], emb.indptr[:-1]) if emb.nnz else np.zeros(n)
    row_work = np.where(np.diff(emb.indptr) > 0, row_work, 0).astype(np.int64) + 1
    ranges = _blocks(row_work, max(int(block_work), 1)) if n else []

    rows_parts: list[np.ndarray] = []
    cols_parts: list[np.ndarray] = []
    vals_parts: list[np.ndarray] = []
    held = 0
    for i, j, v in _iter_blocks(emb, ranges, threshold, workers):
        if on_block is not None:
            on_block(len(ranges))
        if max_degree > 0:
            # both directions, so each row sees all its neighbours for the top-m cut
            i, j, v = np.concatenate([i, j]), np.concatenate([j, i]), np.concatenate([v, v])
        rows_parts.append(i)
        cols_parts.append(j)
        vals_parts.append(v)
        held += len(i)
        if max_degree > 0 and held > _PRUNE_EVERY:
            r, c, x = _top_per_row(
                np.concatenate(rows_parts),
                np.concatenate(cols_parts),
                np.concatenate(vals_parts),
                max_degree,
            )
            rows_parts, cols_parts, vals_parts, held = [r], [c], [x], len(r)

    rows = np.concatenate(rows_parts) if rows_parts else np.zeros(0, np.int64)
    cols = np.concatenate(cols_parts) if cols_parts else np.zeros(0, np.int64)
    vals = np.concatenate(vals_parts) if vals_parts else np.zeros(0, np.float32)
    capped = 0
    if max_degree > 0:
        degree = np.bincount(rows, minlength=n)
        capped = int((degree > max_degree).sum())
        rows, cols, vals = _top_per_row(rows, cols, vals, max_degree)
        kept = sp.csr_array((vals, (rows, cols)), shape=(n, n))
        off = kept.maximum(kept.T)  # an edge survives when either end keeps it
    else:
        upper = sp.csr_array((vals, (rows, cols)), shape=(n, n))
        off = upper + upper.T
    del rows, cols, vals
    graph = sp.csr_array(off, dtype=np.float32)
    if self_loops:
        diag = np.asarray(emb.multiply(emb).sum(axis=1)).ravel().astype(np.float32)
        diag = np.where(diag >= threshold, diag, np.float32(0))
        graph = sp.csr_array(graph + sp.diags_array(diag, format="csr"), dtype=np.float32)
    graph.eliminate_zeros()
    graph.sort_indices()
    if max(n, graph.nnz) < np.iinfo(np.int32).max:
        # int32 indices: a third less to store, read and stream per PageRank step
        graph = sp.csr_array(
            (graph.data, graph.indices.astype(np.int32), graph.indptr.astype(np.int32)),
            shape=graph.shape,
        )
    products = int(row_work.sum() - n)
    stats = GraphStats(n, int(graph.nnz), products // 2, len(ranges), capped)
    return graph, stats


def column_sums(graph: sp.csr_array) -> np.ndarray:
    """Out-weight of every node (the column sums of a symmetric graph), float64."""
    return np.asarray(graph.sum(axis=0), dtype=np.float64).ravel()
