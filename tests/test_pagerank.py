"""lcr.graph: PageRank equals networkx's; the blocked similarity graph equals the dense one."""

from __future__ import annotations

import importlib

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp

from lcr.graph.pagerank import (
    GraphOperator,
    QueryGraph,
    StoredGraph,
    graph_pagerank,
    pagerank,
    power_iteration,
    transition_matrix,
)
from lcr.graph.similarity import similarity_graph
from tests.conftest import needs_shared_data


def random_weights(n: int, seed: int, density: float = 0.15) -> np.ndarray:
    rng = np.random.default_rng(seed)
    w = rng.random((n, n)) * (rng.random((n, n)) < density)
    w[:, rng.choice(n, size=max(1, n // 8), replace=False)] = 0.0  # dangling nodes
    return w  # w[i, j] = weight of the edge j -> i


def nx_graph(w: np.ndarray) -> nx.DiGraph:
    g = nx.DiGraph()
    g.add_nodes_from(range(len(w)))
    for i, j in zip(*np.nonzero(w), strict=True):
        g.add_edge(int(j), int(i), weight=float(w[i, j]))
    return g


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("alpha", [0.0, 0.15, 0.6])
def test_matches_networkx(seed: int, alpha: float) -> None:
    w = random_weights(30, seed)
    transition, dangling = transition_matrix(sp.csr_array(w))
    rng = np.random.default_rng(seed + 100)
    p = rng.random(30)
    for personal in (None, p):
        nx_p = None if personal is None else {i: float(v) for i, v in enumerate(personal)}
        ref = nx.pagerank(
            nx_graph(w), alpha=1.0 - alpha, personalization=nx_p, max_iter=1000, tol=1e-12
        )
        ours = pagerank(
            transition, dangling, alpha=alpha, personalization=personal, max_iter=1000, tol=1e-12
        )
        assert ours.converged
        np.testing.assert_allclose(ours.scores, [ref[i] for i in range(30)], atol=1e-9)
        assert ours.scores.sum() == pytest.approx(1.0)


@pytest.mark.parametrize("cap", [1, 3, 18])
def test_iteration_cap_matches_networkx_power_steps(cap: int) -> None:
    """With the cap hit, the result is exactly ``cap`` steps of networkx's Google matrix."""
    w = random_weights(25, 7)
    p = np.zeros(25)
    p[3] = 1.0
    alpha = 0.6
    google = nx.google_matrix(
        nx_graph(w), alpha=1.0 - alpha, personalization={i: float(v) for i, v in enumerate(p)}
    )
    x = np.full(25, 1 / 25)
    for _ in range(cap):
        x = x @ np.asarray(google)
    transition, dangling = transition_matrix(sp.csr_array(w))
    ours = pagerank(transition, dangling, alpha=alpha, personalization=p, max_iter=cap, tol=0.0)
    assert ours.iterations == cap and not ours.converged
    np.testing.assert_allclose(ours.scores, x, atol=1e-12)


def test_networkx_tolerance_rule_stops_early() -> None:
    w = random_weights(40, 3, density=0.3)
    transition, dangling = transition_matrix(sp.csr_array(w))
    loose = pagerank(transition, dangling, alpha=0.6, max_iter=18, tol=1e-3)
    tight = pagerank(transition, dangling, alpha=0.6, max_iter=18, tol=1e-12)
    assert loose.converged and loose.iterations < tight.iterations <= 18


def test_bad_alpha_and_personalization_are_refused() -> None:
    dangling = np.zeros(3, dtype=bool)
    with pytest.raises(ValueError):
        power_iteration(lambda x: x, dangling, alpha=1.5)
    with pytest.raises(ValueError):
        power_iteration(lambda x: x, dangling, alpha=0.5, personalization=np.zeros(3))


def unit_rows(seed: int, n: int = 120, v: int = 40) -> sp.csr_array:
    m = sp.random(n, v, density=0.12, random_state=seed, format="csr", dtype=np.float64)
    m = sp.csr_array(m)
    norms = np.sqrt(np.asarray(m.multiply(m).sum(axis=1)).ravel())
    norms[norms == 0] = 1.0
    return sp.csr_array(sp.diags_array(1.0 / norms) @ m)


@pytest.mark.parametrize("self_loops", [True, False])
@pytest.mark.parametrize("workers", [1, 2])
def test_similarity_graph_equals_dense_thresholded_product(self_loops: bool, workers: int) -> None:
    emb = unit_rows(1)
    dense = (emb @ emb.T).toarray()
    ref = np.where(dense >= 0.27, dense, 0.0)
    if not self_loops:
        np.fill_diagonal(ref, 0.0)
    # a tiny work budget forces many blocks
    graph, stats = similarity_graph(
        emb, 0.27, self_loops=self_loops, workers=workers, block_work=50
    )
    assert stats.blocks > 10
    assert graph.nnz == np.count_nonzero(ref) == stats.nnz
    np.testing.assert_allclose(graph.toarray(), ref, atol=1e-6)
    assert (graph != graph.T).nnz == 0


def real_tfidf_rows() -> sp.csr_array:
    """TF-IDF rows of 32-word chunks of real text: common words make dense blocks."""
    from lcr.scoring.tfidf import TfidfModel
    from lcr.text.chunking import sentence_word_chunks
    from tests.realdata import real_texts

    text = "\n\n".join(real_texts().values())[:60_000]
    _, emb = TfidfModel.fit([c.text for c in sentence_word_chunks(text, max_words=32)])
    return sp.csr_array(emb)


@pytest.mark.parametrize("scan", ["dense", "sparse", "chosen"])
def test_compiled_kernels_give_scipys_graph_to_the_last_bit(
    scan: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both kernels sum in scipy's order, so the graphs are identical, not just close."""
    pytest.importorskip("numba")
    import lcr.graph.similarity as similarity

    ratio = {"dense": 10**12, "sparse": 0, "chosen": similarity._DENSE_SCAN_RATIO}[scan]
    monkeypatch.setattr(similarity, "_DENSE_SCAN_RATIO", ratio)
    for emb in (real_tfidf_rows(), unit_rows(7, n=300, v=60)):
        ref, ref_stats = similarity_graph(emb, 0.27, backend="scipy", block_work=20_000)
        ours, stats = similarity_graph(emb, 0.27, backend="product", block_work=20_000, workers=2)
        assert stats.blocks == ref_stats.blocks > 2
        assert ours.nnz == ref.nnz > emb.shape[0]
        assert np.array_equal(ours.indptr, ref.indptr)
        assert np.array_equal(ours.indices, ref.indices)
        assert np.array_equal(ours.data, ref.data)


def test_compiled_kernel_empties_its_buffers_and_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """A block with more surviving entries than its buffers hold is finished in several calls."""
    pytest.importorskip("numba")
    import types

    import lcr.graph.similarity as similarity

    kernels = similarity._compiled_kernels()
    calls: list[str] = []

    def counted(name: str) -> object:
        def call(*args: object) -> object:
            calls.append(name)
            return getattr(kernels, name)(*args)

        return call

    spy = types.SimpleNamespace(
        upper_pairs_dense=counted("upper_pairs_dense"),
        upper_pairs_sparse=counted("upper_pairs_sparse"),
    )
    monkeypatch.setattr(similarity, "_compiled_kernels", lambda: spy)
    monkeypatch.setattr(similarity, "_BUFFER_ENTRIES", 1)  # buffers of 4 rows' width
    emb = unit_rows(8, n=400, v=6)  # few terms: most pairs survive a low threshold
    ref, _ = similarity_graph(emb, 0.05, backend="scipy", block_work=10**9)
    ours, stats = similarity_graph(emb, 0.05, backend="product", block_work=10**9)
    assert stats.blocks == 1 and len(calls) >= 4
    assert ref.nnz > 10_000 and (ours != ref).nnz == 0


def prose_tfidf_rows(chars: int) -> sp.csr_array:
    """TF-IDF rows of 32-word chunks of the shared data's stories and summaries."""
    import json

    from lcr.scoring.tfidf import TfidfModel
    from lcr.text.chunking import sentence_word_chunks
    from tests.conftest import SHARED_DATA as SHARED

    parts = [json.loads(x)["document"] for x in (SHARED / "squality" / "dev.jsonl").open()]
    text = "\n\n".join(parts)[:chars]
    _, emb = TfidfModel.fit([c.text for c in sentence_word_chunks(text, max_words=32)])
    return sp.csr_array(emb)


def assert_same_edges(ours: sp.csr_array, ref: sp.csr_array) -> None:
    """The same edge set (indices exactly), values within float32 rounding."""
    assert ours.shape == ref.shape and ours.nnz == ref.nnz
    assert np.array_equal(ours.indptr, ref.indptr)
    assert np.array_equal(ours.indices, ref.indices)
    np.testing.assert_allclose(ours.data, ref.data, rtol=0, atol=1e-6)


def assert_split_equals_product(emb: sp.csr_array, block_work: int, workers: int) -> None:
    ref, _ = similarity_graph(emb, 0.27, backend="product")
    ours, stats = similarity_graph(emb, 0.27, workers=workers, block_work=block_work)
    assert stats.blocks > 2 and ref.nnz > 2 * emb.shape[0]
    assert_same_edges(ours, ref)


@pytest.mark.parametrize("workers", [1, 2])
def test_split_kernel_gives_the_product_kernels_edges(workers: int) -> None:
    """The default (split) kernel against the full-product kernel it replaced,
    on random rows and a small real text."""
    pytest.importorskip("numba")
    assert_split_equals_product(unit_rows(7, n=300, v=60), 2_000, workers)
    assert_split_equals_product(real_tfidf_rows(), 3_000, workers)


@needs_shared_data
@pytest.mark.parametrize("workers", [1, 2])
def test_split_kernel_gives_the_product_kernels_edges_on_a_medium_text(workers: int) -> None:
    """The same on ~3,000 chunks of real prose (many blocks)."""
    pytest.importorskip("numba")
    assert_split_equals_product(prose_tfidf_rows(400_000), 200_000, workers)


@needs_shared_data
def test_split_kernel_skips_most_products_and_verifies_few() -> None:
    """On real text the bound leaves most common-word products undone: the kernel's
    work is a fraction of the full product's, and few pairs need their common part summed."""
    pytest.importorskip("numba")
    emb = prose_tfidf_rows(400_000)
    graph, stats = similarity_graph(emb, 0.27)
    assert 0 < stats.bounded_work < stats.products / 3
    assert 0 < stats.verified < stats.products / 100
    assert graph.nnz == stats.nnz


@pytest.mark.parametrize("threshold", [0.05, 0.27, 0.9])
def test_split_kernel_edges_at_any_threshold_and_when_buffers_fill(
    threshold: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Low thresholds (most pairs kept, buffers of four rows' width refilled many times)
    and high ones (nearly only duplicates) give scipy's edges."""
    pytest.importorskip("numba")
    import lcr.graph.similarity as similarity

    monkeypatch.setattr(similarity, "_BUFFER_ENTRIES", 1)
    for emb in (unit_rows(8, n=400, v=6), unit_rows(11, n=300, v=80), real_tfidf_rows()):
        ref, _ = similarity_graph(emb, threshold, backend="scipy")
        ours, _ = similarity_graph(emb, threshold, block_work=500)
        assert_same_edges(ours, ref)


def test_similarity_graph_reports_blocks_and_stores_int32_indices() -> None:
    emb = unit_rows(4)
    seen: list[int] = []
    graph, stats = similarity_graph(emb, 0.27, block_work=50, on_block=seen.append)
    assert len(seen) == stats.blocks > 10 and set(seen) == {stats.blocks}
    assert graph.indices.dtype == np.int32 and graph.indptr.dtype == np.int32
    assert graph.has_sorted_indices


@pytest.mark.parametrize("kernel", ["scipy's own", "public @"])
@pytest.mark.parametrize("workers", [1, 3])
def test_graph_operator_is_bitwise_scipys_float64_product(
    workers: int, kernel: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Split over threads or not, each row sums in scipy's order: equal to the last bit,
    through scipy's private kernel or, should a release move it, the public product."""
    # the module (lcr.graph's ``pagerank`` attribute is the function of that name)
    pagerank_module = importlib.import_module("lcr.graph.pagerank")

    if kernel == "public @":
        monkeypatch.setattr(pagerank_module, "_CSR_MATVEC", None)
    else:
        assert pagerank_module._CSR_MATVEC is not None
    m = sp.random(1500, 1500, density=0.5, random_state=5, format="csr", dtype=np.float32)
    graph = sp.csr_array(m + m.T)  # > 1M entries, so the rows are split across workers
    assert graph.nnz > 1_000_000
    op = GraphOperator(graph, workers=workers)
    y = np.random.default_rng(0).random(1500)
    ref = sp.csr_array(graph, dtype=np.float64) @ y
    for _ in range(2):  # the pool is kept between products
        assert np.array_equal(op(y), ref)
    op.close()
    assert np.array_equal(op(y), ref)  # a closed operator still works (single thread)
    assert graph.dtype == np.float32  # the caller's matrix is left as it was


def test_query_graph_with_a_shared_operator_equals_a_fresh_one() -> None:
    emb = unit_rows(6, n=80)
    graph, _ = similarity_graph(emb, 0.2)
    sums = np.asarray(graph.sum(axis=0)).ravel()
    shared = GraphOperator(graph, workers=2)
    rng = np.random.default_rng(1)
    for _ in range(3):  # several questions over one operator
        links = np.where(rng.random(80) < 0.1, rng.random(80), 0.0)
        fresh = QueryGraph(graph, sums, links, 1.0, workers=2).personalised(0.6, tol=1e-10)
        reused = QueryGraph(shared, sums, links, 1.0).personalised(0.6, tol=1e-10)
        ready = StoredGraph(shared, sums)
        stored = QueryGraph(ready, None, links, 1.0).personalised(0.6, tol=1e-10)
        assert fresh.iterations == stored.iterations
        assert np.array_equal(fresh.scores, stored.scores)
        assert fresh.iterations == reused.iterations
        assert np.array_equal(fresh.scores, reused.scores)


def test_query_graph_patches_only_the_linked_columns_bitwise() -> None:
    """The per-question column scale (stored sums, patched where the question links)
    equals dividing every column's full sum afresh, to the last bit; an isolated
    chunk stays dangling unless the question links to it."""
    emb = unit_rows(4, n=90)
    graph, _ = similarity_graph(emb, 0.5, self_loops=False)
    sums = np.asarray(graph.sum(axis=0), dtype=np.float64).ravel()
    isolated = np.flatnonzero(sums == 0)
    assert len(isolated) >= 2
    rng = np.random.default_rng(2)
    links = np.where(rng.random(90) < 0.2, rng.random(90), 0.0)
    links[isolated[0]], links[isolated[1]] = 0.3, 0.0
    full = np.append(sums + links, links.sum() + 1.0)
    with np.errstate(divide="ignore"):
        ref_inv = np.where(full > 0, 1.0 / full, 0.0)
    stored = StoredGraph(graph, sums)
    for qg in (QueryGraph(graph, sums, links, 1.0), QueryGraph(stored, None, links, 1.0)):
        assert np.array_equal(qg.dangling, full <= 0)
        assert qg.dangling[isolated[1]] and not qg.dangling[isolated[0]]
        assert np.array_equal(qg._inv, ref_inv)
    a = QueryGraph(graph, sums, links, 1.0).personalised(0.6, tol=1e-12)
    b = QueryGraph(stored, None, links, 1.0).personalised(0.6, tol=1e-12)
    assert a.iterations == b.iterations and np.array_equal(a.scores, b.scores)


@pytest.mark.parametrize("workers", [1, 2])
def test_the_fused_walk_is_bitwise_power_iteration_of_matvec(workers: int) -> None:
    """QueryGraph.personalised finishes each step on the worker threads; it must be
    power_iteration of its own matvec to the last bit, with dangling chunks, a
    dangling question, and rows split across threads (over a million entries)."""
    m = sp.random(1500, 1500, density=0.5, random_state=8, format="csr", dtype=np.float32)
    big = sp.csr_array(m + m.T)
    small, _ = similarity_graph(unit_rows(4, n=90), 0.5, self_loops=False)  # isolated chunks
    rng = np.random.default_rng(6)
    for graph in (big, small):
        n = graph.shape[0]
        sums = np.asarray(graph.sum(axis=0), dtype=np.float64).ravel()
        stored = StoredGraph(graph, sums, workers=workers)
        assert len(stored.operator._parts) == (workers if graph is big else 1)
        for links, self_weight in (
            (np.where(rng.random(n) < 0.05, rng.random(n), 0.0), 1.0),
            (np.zeros(n), 0.0),  # the question itself dangles
        ):
            qg = QueryGraph(stored, None, links, self_weight)
            p = np.zeros(n + 1)
            p[n] = 1.0
            for alpha, cap, tol in ((0.6, 18, 1e-9), (0.0, 5, 1e-12), (1.0, 18, 1e-9)):
                ref = power_iteration(
                    qg.matvec, qg.dangling, alpha=alpha, personalization=p,
                    max_iter=cap, tol=tol,
                )  # fmt: skip
                ours = qg.personalised(alpha, max_iter=cap, tol=tol)
                assert (ours.iterations, ours.converged) == (ref.iterations, ref.converged)
                assert np.array_equal(ours.scores, ref.scores)
        assert stored.dangling.any() == (graph is small)
        stored.close()


def test_max_degree_keeps_each_rows_strongest_edges() -> None:
    emb = unit_rows(2)
    full, _ = similarity_graph(emb, 0.1, self_loops=False)
    capped, stats = similarity_graph(emb, 0.1, self_loops=False, max_degree=3, block_work=40)
    dense, kept = full.toarray(), capped.toarray()
    assert stats.capped_rows == int((np.count_nonzero(dense, axis=1) > 3).sum()) > 0
    assert (capped != capped.T).nnz == 0
    for i in range(len(dense)):
        nz = np.flatnonzero(dense[i])
        best = nz[np.lexsort((nz, -dense[i, nz]))][:3]
        assert np.all(kept[i, best] == pytest.approx(dense[i, best]))  # own top 3 survive
        others = np.setdiff1d(np.flatnonzero(kept[i]), best)
        for j in others:  # any other edge is one of j's own top 3
            nzj = np.flatnonzero(dense[j])
            assert i in nzj[np.lexsort((nzj, -dense[j, nzj]))][:3]
    assert capped.nnz <= 2 * 3 * len(dense)


def test_query_graph_equals_explicitly_extended_graph() -> None:
    emb = unit_rows(3, n=60)
    graph, _ = similarity_graph(emb, 0.2)
    rng = np.random.default_rng(0)
    links = np.where(rng.random(60) < 0.1, rng.random(60), 0.0)
    big = np.zeros((61, 61))
    big[:60, :60] = graph.toarray()
    big[:60, 60] = big[60, :60] = links
    big[60, 60] = 1.0
    transition, dangling = transition_matrix(sp.csr_array(big))
    p = np.zeros(61)
    p[60] = 1.0
    ref = pagerank(transition, dangling, alpha=0.6, personalization=p, tol=1e-10)
    qg = QueryGraph(graph, np.asarray(graph.sum(axis=0)).ravel(), links, 1.0, workers=2)
    ours = qg.personalised(0.6, tol=1e-10)
    assert ours.iterations == ref.iterations
    np.testing.assert_allclose(ours.scores, ref.scores, rtol=1e-5, atol=1e-9)


@pytest.mark.parametrize("backend", ["numba", "scipy"])
def test_max_edges_caps_the_degree_only_when_the_exact_graph_would_not_fit(backend: str) -> None:
    if backend == "numba":
        pytest.importorskip("numba")
    emb = unit_rows(9, n=300, v=30)
    exact, _ = similarity_graph(emb, 0.1, backend=backend)
    roomy, stats = similarity_graph(emb, 0.1, max_edges=exact.nnz, backend=backend)
    assert not stats.auto_capped and stats.max_degree == 0
    assert (roomy != exact).nnz == 0

    budget = exact.nnz * 2 // 3  # under the 2x past which a graph of alike rows is refused
    # many small blocks: the build sees the overflow part-way, after exact blocks
    capped, stats = similarity_graph(emb, 0.1, max_edges=budget, block_work=300, backend=backend)
    self_loops = int(np.count_nonzero(emb.multiply(emb).sum(axis=1)))  # non-empty rows
    m = (budget - self_loops) // (2 * 300)
    assert stats.auto_capped and stats.max_degree == m and stats.blocks > 5
    assert capped.nnz <= budget
    asked, asked_stats = similarity_graph(emb, 0.1, max_degree=m, backend=backend)
    assert not asked_stats.auto_capped
    assert (capped != asked).nnz == 0  # the same graph as asking for the cap at the start


# "product": the compiled full product, bitwise scipy's, so the two cuts can be compared
@pytest.mark.parametrize("backend", ["product", "scipy"])
@pytest.mark.parametrize("budget", ["max_degree", "max_edges"])
def test_pruning_as_blocks_arrive_gives_the_one_shot_cap(
    budget: str, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pruning often (with each row's floor dropping entries early) keeps the same edges
    as one top-m cut at the end, ties included, and counts the capped rows the same."""
    import lcr.graph.similarity as similarity

    emb = unit_rows(10, n=300, v=12)  # few terms: many equal similarities (ties)
    args = {"max_degree": 4} if budget == "max_degree" else {"max_edges": 7000}
    monkeypatch.setattr(similarity, "_PRUNE_EVERY", 10**12)
    if backend == "product":
        pytest.importorskip("numba")
    once, once_stats = similarity_graph(emb, 0.1, block_work=300, backend=backend, **args)
    monkeypatch.setattr(similarity, "_PRUNE_EVERY", 50)
    often, often_stats = similarity_graph(emb, 0.1, block_work=300, backend=backend, **args)
    assert once_stats.blocks > 5 and once_stats.max_degree == often_stats.max_degree
    assert once_stats.capped_rows == often_stats.capped_rows > 0
    assert (once != often).nnz == 0
    # the compiled and the NumPy cut agree (ties go to the lower column in both)
    other, _ = similarity_graph(emb, 0.1, block_work=300, backend="scipy", **args)
    assert (other != often).nnz == 0


@pytest.mark.parametrize("workers", [1, 2])
def test_graph_pagerank_equals_pagerank_of_the_transition_matrix(workers: int) -> None:
    """The build's PageRank without a column-normalised copy gives the same scores."""
    w = random_weights(300, seed=3)
    graph = sp.csr_array(w + w.T)
    transition, dangling = transition_matrix(graph)
    for alpha in (0.0, 0.6):
        ref = pagerank(transition, dangling, alpha=alpha, max_iter=18, tol=1e-9)
        ours = graph_pagerank(graph, alpha=alpha, max_iter=18, tol=1e-9, workers=workers)
        assert ours.iterations == ref.iterations > 3
        np.testing.assert_allclose(ours.scores, ref.scores, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("alpha", [0.0, 0.6])
@pytest.mark.parametrize("cap", [3, 200])
def test_power_iteration_is_bitwise_the_step_it_writes_out(alpha: float, cap: int) -> None:
    """The in-place loop must give exactly the scores of the formula written out."""
    w = random_weights(40, 11)
    transition, dangling = transition_matrix(sp.csr_array(w))
    n = len(w)
    p = np.zeros(n)
    p[5] = 1.0
    x = np.full(n, 1.0 / n)
    steps = 0
    for steps in range(1, cap + 1):  # noqa: B007 - the step count is compared below
        last = x
        x = (1 - alpha) * (transition @ last + last[dangling].sum() * p) + alpha * p
        if np.abs(x - last).sum() < n * 1e-10:
            break
    ours = pagerank(transition, dangling, alpha=alpha, personalization=p, max_iter=cap, tol=1e-10)
    assert ours.iterations == steps and np.array_equal(ours.scores, x)
