"""LightPAL (Enomoto et al., NEC, 2025) on the shared method contract.

Build (section 4, 5.1): passages (``passages``); their embeddings; each
passage's ``k'`` most similar passages as candidates (``graph``); every
candidate pair scored by the scorer LLM (``scoring``, resumable; the
ContextScore summed, the paper's, or per token: ``context_score``); the top
``k`` candidates per passage kept as directed edges, stored as a sparse matrix
with their scores. A BM25 index over the passages serves the initial step.

Retrieve: the initial ranking (BM25 or dense) gives D_init, the top 60% of K;
personalised PageRank on the graph, restarting on D_init, gives the rest. No LLM
call at query time.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np

from lcr.answer.shared import AnswerResult, answer
from lcr.config import Fixed, Settings, SettingValue, retired, setting
from lcr.estimate.figures import BuildEstimate
from lcr.evidence import Evidence
from lcr.methods.base import (
    NOTHING,
    SHARED_ANSWER,
    TOP_K,
    AnswerContext,
    AnswerStep,
    BuildContext,
    EstimateContext,
    Method,
    Needs,
    NoState,
    QueryContext,
    item_from_node,
    top_indices,
)
from lcr.methods.lightpal.graph import (
    ContextFill,
    Walk,
    context_passages,
    dense_candidates,
    edge_matrix,
    top_edges,
)
from lcr.methods.lightpal.passages import cut_passages, head_of
from lcr.methods.lightpal.prompt import summary_prompt
from lcr.methods.lightpal.scoring import SCORER_NEEDS, SMALLER_SCORER, USE_LLM, PairScorer
from lcr.scoring.bm25 import BM25Index, bm25_tokenize
from lcr.store import MethodReader, Node


def _bm25_tokens(texts: list[str]) -> list[list[str]]:
    """English stop words and Snowball stems, as lcr's bm25 baseline by default."""
    return bm25_tokenize(texts, "en", "english")


_DOCS = "docs/methods/lightpal.md"  # where lcr's measured defaults are written up
# The paper prompt's "approximately N words" (the paper gives no N): between the median
# (180) and the mean (226) of ODSum Story's 500 dev reference summaries:
# docs/methods/lightpal.md#how-the-defaults-were-chosen
ANSWER_WORDS = 200


@dataclass(frozen=True)
class LightPALBuild(Settings):
    """Passages, candidates and the scored graph (sections 4, 5.1)."""

    # PASSAGE_SHAPES (passages.py)
    passages: Literal["chars", "sections"] = setting(
        "chars",
        "chars: ~chunk_chars characters at paragraphs, then sentences; sections: blank-line blocks",
        paper=True,  # chars: the paper's Meeting passages; sections: its Story ones
    )
    chunk_chars: int = setting(
        1000,
        "passage size in characters (passages=chars)",
        paper=True,
        low=50,
    )
    candidates: int = setting(
        100,
        "candidates per passage by embedding cosine, each scored by the LLM (the paper's k')",
        paper=True,
        low=1,
    )
    edges: int = setting(
        5, "best-scored candidates kept as out-edges (the paper's k)", paper=True, low=1
    )
    scorer: str = setting(
        "qwen2.5-coder-0.5b",
        "scorer LLM of P(d_j | d_i); 'llm' = --llm",
        nearest="Qwen2.5-0.5B",  # the same family and size; the paper's own is no preset
        free_text="an LLM preset, .gguf file, model folder or hub id, or 'llm'",
    )
    max_tokens: int = setting(
        1024,
        "a scored pair (d_i then d_j) cut to this many scorer tokens together",
        paper=True,
        low=2,
    )
    continuation_tokens: int = setting(
        0,
        "score only the first N tokens of d_j (0 = all, the paper); the faster setting",
        paper=True,
        low=0,
    )
    # CONTEXT_SCORES (scoring.py)
    context_score: Literal["sum", "mean"] = setting(
        "sum",
        "ContextScore: sum, log P(d_j | d_i) summed over d_j's tokens (the paper); mean, per token",
        paper=True,
    )


@dataclass(frozen=True)
class LightPALQuery(Settings):
    """The initial ranking, the walk, and the answer prompt."""

    top_k: int = setting(
        10, "passages returned (the paper's K: 5, 10, 20; -k overrides)", paper=True, low=1
    )
    initial: Literal["bm25", "dense"] = setting(
        "bm25", "initial retriever of D_init", measured=f"{_DOCS}#odsum-story-retrieval"
    )
    initial_share: float = setting(
        0.6,
        "share of K taken from the initial ranking (|D_init| / K; section 5.1: top 60% of K)",
        paper=True,
        low=0.0,
        high=1.0,
    )
    restart_top: int = setting(
        20, "the walk restarts on at most this many passages of D_init", paper=True, low=1
    )
    prompt: Literal["paper", "shared"] = setting(
        "paper",
        "answer prompt: paper (appendix A.2: sections under their story) or shared (lcr's prompt)",
        paper=True,
    )
    alpha: float = setting(
        0.2,
        "PPR damping (the paper's alpha): the walk restarts with probability 1 - alpha",
        paper=True,
        low=0.0,
        high=1.0,
    )
    fixed = retired(
        restart=Fixed("d_init", "the ranking's top 20 was never better on ODSum Story"),
        answer_words=Fixed(ANSWER_WORDS, "ODSum Story's reference summaries' length"),
    )


class LightPAL(Method[LightPALBuild, LightPALQuery]):
    name = "lightpal"
    manual = "docs/methods/lightpal.md"
    k_option = TOP_K
    quick_build_settings: ClassVar[Mapping[str, SettingValue]] = {"scorer": "llm"}
    summary = (
        "passage graph whose edges an LLM scores by P(d_j | d_i); BM25/dense passages plus "
        "personalised-PageRank context passages"
    )
    paper = (
        "Enomoto, Takeoka, Akimoto, Gashteovski and Oyamada (NEC) 2025, LightPAL: "
        "Lightweight Passage Retrieval for Open Domain Multi-Document Summarization"
    )
    answer_note = (
        "with lightpal.prompt=paper (default) the paper's prompt answers (appendix A.2: "
        "sections under their story, in document order): answer.order, passages, "
        "instruction and not_found do not apply, and answer.check=quote|both does (the "
        "prompt then asks for a quote, checked against the passages read); with "
        "lightpal.prompt=shared they all do"
    )
    built_by_default = False
    build_settings = LightPALBuild
    query_settings = LightPALQuery

    def build_needs(self, settings: LightPALBuild) -> Needs:
        """The embedder, and the scorer: the --llm model itself (lightpal.scorer=llm) or
        its own model, loaded by the build (slow: k' pairs per passage)."""
        if settings.scorer == USE_LLM:
            return Needs(llm=SCORER_NEEDS, embedder=True)
        return Needs(
            embedder=True,
            scorer=SCORER_NEEDS,
            scorer_model=settings.scorer,
            scorer_missing=SMALLER_SCORER,
        )

    def retrieve_needs(self, settings: LightPALQuery) -> Needs:
        return Needs(embedder=True) if settings.initial == "dense" else NOTHING

    def answer_step(self, settings: LightPALQuery) -> AnswerStep[Any, Any]:
        """The paper's prompt (appendix A.2), unless ``lightpal.prompt=shared``."""
        return PAPER_PROMPT if settings.prompt == "paper" else SHARED_ANSWER

    def estimate(self, ctx: EstimateContext[LightPALBuild]) -> BuildEstimate:
        """k' scored pairs per passage of the build's own cutter: the pairs exact."""
        from lcr.methods.lightpal.estimate import estimate_scoring

        s = ctx.settings
        texts = [p.text for p in cut_passages(ctx.documents, s.passages, s.chunk_chars)]
        heads = [head_of(x, s.continuation_tokens) for x in texts]
        scorer = ctx.llm if s.scorer == USE_LLM else s.scorer
        role = "llm" if s.scorer == USE_LLM else "scorer"
        return estimate_scoring(
            texts, heads, ctx.tokenizer(scorer), s.candidates, s.max_tokens, role
        )

    # ------------------------------------------------------------------ build
    def build(self, ctx: BuildContext[LightPALBuild]) -> None:
        s = ctx.settings
        seconds: dict[str, float] = {}

        t = time.perf_counter()
        passages = cut_passages(ctx.doc_texts(), s.passages, s.chunk_chars)
        nodes = [
            Node(f"p{i}", 0, p.text, [(p.start, p.end)], p.doc) for i, p in enumerate(passages)
        ]
        texts = [n.text for n in nodes]
        bm25 = BM25Index.fit(_bm25_tokens(texts))
        seconds["passages_bm25"] = time.perf_counter() - t

        t = time.perf_counter()
        # every row normalised again, as LightPAL's builds always did (the same bytes)
        emb = ctx.embed(texts, "lightpal: embedding passages", renormalise_whole=True)
        candidates = dense_candidates(emb, s.candidates)
        seconds["embedding_candidates"] = time.perf_counter() - t

        t = time.perf_counter()
        scorer_llm = ctx.models.llm if s.scorer == USE_LLM else ctx.models.scorer
        seconds["scorer_load"] = time.perf_counter() - t
        scorer = PairScorer(
            scorer_llm,
            ctx.cache,
            s.max_tokens,
            s.continuation_tokens,
            context_score=s.context_score,
            warn=ctx.warn,
        )
        heads = [head_of(x, s.continuation_tokens) for x in texts]
        scores = scorer.score_all(
            texts,
            heads,
            candidates,
            lambda pairs: ctx.progress.task("lightpal: scoring passage pairs", total=pairs),
        )
        seconds["scoring"] = time.perf_counter() - t - seconds["scorer_load"]

        k = s.edges
        kept = [top_edges(c, sc, k) for c, sc in zip(candidates, scores, strict=True)]
        edges = edge_matrix(len(nodes), [e[0] for e in kept], [e[1] for e in kept])

        ctx.out.write_nodes(nodes)
        ctx.out.write_array("embeddings", emb)
        ctx.out.write_csr("edges", edges)
        bm25.save(ctx.out)
        ctx.out.counts["edges"] = int(edges.nnz)
        ctx.out.stats.update(
            {
                "scorer": scorer_llm.model_id,
                "scorer_backend": str(scorer_llm.backend),
                **scorer.stats.to_json(),
                "seconds": {key: round(v, 3) for key, v in seconds.items()},
            }
        )

    # --------------------------------------------------------------- retrieve
    def check_stored(self, stored: MethodReader, built: LightPALBuild) -> None:
        n = len(stored.nodes())
        _stored_walk(stored, n)
        _stored_embeddings(stored, n)
        BM25Index.load(stored, documents=n)

    def _ranking(
        self, ctx: QueryContext[LightPALBuild, LightPALQuery], question: str, n: int
    ) -> np.ndarray:
        if ctx.settings.initial == "dense":
            emb = _stored_embeddings(ctx.stored, n)
            q = np.asarray(ctx.models.embedder.encode([question])[0], dtype=np.float32)
            if emb.shape[1] != len(q):
                raise ctx.stored.damage(
                    f"embeddings have {emb.shape[1]} dimensions, the embedder {len(q)}"
                )
            scores = (emb @ q).astype(np.float64)
        else:
            scores = self._bm25_scores(ctx, question, n)
        return scores

    def _bm25_scores(self, ctx: QueryContext, question: str, n: int) -> np.ndarray:
        index: BM25Index = ctx.stored.memoised(
            "bm25", lambda: BM25Index.load(ctx.stored, documents=n)
        )
        return index.scores(_bm25_tokens([question])[0], n)

    def retrieve(self, ctx: QueryContext[LightPALBuild, LightPALQuery], question: str) -> Evidence:
        nodes = ctx.stored.nodes()
        n = len(nodes)
        walk: Walk = ctx.stored.memoised("walk", lambda: _stored_walk(ctx.stored, n))
        want = ctx.settings.top_k
        s = ctx.settings
        scores = self._ranking(ctx, question, n)
        if len(scores) != n:
            raise ctx.stored.damage(f"the initial ranking scores {len(scores)} of {n} passages")
        ranking = top_indices(scores, want)
        fill: ContextFill = context_passages(
            walk,
            ranking.tolist(),
            want,
            initial_share=s.initial_share,
            restart_top=s.restart_top,
            alpha=s.alpha,
        )
        names = [d.name for d in ctx.documents]
        items = [
            item_from_node(
                nodes[i],
                float(scores[i]),
                role="initial",
                rank=r + 1,
                document=_name(names, i, nodes),
            )
            for r, i in enumerate(fill.initial)
        ]
        items += [
            item_from_node(
                nodes[i],
                float(fill.ppr[i]),
                role="context",
                rank=len(fill.initial) + r + 1,
                document=_name(names, i, nodes),
            )
            for r, i in enumerate(fill.context)
        ]
        info = {
            "initial": s.initial,
            "k": want,
            "initial_passages": len(fill.initial),
            "context_passages": len(fill.context),
            "restart": len(fill.restart),
            "ppr_iterations": fill.iterations,
        }
        if fill.from_ranking:
            info["context_from_ranking"] = fill.from_ranking
        return Evidence(method=self.name, items=items, info=info)


class PaperPromptAnswer(AnswerStep[LightPALQuery, NoState]):
    """The paper's summary prompt (appendix A.2) over the evidence in document order.
    With ``answer.check`` quote or both it also asks for the sentence the answer rests
    on, checked against the passages read as the shared step checks its excerpts."""

    name = "lightpal"
    state_type = NoState

    def answer(
        self, ctx: AnswerContext[LightPALQuery], question: str, evidence: Evidence, state: NoState
    ) -> AnswerResult:
        names = [d.name for d in ctx.documents]
        prompt = summary_prompt(names, ANSWER_WORDS, ctx.quoting)
        out = answer(
            question,
            evidence.in_document_order(),
            ctx.llm,
            max_new_tokens=ctx.answer.max_new_tokens,
            prompt=prompt,
        )
        return ctx.checked(question, out)  # quoting: checked against the passages read


PAPER_PROMPT = PaperPromptAnswer()


def _name(names: list[str], i: int, nodes: list[Node]) -> str:
    doc = nodes[i].doc
    return names[doc] if 0 <= doc < len(names) else str(doc)


def _stored_walk(stored: MethodReader, n: int) -> Walk:
    edges = stored.csr("edges")
    if edges.shape != (n, n):
        raise stored.damage(f"edges are {edges.shape[0]} x {edges.shape[1]}, not {n} x {n}")
    return Walk.from_edges(edges)


def _stored_embeddings(stored: MethodReader, n: int) -> np.ndarray:
    emb = stored.array("embeddings")
    if emb.ndim != 2 or emb.shape[0] != n:
        raise stored.damage(f"embeddings hold {emb.shape}, not one row for each of {n} passages")
    return emb
