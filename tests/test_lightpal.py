"""LightPAL: passages, candidates, edges, the walk, resumable scoring, and the real path.

Control flow runs on the scripted LLM (tests/fakes.py); the same path runs end
to end with the real smollm2-135m scorer and the real MiniLM embedder below.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lcr import api, pipeline
from lcr.errors import LLMCallError, ModelError
from lcr.methods import get_method
from lcr.methods.base import NOTHING, Needs
from lcr.methods.lightpal.graph import (
    Walk,
    context_passages,
    dense_candidates,
    edge_matrix,
    top_edges,
)
from lcr.methods.lightpal.method import LightPALBuild, LightPALQuery
from lcr.methods.lightpal.passages import PASSAGE_SHAPES, cut_passages, head_of
from lcr.methods.lightpal.scoring import (
    CONTEXT_SCORES,
    MEAN_ONLY_VERSION,
    SCORER_NEEDS,
    PairScorer,
    context_scores,
)
from lcr.models.base import ContinuationScore
from lcr.models.container import Models
from lcr.progress import NULL_PROGRESS
from lcr.store import Document, Index, LLMCache
from tests.asking import ask_with
from tests.conftest import FIXTURES, SHARED_DATA, needs_shared_data
from tests.fakes import ScriptedLLM

FAST = ["lightpal.scorer=llm"]


def _doc(name: str, text: str) -> Document:
    raw = text.encode("utf-8")
    return Document(name, text, hashlib.sha256(raw).hexdigest(), len(raw))


def _cut(text: str, chars: int) -> str:
    text = text.strip()
    cut = text.rfind("\n\n", 0, chars)
    return text[: cut if cut > 0 else chars].strip()


def _stories(n: int, chars: int) -> list[tuple[str, str]]:
    """The first ``chars`` characters (cut at a paragraph) of up to 3 real texts from
    tests/data: a SQuALITY story, Cinderella, a QMSum meeting."""
    squality = json.loads((FIXTURES / "squality.jsonl").read_text(encoding="utf-8"))
    meeting = json.loads((FIXTURES / "qmsum.jsonl").read_text(encoding="utf-8"))
    texts = [
        squality["document"],
        (FIXTURES / "cinderella.txt").read_text(encoding="utf-8"),
        "\n".join(f"{t['speaker']}: {t['content']}" for t in meeting["meeting_transcripts"]),
    ]
    assert n <= len(texts)
    return [(f"story{i}.txt", _cut(text, chars)) for i, text in enumerate(texts[:n])]


def _squality_stories(n: int, chars: int) -> list[tuple[str, str]]:
    """The first ``chars`` characters of ``n`` SQuALITY stories (the full data set)."""
    out = []
    with (SHARED_DATA / "squality" / "dev.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            out.append((f"story{len(out)}.txt", _cut(json.loads(line)["document"], chars)))
            if len(out) == n:
                break
    return out


# ------------------------------------------------------------------ passages


def test_passages_are_about_1000_characters_with_exact_spans(cinderella: Path) -> None:
    text = cinderella.read_text("utf-8")
    second = _stories(1, 6000)[0][1]
    source = text + "\n\n" + second
    docs = [(0, 0, text), (1, len(text) + 2, second)]
    passages = cut_passages(docs, "chars", 1000)
    assert {p.doc for p in passages} == {0, 1}
    assert all(source[p.start : p.end] == p.text for p in passages)
    assert all(len(p.text) <= 1000 for p in passages)
    sizes = [len(p.text) for p in passages]
    assert np.median(sizes) > 600  # packed towards the size, not one paragraph each
    # no text lost: every non-space character lies in a passage
    covered = sum(len("".join(p.text.split())) for p in passages)
    assert covered == len("".join(source.split()))


def test_sections_keep_blank_line_blocks_whole() -> None:
    sections = ["First section.\nIt has two lines.", "Second " * 400, "Third."]
    text = "\n\n".join(sections)
    passages = cut_passages([(0, 0, text)], "sections", 1000)
    assert [p.text for p in passages] == [s.strip() for s in sections]


def test_head_of_keeps_the_first_tokens() -> None:
    text = "one two three four five six"
    assert head_of(text, 0) == text
    assert head_of(text, 3) == "one two three"


# ------------------------------------------------------------------ contract


PAPER = Path(__file__).resolve().parents[2] / "shared" / "papers" / "lightpal.txt"


def test_citation_names_every_author_the_year_and_the_title() -> None:
    assert get_method("lightpal").paper == (
        "Enomoto, Takeoka, Akimoto, Gashteovski and Oyamada (NEC) 2025, LightPAL: "
        "Lightweight Passage Retrieval for Open Domain Multi-Document Summarization"
    )


# the title page and appendix A.2's Story prompt (Listing 4), carried so every clone runs
PAPER_LINES = json.loads(
    (Path(__file__).parent / "data" / "papers" / "lightpal_prompt.json").read_text("utf-8")
)


@pytest.mark.skipif(not PAPER.exists(), reason="the paper's text (../shared/papers) is not here")
def test_the_fixture_lines_are_the_papers_text() -> None:
    text = PAPER.read_text(encoding="utf-8")
    for key in ("title_page", "listing_4"):
        assert "\n".join(PAPER_LINES[key]) in text, key


def test_citation_matches_the_papers_title_page() -> None:
    """The title, and the authors' surnames in the paper's order, as its first page has them."""
    lines = [line.strip() for line in PAPER_LINES["title_page"]]
    lines = [line for line in lines if line]
    title = lines[0]
    author_block = " ".join(lines[1 : next(i for i, x in enumerate(lines) if x[0] in "¹²")])
    surnames = re.findall(r"([A-Z][a-z]+)[¹²]", author_block)
    citation = get_method("lightpal").paper
    assert citation.endswith(title)
    assert re.findall(r"[A-Z][a-z]+", citation.split(" (")[0]) == surnames


def test_settings_and_needs() -> None:
    method = get_method("lightpal")
    assert LightPALBuild.by_name()["passages"].choices == PASSAGE_SHAPES
    for cls in (LightPALBuild, LightPALQuery):
        assert all(len(s.help) <= 100 for s in cls.declared())
    # the scorer is the --llm model, or a second model the build loads
    assert method.build_needs(LightPALBuild(scorer="llm")) == Needs(llm=SCORER_NEEDS, embedder=True)
    own = method.build_needs(LightPALBuild(scorer="smollm2-135m"))
    assert own == Needs(embedder=True, scorer=SCORER_NEEDS, scorer_model="smollm2-135m")
    assert not own.uses_llm
    # no LLM to retrieve; the embedder only for a dense initial ranking
    assert method.retrieve_needs(LightPALQuery()) == NOTHING
    assert method.retrieve_needs(LightPALQuery(initial="dense")) == Needs(embedder=True)


def test_a_build_from_before_context_score_is_not_read_as_sums() -> None:
    """lcr 0.2.0 retired the old name passage_chars and the old builds' mean scores: a
    manifest that old is not read as today's build (lcr.pipeline.integrity)."""
    from lcr.pipeline.integrity import retired_reading

    method = get_method("lightpal")
    old = {"passage_chars": 800}
    assert retired_reading(method, old) == ("lightpal.context_score=mean", "")
    assert not pipeline._same_settings(method, old, LightPALBuild(chunk_chars=800))
    recorded = {**LightPALBuild().to_json(), "passage_chars": 800}
    del recorded["chunk_chars"]
    assert retired_reading(method, recorded) == (
        "lightpal.passage_chars=800",
        "lightpal.chunk_chars=800",
    )


# --------------------------------------------------------------------- graph


def test_dense_candidates_exclude_self_and_rank_by_cosine() -> None:
    rng = np.random.default_rng(0)
    emb = rng.normal(size=(30, 8)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    cands = dense_candidates(emb, 5, block=7)  # several row blocks
    sims = emb @ emb.T
    for i, c in enumerate(cands):
        assert len(c) == 5 and i not in c
        expected = [j for j in np.argsort(-sims[i], kind="stable") if j != i][:5]
        assert list(c) == expected
    assert all(len(c) == 29 for c in dense_candidates(emb, 100))  # k' capped at n - 1


def test_top_edges_keep_k_best_scores() -> None:
    cands = np.array([4, 7, 1, 9])
    targets, scores = top_edges(cands, np.array([-2.0, -0.5, -3.0, -0.5]), 2)
    assert list(targets) == [7, 9] and list(scores) == [-0.5, -0.5]  # ties: candidate order


def _chain_walk(n: int) -> Walk:
    """i -> i + 1 for the first half; the second half is a separate cycle."""
    half = n // 2
    targets = [np.array([i + 1]) if i + 1 < half else np.array([0]) for i in range(half)]
    targets += [np.array([half + (i + 1) % (n - half)]) for i in range(n - half)]
    return Walk.from_edges(edge_matrix(n, targets, [np.ones(1)] * n))


def test_walk_restarts_only_on_the_initial_passages() -> None:
    walk = _chain_walk(20)
    fill = context_passages(walk, [0, 3], 5, initial_share=0.6, restart_top=2, alpha=0.2)
    assert fill.initial == [0, 3]  # 60% of 5, rounded
    assert fill.restart == [0, 3]
    # nothing outside the restart set's component is ever reached
    assert np.all(fill.ppr[10:] == 0) and fill.ppr[:10].sum() == pytest.approx(1.0)
    # no edges followed (alpha 0): all mass stays, uniformly, on the restart set
    still = context_passages(walk, [0, 3], 5, initial_share=0.6, restart_top=2, alpha=0.0)
    assert np.flatnonzero(still.ppr).tolist() == [0, 3]
    assert still.ppr[0] == pytest.approx(0.5)
    # the walk's successors of the initial passages come next, then the rest of the ranking
    assert set(fill.context[:2]) == {1, 4}
    assert len(fill.initial) + len(fill.context) == 5
    assert not set(fill.initial) & set(fill.context)


def test_the_walk_restarts_on_d_init_not_the_rankings_top_20() -> None:
    """Section 5.1's walk restarts on D_init (lcr 0.2.0 fixed the reading): the context
    is what D_init's passages point to, not the ranking's ranks 4-20, whatever restart
    mass they would carry."""
    n = 30
    targets = [np.array([25]) for _ in range(3)]  # D_init (ranks 1-3) -> 25
    targets += [np.array([3 + (i - 2) % 17]) for i in range(3, 20)]  # ranks 4-20: a cycle
    targets += [np.array([25])] * 5 + [np.array([26])] + [np.array([27])] * 4  # 25 -> 26
    walk = Walk.from_edges(edge_matrix(n, targets, [np.ones(1)] * n))
    ranking = list(range(20))
    args = {"initial_share": 0.6, "restart_top": 20, "alpha": 0.2}
    fill = context_passages(walk, ranking, 5, **args)
    assert fill.initial == fill.restart == [0, 1, 2]
    assert fill.context == [25, 26] and fill.from_ranking == 0
    # restart_top caps D_init too (it never exceeds it at the paper's K = 5, 10, 20)
    capped = context_passages(walk, ranking, 5, **{**args, "restart_top": 2})
    assert capped.restart == [0, 1]
    assert LightPALQuery.fixed["restart"].value == "d_init"


def test_context_fill_falls_back_to_the_ranking_when_the_walk_runs_dry() -> None:
    n = 8
    walk = Walk.from_edges(edge_matrix(n, [np.zeros(0, dtype=np.int64)] * n, [np.zeros(0)] * n))
    fill = context_passages(walk, [5, 2, 7, 1], 4, initial_share=0.5, restart_top=1, alpha=0.2)
    assert fill.initial == [5, 2]
    assert fill.context == [7, 1] and fill.from_ranking == 2


# ------------------------------------------------------------ build, resume


class CountingLLM(ScriptedLLM):
    """The scripted scorer, recording every pair it scores; can fail after N passages."""

    def __init__(self, fail_after: int | None = None) -> None:
        super().__init__()
        self.pairs: list[tuple[str, str]] = []
        self.passages = 0
        self.fail_after = fail_after

    def continuation_logprobs(
        self, context: str, continuations: Sequence[str], *, max_tokens: int | None = None
    ) -> list[ContinuationScore]:
        if self.fail_after is not None and self.passages >= self.fail_after:
            raise RuntimeError("killed")
        self.passages += 1
        self.pairs.extend((context, c) for c in continuations)
        return super().continuation_logprobs(context, continuations, max_tokens=max_tokens)


def _index(tmp: Path, docs: list[tuple[str, str]]) -> Index:
    return Index.create(tmp, [_doc(name, text) for name, text in docs])


def test_killed_build_resumes_without_scoring_a_pair_twice(
    tmp_path: Path, cinderella: Path, embedder: Any
) -> None:
    index = _index(tmp_path / "c.idx", [("cinderella.txt", cinderella.read_text("utf-8"))])
    sets = [*FAST, "lightpal.candidates=6"]
    first = CountingLLM(fail_after=5)
    with pytest.raises(LLMCallError, match="resume"):
        api.plan_and_build(
            index, ["lightpal"], Models.with_objects(llm=first, embedder=embedder), sets
        )
    assert "lightpal" not in Index.open(tmp_path / "c.idx").methods  # nothing half-built
    second = CountingLLM()
    warnings: list[str] = []
    api.plan_and_build(
        index,
        ["lightpal"],
        Models.with_objects(llm=second, embedder=embedder),
        sets,
        warn=warnings.append,
    )
    stats = index.methods["lightpal"].stats
    n = index.methods["lightpal"].counts["nodes"]
    assert first.passages == 5 and second.passages == n - 5
    both = first.pairs + second.pairs
    assert len(both) == len(set(both)) == n * 6  # every pair once, none twice
    assert stats["pairs"] == n * 6 and stats["pairs_cached"] == 5 * 6
    assert stats["pairs_scored"] == (n - 5) * 6
    assert any("pairs" in w and "about" in w for w in warnings)
    # a third build with other edges re-uses every score
    third = CountingLLM()
    api.plan_and_build(
        index,
        ["lightpal"],
        Models.with_objects(llm=third, embedder=embedder),
        [*sets, "lightpal.edges=2"],
    )
    assert third.passages == 0
    edges = index.reader("lightpal").csr("edges")
    assert edges.shape == (n, n) and np.diff(edges.indptr).max() <= 2
    assert edges.diagonal().sum() == 0


@pytest.mark.parametrize("context_score", ["sum", "mean"])
def test_at_most_k_edges_each_the_best_scored(
    tmp_path: Path, cinderella: Path, embedder: Any, context_score: str
) -> None:
    index = _index(tmp_path / "c.idx", [("cinderella.txt", cinderella.read_text("utf-8"))])
    llm = CountingLLM()
    sets = [*FAST, f"lightpal.context_score={context_score}"]
    api.plan_and_build(index, ["lightpal"], Models.with_objects(llm=llm, embedder=embedder), sets)
    reader = index.reader("lightpal")
    edges = reader.csr("edges")
    nodes = reader.nodes()
    assert np.diff(edges.indptr).max() <= 5 and edges.nnz > 0
    per_token = context_score == "mean"
    for i, node in enumerate(nodes):
        row = edges[[i], :].toarray().ravel()
        kept = np.flatnonzero(row)
        scored = {
            c: llm.continuation_logprob(node.text, c) / (llm.count_tokens(c) if per_token else 1)
            for _, c in [p for p in llm.pairs if p[0] == node.text]
        }
        best = sorted(scored.values(), reverse=True)[: len(kept)]
        assert sorted(row[kept].tolist(), reverse=True) == pytest.approx(best, abs=1e-3)


def test_context_score_is_the_papers_sum_or_lcrs_mean_per_token() -> None:
    assert LightPALBuild().context_score == "sum"  # the paper's P_LM(d_j | d_i)
    declared = LightPALBuild.by_name()["context_score"]
    assert declared.paper and declared.choices == CONTEXT_SCORES
    logprobs, tokens = np.array([-30.0, -8.0, -5.0]), np.array([30, 4, 0])
    assert context_scores(logprobs, tokens, "sum").tolist() == [-30.0, -8.0, -5.0]
    # per token the long candidate wins over the short one; no token scores 0
    assert context_scores(logprobs, tokens, "mean").tolist() == [-1.0, -2.0, 0.0]
    with pytest.raises(ValueError, match="context_score"):
        context_scores(logprobs, tokens, "max")  # type: ignore[arg-type]


def test_one_scoring_pass_serves_both_context_scores(
    tmp_path: Path, cinderella: Path, embedder: Any
) -> None:
    """The cache keeps each pair's sum and token count: the other score needs no LLM,
    and the two graphs differ where length decides (the scripted score favours short)."""
    index = _index(tmp_path / "c.idx", [("cinderella.txt", cinderella.read_text("utf-8"))])
    sets = [*FAST, "lightpal.candidates=6", "lightpal.edges=2"]
    first = CountingLLM()
    models = Models.with_objects(llm=first, embedder=embedder)
    api.plan_and_build(index, ["lightpal"], models, [*sets, "lightpal.context_score=mean"])
    mean_edges = index.reader("lightpal").csr("edges")
    assert first.passages > 0
    second = CountingLLM()
    (report,) = api.plan_and_build(
        index,
        ["lightpal"],
        Models.with_objects(llm=second, embedder=embedder),
        [*sets, "lightpal.context_score=sum"],
    )
    assert report.built and second.passages == 0  # every pair read back from the cache
    assert index.methods["lightpal"].settings["context_score"] == "sum"
    sum_edges = index.reader("lightpal").csr("edges")
    assert (sum_edges != mean_edges).nnz > 0  # the scores differ, and so do the edges


def test_a_mean_only_cache_serves_mean_and_sum_scores_again(tmp_path: Path) -> None:
    """Entries from before the sum was offered hold means only: never read as sums."""
    cache = LLMCache(tmp_path / "lightpal.jsonl")
    llm = CountingLLM()
    prefix, conts = "The prince searched the kingdom.", ["He found her.", "Rain fell on the hills."]
    old = PairScorer(llm, cache, 1024, 0, context_score="mean")
    cache.put(old._key(prefix, conts, MEAN_ONLY_VERSION), {"scores": [-0.25, -0.5]})

    def task(pairs: int) -> Any:
        return NULL_PROGRESS.task("scoring", total=pairs)

    means = PairScorer(llm, cache, 1024, 0, context_score="mean").score_all(
        [prefix], conts, [np.array([0, 1])], task
    )
    assert means[0].tolist() == [-0.25, -0.5] and llm.passages == 0
    sums = PairScorer(llm, cache, 1024, 0, context_score="sum").score_all(
        [prefix], conts, [np.array([0, 1])], task
    )
    assert llm.passages == 1  # scored again, not the old means taken for sums
    assert sums[0].tolist() == [llm.continuation_logprob(prefix, c) for c in conts]


def test_index_from_before_context_score_was_built_with_the_mean(
    tmp_path: Path, cinderella: Path, embedder: Any
) -> None:
    """0.2.0 reads no legacy value: a manifest without context_score is out of date,
    for mean and for the paper's sum alike, and rebuilt from the cache (no pair is
    scored again)."""
    path = tmp_path / "c.idx"
    index = _index(path, [("cinderella.txt", cinderella.read_text("utf-8")[:4000])])
    sets = [*FAST, "lightpal.candidates=3", "lightpal.context_score=mean"]
    api.plan_and_build(
        index, ["lightpal"], Models.with_objects(llm=CountingLLM(), embedder=embedder), sets
    )
    manifest = json.loads((path / "manifest.json").read_text(encoding="utf-8"))
    del manifest["methods"]["lightpal"]["settings"]["context_score"]
    (path / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    old = Index.open(path)
    assert "context_score" not in old.methods["lightpal"].settings
    llm = CountingLLM()
    models = Models.with_objects(llm=llm, embedder=embedder)
    (report,) = api.plan_and_build(old, ["lightpal"], models, sets)
    assert report.built and llm.passages == 0
    (report,) = api.plan_and_build(Index.open(path), ["lightpal"], models, sets)
    assert not report.built  # now written down: up to date
    (report,) = api.plan_and_build(Index.open(path), ["lightpal"], models, sets[:-1])  # sum
    assert report.built and llm.passages == 0


def test_missing_scorer_is_one_clear_error(
    tmp_path: Path, cinderella: Path, embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lcr.models import cache, presets

    monkeypatch.setattr(presets.Preset, "installed", lambda self: False)
    monkeypatch.setattr(cache, "has_dequantized", lambda name: False)
    index = _index(tmp_path / "c.idx", [("cinderella.txt", cinderella.read_text("utf-8"))])
    models = Models.with_objects(llm=CountingLLM(), embedder=embedder)
    with pytest.raises(ModelError) as err:
        api.plan_and_build(index, ["lightpal"], models, ["lightpal.scorer=qwen2.5-coder-0.5b"])
    message = str(err.value)
    assert "lcr models install qwen2.5-coder-0.5b" in message
    assert "lightpal.scorer=smollm2-135m" in message and "\n" not in message


# -------------------------------------------------------------- real models


@needs_shared_data
def test_true_predecessor_makes_a_passage_likelier(smollm: Any, tmp_path: Path) -> None:
    """On real text, ContextScore(d_i, d_i+1) beats ContextScore(unrelated, d_i+1), scored
    as a build scores it: the default settings' PairScorer, whose default ContextScore is
    the paper's sum of log P(d_j | d_i) over d_j's tokens (not the per-token mean).

    (Measured with smollm2-135m: as candidates of one d_i, a true successor and an
    unrelated passage are not reliably ordered, since a passage's own fluency
    weighs more in its log-probability than the context does; the README says so.)
    """
    story = _squality_stories(1, 6000)[0][1]
    other = _squality_stories(3, 6000)[2][1]
    ours = cut_passages([(0, 0, story)], "chars", 500)
    theirs = cut_passages([(0, 0, other)], "chars", 500)
    steps = range(1, 5)
    built = LightPALBuild()
    scorer = PairScorer(
        smollm,
        LLMCache(tmp_path / "lightpal.jsonl"),
        built.max_tokens,
        built.continuation_tokens,
        context_score=built.context_score,
    )
    # each successor d_i+1 is the one candidate of its true d_i and of an unrelated passage
    texts = [ours[i].text for i in steps] + [theirs[i].text for i in steps]
    successors = [ours[i + 1].text for i in steps]
    candidates = [np.array([j]) for j in range(len(successors))] * 2
    scores = scorer.score_all(
        texts, successors, candidates, lambda pairs: NULL_PROGRESS.task("scoring", total=pairs)
    )
    for j, i in enumerate(steps):
        (true,) = smollm.continuation_logprobs(ours[i].text, [successors[j]])
        (false,) = smollm.continuation_logprobs(theirs[i].text, [successors[j]])
        assert true.tokens == false.tokens
        # the build's score is the sum, the paper's ContextScore
        assert scores[j][0] == pytest.approx(true.logprob, rel=1e-4)
        assert scores[len(steps) + j][0] == pytest.approx(false.logprob, rel=1e-4)
        assert scores[j][0] > scores[len(steps) + j][0], i


@pytest.mark.slow
def test_multi_document_index_answers_through_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Three stories, one index, the real smollm2-135m scorer and answerer, through the CLI."""
    from lcr.cli.main import main

    files = []
    for name, text in _stories(3, 1500):
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        files.append(str(path))
    out = tmp_path / "corpus.idx"
    common = ["--llm", "smollm2-135m", "--device", "cpu", "-q"]
    sets = ["lightpal.scorer=smollm2-135m", "lightpal.candidates=2", "lightpal.chunk_chars=800",
            "lightpal.continuation_tokens=16"]  # fmt: skip
    with pytest.raises(SystemExit) as ex:
        main(["index", *files, "-o", str(out), "-m", "lightpal", *common,
              *[a for s in sets for a in ("--set", s)]])  # fmt: skip
    assert ex.value.code == 0, capsys.readouterr().err
    index = Index.open(out)
    entry = index.methods["lightpal"]
    assert entry.stats["scorer"] == "smollm2-135m"
    assert entry.models["scorer"] == "smollm2-135m"  # the scorer role the build was bound to
    assert entry.stats["pairs_scored"] == entry.counts["nodes"] * 2
    assert entry.stats["llm_usage"]["cached_tokens"] > 0  # d_i encoded once per passage
    assert len({n.doc for n in index.reader("lightpal").nodes()}) == 3
    capsys.readouterr()
    with pytest.raises(SystemExit) as ex:
        main(["ask", str(out), "Who is the story about?", "-m", "lightpal", "-k", "5",
              "--json", "--max-new-tokens", "16", *common])  # fmt: skip
    captured = capsys.readouterr()
    assert ex.value.code == 0, captured.err
    obj = json.loads(captured.out.strip().splitlines()[-1])
    assert isinstance(obj["answer"], str) and obj["answer"].strip()
    roles = [ev["role"] for ev in obj["evidence"]]
    assert roles.count("initial") == 3 and roles.count("context") == 2
    source = index.source
    for ev in obj["evidence"]:
        assert ev["document"] == Path(files[ev["doc"]]).name
        ((s, e),) = ev["spans"]
        assert source[s:e] == ev["text"]
    assert obj["info"]["context_passages"] == 2


def _listing_4(items: Any, docs: list[tuple[str, str]]) -> str:
    """Appendix A.2's Story prompt (Listing 4, the paper's lines) filled in as the paper's
    placeholders say: 200 words, each story's sections under it, then the question."""
    lines = [x for x in PAPER_LINES["listing_4"] if x.strip() != "```"]
    template = "\n".join(lines[: lines.index("SUMMARY:") + 1])
    block = "# STORY: {{story_idx}}\n## SECTION: {passage_idx}\n{{passage}}\n"
    block += "... (repeated for all retrieved passages)"
    assert block in template
    sections, story = [], None
    for it in items:
        if it.doc != story:
            story = it.doc
            sections.append(f"# STORY: {docs[it.doc][0]}")
        sections += [f"## SECTION: {it.id}", it.text]
    filled = template.replace(block, "\n".join(sections)).replace("{{n_summ_words}}", "200")
    return filled.replace("{{query}}", "What happens in the stories?")


def test_answers_use_the_papers_prompt(tmp_path: Path, embedder: Any) -> None:
    """The whole prompt is Listing 4 filled in (whitespace aside), not only its pieces."""
    docs = _stories(2, 2500)
    index = _index(tmp_path / "two.idx", docs)
    llm = CountingLLM()
    models = Models.with_objects(llm=llm, embedder=embedder)
    api.plan_and_build(index, ["lightpal"], models, [*FAST, "lightpal.candidates=4"])
    result = api.plan_and_ask(index, "lightpal", "What happens in the stories?", models, k=4)
    prompt = llm.prompts[-1][-1]["content"]
    # the paper's prompt reads the passages in document order (each story's together)
    read = sorted(result.evidence.items, key=lambda it: (it.doc, it.spans[0][0]))
    assert " ".join(prompt.split()) == " ".join(_listing_4(read, docs).split())
    assert prompt.startswith("You are a helpful assistant that gives long answer")
    assert "approximately 200 words" in prompt
    assert prompt.rstrip().endswith("QUESTION: What happens in the stories?\nSUMMARY:")
    for it in result.evidence.items:
        assert f"## SECTION: {it.id}\n{it.text}" in prompt
    stories = {docs[it.doc][0] for it in result.evidence.items}
    assert {
        line[len("# STORY: ") :] for line in prompt.splitlines() if line.startswith("# STORY:")
    } == stories
    assert result.answer_settings is not None and result.answer_settings["step"] == "lightpal"
    # the counting LLM's three words are in no run of the stories: shown unquoted
    short = ask_with(
        index, "lightpal", "What happens?", models, k=4, max_new_tokens=3, unquoted="show"
    )
    assert short.answer is not None and len(short.answer.split()) == 3  # --max-new-tokens
    shared = api.plan_and_ask(index, "lightpal", "Q?", models, ["lightpal.prompt=shared"], k=4)
    # the shared step's prompt, last: its support check reads words and asks nothing
    assert llm.prompts[-1][-1]["content"].startswith("Excerpts:")
    assert shared.answer_settings is not None and shared.answer_settings["step"] == "shared"
