"""MixPR: a mixture of PageRanks over a sparse TF-IDF chunk graph (Alonso & Millidge 2024).

Build (section 4, appendix A.2): sentence chunks of at most 32 words; TF-IDF
rows, L2-normalised; ``A`` = column-normalised ``E^T E`` with entries below
0.27 removed, computed block by block (:mod:`lcr.graph.similarity`). Plain
PageRank does not depend on the question, so it is computed once here.

Retrieve: under ``question=last-chunks`` (the paper's reading, section 3) the
question is chunked like the text and its last chunk (the last two at 0.5 each when
the last is short) is vectorised as a fit counting the question's chunks would, then
linked into the graph as one more node and made the one-hot personalisation node
(``question=whole``: the whole question, by the stored vocabulary alone);
personalised PageRank (alpha 0.6) for local questions, plain PageRank (alpha
0) for global ones. ``mode=auto`` lets the paper's zero-shot y/n router (it
reads the context's first and last two chunks and the question) choose; the
default is local, because with the default model the router sent nearly every
question to global (bench/bench_router.py). The top k = 100 chunks are returned best
first, as every method's; the answer step reads them in document order (its
``answer.order=document``, the paper's).

How the question links into the graph decides whether the walk works (see
the ``link`` setting, and bench/README.md for the measurements).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np
import scipy.sparse as sp

from lcr.config import Fixed, Settings, SettingValue, retired, setting
from lcr.errors import SettingError
from lcr.evidence import Evidence
from lcr.graph.pagerank import NETWORKX_TOL, PAPER_MAX_ITER, StoredGraph
from lcr.graph.similarity import REFUSE_OVER, GraphTooLarge
from lcr.methods.base import (
    NOTHING,
    TOP_K,
    BuildContext,
    Method,
    Needs,
    QueryContext,
    item_from_node,
    top_candidates,
    top_indices,
)
from lcr.models.base import Capability
from lcr.store import MethodReader

M = "docs/methods/mixpr.md"  # where lcr's measured defaults are written up

ROUTER_INSTRUCTION = (
    "If the query asks for summarization, most frequent words, or descriptions of an entire "
    "document, answer 'y' with no other text. If the query does not and only asks a specific "
    "question, answer 'n' with no other text."
)

# the stored plain PageRank is computed with the default query settings
BUILD_MAX_ITER = PAPER_MAX_ITER
# Every walk stops as networkx's pagerank does, which the paper's PPR follows: once the
# scores' L1 change is below nodes x 1e-6. lcr's old stop (1e-4 in all) kept one gold
# sentence more in 150 HotpotQA dev questions at k = 100 (-0.002 [-0.005, 0.000]) for
# twice the steps: bench/results/mixpr-log.md#when-the-walk-stops-networkxs-rule-and-lcrs-old-one
WALK_TOL = NETWORKX_TOL
STOP = f"per-node {WALK_TOL:g}"  # how the build's stats record that stop
# what an index built before lcr recorded its stop stopped its stored PageRank by
OLD_BUILD_STOP = "total 0.0001"
# The chunks a question links to besides those over the threshold (link=threshold+topm),
# chosen with the linking on QMSum meetings 1-8 and held out on 9-35 (0.252 against the
# paper's linking's 0.158): bench/results/mixpr-log.md#how-the-question-joins-the-graph
LINK_M = 5


def _threads() -> int:
    return max(1, min(4, os.cpu_count() or 1))


def router_query(question: str, chunks: list[str], edge: int) -> str:
    """What the router reads as the query: the context's first and last ``edge`` chunks, then
    the question.

    The paper's input is the document with the prompt and question appended, and its
    router reads that input's first and last two chunks (appendix A.2); here the
    question comes separately, so it follows the chunks as it would end that input.
    ``edge`` = 0 reads the question alone.
    """
    if edge <= 0 or not chunks:
        return question
    head = chunks[:edge]
    tail = chunks[max(edge, len(chunks) - edge) :]
    return "\n".join([*(" ".join(c.split()) for c in head + tail), question])


def router_messages(query: str) -> list[dict[str, str]]:
    """The paper's zero-shot prompt (appendix A.2), instruction before and after the query."""
    content = f"{ROUTER_INSTRUCTION}\n\nQUERY: {query}\n\n{ROUTER_INSTRUCTION}\n\nAnswer:"
    return [{"role": "user", "content": content}]


def question_links(sims: np.ndarray, how: str, threshold: float, m: int = LINK_M) -> np.ndarray:
    """Edge weights from the question to every chunk under the ``link`` setting.

    Weights are the question-chunk cosines; only the chosen chunks get an edge.
    """
    links = np.zeros_like(sims, dtype=np.float64)
    positive = sims > 0
    if how == "all":
        links[positive] = sims[positive]
        return links
    chosen = np.zeros(len(sims), dtype=bool)
    if how in ("threshold", "threshold+topm"):
        chosen |= sims >= threshold
    if how in ("topm", "threshold+topm") and m > 0:
        chosen[top_indices(sims, m)] = True
    chosen &= positive
    links[chosen] = sims[chosen]
    return links


SHORT_LAST_CHUNK = 3  # words under which the paper's walk also starts from the chunk before


def question_chunks(question: str, chunk_words: int) -> tuple[list[str], list[tuple[str, float]]]:
    """The question chunked like the text, and the paper's start of the walk among them
    (section 3, "Personalization Vector"): the last chunk with weight 1, or the last two
    at 0.5 each when the last is short (fewer than 3 words, the rule of the paper's
    appendix for its sparse baseline's query)."""
    from lcr.text.chunking import sentence_word_chunks

    chunks = [c.text for c in sentence_word_chunks(question, max_words=chunk_words)]
    if not chunks:
        return [question], [(question, 1.0)]
    if len(chunks) >= 2 and len(chunks[-1].split()) < SHORT_LAST_CHUNK:
        return chunks, [(chunks[-2], 0.5), (chunks[-1], 0.5)]
    return chunks, [(chunks[-1], 1.0)]


def refit_question_vector(
    model: Any, chunk: str, all_chunks: list[str], n_chunks: int
) -> np.ndarray:
    """One question chunk's TF-IDF vector over the stored vocabulary as a fit that also
    counted the question's chunks would make it: every word of the chunk, including
    words the context lacks, gets the idf of that fit (n + q documents) and counts in
    the L2 norm, and only then are the context-less words dropped (they match no chunk).
    The context's own vectors keep the stored fit (a question moves their idf by under
    1/n). Needs scikit-learn's smoothed idf, ln((1 + n) / (1 + df)) + 1, which gives df
    back from the stored idf."""
    from collections import Counter

    from lcr.scoring.tfidf import compile_token_pattern, tokenise

    pattern = compile_token_pattern(model.token_pattern)
    words = [tokenise(c, pattern, model.stop_word_list) for c in all_chunks]
    in_question = Counter(t for w in words for t in set(w))
    counts = Counter(tokenise(chunk, pattern, model.stop_word_list))
    docs = n_chunks + len(all_chunks)
    vector = np.zeros(model.vocabulary_size, dtype=np.float64)
    squares = 0.0
    for term, count in counts.items():
        col = model.vocabulary.get(term)
        df = 0 if col is None else round((1 + n_chunks) * np.exp(1.0 - model.idf[col]) - 1)
        idf = np.log((1 + docs) / (1 + df + in_question[term])) + 1.0
        tf = 1.0 + np.log(count) if model.sublinear_tf else float(count)
        weight = tf * idf
        squares += weight * weight
        if col is not None:
            vector[col] = weight
    return vector / np.sqrt(squares) if squares > 0 else vector


LINKS_WARNED = 100  # graph links a chunk past which the index is far larger than usual
GRAPH_ENTRY_BYTES = 12  # a stored link: its float64 weight and int32 column


def dense_graph_warning(links: int, chunks: int, threshold: float) -> str | None:
    """What to say, before the graph is written, when chunks link to far more chunks than
    in prose (2-20 a chunk; 609 on 8 MB of repetitive logs made a 795 MB index)."""
    per_chunk = links / max(chunks, 1)
    if per_chunk <= LINKS_WARNED:
        return None
    size = links * GRAPH_ENTRY_BYTES / 2**20
    return (
        f"mixpr: the similarity graph links each chunk to {per_chunk:,.0f} others (prose: "
        f"under 20), as many chunks of this text are alike, so it will take about "
        f"{size:,.0f} MB on disk; --set mixpr.max_degree=20 keeps each chunk's 20 "
        f"strongest links, or a higher mixpr.threshold (now {threshold:g}) fewer of them"
    )


BUILD_PEAK_ENTRY_BYTES = 40  # the build's peak memory per graph entry kept (bench/README.md)


def graph_refusal(too_large: GraphTooLarge) -> str:
    """The one line that refuses a graph far over ``max_edges``, with what to do."""
    need = -(-too_large.estimate // REFUSE_OVER)  # the max_edges under which it would build
    peak = need * BUILD_PEAK_ENTRY_BYTES
    size = f"{peak / 1e9:,.1f} GB" if peak >= 1e9 else f"{peak / 1e6:,.0f} MB"
    return (
        f"mixpr: this text's similarity graph would hold about {too_large.estimate:,} "
        f"entries ({too_large.edge_share:.0%} of its {too_large.nodes:,} chunks' pairs are "
        f"alike; prose: under 1%), over {REFUSE_OVER} x mixpr.max_edges "
        f"({too_large.max_edges:,}), and building it would compute every one; index this "
        f"text with another method (-m bm25), or --set mixpr.max_edges={need} to build it "
        f"anyway (about {size} at the build's peak)"
    )


def combine_ranking(walk: np.ndarray, sims: np.ndarray, k: int, sim_share: float) -> np.ndarray:
    """The k chunks to return: ``round(sim_share * k)`` by direct similarity, the rest by walk.

    Walk ties (e.g. chunks the walk never reached) are broken by direct
    similarity, then by position. ``sim_share`` = 0 is the paper's pure ranking.
    """
    n = len(walk)
    k = min(k, n)
    chosen: list[int] = []
    taken = np.zeros(n, dtype=bool)
    n_direct = round(max(0.0, min(1.0, sim_share)) * k)
    if n_direct:
        direct = top_indices(sims, n_direct)
        direct = direct[sims[direct] > 0]
        chosen.extend(direct.tolist())
        taken[direct] = True
    rest = k - len(chosen)
    if rest > 0:
        # only chunks scoring at least the rest-th best walk score among those not
        # taken can make it (ties at that score included), and all of them are among
        # the top (rest + taken) of every chunk: sorting those alone gives the same order
        candidates = top_candidates(walk, rest + len(chosen))
        candidates = candidates[~taken[candidates]]
        order = np.lexsort((candidates, -sims[candidates], -walk[candidates]))
        chosen.extend(candidates[order[:rest]].tolist())
    return np.asarray(chosen, dtype=np.int64)


@dataclass(frozen=True)
class MixPRBuild(Settings):
    chunk_words: int = setting(
        32,
        "chunk size in words: sentences, then newlines, then equal word splits (the paper's N)",
        paper=True,
        low=1,
    )
    threshold: float = setting(
        0.27, "graph edges need TF-IDF cosine >= this", paper=True, low=0, high=1
    )
    self_loops: bool = setting(
        True, "keep each chunk's similarity with itself (the diagonal of the paper's A)", paper=True
    )
    max_degree: int = setting(
        0,
        "keep each chunk's N strongest edges; 0 = every edge over the threshold",
        paper=True,
        low=0,
    )
    max_edges: int = setting(
        150_000_000,
        "memory guard: over this many graph entries, cap each chunk's edges; 0 = never",
        measured=f"{M}#memory-guard",
        low=0,
    )


@dataclass(frozen=True)
class MixPRQuery(Settings):
    mode: Literal["auto", "local", "global"] = setting(
        "local",
        "local: personalised PageRank; global: plain PageRank; auto: the paper's LLM router",
        measured=f"{M}#the-router",
    )
    alpha_local: float = setting(
        0.6,
        "restart probability for local questions (the paper's alpha)",
        paper=True,
        low=0,
        high=1,
    )
    alpha_global: float = setting(
        0.0,
        "restart probability for global questions; 0 = plain PageRank, computed at build",
        paper=True,
        low=0,
        high=1,
    )
    # each step multiplies the whole graph: 10,000 steps are minutes at 10M tokens, and
    # more never helps (float rounding stops the scores changing long before)
    max_iter: int = setting(PAPER_MAX_ITER, "power-iteration cap", paper=True, low=1, high=10_000)
    top_k: int = setting(
        100, "chunks handed to the answer step (-k overrides; the paper's k)", paper=True, low=1
    )
    question: Literal["last-chunks", "whole"] = setting(
        "last-chunks",
        "the walk's start: the question's last chunk (last two if short), idf refit; "
        "whole: one node",
        paper=True,
    )
    link: Literal["threshold", "topm", "threshold+topm", "all"] = setting(
        "threshold+topm",
        "how the question joins the graph; 'threshold' (the paper's) can leave it alone",
        measured=f"{M}#how-the-question-joins-the-graph",
    )
    sim_share: float = setting(
        0.5,
        "share of top_k filled by direct TF-IDF similarity first (0 = the paper's ranking)",
        measured=f"{M}#how-the-question-joins-the-graph",
        low=0,
        high=1,
    )
    router_threshold: float = setting(
        0.5,
        "P('y') above which mode=auto routes to global (0.5: the model's own y/n reply)",
        paper=True,  # the paper takes the router's "y" or "n": P(y) > P(n)
        low=0,
        high=1,
    )
    router_chunks: int = setting(
        2,
        "the router reads the first and last N chunks, then the question; 0 = question alone",
        paper=True,
        low=0,
    )
    fixed = retired(
        tol=Fixed(WALK_TOL, "networkx's stop, as the paper's PPR"),
        tol_rule=Fixed("per-node", "networkx's stop, as the paper's PPR"),
        link_m=Fixed(LINK_M, "measured with the linking it belongs to"),
        link_ratio=Fixed(0.5, "its link=relative is gone: it never beat threshold+topm"),
    )


ROUTER_NEEDS = Needs(
    llm=frozenset({Capability.CHOICE_PROBABILITY}),  # the router reads y/n logits
    why="mixpr.mode=auto routes each question with it; --mode local or --mode global needs none",
)


def _graph_of(ctx: BuildContext[MixPRBuild], emb: sp.csr_array) -> tuple[sp.csr_array, Any]:
    """The thresholded similarity graph of the chunks' TF-IDF rows, with a progress bar;
    a graph far over ``max_edges`` is refused in one line."""
    from lcr.graph.similarity import similarity_graph

    task = ctx.progress.task("similarity graph", total=None)

    def on_block(total: int) -> None:
        task.update(total=total)
        task.advance()

    s = ctx.settings
    try:
        return similarity_graph(
            emb,
            s.threshold,
            self_loops=s.self_loops,
            max_degree=s.max_degree,
            max_edges=s.max_edges,
            workers=_threads(),
            on_block=on_block,
        )
    except GraphTooLarge as too_large:
        raise SettingError(graph_refusal(too_large)) from None


QueryCtx = QueryContext[MixPRBuild, MixPRQuery]


class MixPR(Method[MixPRBuild, MixPRQuery]):
    name = "mixpr"
    manual = "docs/methods/mixpr.md"
    k_option = TOP_K
    summary = "mixture of PageRanks over a TF-IDF sentence graph; no LLM to build, real-time on CPU"
    answer_paper: ClassVar[Mapping[str, SettingValue]] = {
        "order": "document"
    }  # chronological order, not rank order (Figure 2)
    answer_note = "chronological, not rank order, is what the paper reads (Figure 2)"
    paper = "Alonso & Millidge 2024, Mixture-of-PageRanks (arXiv:2412.06078)"
    built_by_default = True
    setup_cpu_s = 1.7  # scikit-learn's TF-IDF and the graph's kernels, imported by a first build
    build_settings = MixPRBuild
    query_settings = MixPRQuery

    def retrieve_needs(self, settings: MixPRQuery) -> Needs:
        return ROUTER_NEEDS if settings.mode == "auto" else NOTHING

    # ------------------------------------------------------------------ build
    def build(self, ctx: BuildContext[MixPRBuild]) -> None:
        from lcr.graph.pagerank import graph_pagerank
        from lcr.graph.similarity import column_sums
        from lcr.scoring.tfidf import TfidfModel
        from lcr.text.chunking import sentence_word_chunks

        s = ctx.settings
        with ctx.build_stage("chunk"):
            nodes = ctx.chunk_nodes(
                lambda text, start: sentence_word_chunks(text, s.chunk_words, offset=start),
                prefix="s",
            )
        with ctx.build_stage("tfidf"):
            ctx.out.mapped = True  # every array memory-mapped at query time (no zarr to load)
            if nodes:
                model, emb = TfidfModel.fit([n.text for n in nodes])
                model.save(ctx.out)
                vocab = model.vocabulary_size
            else:
                emb, vocab = sp.csr_array((0, 0), dtype=np.float32), 0
        with ctx.build_stage("write"):
            n_nodes = ctx.out.write_nodes(nodes, offsets=True)  # a question reads only its top k
        del nodes  # the records (~0.4 GB at 10M tokens) are not needed past this point

        with ctx.build_stage("graph"):
            graph, gstats = _graph_of(ctx, emb)
        dense_graph = dense_graph_warning(graph.nnz, n_nodes, s.threshold)
        if dense_graph:
            ctx.warn(dense_graph)
        if gstats.auto_capped:
            ctx.warn(
                f"mixpr: the exact graph would hold more than mixpr.max_edges="
                f"{s.max_edges:,} entries, so each chunk keeps its "
                f"{gstats.max_degree} strongest edges (degree_cap in 'lcr info'; "
                "--set mixpr.max_edges=0 keeps every edge if memory allows)"
            )

        with ctx.build_stage("pagerank"):
            # float64, as stored and walked; the float32 values go as soon as they are copied
            graph = sp.csr_array(
                (graph.data.astype(np.float64), graph.indices, graph.indptr), shape=graph.shape
            )
            pr = graph_pagerank(
                graph, alpha=0.0, max_iter=BUILD_MAX_ITER,
                tol=WALK_TOL, workers=_threads(),
            )  # fmt: skip

        with ctx.build_stage("write"):
            # memory-mapped at query time; the graph's values as the walk multiplies them
            ctx.out.write_csr("tfidf", emb, mapped=True)
            ctx.out.write_csr("graph", graph, mapped=True, dtype=np.float64)
            ctx.out.write_array("col_sums", column_sums(graph), mapped=True)
            ctx.out.write_array("pagerank", pr.scores.astype(np.float64), mapped=True)

        ctx.out.stats.update(
            {
                "chunks": n_nodes,
                "vocabulary": vocab,
                "nnz": int(graph.nnz),
                "mean_degree": round(graph.nnz / max(n_nodes, 1), 1),
                "degree_cap": gstats.max_degree,
                "degree_cap_auto": gstats.auto_capped,
                "capped_rows": gstats.capped_rows,
                "graph_blocks": gstats.blocks,
                "pagerank_iterations": pr.iterations,
                "pagerank_stop": STOP,
                **{f"{k}_s": v for k, v in ctx.stages.to_json().items()},
            }
        )

    # --------------------------------------------------------------- retrieve
    def _route(self, ctx: QueryCtx, question: str) -> tuple[str, float | None]:
        mode = ctx.settings.mode
        if mode != "auto":
            return mode, None
        nodes = ctx.stored.nodes()  # the router reads the context's first and last chunks
        query = router_query(question, [n.text for n in nodes], ctx.settings.router_chunks)
        llm = ctx.models.llm
        p_global = float(llm.choice_probability(router_messages(query), yes="y", no="n"))
        return ("global" if p_global > ctx.settings.router_threshold else "local"), p_global

    def retrieve(self, ctx: QueryCtx, question: str) -> Evidence:
        from lcr.graph.pagerank import QueryGraph

        s = ctx.settings
        top_k = s.top_k
        mode, p_global = self._route(ctx, question)
        n = ctx.stored.node_count()
        info: dict[str, Any] = {"mode": mode}
        if p_global is not None:
            info["router_p_global"] = round(p_global, 4)
        if n == 0:
            return Evidence(self.name, [], info=info)

        starts = self._question_starts(ctx, question, n)
        sims = starts[0][1]
        if len(starts) > 1:
            sims = np.add.reduce([w * x for w, x in starts])
        alpha = s.alpha_local if mode == "local" else s.alpha_global
        max_iter = s.max_iter
        built_stop = ctx.stored.stats.get("pagerank_stop", OLD_BUILD_STOP)
        info["alpha"] = alpha
        if alpha == 0.0 and max_iter == BUILD_MAX_ITER and built_stop == STOP:
            # Plain PageRank ignores the personalisation, and one extra node barely
            # moves it: the build already computed it over the chunk graph.
            walk = _stored_pagerank(ctx.stored, n)
            info.update(iterations=ctx.stored.stats.get("pagerank_iterations"), linked=0)
        else:
            _stored_pagerank(ctx.stored, n)  # a header read: a damaged build is damage
            stored = self._graph(ctx, n)
            self_weight = 1.0 if ctx.built.self_loops else 0.0
            walk = np.zeros(n)
            steps: list[int] = []
            converged, linked = True, 0
            # the walk is linear in its restart: two start chunks at 0.5 each are the
            # mean of the walks from each (each with its own question node)
            for weight, chunk_sims in starts:
                links = question_links(chunk_sims, s.link, ctx.built.threshold)
                qg = QueryGraph(stored, None, links, self_weight)
                result = qg.personalised(alpha, max_iter=max_iter, tol=WALK_TOL)
                walk = result.scores[:n] if len(starts) == 1 else walk + weight * result.scores[:n]
                steps.append(result.iterations)
                converged = converged and result.converged
                linked += int((links > 0).sum())
            info.update(iterations=max(steps), converged=converged, linked=linked)
        info["link"] = s.link
        info["question"] = s.question
        share = s.sim_share if mode == "local" else 0.0
        chosen = combine_ranking(np.asarray(walk, dtype=np.float64), sims, top_k, share)
        rank = {int(i): r + 1 for r, i in enumerate(chosen)}
        # the first picks were ranked by similarity (a top-similarity pick at or below 0
        # means every later chunk is too): their score is that similarity, not the walk's
        n_direct = round(max(0.0, min(1.0, share)) * min(top_k, n))
        by_similarity = {int(i) for i in chosen[:n_direct] if sims[i] > 0}
        nodes = dict(zip(rank, ctx.stored.nodes_at(rank), strict=True))
        items = [
            item_from_node(
                nodes[i],
                float(sims[i] if i in by_similarity else walk[i]),
                rank=rank[i],
                ranked_by="similarity" if i in by_similarity else "walk",
                walk=float(walk[i]),
                similarity=float(sims[i]),
            )
            for i in rank  # best first: document order is the answer step's view of them
        ]
        return Evidence(self.name, items, info=info)

    @staticmethod
    def _graph(ctx: QueryCtx, n: int) -> StoredGraph:
        """The stored graph made ready for questions, once per reader."""
        stored: StoredGraph = ctx.stored.memoised(
            "mixpr:graph", lambda: StoredGraph(*_stored_graph(ctx.stored, n), workers=_threads())
        )
        return stored

    @staticmethod
    def _question_starts(ctx: QueryCtx, question: str, n: int) -> list[tuple[float, np.ndarray]]:
        """Where the walk starts, as (weight, cosine with every chunk): under
        ``question=last-chunks`` the paper's last chunk(s) of the question, vectorised as a
        fit that counted them would; under ``whole`` the whole question, one node."""
        if ctx.settings.question == "whole":
            return [(1.0, MixPR._question_sims(ctx, question, n))]
        model, emb = _stored_vectors(ctx.stored, n)
        chunks, starts = question_chunks(question, ctx.built.chunk_words)
        out: list[tuple[float, np.ndarray]] = []
        for text, weight in starts:
            # float32, as the chunks' rows: scipy would copy the whole matrix to float64
            vector = refit_question_vector(model, text, chunks, n).astype(emb.dtype)
            out.append((weight, np.asarray(emb @ vector, dtype=np.float64)))
        return out

    @staticmethod
    def _question_sims(ctx: QueryCtx, question: str, n: int) -> np.ndarray:
        """Cosine of the whole question with every chunk, by the stored vectoriser."""
        model, emb = _stored_vectors(ctx.stored, n)
        q = model.transform([question])
        # the question as a dense vector: a matrix-vector product streams the chunks'
        # rows once (5x faster at 10M tokens than the sparse-sparse product), and
        # each row still sums its own entries in stored order, the question's
        # zeros adding exact zeros, so every cosine is bitwise the same
        dense = np.zeros(emb.shape[1], dtype=np.result_type(emb.dtype, q.dtype))
        dense[q.indices] = q.data
        return np.asarray(emb @ dense, dtype=np.float64)

    def check_stored(self, stored: MethodReader, built: MixPRBuild) -> None:
        n = stored.node_count()
        if n != len(stored.nodes()):
            raise stored.damage("nodes.jsonl does not hold the records the manifest counts")
        if n:
            stored.nodes_at([0, n - 1])
            _stored_vectors(stored, n)
            _stored_graph(stored, n)
            _stored_pagerank(stored, n)


# Each loader checks what it loads against the chunk count n: the arrays' own structure
# is checked by the store (lcr.store.arrays), their agreement with each other here.
def _stored_vectors(stored: MethodReader, n: int) -> tuple[Any, sp.csr_array]:
    """The stored vectoriser and the chunks' TF-IDF rows, once per reader."""
    from lcr.scoring.tfidf import TfidfModel

    model = stored.memoised("mixpr:tfidf", lambda: TfidfModel.load(stored))
    emb = stored.csr("tfidf")
    if emb.shape != (n, model.vocabulary_size):
        raise stored.damage(
            f"tfidf.csr is {emb.shape[0]} x {emb.shape[1]}, not {n} chunks x "
            f"{model.vocabulary_size} terms"
        )
    return model, emb


def _stored_graph(stored: MethodReader, n: int) -> tuple[sp.csr_array, np.ndarray]:
    graph = stored.csr("graph")
    col_sums = stored.array("col_sums")
    if graph.shape != (n, n):
        raise stored.damage(f"graph.csr is {graph.shape[0]} x {graph.shape[1]}, not {n} x {n}")
    if col_sums.shape != (n,):
        raise stored.damage(f"col_sums.npy holds {col_sums.shape}, not {n} sums")
    return graph, col_sums


def _stored_pagerank(stored: MethodReader, n: int) -> np.ndarray:
    walk = stored.array("pagerank")
    if walk.shape != (n,):
        raise stored.damage(f"pagerank.npy holds {walk.shape}, not {n} scores")
    return walk
