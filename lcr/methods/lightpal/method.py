"""LightPAL build and retrieval on the shared method contract.

Build (section 4, 5.1): passages (``passages``); their embeddings; each
passage's ``k'`` most similar passages as candidates (``graph``); every
candidate pair scored by the scorer LLM (``scoring``, resumable); the top
``k`` candidates per passage kept as directed edges, stored as a sparse matrix
with their scores. A BM25 index over the passages serves the initial step.

Retrieve: the initial ranking (BM25 or dense) gives D_init, the top 60% of K;
personalised PageRank on the graph, restarting on the ranking's top 20, gives
the rest. No LLM call at query time.
"""

from __future__ import annotations

import time
from typing import Any, Literal

import numpy as np

from lcr.answer import AnswerResult, answer
from lcr.config import Setting
from lcr.errors import IndexDamagedError
from lcr.evidence import Evidence
from lcr.methods.base import BuildContext, Method, QueryContext, item_from_node, top_indices
from lcr.methods.lightpal.graph import (
    ContextFill,
    Walk,
    context_passages,
    dense_candidates,
    edge_matrix,
    top_edges,
)
from lcr.methods.lightpal.passages import PASSAGE_SHAPES, cut_passages, head_of
from lcr.methods.lightpal.prompt import summary_prompt
from lcr.methods.lightpal.scoring import (
    SCORER_NEEDS,
    USE_LLM,
    PairScorer,
    check_scorer,
    load_scorer,
)
from lcr.models.base import LLM, Capability
from lcr.progress import OneTask, Task
from lcr.scoring.bm25 import BM25Index, bm25_tokenize
from lcr.store import Node, SourceDoc


def _bm25_tokens(texts: list[str]) -> list[list[str]]:
    """English stop words and Snowball stems, as lcr's bm25 baseline by default."""
    return bm25_tokenize(texts, "en", "english")


def passage_embeddings(embedder: Any, texts: list[str], task: Task) -> np.ndarray:
    """One L2-normalised vector per passage: the mean of the pieces the embedder can read.

    A passage longer than the embedder's window (ODSum sections run to ~3k
    characters) is embedded in sentence-respecting pieces, so none of it is
    silently dropped.
    """
    from lcr.text.chunking import token_windows

    limit = int(getattr(embedder, "max_tokens", 0) or 0)
    counts = embedder.token_counts(texts) if limit and texts else [0] * len(texts)
    pieces: list[str] = []
    owner: list[int] = []
    for i, (text, n) in enumerate(zip(texts, counts, strict=True)):
        parts = [text]
        if limit and n > limit:
            parts = [c.text for c in token_windows(text, limit, count=embedder.count_tokens)]
        pieces.extend(parts)
        owner.extend([i] * len(parts))
    if not pieces:
        return np.zeros((0, int(embedder.dim)), dtype=np.float32)
    emb = np.asarray(embedder.encode(pieces, progress=OneTask(task)), dtype=np.float64)
    sums = np.zeros((len(texts), emb.shape[1]))
    np.add.at(sums, np.asarray(owner), emb)
    norms = np.linalg.norm(sums, axis=1, keepdims=True)
    return (sums / np.where(norms > 0, norms, 1.0)).astype(np.float32)


class LightPAL(Method):
    name = "lightpal"
    summary = (
        "passage graph whose edges an LLM scores by P(d_j | d_i); BM25/dense passages plus "
        "personalised-PageRank context passages"
    )
    needs = (
        "build: embedder + a scorer LLM with log-probabilities (lightpal.scorer; slow: "
        "k' pairs per passage); answer: LLM (+ embedder for lightpal.initial=dense)"
    )
    paper = (
        "Sakai et al. 2025, LightPAL: Lightweight Passage Retrieval for Open-Domain "
        "Multi-Document Summarization"
    )
    build_uses_llm = False  # the scorer is its own model (lightpal.scorer), loaded here
    answer_note = (
        "with lightpal.prompt=paper (default) the paper's prompt answers (appendix A.2: "
        "sections under their story, in document order): answer.order, passages, "
        "instruction, not_found do not apply; with lightpal.prompt=shared they all do"
    )
    build_uses_embedder = True
    built_by_default = False
    build_settings = (
        Setting(
            "passages",
            "chars",
            "chars: ~passage_chars characters on paragraph, then sentence, boundaries "
            "(the paper's Meeting setting); sections: each blank-line block whole (ODSum Story)",
            choices=PASSAGE_SHAPES,
        ),
        Setting("passage_chars", 1000, "passage size in characters (chars)", paper=True, low=50),
        Setting(
            "candidates",
            100,
            "k': candidates per passage by embedding cosine, each scored by the LLM",
            paper=True,
            low=1,
        ),
        Setting("edges", 5, "k: best-scored candidates kept as out-edges", paper=True, low=1),
        Setting(
            "scorer",
            "qwen2.5-coder-0.5b",
            "scorer LLM of P(d_j | d_i) (closest preset to the paper's Qwen2.5-0.5B); "
            "'llm' = the --llm model",
            free_text="an LLM preset, .gguf file, model folder or hub id, or 'llm'",
        ),
        Setting(
            "max_tokens",
            1024,
            "a scored pair (d_i then d_j) cut to this many scorer tokens together",
            paper=True,
            low=2,
        ),
        Setting(
            "continuation_tokens",
            0,
            "score only the first N tokens of d_j (0 = all, the paper); the faster setting",
            low=0,
        ),
    )
    query_settings = (
        Setting("top_k", 10, "K: passages returned (the paper: 5, 10, 20; -k overrides)", low=1),
        Setting(
            "initial",
            "bm25",
            "initial retriever of D_init",
            choices=("bm25", "dense"),
        ),
        Setting(
            "initial_share",
            0.6,
            "share of K taken from the initial ranking",
            paper=True,
            low=0.0,
            high=1.0,
        ),
        Setting(
            "restart_top",
            20,
            "the walk restarts on this many top initial passages",
            paper=True,
            low=1,
        ),
        Setting(
            "prompt",
            "paper",
            "answer prompt: paper (appendix A.2: sections under their story, then the "
            "question) or shared (lcr's prompt for every method)",
            choices=("paper", "shared"),
            paper=True,
        ),
        Setting(
            "answer_words",
            200,
            "the paper prompt's 'approximately N words' (ODSum Story summaries: ~1.3k chars)",
            low=1,
        ),
        Setting(
            "alpha",
            0.2,
            "PPR damping (networkx's alpha): the walk restarts with probability 1 - alpha",
            paper=True,
            low=0.0,
            high=1.0,
        ),
    )

    def answer(
        self,
        question: str,
        evidence: Evidence,
        llm: LLM,
        *,
        settings: dict[str, Any],
        documents: list[SourceDoc],
        max_new_tokens: int = 256,
    ) -> AnswerResult | None:
        """The shared answer step with the paper's prompt (appendix A.2), unless
        ``lightpal.prompt=shared``."""
        if settings.get("prompt") != "paper":
            return None
        prompt = summary_prompt([d.name for d in documents], int(settings["answer_words"]))
        return answer(
            question,
            evidence.in_document_order(),
            llm,
            max_new_tokens=max_new_tokens,
            prompt=prompt,
        )

    def retrieval_uses_embedder(self, settings: dict[str, Any]) -> bool:
        return settings.get("initial") == "dense"

    def llm_needs(
        self, phase: Literal["build", "query"], settings: dict[str, Any]
    ) -> frozenset[Capability]:
        if phase == "build" and settings.get("scorer") == USE_LLM:
            return SCORER_NEEDS
        return frozenset()

    # ------------------------------------------------------------------ build
    def build(self, ctx: BuildContext) -> None:
        s = ctx.settings
        check_scorer(str(s["scorer"]))
        seconds: dict[str, float] = {}

        t = time.perf_counter()
        passages = cut_passages(ctx.doc_texts(), str(s["passages"]), int(s["passage_chars"]))
        nodes = [
            Node(f"p{i}", 0, p.text, [(p.start, p.end)], p.doc) for i, p in enumerate(passages)
        ]
        texts = [n.text for n in nodes]
        bm25 = BM25Index.fit(_bm25_tokens(texts))
        seconds["passages_bm25"] = time.perf_counter() - t

        t = time.perf_counter()
        task = ctx.progress.task("lightpal: embedding passages", total=len(texts))
        emb = passage_embeddings(ctx.models.embedder, texts, task)
        candidates = dense_candidates(emb, int(s["candidates"]))
        seconds["embedding_candidates"] = time.perf_counter() - t

        t = time.perf_counter()
        scorer_llm = load_scorer(ctx.models, str(s["scorer"]))
        seconds["scorer_load"] = time.perf_counter() - t
        before = scorer_llm.usage.copy()
        scorer = PairScorer(
            scorer_llm,
            ctx.cache,
            int(s["max_tokens"]),
            int(s["continuation_tokens"]),
            warn=ctx.warn,
        )
        heads = [head_of(x, int(s["continuation_tokens"])) for x in texts]
        scores = scorer.score_all(
            texts,
            heads,
            candidates,
            lambda pairs: ctx.progress.task("lightpal: scoring passage pairs", total=pairs),
        )
        seconds["scoring"] = time.perf_counter() - t - seconds["scorer_load"]

        k = int(s["edges"])
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
                "scorer_backend": str(getattr(scorer_llm, "backend", "")),
                **scorer.stats.to_json(),
                "llm_usage": scorer_llm.usage.minus(before).to_json(),
                "seconds": {key: round(v, 3) for key, v in seconds.items()},
            }
        )

    # --------------------------------------------------------------- retrieve
    def _ranking(self, ctx: QueryContext, question: str, n: int) -> np.ndarray:
        if ctx.settings["initial"] == "dense":
            emb = ctx.stored.array("embeddings")
            q = np.asarray(ctx.models.embedder.encode([question])[0], dtype=np.float32)
            scores = (emb @ q).astype(np.float64)
        else:
            scores = self._bm25_scores(ctx, question, n)
        return scores

    def _bm25_scores(self, ctx: QueryContext, question: str, n: int) -> np.ndarray:
        index: BM25Index = ctx.stored.memoised("bm25", lambda: BM25Index.load(ctx.stored))
        return index.scores(_bm25_tokens([question])[0], n)

    def retrieve(self, ctx: QueryContext, question: str, k: int | None) -> Evidence:
        nodes = ctx.stored.nodes()
        n = len(nodes)
        walk: Walk = ctx.stored.memoised("walk", lambda: Walk.from_edges(ctx.stored.csr("edges")))
        if walk.n != n:
            raise IndexDamagedError("lightpal index is damaged: graph and passages disagree")
        want = int(k if k is not None else ctx.settings["top_k"])
        s = ctx.settings
        t = time.perf_counter()
        scores = self._ranking(ctx, question, n)
        if len(scores) != n:
            raise IndexDamagedError("lightpal index is damaged: scores and passages disagree")
        depth = max(want, int(s["restart_top"]))
        ranking = top_indices(scores, depth)
        initial_s = time.perf_counter() - t
        t = time.perf_counter()
        fill: ContextFill = context_passages(
            walk,
            ranking.tolist(),
            want,
            initial_share=float(s["initial_share"]),
            restart_top=int(s["restart_top"]),
            alpha=float(s["alpha"]),
        )
        context_s = time.perf_counter() - t
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
            "initial": s["initial"],
            "k": want,
            "initial_passages": len(fill.initial),
            "context_passages": len(fill.context),
            "restart": len(fill.restart),
            "ppr_iterations": fill.iterations,
            "initial_ms": round(1000 * initial_s, 2),
            "context_ms": round(1000 * context_s, 2),
        }
        if fill.from_ranking:
            info["context_from_ranking"] = fill.from_ranking
        return Evidence(method=self.name, items=items, info=info)


def _name(names: list[str], i: int, nodes: list[Node]) -> str:
    doc = nodes[i].doc
    return names[doc] if 0 <= doc < len(names) else str(doc)
