"""MixPR end to end: multi-hop chains, global spread, the router, save/reopen."""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import string
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from lcr import api, pipeline
from lcr.errors import SettingError
from lcr.evidence import Evidence, Usage
from lcr.methods import get_method
from lcr.methods.base import NOTHING
from lcr.methods.mixpr import MixPRBuild, MixPRQuery
from lcr.models.base import Capability, Generation, Message
from lcr.models.container import Models
from lcr.pipeline.plans import parse_sets
from lcr.store import Document, Index
from lcr.text.chunking import split_sentences

AUTO = ["mixpr.mode=auto"]  # the paper's router; lcr's default mode is local


class RouterLLM:
    """Fake LLM: answers the router with a fixed P('y') and counts the calls."""

    model_id = "fake-router"
    backend = "fake"

    def __init__(self, p_yes: float) -> None:
        self.p_yes = p_yes
        self.usage = Usage()
        self.calls: list[tuple[list[Message], str, str]] = []

    @property
    def context_window(self) -> int:
        return 2048

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def generate(self, messages: Sequence[Message], **kw: object) -> Generation:
        raise AssertionError("retrieval must not generate text")

    def generate_batch(self, conversations: object, **kw: object) -> list[Generation]:
        raise AssertionError("retrieval must not generate text")

    def choice_probability(
        self, messages: Sequence[Message], yes: str = "Yes", no: str = "No"
    ) -> float:
        self.calls.append((list(messages), yes, no))
        self.usage.add(sum(self.count_tokens(m["content"]) for m in messages), 0)
        return self.p_yes

    def continuation_logprob(self, context: str, continuation: str) -> float:
        raise AssertionError("not used")


def prose(shared: Path, count: int) -> list[str]:
    out: list[str] = []
    with (shared / "squality" / "dev.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)["document"]
            out.extend(" ".join(c.text.split()) for c in split_sentences(doc))
            if len(out) >= count:
                return out[:count]
    return out


def variable_chains(shared: Path, seed: int = 0) -> tuple[str, str, list[list[str]]]:
    """Five 4-hop VAR chains hidden among 3,000 real sentences; chain 0 is asked."""
    rng = random.Random(seed)
    names = rng.sample(
        [
            "".join(t)
            for t in zip(
                *[rng.choices(string.ascii_uppercase, k=60) for _ in range(5)], strict=False
            )
        ],
        25,
    )
    chains = []
    for c in range(5):
        ns = names[c * 5 : c * 5 + 5]
        lines = [f"VAR {ns[0]} = {rng.randint(10000, 99999)}."]
        lines += [f"VAR {ns[i + 1]} = VAR {ns[i]}." for i in range(4)]
        chains.append(lines)
    filler = prose(shared, 3000)
    slots: dict[int, str] = {}
    for lines in chains:
        free = [i for i in range(len(filler)) if i not in slots]
        for pos, line in zip(sorted(rng.sample(free, 5)), lines, strict=True):
            slots[pos] = line
    parts = []
    for i, sentence in enumerate(filler):
        if i in slots:
            parts.append(slots[i])
        parts.append(sentence)
    last = chains[0][-1].split()[1]
    question = (
        f"Find the value assigned to VAR {last} in the text above, following each "
        "variable back to the number it was set to."
    )
    return " ".join(parts), question, chains


def make_index(tmp: Path, text: str, methods: list[str], sets: Sequence[str] = ()) -> Index:
    doc = Document("doc.txt", text, hashlib.sha256(text.encode()).hexdigest(), len(text))
    idx = Index.create(tmp / "doc.idx", [doc])
    api.plan_and_build(idx, methods, Models.with_objects(), list(sets))
    return idx


@pytest.fixture(scope="module")
def chains_index(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> tuple:
    text, question, chains = variable_chains(shared_data)
    # tfidf over chunks of about mixpr's size (32 words), as the paper's RAG-Sparse
    idx = make_index(
        tmp_path_factory.mktemp("vt"), text, ["mixpr", "tfidf"], ["tfidf.chunk_tokens=40"]
    )
    return idx, text, question, chains


def found(evidence_texts: list[str], lines: list[str]) -> list[bool]:
    return [any(line in t for t in evidence_texts) for line in lines]


def test_chain_is_followed_where_tfidf_misses_far_hops(chains_index: tuple) -> None:
    idx, _, question, chains = chains_index
    ev = api.plan_and_retrieve(idx, "mixpr", question, Models.with_objects(), ["mixpr.mode=local"])
    texts = [it.text for it in ev.evidence.items]
    assert len(texts) == 100  # the paper's k
    assert all(found(texts, chains[0])), "every link of the chain is in mixpr's top k"
    # RAG-Sparse (the tfidf baseline) with the same k over chunks of the same size
    tf = api.plan_and_retrieve(idx, "tfidf", question, Models.with_objects(), k=100)
    tf_hits = found([it.text for it in tf.evidence.items], chains[0])
    assert tf_hits[-1], "tfidf finds the hop that names the asked variable"
    assert not all(tf_hits), "tfidf misses a far hop"
    info = ev.evidence.info
    assert info["mode"] == "local" and info["alpha"] == 0.6 and 1 <= info["iterations"] <= 18
    # rank order (as every method), read by the answer step in document order; each
    # item with its PageRank score and exact span
    assert [it.extra["rank"] for it in ev.evidence.items] == list(range(1, 101))
    starts = [it.spans[0][0] for it in ev.evidence.in_document_order()]
    assert starts == sorted(starts)
    for it in ev.evidence.items:
        s, e = it.spans[0]
        assert idx.source[s:e] == it.text and it.score >= 0


def test_global_question_spreads_over_the_document(chains_index: tuple) -> None:
    idx, text, _, _ = chains_index
    ev = api.plan_and_retrieve(
        idx, "mixpr", "Summarise the whole document", Models.with_objects(), ["mixpr.mode=global"]
    ).evidence
    assert ev.info["mode"] == "global" and ev.info["alpha"] == 0.0
    deciles = {10 * it.spans[0][0] // len(text) for it in ev.items}
    assert len(deciles) >= 8, f"global chunks cluster in deciles {sorted(deciles)}"
    # not one keyword's neighbourhood: the top chunks share no single rare word
    words = [set(w.lower() for w in it.text.split() if len(w) > 5) for it in ev.items]
    common = set.intersection(*words) if words else set()
    assert not common


def test_router_is_asked_once_per_question_and_mode_overrides(chains_index: tuple) -> None:
    idx, _, question, _ = chains_index
    method = get_method("mixpr")
    auto = method.retrieve_needs(MixPRQuery.build({"mode": "auto"}, label="mixpr"))
    assert auto.llm == {Capability.CHOICE_PROBABILITY} and not auto.embedder
    assert "--mode local" in auto.why
    assert (
        method.retrieve_needs(pipeline.query_settings(method, parse_sets([]))) == NOTHING
    )  # default local
    for mode in ("local", "global"):
        assert method.retrieve_needs(MixPRQuery.build({"mode": mode})) == NOTHING
    assert method.build_needs(MixPRBuild()) == NOTHING

    for p_yes, mode in ((0.9, "global"), (0.1, "local")):
        llm = RouterLLM(p_yes)
        models = Models.with_objects(llm=llm)
        for n in (1, 2):
            ev = api.plan_and_retrieve(idx, "mixpr", question, models, AUTO).evidence
            assert len(llm.calls) == n
            assert ev.info["mode"] == mode and ev.info["router_p_global"] == p_yes
            assert ev.usage.calls == 1
        messages, yes, no = llm.calls[0]
        assert (yes, no) == ("y", "n")
        assert "answer 'y' with no other text" in messages[-1]["content"]
        assert question in messages[-1]["content"]

    silent = RouterLLM(0.9)
    models = Models.with_objects(llm=silent)
    for mode in ("local", "global"):
        ev = api.plan_and_retrieve(idx, "mixpr", question, models, [f"mixpr.mode={mode}"]).evidence
        assert ev.info["mode"] == mode
    assert silent.calls == []
    with pytest.raises(SettingError):
        api.plan_and_retrieve(idx, "mixpr", question, models, ["mixpr.mode=sideways"])


def test_reopened_index_gives_the_same_evidence(chains_index: tuple) -> None:
    idx, _, question, _ = chains_index
    first = api.plan_and_retrieve(
        idx, "mixpr", question, Models.with_objects(), ["mixpr.mode=local"]
    )
    again = api.plan_and_retrieve(
        Index.open(idx.path), "mixpr", question, Models.with_objects(), ["mixpr.mode=local"]
    )
    assert [it.to_json() for it in first.evidence.items] == [
        it.to_json() for it in again.evidence.items
    ]
    stats = idx.methods["mixpr"].stats
    assert stats["chunks"] > 2900 and stats["nnz"] > stats["chunks"] and stats["vocabulary"] > 0
    assert {"chunk_s", "tfidf_s", "graph_s"} <= set(stats)


@pytest.mark.parametrize("link", ["threshold", "topm", "threshold+topm", "all"])
def test_every_link_setting_runs_and_unknown_words_do_not_crash(
    tmp_path: Path, cinderella: Path, link: str
) -> None:
    text = cinderella.read_text(encoding="utf-8")
    idx = make_index(tmp_path, text, ["mixpr"], ["mixpr.max_degree=8"])
    models = Models.with_objects()
    sets = ["mixpr.mode=local", f"mixpr.link={link}"]
    ev = api.plan_and_retrieve(idx, "mixpr", "Who sat in the ashes?", models, sets, k=5).evidence
    assert len(ev.items) == 5
    if link == "threshold":
        # the point: a wordy question can fall under 0.27 to every chunk
        assert ev.info["linked"] == 0
    else:
        assert ev.info["linked"] >= 1
        assert any("ashes" in it.text.lower() for it in ev.items)
    none = api.plan_and_retrieve(idx, "mixpr", "zzzqqq xxyyzz", models, sets, k=3).evidence
    assert len(none.items) == 3 and none.info["linked"] == 0


def test_sim_share_puts_the_most_similar_chunks_first(chains_index: tuple) -> None:
    idx, _, question, _chains = chains_index
    ev = api.plan_and_retrieve(
        idx, "mixpr", question, Models.with_objects(), ["mixpr.mode=local", "mixpr.sim_share=1"]
    ).evidence
    ranks = sorted(ev.items, key=lambda it: it.extra["rank"])
    sims = [it.extra["similarity"] for it in ranks]
    assert sims == sorted(sims, reverse=True)


def test_combine_ranking_equals_a_full_sort() -> None:
    """The partial selection gives exactly the full lexsort's choice, ties included."""
    import numpy as np

    from lcr.methods.base import top_indices
    from lcr.methods.mixpr import combine_ranking

    def full(walk: np.ndarray, sims: np.ndarray, k: int, share: float) -> list[int]:
        k = min(k, len(walk))
        chosen: list[int] = []
        n_direct = round(share * k)
        if n_direct:
            direct = top_indices(sims, n_direct)
            chosen = direct[sims[direct] > 0].tolist()
        rest = [i for i in range(len(walk)) if i not in chosen]
        rest.sort(key=lambda i: (-walk[i], -sims[i], i))
        return chosen + rest[: k - len(chosen)]

    rng = np.random.default_rng(3)
    for _ in range(300):
        n = int(rng.integers(1, 120))
        walk = np.round(rng.random(n), int(rng.integers(0, 3)))  # many exact ties
        sims = np.round(rng.random(n) * (rng.random(n) < 0.5), 1)
        k, share = int(rng.integers(1, 80)), float(rng.choice([0.0, 0.3, 0.5, 1.0]))
        assert combine_ranking(walk, sims, k, share).tolist() == full(walk, sims, k, share)
    # at corpus size the candidates come from a sample's bound: still the same choice
    for decimals in (2, 5):
        n = 100_000
        walk = np.round(rng.random(n), decimals)
        sims = np.round(rng.random(n) * (rng.random(n) < 0.2), 2)
        for k, share in ((100, 0.5), (100, 0.0), (10, 1.0)):
            n_direct = round(share * k)
            direct = top_indices(sims, n_direct).tolist() if n_direct else []
            order = np.lexsort((np.arange(n), -sims, -walk))
            rest = [int(i) for i in order if i not in set(direct)][: k - len(direct)]
            assert combine_ranking(walk, sims, k, share).tolist() == direct + rest


def test_a_batch_of_questions_reuses_the_prepared_graph(chains_index: tuple) -> None:
    idx, _, question, _ = chains_index
    models = Models.with_objects()
    sets = ["mixpr.mode=local"]
    first = api.plan_and_retrieve(idx, "mixpr", question, models, sets).evidence
    memo = idx.reader("mixpr").memo
    prepared = memo["mixpr:graph"], memo["mixpr:tfidf"]
    again = api.plan_and_retrieve(idx, "mixpr", question, models, sets).evidence
    assert memo["mixpr:graph"] is prepared[0] and memo["mixpr:tfidf"] is prepared[1]
    assert [it.to_json() for it in first.items] == [it.to_json() for it in again.items]
    fresh = api.plan_and_retrieve(Index.open(idx.path), "mixpr", question, models, sets).evidence
    assert [it.to_json() for it in fresh.items] == [it.to_json() for it in first.items]


def test_router_reads_the_first_and_last_two_chunks_then_the_question(
    chains_index: tuple,
) -> None:
    idx, _, question, _ = chains_index
    chunks = [n.text for n in idx.reader("mixpr").nodes()]
    llm = RouterLLM(0.1)
    api.plan_and_retrieve(idx, "mixpr", question, Models.with_objects(llm=llm), AUTO)
    content = llm.calls[0][0][-1]["content"]
    query = content.split("QUERY: ", 1)[1].split("\n\n", 1)[0]
    assert query.split("\n") == [*chunks[:2], *chunks[-2:], question]
    assert chunks[2] not in content and chunks[-3] not in content
    # router_chunks=0 reads the question alone (lcr's router before issue 18)
    alone = RouterLLM(0.1)
    api.plan_and_retrieve(
        idx, "mixpr", question, Models.with_objects(llm=alone), [*AUTO, "mixpr.router_chunks=0"]
    )
    assert alone.calls[0][0][-1]["content"].split("QUERY: ", 1)[1].startswith(question + "\n")


def test_router_query_never_repeats_a_chunk_of_a_short_text() -> None:
    from lcr.methods.mixpr import router_query

    assert router_query("Q?", ["a", "b", "c"], 2) == "a\nb\nc\nQ?"
    assert router_query("Q?", ["a"], 2) == "a\nQ?"
    assert router_query("Q?", ["a", "b", "c", "d", "e"], 1) == "a\ne\nQ?"
    assert router_query("Q?", [], 2) == router_query("Q?", ["a"], 0) == "Q?"


@pytest.mark.parametrize(
    ("p_yes", "threshold", "mode"),
    [(0.5, 0.5, "local"), (0.5001, 0.5, "global"), (0.3, 0.3, "local"), (0.31, 0.3, "global")],
)
def test_router_threshold_boundary_is_local(
    chains_index: tuple, p_yes: float, threshold: float, mode: str
) -> None:
    idx, _, question, _ = chains_index
    sets = [*AUTO, f"mixpr.router_threshold={threshold}"]
    ev = api.plan_and_retrieve(
        idx, "mixpr", question, Models.with_objects(llm=RouterLLM(p_yes)), sets
    ).evidence
    assert ev.info["mode"] == mode


def test_retrieval_says_once_that_it_loads_the_llm_for_routing(chains_index: tuple) -> None:
    idx, _, question, _ = chains_index
    notes: list[str] = []

    class LazyModels(Models):
        """Loads the router LLM on first use, as real models do."""

        @property
        def llm(self) -> RouterLLM:
            if self._loaded.llm is None:
                self._loaded.llm = RouterLLM(0.1)
            return self._loaded.llm  # type: ignore[return-value]

    models = LazyModels()
    for _ in range(3):
        api.plan_and_retrieve(idx, "mixpr", question, models, AUTO, note=notes.append)
    assert len(notes) == 1
    assert "loads the LLM" in notes[0] and "--mode local" in notes[0]
    quiet: list[str] = []
    api.plan_and_retrieve(
        idx, "mixpr", question, LazyModels(), ["mixpr.mode=local"], note=quiet.append
    )
    assert quiet == []


def test_the_papers_own_settings_follow_the_chain(chains_index: tuple) -> None:
    """The paper's MixPR: threshold links only, pure walk ranking (link and sim_share).

    Each setting is checked by what it does, not only by the recall it keeps: the walk
    ranks every chunk under sim_share 0 and half of them under 0.5; the question links
    to exactly LINK_M (5) chunks under topm, and threshold+topm adds at most LINK_M
    chunks to the threshold's."""
    from lcr.methods.mixpr import LINK_M

    idx, _, question, chains = chains_index

    def evidence(*sets: str) -> Evidence:
        ev = api.plan_and_retrieve(
            idx, "mixpr", question, Models.with_objects(), ["mixpr.mode=local", *sets]
        ).evidence
        return ev

    paper = evidence("mixpr.link=threshold", "mixpr.sim_share=0")
    assert len(paper.items) == 100 and paper.info["link"] == "threshold"
    assert all(found([it.text for it in paper.items], chains[0]))
    assert {it.extra["ranked_by"] for it in paper.items} == {"walk"}
    lcrs = evidence("mixpr.link=threshold+topm", "mixpr.sim_share=0.5")
    by = [it.extra["ranked_by"] for it in lcrs.items]
    assert by.count("similarity") == 50 and by.count("walk") == 50
    assert evidence("mixpr.link=topm").info["linked"] == LINK_M == 5
    both = evidence("mixpr.link=threshold+topm").info["linked"]
    assert paper.info["linked"] <= both <= paper.info["linked"] + LINK_M


def test_the_walk_stops_by_networkxs_rule(chains_index: tuple) -> None:
    """The walk stops as networkx's does (lcr 0.2.0 fixed it): once the scores' L1 change
    falls below nodes x 1e-6, before the paper's cap of 18 steps here, and not a step
    sooner; the build's stored PageRank stopped by the same rule, so global reads it."""
    idx, _, question, _ = chains_index

    def walk(*sets: str) -> dict[str, Any]:
        ev = api.plan_and_retrieve(
            idx, "mixpr", question, Models.with_objects(), ["mixpr.mode=local", *sets]
        ).evidence
        return ev.info

    default = walk()
    assert default["converged"] and default["iterations"] < 18
    assert not walk(f"mixpr.max_iter={default['iterations'] - 1}")["converged"]
    reader = idx.reader("mixpr")
    assert reader.stats["pagerank_stop"] == "per-node 1e-06"
    used = api.plan_and_retrieve(
        idx, "mixpr", question, Models.with_objects(), ["mixpr.mode=global"]
    )
    assert used.evidence.info["linked"] == 0  # the stored walk: no question node joined


def test_stored_global_pagerank_is_a_dense_power_iteration_and_a_fresh_walk(
    chains_index: tuple,
) -> None:
    import numpy as np

    idx, _, _, _ = chains_index
    reader = idx.reader("mixpr")
    stored = reader.array("pagerank")
    steps = reader.stats["pagerank_iterations"]
    # oracle: the textbook dense iteration, dangling mass spread evenly, from uniform
    a = reader.csr("graph").toarray().astype(np.float64)
    sums = a.sum(axis=0)
    dangling = sums == 0
    p = np.divide(a, sums, out=np.zeros_like(a), where=~dangling)
    x = np.full(len(a), 1.0 / len(a))
    for _ in range(steps):
        x = p @ x + x[dangling].sum() / len(a)
    assert np.allclose(stored, x, rtol=1e-9, atol=1e-15)
    # global retrieval reads the stored scores; a fresh alpha=0 walk (with the
    # question node, forced by a different iteration cap) ranks the same chunks
    question = "Summarise the whole document"
    used = api.plan_and_retrieve(
        idx, "mixpr", question, Models.with_objects(), ["mixpr.mode=global"]
    )
    fresh = api.plan_and_retrieve(
        idx, "mixpr", question, Models.with_objects(), ["mixpr.mode=global", "mixpr.max_iter=30"]
    )
    assert used.evidence.info["linked"] == 0 and fresh.evidence.info["linked"] > 0
    stored_ids = {it.id for it in used.evidence.items}
    assert [it.score for it in used.evidence.items] == [
        float(stored[int(it.id[1:])]) for it in used.evidence.items
    ]
    overlap = len(stored_ids & {it.id for it in fresh.evidence.items})
    assert overlap >= 95, overlap


def test_a_text_of_one_letter_words_falls_back_to_whitespace_tokens(tmp_path: Path) -> None:
    """scikit-learn's pattern finds no word here; the fallback vocabulary still retrieves."""
    from lcr.scoring.tfidf import TfidfModel

    with pytest.raises(ValueError):  # what the fallback is for
        from sklearn.feature_extraction.text import TfidfVectorizer

        TfidfVectorizer().fit(["a b c", "d e f"])
    text = "a b c.\n\nd e f.\n\ng h i.\n\nx y z."
    model, rows = TfidfModel.fit(["a b c.", "x y z."])
    assert model.vocabulary_size > 0 and rows.nnz > 0
    idx = make_index(tmp_path, text, ["mixpr", "tfidf"], ["tfidf.chunk_tokens=4"])
    assert idx.methods["mixpr"].stats["vocabulary"] > 0
    for method, sets in (("tfidf", []), ("mixpr", ["mixpr.mode=local"])):
        ev = api.plan_and_retrieve(idx, method, "y", Models.with_objects(), sets, k=1).evidence
        assert [it.text for it in ev.items] == ["x y z."], method


def test_help_texts_are_one_short_line() -> None:
    for cls in (MixPRBuild, MixPRQuery):
        for s in cls.declared():
            assert len(s.help) <= 100 and "\n" not in s.help, s.name


def test_retrieval_links_the_question_by_the_threshold_the_graph_was_built_with(
    tmp_path: Path, cinderella: Path
) -> None:
    """``ctx.built``: the question joins the graph as a chunk would, by the build's threshold."""
    text = cinderella.read_text(encoding="utf-8")
    question, sets = "Who lost a glass slipper?", ["mixpr.link=threshold"]
    linked = {}
    for threshold in ("0.27", "0.05"):
        idx = make_index(tmp_path / threshold, text, ["mixpr"], [f"mixpr.threshold={threshold}"])
        ev = api.plan_and_retrieve(idx, "mixpr", question, Models.with_objects(), sets).evidence
        linked[threshold] = ev.info["linked"]
    assert linked["0.27"] < linked["0.05"]  # the lower build threshold links more chunks
    built = MixPRBuild.from_stored(idx.reader("mixpr").settings)
    assert built == MixPRBuild(threshold=0.05)


def zarr_layout_copy(idx: Index, dest: Path) -> Index:
    """A copy of ``idx`` whose mixpr build is stored as before the mapped layout: zarr
    arrays (the graph's values float32, as they were written), no node offsets."""
    import numpy as np
    import scipy.sparse as sp

    from lcr.store.arrays import write_array, write_csr
    from lcr.store.index import _dir_digests, _dir_files

    shutil.copytree(idx.path, dest)
    manifest = json.loads((dest / "manifest.json").read_text())
    entry = manifest["methods"]["mixpr"]
    mdir = dest / entry["dir"]
    for folder in sorted(mdir.glob("*.csr")):
        m = sp.csr_array(
            tuple(np.load(folder / f"{a}.npy") for a in ("data", "indices", "indptr")),
            shape=tuple(json.loads((folder / "shape.json").read_text())["shape"]),
        )
        shutil.rmtree(folder)
        write_csr(mdir / f"{folder.stem}.zarr", sp.csr_array(m, dtype=np.float32))
    for f in sorted(mdir.glob("*.npy")):
        if not f.name.endswith(".offsets.npy"):
            write_array(mdir / f"{f.stem}.zarr", np.load(f))
        f.unlink()
    entry["files"], entry["sha256"] = _dir_files(mdir), _dir_digests(mdir)
    (dest / "manifest.json").write_text(json.dumps(manifest))
    return Index.open(dest)


def mapped(array: object) -> bool:
    """Whether ``array`` is (a view of) a memory map rather than memory of its own."""
    import mmap

    import numpy as np

    while array is not None:
        if isinstance(array, (np.memmap, mmap.mmap)):
            return True
        array = getattr(array, "base", None)
    return False


def test_the_memory_mapped_graph_gives_the_zarr_layouts_evidence(
    chains_index: tuple, tmp_path: Path
) -> None:
    """A build maps its arrays from disk; an index in the earlier zarr layout still opens
    and answers, with the same evidence (spans, scores, ranks) for every mode."""
    import numpy as np

    idx, _, question, _ = chains_index
    stored = Index.open(idx.path).reader("mixpr")
    graph = stored.csr("graph")
    assert mapped(graph.data) and mapped(graph.indices) and mapped(stored.array("col_sums"))
    assert graph.data.dtype == np.float64 and not graph.data.flags.writeable
    old = zarr_layout_copy(idx, tmp_path / "old.idx")
    old_dir = old.path / old.methods["mixpr"].dir
    assert (old_dir / "graph.zarr").is_dir() and not list(old_dir.glob("*.npy"))
    assert old.reader("mixpr").csr("graph").data.dtype == np.float32
    for sets in (["mixpr.mode=local"], ["mixpr.mode=global"], ["mixpr.link=all"]):
        new_ev = api.plan_and_retrieve(
            Index.open(idx.path), "mixpr", question, Models.with_objects(), sets
        )
        old_ev = api.plan_and_retrieve(
            Index.open(old.path), "mixpr", question, Models.with_objects(), sets
        )
        assert len(new_ev.evidence.items) == 100
        assert [it.to_json() for it in new_ev.evidence.items] == [
            it.to_json() for it in old_ev.evidence.items
        ]


def test_a_question_reads_only_its_nodes_and_damaged_offsets_are_an_error(
    chains_index: tuple, tmp_path: Path
) -> None:
    import numpy as np

    from lcr.errors import IndexDamagedError

    idx, *_ = chains_index
    stored = Index.open(idx.path).reader("mixpr")
    picks = [0, 17, stored.node_count() - 1, 5]
    assert stored.node_count() == stored.stats["chunks"]
    assert "nodes" not in stored._nodes  # node_count read the manifest, not the records
    assert stored.nodes_at(picks) == [stored.nodes()[p] for p in picks]
    copy = tmp_path / "copy.idx"
    shutil.copytree(idx.path, copy)
    mdir = copy / idx.methods["mixpr"].dir
    offsets = np.load(mdir / "nodes.offsets.npy")
    offsets[-1] += 1
    np.save(mdir / "nodes.offsets.npy", offsets)  # same size: only the reader notices
    with pytest.raises(IndexDamagedError, match=r"nodes\.offsets\.npy"):
        Index.open(copy).reader("mixpr").nodes_at([1])


def test_question_cosines_are_bitwise_the_sparse_product(tmp_path: Path, cinderella: Path) -> None:
    """The question's cosines come from a matrix-vector product with the question as a
    dense vector (faster at scale); each must equal the sparse-sparse product's bit for
    bit, or near-ties would rank differently than before."""
    import numpy as np

    from lcr.scoring.tfidf import TfidfModel

    text = cinderella.read_text(encoding="utf-8")
    idx = make_index(tmp_path, text, ["mixpr"])
    reader = idx.reader("mixpr")
    emb, model = reader.csr("tfidf"), TfidfModel.load(reader)
    order = {node.id: i for i, node in enumerate(reader.nodes())}
    for question in ("What did the bird throw down?", "Who went to the festival at the palace?"):
        sets = ["mixpr.mode=local", "mixpr.question=whole"]  # the whole question's cosines
        res = api.plan_and_retrieve(idx, "mixpr", question, Models.with_objects(), sets)
        q = model.transform([question])
        expected = np.asarray((emb @ q.T).toarray(), dtype=np.float64).ravel()
        got = [(it.extra["similarity"], expected[order[it.id]]) for it in res.evidence.items]
        assert len(got) > 10 and any(e > 0 for _, e in got)
        assert all(a == b for a, b in got)


def test_each_score_is_what_ranked_it_and_scores_fall_in_rank_order(tmp_path: Path) -> None:
    """Issue #41: rank 6 showed 0.0 and rank 7 0.0052: the printed score was the walk's for
    chunks the similarity share had picked. Each item now carries the score that ranked it."""
    text = (Path(__file__).resolve().parents[1] / "examples" / "lighthouse.txt").read_text()
    idx = make_index(tmp_path, text, ["mixpr"], [])
    items = api.plan_and_retrieve(
        idx, "mixpr", "Who found the key that Tobias Venn hid?", Models.with_objects()
    ).evidence.items
    ranked = sorted(items, key=lambda it: it.extra["rank"])
    by = [it.extra["ranked_by"] for it in ranked]
    assert by == sorted(by, key=lambda b: b != "similarity") and set(by) == {"similarity", "walk"}
    for kind, key in (("similarity", "similarity"), ("walk", "walk")):
        scores = [it.score for it in ranked if it.extra["ranked_by"] == kind]
        assert scores == sorted(scores, reverse=True), (kind, scores)
        assert scores == [it.extra[key] for it in ranked if it.extra["ranked_by"] == kind]


def test_a_repetitive_text_is_warned_about_before_its_graph_is_written(tmp_path: Path) -> None:
    """Issue #41: 8 MB of repetitive text made a 795 MB mixpr index (609 graph links a
    chunk) without a word. The warning says what, why and the setting that bounds it."""
    line = "request from host alpha served in 12 ms with status ok and no retries. "
    text = " ".join(f"{line}{i % 3}." for i in range(1200))
    doc = Document("log.txt", text, hashlib.sha256(text.encode()).hexdigest(), len(text))
    said: list[str] = []
    idx = Index.create(tmp_path / "log.idx", [doc])
    api.plan_and_build(idx, ["mixpr"], Models.with_objects(), [], warn=said.append)
    assert len(said) == 1, said
    assert said[0].startswith("mixpr: the similarity graph links each chunk to ")
    assert "MB on disk" in said[0] and "--set mixpr.max_degree=20" in said[0]
    said.clear()
    capped = Index.create(tmp_path / "capped.idx", [doc])
    api.plan_and_build(
        capped, ["mixpr"], Models.with_objects(), ["mixpr.max_degree=20"], warn=said.append
    )
    assert said == [] and capped.size_bytes("mixpr") < idx.size_bytes("mixpr") / 3
    story = (Path(__file__).resolve().parents[1] / "examples" / "lighthouse.txt").read_text()
    prose = Document("l.txt", story, hashlib.sha256(story.encode()).hexdigest(), len(story))
    index = Index.create(tmp_path / "l.idx", [prose])
    api.plan_and_build(index, ["mixpr"], Models.with_objects(), [], warn=said.append)
    assert said == []
