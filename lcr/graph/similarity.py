"""Thresholded cosine-similarity graphs over sparse embeddings, in bounded memory.

MixPR's graph is ``E^T E`` with every entry below a threshold removed (appendix
A.2 of the paper). The unthresholded product of a million-token text has about
a billion entries, so it is never formed: rows are taken in blocks, each
block's entries are thresholded as soon as they exist, and only the surviving
entries are kept. Because the matrix is symmetric, each block only computes
entries ``(i, j)`` with ``j > i`` and the result is mirrored. Blocks run on a
thread pool.

The default kernel (``upper_pairs_split`` in ``_kernels.py``, numba) does not
multiply most pairs at all. Nearly all of the full product's multiply-adds
come from the few most frequent words, and their share grows with the text;
a pair's common-word part is bounded by the product of the two rows'
common-word norms (Cauchy-Schwarz), so only pairs that share a rarer word, or
whose norms allow it, are summed (an exact similarity join with a norm
filter, in the spirit of All-Pairs). How many words count as common is chosen
per text from the work each choice leaves. The graph is the same as the full
product's: same edges, values within float rounding (the sums run in another
order). The full-product kernels (``backend="product"``, bitwise scipy's) stay
as the reference the tests compare against; without numba, scipy's product
computes the same graph.

When a text is so large or repetitive that even the thresholded graph would
not fit in memory, ``max_edges`` switches the build to a per-row degree cap.
The guard counts entries as the kernels make them: each block hands its
entries back in pieces of at most ``_TASK_ENTRIES``, so a block of rows that
are all alike (a low-vocabulary text, where nearly every pair is an edge) is
counted and capped piece by piece, never held whole. The cap bounds memory, not
time: the build still computes every entry of the exact graph before the cap
drops most of them, which is quadratic on a text whose chunks are nearly all
alike. So before any block runs, the exact graph's entries are estimated from a
sample of chunk pairs (:func:`estimate_entries`), and a graph of more than
``REFUSE_OVER`` times ``max_edges`` entries, on a text where at least
``ALIKE_SHARE`` of the chunk pairs are edges, is refused (:class:`GraphTooLarge`).

The graph is exact: no approximate neighbour search, no sampling (only the
guard's estimate samples, and it decides whether to build, never what is built).
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

__all__ = ["GraphStats", "GraphTooLarge", "column_sums", "estimate_entries", "similarity_graph"]

# Multiply-adds per block: bounds the transient memory of one block's product
# (about 12 bytes per product entry before thresholding).
DEFAULT_BLOCK_WORK = 20_000_000
# Rows per block of the prefix kernel at most: its accumulators stay in a core's cache.
_MAX_BLOCK_ROWS = 16384
# Float margin of the bounded kernel's tests, far above float32 rounding of a cosine.
_SLACK = 1e-5
# Directed entries held before the per-row top-``max_degree`` pruning runs.
_PRUNE_EVERY = 40_000_000
# A graph estimated at over this many times ``max_edges`` entries, on a text where at
# least ALIKE_SHARE of all chunk pairs are edges, is refused: the capped build would
# compute every entry (a few hundred thousand a second on text of a few words, where
# the cap keeps thousands a chunk) to keep under half, and spend its peak memory (4-6 GB
# at the default max_edges) on a graph mostly dropped. Prose stays far under 1% (0.13%
# at 12k chunks, 0.03% at 46k) and is capped at any size instead.
REFUSE_OVER = 2
ALIKE_SHARE = 0.01
# Chunk pairs sampled to estimate the graph's entries: ~0.4 s, and at the refusal point
# of the default max_edges (300M entries) thousands of sampled pairs are edges up to
# ~20M chunks (over 400M tokens of prose), so the estimate is within a few percent.
PAIR_SAMPLE = 1 << 21
_SAMPLE_BATCH = 1 << 17


class GraphTooLarge(ValueError):
    """The exact graph would hold far more entries than ``max_edges`` allows."""

    def __init__(self, estimate: int, max_edges: int, nodes: int, edge_share: float) -> None:
        self.estimate, self.max_edges = estimate, max_edges
        self.nodes, self.edge_share = nodes, edge_share
        super().__init__(
            f"the similarity graph would hold about {estimate:,} entries, over "
            f"{REFUSE_OVER} x max_edges ({max_edges:,})"
        )


def estimate_entries(
    emb: sp.csr_array, threshold: float, n_diag: int, *, sample: int = PAIR_SAMPLE, seed: int = 0
) -> tuple[int, float]:
    """The exact graph's entries (both directions, plus ``n_diag`` self-loops), and the
    share of chunk pairs that are edges: counted exactly when the rows have at most
    ``sample`` pairs, else estimated from ``sample`` random pairs (a fixed seed, so a
    build decides the same way every time). Cheap whatever the text: no block runs."""
    n = emb.shape[0]
    pairs = n * (n - 1) // 2
    thr = np.float32(threshold)
    if pairs == 0:
        return n_diag, 0.0
    if pairs <= sample:
        prod = sp.csr_array(sp.triu(sp.csr_array(emb @ emb.T), k=1))
        hits = int(np.count_nonzero(prod.data >= thr))
        return 2 * hits + n_diag, hits / pairs
    rng = np.random.default_rng(seed)
    left = rng.integers(0, n, sample)
    right = rng.integers(0, n - 1, sample)
    right += right >= left  # a pair of two different rows, uniform over all such pairs
    hits = 0
    for a in range(0, sample, _SAMPLE_BATCH):
        b = a + _SAMPLE_BATCH
        cos = np.asarray(emb[left[a:b]].multiply(emb[right[a:b]]).sum(axis=1)).ravel()
        hits += int(np.count_nonzero(cos >= thr))
    share = hits / sample
    return round(share * n * (n - 1)) + n_diag, share


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
    bounded_work: int = 0  # the bounded kernel's multiply-adds (0: the full product ran)
    verified: int = 0  # pairs whose common part had to be summed after the bound
    common_terms: int = 0  # the split kernel's common words (the most frequent terms)
    estimated_entries: int = 0  # the exact graph's entries estimated first (0: not needed)


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


def _row_work(emb: sp.csr_array, df: np.ndarray) -> np.ndarray:
    """Multiply-adds each row causes against all rows (its postings' lengths), plus one."""
    n = emb.shape[0]
    if not emb.nnz:
        return np.ones(n, np.int64)
    work = np.add.reduceat(df[emb.indices], np.minimum(emb.indptr[:-1], emb.nnz - 1))
    return np.where(np.diff(emb.indptr) > 0, work, 0).astype(np.int64) + 1


def _blocks(work: np.ndarray, budget: int, max_rows: int = 0) -> list[tuple[int, int]]:
    """Consecutive row ranges whose summed ``work`` stays near ``budget``, each at most
    ``max_rows`` long (0: no limit)."""
    cum = np.cumsum(work, dtype=np.int64)
    bounds = [0]
    n = len(work)
    while bounds[-1] < n:
        start = bounds[-1]
        base = cum[start - 1] if start else 0
        end = int(np.searchsorted(cum, base + budget, side="right"))
        if max_rows > 0:
            end = min(end, start + max_rows)
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
# One piece of a block's work: its entries, and the task that goes on (None: done).
Task = Callable[[], tuple[Entries, "Task | None"]]
# A compiled kernel's sweep from row j: (entries written to the buffers, next j).
Step = Callable[[int, np.ndarray, np.ndarray, np.ndarray], tuple[int, int]]
# Whether a block's compiled product scans its whole accumulator per row: cheaper
# than tracking the entries hit once a row meets more than ~1/32 of the block.
_DENSE_SCAN_RATIO = 32
# Entries a compiled block writes before handing them back (at least 4 rows' width).
_BUFFER_ENTRIES = 1 << 20
# Entries one piece of a block hands back at most (plus one buffer): ~50 MB, so the
# window of pieces in flight stays a few hundred MB however alike the rows are.
_TASK_ENTRIES = 1 << 22


def _scipy_block(emb: sp.csr_array, start: int, end: int, threshold: float) -> Task:
    """Entries ``(i, j, s)`` of block rows ``i``, with ``j > i`` and ``s >= threshold``,
    by scipy's product. The operands are made here, on the calling thread
    (scipy may sort shared arrays in place); the returned call runs on a worker."""
    left, right = _row_view(emb, start), sp.csr_array(emb[start:end].T)

    def run() -> tuple[Entries, Task | None]:
        # the product holds at most the block's multiply-adds (``block_work``)
        prod = sp.csr_array(left @ right)  # rows j >= start, cols i - start
        # Most products fall under the threshold: find the kept positions first and
        # look up only their rows, instead of expanding a row id for every product.
        kept = np.flatnonzero(prod.data >= threshold)
        rows_j = np.searchsorted(prod.indptr, kept, side="right").astype(np.int64) - 1 + start
        cols_i = prod.indices[kept].astype(np.int64) + start
        vals = prod.data[kept]
        upper = rows_j > cols_i
        entries = (
            cols_i[upper].astype(np.int32),
            rows_j[upper].astype(np.int32),
            vals[upper].astype(np.float32),
        )
        return entries, None

    return run


def _compiled_block(
    kernels: Any, emb: sp.csr_array, start: int, end: int, threshold: float, dense: bool
) -> Task:
    """The same entries as :func:`_scipy_block`, by a compiled kernel, in pieces."""
    bt = sp.csr_array(emb[start:end].T)
    bt.sort_indices()
    kernel = kernels.upper_pairs_dense if dense else kernels.upper_pairs_sparse
    thr = np.float32(threshold)

    def step(j: int, out_i: np.ndarray, out_j: np.ndarray, out_v: np.ndarray) -> tuple[int, int]:
        k, j = kernel(
            emb.indptr, emb.indices, emb.data, bt.indptr, bt.indices, bt.data,
            start, end, j, thr, out_i, out_j, out_v,
        )  # fmt: skip
        return int(k), int(j)

    return _pieces(step, start + 1, emb.shape[0], end - start)


def _pieces(step: Step, first: int, n: int, width: int) -> Task:
    """A block's run as bounded pieces: each call of the returned task sweeps later
    rows from ``first`` with ``step`` until about ``_TASK_ENTRIES`` entries are out,
    and hands back those entries and the task that goes on (None when the sweep is
    done). A block of near-identical rows then never holds billions of entries at
    once: the caller counts each piece against ``max_edges`` before taking the next.
    """
    capacity = max(_BUFFER_ENTRIES, 4 * width)

    def run(j: int) -> tuple[Entries, Task | None]:
        out_i = np.empty(capacity, np.int32)
        out_j = np.empty(capacity, np.int32)
        out_v = np.empty(capacity, np.float32)
        parts: list[Entries] = []
        out = 0
        # the kernel stops when its buffers might overflow; empty them and go on
        while j < n and out < _TASK_ENTRIES:
            k, j = step(j, out_i, out_j, out_v)
            parts.append((out_i[:k].copy(), out_j[:k].copy(), out_v[:k].copy()))
            out += k
        rest = None if j >= n else (lambda: run(j))
        return (parts[0] if len(parts) == 1 else _joined(parts)), rest

    return lambda: run(first)


@dataclass
class _Split:
    """Every row cut into its rare-word and common-word parts (see ``upper_pairs_split``)."""

    rare: sp.csr_array  # the rare-word entries, original term ids
    common: sp.csr_array  # the common-word entries, term ids 0..K-1
    norm: np.ndarray  # |common part| of each row (float32)


# Common-word counts tried, and what one common-only pair costs against one rare product.
_COMMON_CHOICES = (0, 8, 16, 32, 64, 128, 256)
_SCAN_RATIO = 1  # scan the accumulator only when a row probes more entries than it holds
_PAIR_COST = 8  # measured at 1M tokens: K=32 beat 16 and 64 by CPU time, as this predicts


def _choose_common(emb: sp.csr_array, df: np.ndarray, order: np.ndarray, threshold: float) -> int:
    """The number K of most frequent terms to treat as common words, by the work each K
    leaves: the rare-word products (sum of df^2 over the other terms) plus the pairs
    whose common-part norms multiply to the threshold (summed in full)."""
    n = emb.shape[0]
    rank = np.empty(len(df), np.int64)
    rank[order] = np.arange(len(df))
    entry_rank = rank[emb.indices]
    row_of = np.repeat(np.arange(n), np.diff(emb.indptr))
    sq = emb.data.astype(np.float64) ** 2
    # upper-triangle rare-word products from rank K on (half the sum of df^2)
    rare_left = np.cumsum((df[order].astype(np.float64) ** 2)[::-1])[::-1] / 2
    best, best_cost = 0, float(rare_left[0]) if len(rare_left) else 0.0
    for k in _COMMON_CHOICES[1:]:
        if k >= len(df):
            break
        c = entry_rank < k
        norm = np.sqrt(np.bincount(row_of[c], weights=sq[c], minlength=n))
        srt = np.sort(norm)
        need = np.where(norm > 0, threshold / np.maximum(norm, 1e-12), np.inf)
        pairs = float((n - np.searchsorted(srt, need, side="left")).sum()) / 2
        cost = float(rare_left[k]) + _PAIR_COST * pairs
        if cost < best_cost:
            best, best_cost = k, cost
    return best


def _split(emb: sp.csr_array, df: np.ndarray, threshold: float, common: int | None) -> _Split:
    """Cut rows at the ``common`` most frequent terms (None: chosen by the work left)."""
    n = emb.shape[0]
    order = np.argsort(-df, kind="stable")
    k = _choose_common(emb, df, order, threshold) if common is None else int(common)
    k = min(k, int(np.count_nonzero(df)))
    common_ids = np.full(emb.shape[1], -1, np.int32)
    common_ids[order[:k]] = np.arange(k, dtype=np.int32)
    remapped = common_ids[emb.indices]
    is_common = remapped >= 0
    row_of = np.repeat(np.arange(n), np.diff(emb.indptr))

    def part(mask: np.ndarray, ids: np.ndarray, width: int) -> sp.csr_array:
        ptr = np.zeros(n + 1, np.int64)
        np.cumsum(np.bincount(row_of[mask], minlength=n), out=ptr[1:])
        m = sp.csr_array((emb.data[mask], ids[mask], ptr), shape=(n, width), copy=False)
        m.has_sorted_indices = True  # rare ids stay sorted; kernels read common ids in any order
        return m

    rare = part(~is_common, emb.indices, emb.shape[1])
    com = part(is_common, remapped, k)
    sq = np.bincount(row_of[is_common], weights=emb.data[is_common].astype(np.float64) ** 2,
                     minlength=n)  # fmt: skip
    return _Split(rare, com, np.sqrt(sq).astype(np.float32))


def _split_block(
    kernels: Any, split: _Split, start: int, end: int, threshold: float, verified: list[int]
) -> Task:
    """The same entries as :func:`_compiled_block`, by the split kernel, in pieces."""
    bt = sp.csr_array(split.rare[start:end].T)
    bt.sort_indices()
    norm = split.norm[start:end]
    # rows whose common part may reach the threshold with some row's (norms are <= 1)
    cands = np.flatnonzero(norm * np.float32(1.001) + np.float32(_SLACK) >= threshold)
    high = cands[np.argsort(-norm[cands], kind="stable")].astype(np.int32)
    thr = np.float32(threshold)
    r, c = split.rare, split.common

    def step(j: int, out_i: np.ndarray, out_j: np.ndarray, out_v: np.ndarray) -> tuple[int, int]:
        k, j, checked = kernels.upper_pairs_split(
            r.indptr, r.indices, r.data, c.indptr, c.indices, c.data, split.norm,
            bt.indptr, bt.indices, bt.data, high, c.shape[1],
            start, end, j, thr, np.float32(_SLACK), _SCAN_RATIO, out_i, out_j, out_v,
        )  # fmt: skip
        verified.append(checked)  # list.append is atomic: safe from worker threads
        return int(k), int(j)

    return _pieces(step, start + 1, r.shape[0], end - start)


def _top_per_row(
    rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, m: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Keep each row's ``m`` largest entries (ties: lower column first); NumPy."""
    order = np.lexsort((cols, -vals, rows))
    rows, cols, vals = rows[order], cols[order], vals[order]
    first = np.searchsorted(rows, rows, side="left")
    keep = (np.arange(len(rows)) - first) < m
    return rows[keep], cols[keep], vals[keep]


Floor = tuple[np.ndarray, np.ndarray]  # each row's m-th best value and its column


def _cap_rows(
    kernels: Any, entries: Entries, n: int, m: int, mirror: bool
) -> tuple[Entries, Floor]:
    """Each row's ``m`` best entries, and each row's floor: its m-th best value and
    that entry's column when it has m (else 0 and the largest int32). ``mirror``:
    the entries are an upper triangle standing for the symmetric matrix. The
    compiled kernel needs O(n + N) memory; the NumPy fallback sorts everything
    (several times N)."""
    if kernels is not None:
        r, c, v, floor, floor_col = kernels.top_per_row(*entries, n, m, mirror)
        return (r, c, v), (floor, floor_col)
    r, c, v = _top_per_row(*(_both_directions(*entries) if mirror else entries), m)
    floor = np.zeros(n, np.float32)
    floor_col = np.full(n, np.iinfo(np.int32).max, np.int32)
    full = np.flatnonzero(np.bincount(r, minlength=n) == m)
    last = np.searchsorted(r, full, side="right") - 1  # sorted best first
    floor[full], floor_col[full] = v[last], c[last]
    return (r, c, v), (floor, floor_col)


def _may_enter(i: np.ndarray, j: np.ndarray, v: np.ndarray, floor: Floor) -> np.ndarray:
    """Which entries ``(i, j, v)`` can still make row i's top m: over its floor, or
    tied with it at a lower column (ties go to the lower column). Exact, and on
    text of a few words it drops the many equal similarities as they arrive."""
    value, col = floor[0][i], floor[1][i]
    keep: np.ndarray = (v > value) | ((v == value) & (j < col))
    return keep


def _run_blocks(blocks: Iterator[Task], workers: int) -> Iterator[tuple[Entries, bool]]:
    """Run prepared blocks on ``workers`` threads (the kernels and scipy's product
    release the GIL): each piece of entries as it is ready, and whether it ended its
    block. A bounded window of pieces in flight keeps memory bounded too."""
    if workers <= 1:
        for task in blocks:
            rest: Task | None = task
            while rest is not None:
                entries, rest = rest()
                yield entries, rest is None
        return
    with ThreadPoolExecutor(max_workers=workers) as pool:
        window = 2 * workers
        pending = deque(pool.submit(task) for task in itertools.islice(blocks, window))
        while pending:
            entries, rest = pending.popleft().result()
            for task in [rest] if rest is not None else itertools.islice(blocks, 1):
                pending.append(pool.submit(task))
            yield entries, rest is None


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
    common_terms: int | None = None,
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
    as asking for that cap from the start (``GraphStats.max_degree`` says which);
    an exact graph estimated at over ``REFUSE_OVER * max_edges`` entries, with at
    least ``ALIKE_SHARE`` of the row pairs edges, raises :class:`GraphTooLarge`
    before any block runs, whatever ``max_degree``.
    ``backend``: "auto" (the split kernel when numba is installed, else scipy),
    "numba" (the split kernel), "product" (the compiled full product, bitwise
    scipy's; the reference for tests) or "scipy"; all give the same edges.
    ``common_terms``: how many of the most frequent terms the split kernel
    treats as common words (None: chosen from the text).
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
    diag = np.asarray(emb.multiply(emb).sum(axis=1)).ravel().astype(np.float32)
    diag = np.where(diag >= threshold, diag, np.float32(0)) if self_loops else np.zeros_like(diag)
    n_diag = int(np.count_nonzero(diag))
    estimated = 0
    if max_edges > 0 and n * n > REFUSE_OVER * max_edges:  # else it cannot be over
        estimated, share = estimate_entries(emb, threshold, n_diag)
        if estimated > REFUSE_OVER * max_edges and share >= ALIKE_SHARE:
            raise GraphTooLarge(estimated, int(max_edges), n, share)
    plan = _BlockPlan.of(emb, threshold, backend, workers, block_work, common_terms)
    verified: list[int] = []
    kept = _KeptEntries(n, n_diag, int(max_degree), int(max_edges), plan.kernels)
    for (i, j, v), block_done in _run_blocks(plan.tasks(emb, threshold, verified), workers):
        if on_block is not None and block_done:
            on_block(len(plan.ranges))
        kept.add(i, j, v)

    # the kernels are done: their copies of the rows go before the graph is assembled
    common_terms = plan.split.common.shape[1] if plan.split is not None else 0
    plan.split = None
    cap = kept.cap
    capped = int((kept.degree > cap).sum()) if cap > 0 else 0
    graph = _assemble(kept.parts, plan.kernels, n, cap, diag)
    products = int(plan.row_work.sum() - n)
    stats = GraphStats(n, int(graph.nnz), products // 2, len(plan.ranges), capped, cap, kept.auto)
    stats.estimated_entries = estimated
    if verified:
        stats.bounded_work = int(plan.work.sum() - n) // 2
        stats.verified = sum(verified)
        stats.common_terms = common_terms
    return graph, stats


@dataclass
class _BlockPlan:
    """Which kernel computes the graph, and the row blocks it runs in."""

    kernels: Any  # the compiled kernels, or None: scipy's product
    split: _Split | None  # the rows cut at their common words (the split kernel), or None
    row_work: np.ndarray  # multiply-adds each row causes against all rows (an upper bound)
    work: np.ndarray  # the chosen kernel's work per row
    ranges: list[tuple[int, int]]

    @classmethod
    def of(
        cls,
        emb: sp.csr_array,
        threshold: float,
        backend: str,
        workers: int,
        block_work: int,
        common_terms: int | None,
    ) -> _BlockPlan:
        df = np.bincount(emb.indices, minlength=emb.shape[1]).astype(np.int64)
        row_work = _row_work(emb, df)
        kernels = None
        if backend in ("auto", "numba", "product"):
            kernels = _compiled_kernels()
            if kernels is None and backend != "auto":
                raise ValueError(f"backend {backend!r} needs numba installed")
        elif backend != "scipy":
            raise ValueError(f"unknown backend {backend!r} (auto, numba, product, scipy)")
        split = None
        block_rows = 0
        budget = max(int(block_work), 1)
        work = row_work
        if kernels is not None and backend != "product":
            split = _split(emb, df, threshold, common_terms)
            # the kernel's work: the rare-word products of each block row
            work = _row_work(split.rare, df)
            # rows one block indexes: its accumulators stay in cache, both cores get blocks
            block_rows = _MAX_BLOCK_ROWS
            if block_work == DEFAULT_BLOCK_WORK:  # each block scans every later row: fewer
                budget = max(budget, int(work.sum()) // (4 * max(workers, 1)))
        ranges = _blocks(work, budget, block_rows) if emb.shape[0] else []
        return cls(kernels, split, row_work, work, ranges)

    def tasks(self, emb: sp.csr_array, threshold: float, verified: list[int]) -> Iterator[Task]:
        """Each block's task, prepared on the calling thread as it is needed."""
        n = emb.shape[0]
        for a, b in self.ranges:
            if self.kernels is None:
                yield _scipy_block(emb, a, b, threshold)
            elif self.split is not None:
                yield _split_block(self.kernels, self.split, a, b, threshold, verified)
            else:
                dense = (n - a) * (b - a) <= _DENSE_SCAN_RATIO * int(self.row_work[a:b].sum())
                yield _compiled_block(self.kernels, emb, a, b, threshold, dense)


class _KeptEntries:
    """The graph's entries as the blocks hand them over, held within ``max_edges``.

    Under a cap (``max_degree``, or the one ``max_edges`` forces once the exact
    graph will not fit: the held entries are then cut as if the cap had been there
    from the start), every row's neighbour count before pruning is kept (for the
    stats), and its m-th best entry so far: an entry under its row's floor (or
    tied with it at a higher column) can never make that row's top m, so it is
    dropped as it arrives and pruning stays rare, even where thousands of chunks
    are alike.
    """

    def __init__(self, n: int, n_diag: int, max_degree: int, max_edges: int, kernels: Any):
        self.n, self.n_diag, self.max_edges, self.kernels = n, n_diag, max_edges, kernels
        self.cap = max(max_degree, 0)
        self.auto = False
        self.parts: list[Entries] = []
        self.held = 0
        self.degree = np.zeros(n if max_degree > 0 or max_edges > 0 else 0, np.int64)
        self.floor: Floor = (
            np.zeros(len(self.degree), np.float32),
            np.full(len(self.degree), np.iinfo(np.int32).max, np.int32),
        )
        # pruning (under a cap) keeps the held entries near the guard's own size
        every = min(_PRUNE_EVERY, max(max_edges, _TASK_ENTRIES)) if max_edges else _PRUNE_EVERY
        self.prune_every = self.prune_at = every

    def add(self, i: np.ndarray, j: np.ndarray, v: np.ndarray) -> None:
        n = self.n
        over = 2 * (self.held + len(i)) + self.n_diag > self.max_edges
        if self.cap == 0 and self.max_edges > 0 and over:
            self._cap_from_now()
        if self.cap > 0:
            # both directions, so each row sees all its neighbours for the top-m cut
            i, j, v = _both_directions(i, j, v)
            self.degree += np.bincount(i, minlength=n)
            keep = _may_enter(i, j, v, self.floor)
            i, j, v = i[keep], j[keep], v[keep]
        self.parts.append((i, j, v))
        self.held += len(i)
        if self.cap > 0 and self.held > self.prune_at:
            del i, j, v
            held_entries = _joined(self.parts)
            self.parts.clear()
            kept, self.floor = _cap_rows(self.kernels, held_entries, n, self.cap, mirror=False)
            del held_entries
            self._hold(kept)

    def _cap_from_now(self) -> None:
        """The exact graph will not fit: cap every row from here on, and cap what is
        held so far as if the cap had been there from the start."""
        n = self.n
        self.cap = max(1, (self.max_edges - self.n_diag) // (2 * max(n, 1)))
        self.auto = True
        upper = _joined(self.parts)
        self.parts.clear()  # the joined copy alone is held while it is cut
        self.degree += np.bincount(upper[0], minlength=n) + np.bincount(upper[1], minlength=n)
        kept, self.floor = _cap_rows(self.kernels, upper, n, self.cap, mirror=True)
        del upper
        self._hold(kept)

    def _hold(self, kept: Entries) -> None:
        self.parts, self.held = [kept], len(kept[0])
        # prune again only once the held entries have grown well past the kept ones
        self.prune_at = max(self.prune_every, 2 * self.held)


def _assemble(
    parts: list[Entries], kernels: Any, n: int, cap: int, diag: np.ndarray
) -> sp.csr_array:
    """The symmetric float32 graph from the held upper-triangle entries (cut to each
    row's ``cap`` best when capped, an edge kept when either end keeps it), with the
    diagonal; int32 indices when they fit. Empties ``parts`` as it goes."""
    if cap > 0:
        held_entries = _joined(parts)
        parts.clear()
        (rows, cols, vals), _ = _cap_rows(kernels, held_entries, n, cap, mirror=False)
        del held_entries
        kept_graph = sp.csr_array((vals, (rows, cols)), shape=(n, n))
        del rows, cols, vals
        off = kept_graph.maximum(kept_graph.T)  # an edge survives when either end keeps it
    else:
        rows, cols, vals = _joined(parts)
        parts.clear()
        upper_graph = sp.csr_array((vals, (rows, cols)), shape=(n, n))
        del rows, cols, vals
        off = upper_graph + upper_graph.T
    graph = sp.csr_array(off, dtype=np.float32)
    if np.count_nonzero(diag):
        graph = sp.csr_array(graph + sp.diags_array(diag, format="csr"), dtype=np.float32)
    graph.eliminate_zeros()
    graph.sort_indices()
    if graph.nnz < np.iinfo(np.int32).max:
        # int32 indices: a third less to store, read and stream per PageRank step
        graph = sp.csr_array(
            (graph.data, graph.indices.astype(np.int32), graph.indptr.astype(np.int32)),
            shape=graph.shape,
        )
    return graph


def column_sums(graph: sp.csr_array) -> np.ndarray:
    """Out-weight of every node (the column sums of a symmetric graph), float64."""
    return np.asarray(graph.sum(axis=0), dtype=np.float64).ravel()
