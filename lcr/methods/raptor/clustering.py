"""RAPTOR's clustering of one tree layer: UMAP + Gaussian mixtures, soft membership.

Pure functions over arrays (no I/O, no models), following section 3 of the paper;
its text gives none of the numbers below, which are the reference code's:

- embeddings are reduced with UMAP (cosine) to ``reduction_dim`` dimensions, first globally
  with ``n_neighbors = sqrt(n - 1)`` (lcr caps it at 50: docs/methods/raptor.md), then
  locally within each global cluster with ``n_neighbors = 10``;
- the number of mixture components is chosen by BIC among 1..49, and fewer than the
  layer's nodes (the reference code's ``arange(1, min(50, n))``: never one per node);
- membership is soft: a node joins every cluster whose posterior exceeds the
  threshold (0.1), and at least its most probable one (lcr's: the reference code
  drops such an orphan), so no text falls out of the upper layers;
- a cluster whose text exceeds the summariser's budget is clustered again; when
  that makes no progress (or nodes are too few for UMAP) it is cut into
  consecutive groups that fit, so the recursion always terminates.

Everything is seeded, so the same embeddings give the same clusters. The numbers
that are settings are read from the build's settings (:class:`ClusterSettings`
names them), which declare them once.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

Cluster = tuple[int, ...]
"""Indices of the layer's nodes that one summary covers, ascending."""


class ClusterSettings(Protocol):
    """The build settings one layer's clustering reads, by their names in
    :class:`~lcr.methods.raptor.method.RaptorBuild`, which declares them (defaults,
    ranges, sources) and is passed as is."""

    @property
    def reduction_dim(self) -> int: ...
    @property
    def threshold(self) -> float: ...
    @property
    def max_clusters(self) -> int: ...
    @property
    def cluster_max_tokens(self) -> int: ...
    @property
    def seed(self) -> int: ...


# lcr's constants, not settings: the mixtures' covariance regularisation (the
# reference code's is 1e-6; docs/methods/raptor.md, bench/raptor_clustering.py) and
# how often an oversized cluster is clustered again before it is cut into
# consecutive groups.
REG_COVAR = 1e-5
MAX_DEPTH = 4
# UMAP's n_neighbors inside a global cluster: the reference code's local_clustering value
LOCAL_NEIGHBORS = 10
# The cap on the global UMAP's n_neighbors = sqrt(n - 1): at 24,007 leaves it made UMAP
# 1.2-2.3x faster and ~240 MB smaller at its peak, and binds only above 2,501 nodes a
# layer: docs/methods/raptor.md#global_neighbors_cap-on-a-large-layer
GLOBAL_NEIGHBORS_CAP = 50


@dataclass
class ClusterReport:
    """What a layer's clustering did, for the build's stats."""

    global_clusters: int = 0
    global_neighbors: int = 0
    local_fits: int = 0
    reclustered: int = 0
    split_sequentially: int = 0
    orphans_attached: int = 0
    mixture_retries: int = 0  # fits that collapsed and were retried with 10x reg_covar
    mixture_failures: int = 0  # numbers of components given up after every retry


def reduce_dims(emb: np.ndarray, n_neighbors: int, dim: int, seed: int) -> np.ndarray:
    """UMAP (cosine) to ``dim`` dimensions; seeded, hence single-threaded and repeatable."""
    import umap

    n = emb.shape[0]
    dim = max(1, min(dim, n - 2))
    n_neighbors = max(2, min(n_neighbors, n - 1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reducer = umap.UMAP(
            n_neighbors=n_neighbors,
            n_components=dim,
            metric="cosine",
            random_state=seed,
            n_jobs=1,
        )
        out = reducer.fit_transform(np.asarray(emb, dtype=np.float32))
    return np.asarray(out, dtype=np.float64)


def _fit_mixture(
    points: np.ndarray, k: int, seed: int, reg_covar: float, report: ClusterReport | None = None
) -> object | None:
    """A full-covariance mixture; a collapse retries with stronger regularisation."""
    from sklearn.mixture import GaussianMixture

    reg = reg_covar
    for _ in range(5):
        gm = GaussianMixture(
            n_components=k, covariance_type="full", random_state=seed, reg_covar=reg
        )
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                gm.fit(points)
            return gm
        except ValueError:  # ill-defined covariance: singleton or collapsed samples
            reg *= 10.0
            if report is not None:
                report.mixture_retries += 1
    if report is not None:
        report.mixture_failures += 1
    return None


def soft_memberships(
    points: np.ndarray,
    settings: ClusterSettings,
    report: ClusterReport | None = None,
    *,
    reg_covar: float = REG_COVAR,
) -> tuple[list[list[int]], int]:
    """Per point, the clusters it joins; and the number of clusters BIC chose.

    Every k in 1..min(max_clusters, n) - 1 is fitted (the reference code's bound: a
    layer is never split into one cluster per node) and the lowest BIC wins (ties go
    to the smaller k). A point whose posteriors all stay under the threshold joins
    its most probable cluster.
    """
    from threadpoolctl import threadpool_limits

    n = points.shape[0]
    if n <= 1:
        return [[0] for _ in range(n)], 1 if n else 0
    best: object | None = None
    best_bic = math.inf
    # The fits do many tiny (dim x dim) solves: BLAS threads only add overhead
    # there (docs/speed.md, "Threads").
    with threadpool_limits(limits=1):
        for k in range(1, min(settings.max_clusters, n)):
            gm = _fit_mixture(points, k, settings.seed, reg_covar, report)
            if gm is None:
                continue
            bic = float(gm.bic(points))  # type: ignore[attr-defined]
            if bic < best_bic:
                best, best_bic = gm, bic
    if best is None:  # nothing fitted at all: one cluster of everything
        return [[0] for _ in range(n)], 1
    probs = np.asarray(best.predict_proba(points))  # type: ignore[attr-defined]
    members: list[list[int]] = []
    for row in probs:
        joined = [int(c) for c in np.flatnonzero(row > settings.threshold)]
        if not joined:
            joined = [int(np.argmax(row))]
            if report is not None:
                report.orphans_attached += 1
        members.append(joined)
    return members, int(probs.shape[1])


def _groups(members: list[list[int]], n_clusters: int) -> list[list[int]]:
    groups: list[list[int]] = [[] for _ in range(n_clusters)]
    for i, cs in enumerate(members):
        for c in cs:
            groups[c].append(i)
    return [g for g in groups if g]


def two_stage(
    emb: np.ndarray, settings: ClusterSettings, report: ClusterReport, reg_covar: float
) -> list[list[int]]:
    """Global UMAP + mixture, then a local UMAP + mixture inside each global cluster."""
    n = emb.shape[0]
    dim = settings.reduction_dim
    if n <= dim + 1:
        return [list(range(n))]
    nn = min(GLOBAL_NEIGHBORS_CAP, max(2, int(math.sqrt(n - 1))))
    report.global_neighbors = report.global_neighbors or nn
    reduced = reduce_dims(emb, nn, dim, settings.seed)
    members, k = soft_memberships(reduced, settings, report, reg_covar=reg_covar)
    global_groups = _groups(members, k)
    report.global_clusters += len(global_groups)
    out: list[list[int]] = []
    for group in global_groups:
        if len(group) <= dim + 1:
            out.append(group)
            continue
        sub = emb[group]
        local = reduce_dims(sub, LOCAL_NEIGHBORS, dim, settings.seed)
        report.local_fits += 1
        lmem, lk = soft_memberships(local, settings, report, reg_covar=reg_covar)
        out.extend([group[j] for j in lg] for lg in _groups(lmem, lk))
    return out


def sequential_split(indices: Sequence[int], tokens: Sequence[int], budget: int) -> list[list[int]]:
    """Consecutive groups (in index order) of at most ``budget`` tokens each.

    The fallback when clustering cannot shrink a cluster; a single node over the
    budget stays a group of its own.
    """
    groups: list[list[int]] = []
    cur: list[int] = []
    size = 0
    for i in sorted(indices):
        t = int(tokens[i])
        if cur and size + t > budget:
            groups.append(cur)
            cur, size = [], 0
        cur.append(i)
        size += t
    if cur:
        groups.append(cur)
    return groups


def _fit_budget(
    emb: np.ndarray,
    tokens: Sequence[int],
    cluster: list[int],
    settings: ClusterSettings,
    report: ClusterReport,
    reg_covar: float,
    depth: int,
) -> list[list[int]]:
    """``cluster`` itself if it fits the budget, else its re-clustered parts."""
    budget = settings.cluster_max_tokens
    if len(cluster) <= 1 or sum(int(tokens[i]) for i in cluster) <= budget:
        return [cluster]
    if depth >= MAX_DEPTH or len(cluster) <= settings.reduction_dim + 1:
        report.split_sequentially += 1
        return sequential_split(cluster, tokens, budget)
    report.reclustered += 1
    parts = two_stage(emb[cluster], settings, report, reg_covar)
    out: list[list[int]] = []
    for part in parts:
        mapped = [cluster[j] for j in part]
        if len(mapped) >= len(cluster):  # no progress: cut it instead of looping
            report.split_sequentially += 1
            out.extend(sequential_split(mapped, tokens, budget))
        else:
            out.extend(_fit_budget(emb, tokens, mapped, settings, report, reg_covar, depth + 1))
    return out


def cluster_layer(
    emb: np.ndarray,
    tokens: Sequence[int],
    settings: ClusterSettings,
    *,
    reg_covar: float = REG_COVAR,
) -> tuple[list[Cluster], ClusterReport]:
    """The clusters of one layer: soft, within the token budget, deduplicated, sorted.

    ``emb`` holds the layer's embeddings (one row a node), ``tokens`` each node's
    token count, ``settings`` the build's (a ``RaptorBuild``); ``reg_covar`` is
    varied only by bench/raptor_clustering.py. Clusters come back ordered by their
    first member, so summaries are made (and cached) in document order.
    """
    if emb.shape[0] != len(tokens):
        raise ValueError("one token count per embedding row is needed")
    report = ClusterReport()
    clusters: set[Cluster] = set()
    for group in two_stage(np.asarray(emb), settings, report, reg_covar):
        for part in _fit_budget(emb, tokens, sorted(group), settings, report, reg_covar, 0):
            clusters.add(tuple(sorted(set(part))))
    return sorted(clusters), report
