"""Thresholded cosine-similarity graphs over sparse embeddings, in bounded memory.

MixPR's graph is ``E^T E`` with every entry below a threshold removed (appendix
A.2 of the paper). The unthresholded product of a million-token text has about
a billion entries, so it is never formed: rows are taken in blocks sized by
their work (the number of multiply-adds they cause), each block's product is
thresholded as soon as it exists, and only the surviving entries are kept.
Because the matrix is symmetric, each block only computes entries ``(i, j)``
with ``j > i`` and the result is mirrored, which halves the work. Blocks run on
a thread pool. Each block's product is a compiled kernel (``_kernels.py``,
numba) that thresholds every row as it finishes, so the unthresholded block is
never written either; without numba, scipy's product computes the same entries,
about four times slower.

When a text is so large or repetitive that even the thresholded graph would
not fit in memory, ``max_edges`` switches the build to a per-row degree cap.

Everything here is exact: no approximate neighbour search, no sampling.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

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
    max_degree: int = 0  # the cap applied (0: the exact graph)
    auto_capped: bool = False  # the cap came from ``max_edges``, not from the caller


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


def _compiled_kernels() -> Any:
    """The numba kernels, or None when numba is not installed (scipy is used then)."""
    try:
        from lcr.graph import _kernels
    except (ImportError, OSError, RuntimeError):  # pragma: no cover - no numba wheel, or
        return None  # no writable place for its compiled cache: scipy gives the same graph
    return _kernels


Entries = tuple[np.ndarray, np.ndarray, np.ndarray]
# Whether a block's compiled product scans its whole accumulator per row: cheaper
# than tracking the entries hit once a row meets more than ~1/32 of the block.
_DENSE_SCAN_RATIO = 32
# Entries a compiled block writes before handing them back (at least 4 rows' width).
_BUFFER_ENTRIES = 1 << 20


def _scipy_block(
    emb: sp.csr_array, start: int, end: int, threshold: float
) -> Callable[[], Entries]:
    """Entries ``(i, j, s)`` of block rows ``i``, with ``j > i`` and ``s >= threshold``,
    by scipy's product. The operands are made here, on the calling thread
    (scipy may sort shared arrays in place); the returned call runs on a worker."""
    left, right = _row_view(emb, start), sp.csr_array(emb[start:end].T)

    def run() -> Entries:
        prod = sp.csr_array(left @ right)  # rows j >= start, cols i - start
        # Most products fall under the threshold: find the kept positions first and
        # look up only their rows, instead of expanding a row id for every product.
        kept = np.flatnonzero(prod.data >= threshold)
        rows_j = np.searchsorted(prod.indptr, kept, side="right").astype(np.int64) - 1 + start
        cols_i = prod.indices[kept].astype(np.int64) + start
        vals = prod.data[kept]
        upper = rows_j > cols_i
        return (
            cols_i[upper].astype(np.int32),
            rows_j[upper].astype(np.int32),
            vals[upper].astype(np.float32),
        )

    return run


def _compiled_block(
    kernels: Any, emb: sp.csr_array, start: int, end: int, threshold: float, dense: bool
) -> Callable[[], Entries]:
    """The same entries as :func:`_scipy_block`, by a compiled kernel."""
    bt = sp.csr_array(emb[start:end].T)
    bt.sort_indices()
    kernel = kernels.upper_pairs_dense if dense else kernels.upper_pairs_sparse
    width = end - start
    capacity = max(_BUFFER_ENTRIES, 4 * width)
    thr = np.float32(threshold)

    def run() -> Entries:
        out_i = np.empty(capacity, np.int32)
        out_j = np.empty(capacity, np.int32)
        out_v = np.empty(capacity, np.float32)
        parts: list[Entries] = []
        j = start + 1
        n = emb.shape[0]
        while j < n:
            # the kernel stops when its buffers might overflow; empty them and go on
            k, j = kernel(
                emb.indptr, emb.indices, emb.data, bt.indptr, bt.indices, bt.data,
                start, end, j, thr, out_i, out_j, out_v,
            )  # fmt: skip
            parts.append((out_i[:k].copy(), out_j[:k].copy(), out_v[:k].copy()))
        return parts[0] if len(parts) == 1 else _joined(parts)

    return run


def _top_per_row(
    rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, m: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Keep each row's ``m`` largest entries (ties: lower column first); NumPy."""
    order = np.lexsort((cols, -vals, rows))
    rows, cols, vals = rows[order], cols[order], vals[order]
    first = np.searchsorted(rows, rows, side="left")
    keep = (np.arange(len(rows)) - first) < m
    return rows[keep], cols[keep], vals[keep]


def _cap_rows(
    kernels: Any, entries: Entries, n: int, m: int, mirror: bool
) -> tuple[Entries, np.ndarray]:
    """Each row's ``m`` best entries, and each row's floor (its m-th best value
    when it has m, else 0). ``mirror``: the entries are an upper triangle
    standing for the symmetric matrix. The compiled kernel needs O(n + N)
    memory; the NumPy fallback sorts everything (several times N)."""
    if kernels is not None:
        r, c, v, floor = kernels.top_per_row(*entries, n, m, mirror)
        return (r, c, v), floor
    r, c, v = _top_per_row(*(_both_directions(*entries) if mirror else entries), m)
    floor = np.zeros(n, np.float32)
    full = np.flatnonzero(np.bincount(r, minlength=n) == m)
    floor[full] = v[np.searchsorted(r, full, side="right") - 1]  # sorted best first
    return (r, c, v), floor


def _run_blocks(blocks: Iterator[Callable[[], Entries]], workers: int) -> Iterator[Entries]:
    """Run prepared blocks, in order, on ``workers`` threads (the kernels and
    scipy's product release the GIL). A bounded window of blocks in flight keeps
    memory bounded too."""
    if workers <= 1:
        for run in blocks:
            yield run()
        return
    with ThreadPoolExecutor(max_workers=workers) as pool:
        window = 2 * workers
        pending = [pool.submit(run) for run in itertools.islice(blocks, window)]
        while pending:
            result = pending.pop(0).result()
            for run in itertools.islice(blocks, 1):
                pending.append(pool.submit(run))
            yield result


def _joined(parts: list[Entries]) -> Entries:
    if not parts:
        return np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0, np.float32)
    i, j, v = zip(*parts, strict=True)
    return np.concatenate(i), np.concatenate(j), np.concatenate(v)


def _both_directions(i: np.ndarray, j: np.ndarray, v: np.ndarray) -> Entries:
    return np.concatenate([i, j]), np.concatenate([j, i]), np.concatenate([v, v])


def similarity_graph(
    embeddings: sp.csr_array | sp.csr_matrix,
    threshold: float,
    *,
    self_loops: bool = True,
    max_degree: int = 0,
    max_edges: int = 0,
    workers: int = 2,
    block_work: int = DEFAULT_BLOCK_WORK,
    backend: str = "auto",
    on_block: Callable[[int], None] | None = None,
) -> tuple[sp.csr_array, GraphStats]:
    """The symmetric matrix of cosine similarities ``>= threshold`` between rows.

    ``embeddings`` must have L2-normalised rows (so products are cosines).
    ``self_loops`` keeps the diagonal (each non-empty row's similarity with
    itself, 1). ``max_degree`` > 0 keeps, for every row, only its
    ``max_degree`` strongest neighbours (self excluded); an edge survives when
    either end keeps it, so the graph stays symmetric and holds at most
    ``2 * n * max_degree`` off-diagonal entries however repetitive the text.
    ``max_edges`` > 0 (with ``max_degree`` 0) keeps the exact graph while it
    stays under that many stored entries; once the build sees it will not, it
    switches to the largest ``max_degree`` that fits, which gives the same graph
    as asking for that cap from the start (``GraphStats.max_degree`` says which).
    ``backend``: "auto" (compiled kernels when numba is installed), "numba" or
    "scipy"; all give the same graph.
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
    if n >= np.iinfo(np.int32).max:
        raise ValueError(f"{n} rows: more than the int32 node ids can hold")
    df = np.bincount(emb.indices, minlength=emb.shape[1]).astype(np.int64)
    # multiply-adds row i causes against all rows (an upper bound of its upper-triangle work)
    row_work = np.add.reduceat(df[emb.indices], emb.indptr[:-1]) if emb.nnz else np.zeros(n)
    row_work = np.where(np.diff(emb.indptr) > 0, row_work, 0).astype(np.int64) + 1
    ranges = _blocks(row_work, max(int(block_work), 1)) if n else []

    kernels = None
    if backend in ("auto", "numba"):
        kernels = _compiled_kernels()
        if kernels is None and backend == "numba":
            raise ValueError("backend 'numba' needs numba installed")
    elif backend != "scipy":
        raise ValueError(f"unknown backend {backend!r} (auto, numba, scipy)")

    def prepared() -> Iterator[Callable[[], Entries]]:
        for a, b in ranges:
            if kernels is None:
                yield _scipy_block(emb, a, b, threshold)
            else:
                dense = (n - a) * (b - a) <= _DENSE_SCAN_RATIO * int(row_work[a:b].sum())
                yield _compiled_block(kernels, emb, a, b, threshold, dense)

    diag = np.asarray(emb.multiply(emb).sum(axis=1)).ravel().astype(np.float32)
    diag = np.where(diag >= threshold, diag, np.float32(0)) if self_loops else np.zeros_like(diag)
    n_diag = int(np.count_nonzero(diag))
    cap = max(int(max_degree), 0)
    auto_cap = False
    parts: list[Entries] = []
    held = 0
    prune_at = _PRUNE_EVERY
    # Under a cap: every row's neighbour count before pruning (for the stats), and
    # its m-th best value so far. An entry under its row's floor can never make
    # that row's top m, so it is dropped as it arrives and pruning stays rare.
    degree = np.zeros(n if max_degree > 0 or max_edges > 0 else 0, np.int64)
    floor = np.zeros(len(degree), np.float32)
    for i, j, v in _run_blocks(prepared(), workers):
        if on_block is not None:
            on_block(len(ranges))
        if cap == 0 and max_edges > 0 and 2 * (held + len(i)) + n_diag > max_edges:
            # the exact graph will not fit: cap every row from here on, and cap
            # what is held so far as if the cap had been there from the start
            cap = max(1, (int(max_edges) - n_diag) // (2 * max(n, 1)))
            auto_cap = True
            upper = _joined(parts)
            degree += np.bincount(upper[0], minlength=n) + np.bincount(upper[1], minlength=n)
            kept, floor = _cap_rows(kernels, upper, n, cap, mirror=True)
            del upper
            parts, held = [kept], len(kept[0])
            prune_at = max(_PRUNE_EVERY, 2 * held)
        if cap > 0:
            # both directions, so each row sees all its neighbours for the top-m cut
            i, j, v = _both_directions(i, j, v)
            degree += np.bincount(i, minlength=n)
            keep = v >= floor[i]
            i, j, v = i[keep], j[keep], v[keep]
        parts.append((i, j, v))
        held += len(i)
        if cap > 0 and held > prune_at:
            kept, floor = _cap_rows(kernels, _joined(parts), n, cap, mirror=False)
            parts, held = [kept], len(kept[0])
            # prune again only once the held entries have grown well past the kept ones
            prune_at = max(_PRUNE_EVERY, 2 * held)

    capped = 0
    if cap > 0:
        capped = int((degree > cap).sum())
        (rows, cols, vals), _ = _cap_rows(kernels, _joined(parts), n, cap, mirror=False)
        del parts
        kept_graph = sp.csr_array((vals, (rows, cols)), shape=(n, n))
        del rows, cols, vals
        off = kept_graph.maximum(kept_graph.T)  # an edge survives when either end keeps it
    else:
        rows, cols, vals = _joined(parts)
        del parts
        upper_graph = sp.csr_array((vals, (rows, cols)), shape=(n, n))
        del rows, cols, vals
        off = upper_graph + upper_graph.T
    graph = sp.csr_array(off, dtype=np.float32)
    if n_diag:
        graph = sp.csr_array(graph + sp.diags_array(diag, format="csr"), dtype=np.float32)
    graph.eliminate_zeros()
    graph.sort_indices()
    if graph.nnz < np.iinfo(np.int32).max:
        # int32 indices: a third less to store, read and stream per PageRank step
        graph = sp.csr_array(
            (graph.data, graph.indices.astype(np.int32), graph.indptr.astype(np.int32)),
            shape=graph.shape,
        )
    products = int(row_work.sum() - n)
    stats = GraphStats(n, int(graph.nnz), products // 2, len(ranges), capped, cap, auto_cap)
    return graph, stats


def column_sums(graph: sp.csr_array) -> np.ndarray:
    """Out-weight of every node (the column sums of a symmetric graph), float64."""
    return np.asarray(graph.sum(axis=0), dtype=np.float64).ravel()
