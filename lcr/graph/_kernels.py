"""Compiled kernels for the thresholded similarity product (numba).

``upper_pairs_split`` is the default: it leaves most common-word products
undone by a norm bound (see its docstring and ``similarity.py``). The
full-product kernels below it (``upper_pairs_dense``, ``upper_pairs_sparse``)
run the same row-by-row (Gustavson) product as scipy, summing in scipy's order,
but test each finished row against the threshold at once and write only the
survivors; they are kept as the bitwise reference the tests compare the split
kernel against (``backend="product"``).

Imported lazily: ``similarity.py`` falls back to scipy when numba is missing.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

# Both kernels compute, for rows ``j`` in ``[j0, n)`` and block rows
# ``i`` in ``[a, b)`` with ``i < j``, the cosine ``emb[i] . emb[j]``, and write
# ``(i, j, s)`` for ``s >= threshold`` into the caller's buffers. ``bt_*`` is the
# block transposed (terms x block rows, CSR, sorted). They return
# ``(written, next_j)`` and stop early, before row ``next_j``, when the buffers
# might not hold another row; the caller empties them and calls again.


@numba.njit(nogil=True, cache=True)
def upper_pairs_dense(
    indptr: Any, indices: Any, data: Any,
    bt_ptr: Any, bt_rows: Any, bt_vals: Any,
    a: int, b: int, j0: int, threshold: float,
    out_i: Any, out_j: Any, out_v: Any,
) -> tuple[int, int]:  # fmt: skip
    """For blocks whose rows meet most others (common words): scan the whole
    accumulator per row, which is cheaper than tracking which entries were hit."""
    n = len(indptr) - 1
    w = b - a
    cap = len(out_i)
    acc = np.zeros(w, np.float32)
    k = 0
    for j in range(j0, n):
        if k + w > cap:
            return k, j
        for q in range(indptr[j], indptr[j + 1]):
            t = indices[q]
            x = data[q]
            for r in range(bt_ptr[t], bt_ptr[t + 1]):
                acc[bt_rows[r]] += x * bt_vals[r]
        upto = min(j - a, w)
        for il in range(upto):
            v = acc[il]
            if v >= threshold:
                out_i[k] = a + il
                out_j[k] = j
                out_v[k] = v
                k += 1
        for il in range(w):
            acc[il] = 0.0
    return k, n


@numba.njit(nogil=True, cache=True)
def _gather_rare(
    lo: int, hi: int, r_idx: Any, r_val: Any, bt_ptr: Any, bt_rows: Any, bt_vals: Any,
    scan: bool, acc: Any, hit: Any, touched: Any,
) -> int:  # fmt: skip
    """Row j's rare-word products with the block's rows, added into ``acc``; unless
    ``scan`` (the caller then scans all of ``acc``), the rows met are listed in
    ``touched`` and marked in ``hit``. Returns how many were listed."""
    m = 0
    for q in range(lo, hi):
        t = r_idx[q]
        x = r_val[q]
        if scan:
            for r in range(bt_ptr[t], bt_ptr[t + 1]):
                acc[bt_rows[r]] += x * bt_vals[r]
        else:
            for r in range(bt_ptr[t], bt_ptr[t + 1]):
                il = bt_rows[r]
                acc[il] += x * bt_vals[r]
                if not hit[il]:
                    hit[il] = True
                    touched[m] = il
                    m += 1
    return m


@numba.njit(nogil=True, cache=True)
def upper_pairs_sparse(
    indptr: Any, indices: Any, data: Any,
    bt_ptr: Any, bt_rows: Any, bt_vals: Any,
    a: int, b: int, j0: int, threshold: float,
    out_i: Any, out_j: Any, out_v: Any,
) -> tuple[int, int]:  # fmt: skip
    """For blocks whose rows meet few others (rare words, random strings): visit
    only the accumulator entries a row touched."""
    n = len(indptr) - 1
    w = b - a
    cap = len(out_i)
    acc = np.zeros(w, np.float32)
    hit = np.zeros(w, np.bool_)
    touched = np.empty(w, np.int64)
    k = 0
    for j in range(j0, n):
        if k + w > cap:
            return k, j
        lo, hi = indptr[j], indptr[j + 1]
        m = _gather_rare(lo, hi, indices, data, bt_ptr, bt_rows, bt_vals, False, acc, hit, touched)
        upto = j - a
        for u in range(m):
            il = touched[u]
            v = acc[il]
            if il < upto and v >= threshold:
                out_i[k] = a + il
                out_j[k] = j
                out_v[k] = v
                k += 1
            acc[il] = 0.0
            hit[il] = False
    return k, n


@numba.njit(nogil=True, cache=True)
def top_per_row(
    rows: Any, cols: Any, vals: Any, n: int, m: int, mirror: bool
) -> tuple[Any, Any, Any, Any, Any]:
    """Each row's ``m`` largest entries (ties: lower column first), in O(n + N) memory.

    With ``mirror`` every entry ``(i, j, v)`` also counts as ``(j, i, v)``, so
    an upper triangle is capped as the symmetric matrix it stands for, without
    first writing the mirrored copy. Entries are grouped by row with a counting
    sort, and only rows over ``m`` are sorted. Returns the kept
    ``(rows, cols, vals)`` grouped by row, every row's floor: its m-th best
    value when it has at least ``m`` entries, else 0, and that entry's column
    (else the largest int32): an entry ``(v, c)`` can only enter a full row's top
    ``m`` when ``v > floor`` or ``v == floor and c < floor_col``.
    """
    counts = np.zeros(n + 1, np.int64)
    for k in range(len(rows)):
        counts[rows[k] + 1] += 1
        if mirror:
            counts[cols[k] + 1] += 1
    for r in range(n):
        counts[r + 1] += counts[r]
    total = counts[n]
    g_cols = np.empty(total, np.int32)
    g_vals = np.empty(total, np.float32)
    fill = counts[:n].copy()
    for k in range(len(rows)):
        r = rows[k]
        g_cols[fill[r]] = cols[k]
        g_vals[fill[r]] = vals[k]
        fill[r] += 1
        if mirror:
            c = cols[k]
            g_cols[fill[c]] = r
            g_vals[fill[c]] = vals[k]
            fill[c] += 1
    kept = 0
    for r in range(n):
        kept += min(counts[r + 1] - counts[r], m)
    out_r = np.empty(kept, np.int32)
    out_c = np.empty(kept, np.int32)
    out_v = np.empty(kept, np.float32)
    floor = np.zeros(n, np.float32)
    floor_col = np.full(n, 2147483647, np.int32)
    g_bits = g_vals.view(np.uint32)
    top = np.uint64(0xFFFFFFFF)
    k = 0
    for r in range(n):
        lo = counts[r]
        size = counts[r + 1] - lo
        if size <= m:
            for q in range(lo, lo + size):
                out_r[k] = r
                out_c[k] = g_cols[q]
                out_v[k] = g_vals[q]
                k += 1
            if size == m and m > 0:
                # the m-th best: the lowest value, the highest column among its ties
                low = g_vals[lo : lo + size].min()
                floor[r] = low
                last = -1
                for q in range(lo, lo + size):
                    if g_vals[q] == low and g_cols[q] > last:
                        last = g_cols[q]
                floor_col[r] = last
            continue
        # by value descending, then column ascending: positive float32 bits
        # sort like the values, so one uint64 key holds both
        keys = np.empty(size, np.uint64)
        for q in range(size):
            keys[q] = ((top - np.uint64(g_bits[lo + q])) << np.uint64(32)) | np.uint64(
                g_cols[lo + q]
            )
        order = np.argsort(keys)
        for q in range(m):
            p = lo + order[q]
            out_r[k] = r
            out_c[k] = g_cols[p]
            out_v[k] = g_vals[p]
            k += 1
        floor[r] = out_v[k - 1]
        floor_col[r] = out_c[k - 1]
    return out_r, out_c, out_v, floor, floor_col


@numba.njit(nogil=True, cache=True)
def _bound_candidates(
    scan: bool, upto: int, m: int, acc: Any, hit: Any, touched: Any, cn: Any, cnj: float,
    slack: float, threshold: float, cand: Any,
) -> int:  # fmt: skip
    """The block rows before ``upto`` met by a rare word whose rare product plus the
    bound on their common part can still reach the threshold, into ``cand``; clears
    ``hit`` for the rows listed. Returns how many."""
    count = 0
    if scan:
        for il in range(upto):
            v = acc[il]
            cand[count] = il
            count += (v > 0.0) & (v + cn[il] * cnj + slack >= threshold)
    else:
        for u in range(m):
            il = touched[u]
            hit[il] = False
            v = acc[il]
            if il < upto and v + cn[il] * cnj + slack >= threshold:
                cand[count] = il
                count += 1
    return count


@numba.njit(nogil=True, cache=True)
def upper_pairs_split(
    r_ptr: Any, r_idx: Any, r_val: Any,
    c_ptr: Any, c_idx: Any, c_val: Any, c_norm: Any,
    bt_ptr: Any, bt_rows: Any, bt_vals: Any, high: Any, n_common: int,
    a: int, b: int, j0: int, threshold: float, slack: float, scan_ratio: int,
    out_i: Any, out_j: Any, out_v: Any,
) -> tuple[int, int, int]:  # fmt: skip
    """The entries of :func:`upper_pairs_sparse`, without multiplying most common-word pairs.

    Each row is cut into its rare-word part ``r`` and its common-word part ``c``
    (the few most frequent terms, renumbered ``0..K-1``), so a cosine is
    ``r_i.r_j + c_i.c_j`` and, by Cauchy-Schwarz, ``c_i.c_j <= |c_i| |c_j|``
    (``c_norm``). A pair whose norm product reaches the threshold (rows made
    mostly of common words) is summed in full: ``high`` lists the block's rows
    by ``|c|``, largest first, so those pairs are a prefix of it. Any other pair
    can only reach the threshold through a shared rare word, so it is found by
    the rare-word product (``bt``: the block's rare parts, by term), and its
    common part is summed only when ``r_i.r_j + |c_i| |c_j|`` can still reach
    the threshold. ``slack`` covers float rounding in both tests. A row that
    meets many block rows scans the accumulator instead of tracking its hits
    (as :func:`upper_pairs_dense` does). Returns ``(written, next_j, verified)``:
    ``verified`` counts the common parts summed after the bound.
    """
    n = len(r_ptr) - 1
    w = b - a
    cap = len(out_i)
    acc = np.zeros(w, np.float32)
    hit = np.zeros(w, np.bool_)
    touched = np.empty(w, np.int32)
    cand = np.empty(w, np.int32)
    cn = np.empty(w, np.float32)
    for il in range(w):
        cn[il] = c_norm[a + il]
    dense = np.zeros(n_common, np.float32)  # row j's common part, by term
    k = 0
    verified = 0
    for j in range(j0, n):
        if k + w > cap:
            return k, j, verified
        lo, hi = r_ptr[j], r_ptr[j + 1]
        probes = 0
        for q in range(lo, hi):
            probes += bt_ptr[r_idx[q] + 1] - bt_ptr[r_idx[q]]
        for q in range(c_ptr[j], c_ptr[j + 1]):
            dense[c_idx[q]] = c_val[q]
        upto = min(j - a, w)
        cnj = c_norm[j]
        scan = probes * scan_ratio > upto
        m = _gather_rare(lo, hi, r_idx, r_val, bt_ptr, bt_rows, bt_vals, scan, acc, hit, touched)
        # pairs whose common words alone may reach the threshold: summed in full
        for u in range(len(high)):
            il = high[u]
            if cn[il] * cnj + slack < threshold:
                break
            if il >= upto:
                continue
            i = a + il
            v = acc[il]
            for q in range(c_ptr[i], c_ptr[i + 1]):
                v += c_val[q] * dense[c_idx[q]]
            if v >= threshold:
                out_i[k] = i
                out_j[k] = j
                out_v[k] = v
                k += 1
        # the others: met by a rare word; the common part only where the bound allows
        count = _bound_candidates(scan, upto, m, acc, hit, touched, cn, cnj, slack, threshold, cand)
        for u in range(count):
            il = cand[u]
            if cn[il] * cnj + slack >= threshold:
                continue  # done above
            i = a + il
            v = acc[il]
            if c_ptr[i + 1] > c_ptr[i] and cnj > 0.0:
                verified += 1
                for q in range(c_ptr[i], c_ptr[i + 1]):
                    v += c_val[q] * dense[c_idx[q]]
            if v >= threshold:
                out_i[k] = i
                out_j[k] = j
                out_v[k] = v
                k += 1
        if scan:
            acc[:] = 0.0
        else:
            for u in range(m):
                acc[touched[u]] = 0.0
        for q in range(c_ptr[j], c_ptr[j + 1]):
            dense[c_idx[q]] = 0.0
    return k, n, verified
