"""MixPR: a mixture of PageRanks over a sparse TF-IDF chunk graph (Alonso & Millidge 2024).

Build (section 4, appendix A.2): sentence chunks of at most 32 words; TF-IDF
rows, L2-normalised; ``A`` = column-normalised ``E^T E`` with entries below
0.27 removed, computed block by block (:mod:`lcr.graph.similarity`). Plain
PageRank does not depend on the question, so it is computed once here.

Retrieve: the question is vectorised with the stored vectoriser, linked into
the graph as one more node and made the one-hot personalisation node;
personalised PageRank (alpha 0.6) for local questions, plain PageRank (alpha
0) for global ones. ``mode=auto`` lets the paper's zero-shot y/n router (it
reads the context's first and last two chunks and the question) choose; the
default is local, because with the default model the router sent nearly every
question to global (bench/bench_router.py). The top k = 100 chunks go to the
answer step in document order.

How the question links into the graph decides whether the walk works (see
the ``link`` setting, and bench/README.md for the measurements).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

import numpy as np
import scipy.sparse as sp

from lcr.config import Setting, SettingValue
from lcr.errors import IndexDamagedError
from lcr.evidence import Evidence, Usage
from lcr.graph.pagerank import PAPER_MAX_ITER
from lcr.methods.base import BuildContext, Method, QueryContext, item_from_node, top_indices
from lcr.models.base import Capability
from lcr.store import Node

ROUTER_INSTRUCTION = (
    "If the query asks for summarization, most frequent words, or descriptions of an entire "
    "document, answer 'y' with no other text. If the query does not and only asks a specific "
    "question, answer 'n' with no other text."
)

# the stored plain PageRank is computed with the default query settings
BUILD_MAX_ITER = PAPER_MAX_ITER
BUILD_TOL = 1e-4

LINK_CHOICES = ("threshold", "topm", "threshold+topm", "relative", "all")
MODE_CHOICES = ("auto", "local", "global")


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


def question_links(
    sims: np.ndarray, how: str, threshold: float, m: int, ratio: float = 0.5
) -> np.ndarray:
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
    if how == "relative" and len(sims) and m > 0:
        top = top_indices(sims, m)
        chosen[top[sims[top] >= ratio * sims[top[0]]]] = True
    chosen &= positive
    links[chosen] = sims[chosen]
    return links


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
        candidates = np.flatnonzero(~taken)
        if len(candidates) > rest:
            # only chunks scoring at least the rest-th best walk score can make it
            # (ties at that score included), so sorting them alone gives the same order
            scores = walk[candidates]
            kth = np.partition(scores, len(scores) - rest)[len(scores) - rest]
            candidates = candidates[scores >= kth]
        order = np.lexsort((candidates, -sims[candidates], -walk[candidates]))
        chosen.extend(candidates[order[:rest]].tolist())
    return np.asarray(chosen, dtype=np.int64)


class MixPR(Method):
    name = "mixpr"
    summary = "mixture of PageRanks over a TF-IDF sentence graph; no LLM to build, real-time on CPU"
    needs = "build: nothing; retrieve: LLM router only with mode=auto; answer: LLM"
    answer_paper: ClassVar[Mapping[str, SettingValue]] = {
        "order": "document"
    }  # chronological order, not rank order (Figure 2)
    answer_note = "chronological, not rank order, is what the paper reads (Figure 2)"
    paper = "Alonso & Millidge 2024, Mixture-of-PageRanks (arXiv:2412.06078)"
    built_by_default = True
    retrieval_llm_reason = (
        "mixpr.mode=auto routes each question with it; --mode local or --mode global needs none"
    )
    build_settings = (
        Setting("max_words", 32, "chunk size N in words (sentences, then newlines, then equal "
                "word splits); paper: 32", paper=True, low=1),
        Setting("threshold", 0.27, "graph edges need cosine >= this; paper: 0.27", paper=True,
                low=0, high=1),
        Setting("self_loops", True, "keep each chunk's similarity with itself (the diagonal of "
                "E^T E, as the paper's A has). It makes the walk lazy, so an isolated chunk "
                "keeps its mass instead of being dangling; false drops the diagonal", paper=True),
        Setting("max_degree", 0, "keep only each chunk's N strongest edges (an edge stays when "
                "either end keeps it). 0 = every edge over the threshold, the paper's graph, "
                "unless max_edges steps in", low=0),
        Setting("max_edges", 150_000_000, "memory guard: the exact graph is kept while it "
                "holds at most this many entries (1M tokens of real text: 22M; about 30 bytes "
                "each at the build's peak). A larger graph (a ~3M-token or very repetitive "
                "text) is built with the largest max_degree that fits instead, said in a "
                "warning and by 'lcr info' (degree_cap). 0 = never cap: exact at any size, "
                "but ~2e9 entries (> 16 GB) at 10M tokens. bench/README.md (MixPR)", low=0),
    )  # fmt: skip
    query_settings = (
        Setting("mode", "local", "local: personalised PageRank from the question (no LLM); "
                "global: plain PageRank (no LLM); auto: the paper's LLM router picks one per "
                "question. Not the paper's default (auto): measured with qwen2.5-coder-1.5b "
                "(bench/bench_router.py), the router sent 30/30 QMSum general queries but also "
                "30/30 specific queries and 20/20 generated tasks to global (every P(global) "
                "above 0.53, with the paper's input or the question alone), so auto routed 38% "
                "right and local 62%; README (MixPR)",
                choices=MODE_CHOICES),
        Setting("alpha_local", 0.6, "restart probability for local questions; paper: 0.6",
                paper=True, low=0, high=1),
        Setting("alpha_global", 0.0, "restart probability for global questions; paper: 0 "
                "(plain PageRank, query-independent, precomputed at build)", paper=True, low=0,
                high=1),
        Setting("max_iter", PAPER_MAX_ITER, f"power-iteration cap; paper: {PAPER_MAX_ITER}",
                paper=True, low=1),
        Setting("tol", 1e-4, "stop when the L1 change of the scores falls below this. "
                "networkx's rule (change < nodes * 1e-6) stops a million-token walk after 3-4 "
                "steps, before it reaches the far hops of a chain", low=0),
        Setting("top_k", 100, "chunks handed to the answer step (-k overrides); paper: 100",
                paper=True, low=1),
        Setting("link", "threshold+topm", "how the question joins the graph: 'threshold' "
                "(the paper's 0.27, as if it were a chunk), 'topm' (its link_m most similar "
                "chunks), 'threshold+topm' (both; never isolated), 'relative' (top link_m "
                "within link_ratio of the best), 'all' (every chunk sharing a word). Gold "
                "recall at k=100, variable tracking / Hash-Hop 4-hop chains / QMSum specific "
                "queries: threshold 1.00/1.00/0.179, topm 1.00/1.00/0.179, threshold+topm "
                "1.00/1.00/0.183 (0.212 with sim_share 0.5, the default), relative "
                "1.00/1.00/0.181, all 1.00/0.25/0.248; TF-IDF alone 0.80/0.25/0.247. "
                "Details: bench/README.md (MixPR)", choices=LINK_CHOICES),
        Setting("link_m", 5, "chunks the question links to under 'topm'/'threshold+topm'",
                low=1),
        Setting("link_ratio", 0.5, "under 'relative': link to the (at most link_m) chunks whose "
                "similarity is at least this fraction of the best chunk's", low=0, high=1),
        Setting("sim_share", 0.5, "share of top_k filled by direct TF-IDF similarity before "
                "the walk's ranking (0 = the paper's pure ranking). Measured (k=100): QMSum "
                "specific-query gold recall 0.183 at 0, 0.212 at 0.5, 0.247 for pure TF-IDF; "
                "variable-tracking and Hash-Hop 4-hop chains 1.00 at 0 and 0.5, against 0.80 "
                "and 0.25 for TF-IDF. Details: bench/README.md (MixPR)", low=0, high=1),
        Setting("router_threshold", 0.5, "P('y') above which mode=auto routes to global. With "
                "qwen2.5-coder-1.5b every measured question scored above 0.5; chosen on that same "
                "sample, 0.69 split it best (70/80) with router_chunks=2, 0.87 (76/80) with 0",
                low=0, high=1),
        Setting("router_chunks", 2, "the router reads the context's first and last N chunks, "
                "then the question, as the paper's query (appendix A.2: first and last two); "
                "0 = the question alone", paper=True, low=0),
    )  # fmt: skip

    def retrieval_uses_llm(self, settings: dict[str, Any]) -> bool:
        return str(settings.get("mode", "local")) == "auto"

    def llm_needs(
        self, phase: Literal["build", "query"], settings: dict[str, Any]
    ) -> frozenset[Capability]:
        if phase == "query" and self.retrieval_uses_llm(settings):
            return frozenset({Capability.CHOICE_PROBABILITY})  # the router reads y/n logits
        return frozenset()

    # ------------------------------------------------------------------ build
    def build(self, ctx: BuildContext) -> None:
        from lcr.graph import column_sums, graph_pagerank, similarity_graph
        from lcr.models.tfidf import TfidfModel
        from lcr.text.chunking import sentence_word_chunks

        timings: dict[str, float] = {}
        t0 = time.perf_counter()
        max_words = int(ctx.settings["max_words"])
        nodes: list[Node] = []
        task = ctx.progress.task("chunking", total=len(ctx.documents))
        for doc, start, text in ctx.doc_texts():
            for c in sentence_word_chunks(text, max_words=max_words, offset=start):
                nodes.append(Node(f"s{len(nodes)}", 0, c.text, [(c.start, c.end)], doc))
            task.advance()
        timings["chunk_s"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        ctx.out.mapped = True  # every array memory-mapped at query time (no zarr to load)
        if nodes:
            model, emb = TfidfModel.fit([n.text for n in nodes])
            model.save(ctx.out)
            vocab = model.vocabulary_size
        else:
            emb, vocab = sp.csr_array((0, 0), dtype=np.float32), 0
        timings["tfidf_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        n_nodes = ctx.out.write_nodes(nodes, offsets=True)  # a question reads only its top k
        del nodes  # the records (~0.4 GB at 10M tokens) are not needed past this point
        write_s = time.perf_counter() - t0

        t0 = time.perf_counter()
        graph_task = ctx.progress.task("similarity graph", total=None)

        def on_block(total: int) -> None:
            graph_task.update(total=total)
            graph_task.advance()

        graph, gstats = similarity_graph(
            emb,
            float(ctx.settings["threshold"]),
            self_loops=bool(ctx.settings["self_loops"]),
            max_degree=int(ctx.settings["max_degree"]),
            max_edges=int(ctx.settings["max_edges"]),
            workers=_threads(),
            on_block=on_block,
        )
        timings["graph_s"] = time.perf_counter() - t0
        if gstats.auto_capped:
            ctx.warn(
                f"mixpr: the exact graph would hold more than mixpr.max_edges="
                f"{int(ctx.settings['max_edges']):,} entries, so each chunk keeps its "
                f"{gstats.max_degree} strongest edges (degree_cap in 'lcr info'; "
                "--set mixpr.max_edges=0 keeps every edge if memory allows)"
            )

        t0 = time.perf_counter()
        # float64, as stored and walked; the float32 values go as soon as they are copied
        graph = sp.csr_array(
            (graph.data.astype(np.float64), graph.indices, graph.indptr), shape=graph.shape
        )
        pr = graph_pagerank(
            graph, alpha=0.0, max_iter=BUILD_MAX_ITER, tol=BUILD_TOL / max(n_nodes, 1),
            workers=_threads(),
        )  # fmt: skip
        timings["pagerank_s"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        # memory-mapped at query time; the graph's values as the walk multiplies them
        ctx.out.write_csr("tfidf", emb, mapped=True)
        ctx.out.write_csr("graph", graph, mapped=True, dtype=np.float64)
        ctx.out.write_array("col_sums", column_sums(graph), mapped=True)
        ctx.out.write_array("pagerank", pr.scores.astype(np.float64), mapped=True)
        timings["write_s"] = write_s + time.perf_counter() - t0

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
                **{k: round(v, 3) for k, v in timings.items()},
            }
        )

    # --------------------------------------------------------------- retrieve
    def _route(self, ctx: QueryContext, question: str, usage: Usage) -> tuple[str, float | None]:
        mode = str(ctx.settings.get("mode", "local"))
        if mode != "auto":
            return mode, None
        edge = int(ctx.settings.get("router_chunks", 2))
        nodes = ctx.stored.nodes()
        query = router_query(question, [n.text for n in nodes], edge)
        llm = ctx.models.llm
        before = (llm.usage.prompt_tokens, llm.usage.completion_tokens, llm.usage.calls)
        p_global = float(llm.choice_probability(router_messages(query), yes="y", no="n"))
        usage.add(
            llm.usage.prompt_tokens - before[0],
            llm.usage.completion_tokens - before[1],
            llm.usage.calls - before[2],
        )
        threshold = float(ctx.settings.get("router_threshold", 0.5))
        return ("global" if p_global > threshold else "local"), p_global

    def retrieve(self, ctx: QueryContext, question: str, k: int | None) -> Evidence:
        from lcr.graph import QueryGraph

        s = ctx.settings
        top_k = int(k if k is not None else s["top_k"])
        usage = Usage()
        mode, p_global = self._route(ctx, question, usage)
        n = ctx.stored.node_count()
        info: dict[str, Any] = {"mode": mode}
        if p_global is not None:
            info["router_p_global"] = round(p_global, 4)
        if n == 0:
            return Evidence(self.name, [], info=info, usage=usage)

        sims = self._question_sims(ctx, question, n)
        alpha = float(s["alpha_local"] if mode == "local" else s["alpha_global"])
        max_iter, tol = int(s["max_iter"]), float(s["tol"])
        info["alpha"] = alpha
        stored_settings = ctx.stored.settings
        if alpha == 0.0 and (max_iter, tol) == (BUILD_MAX_ITER, BUILD_TOL):
            # Plain PageRank ignores the personalisation, and one extra node barely
            # moves it: the build already computed it over the chunk graph.
            walk = ctx.stored.array("pagerank")
            info.update(iterations=ctx.stored.stats.get("pagerank_iterations"), linked=0)
        else:
            operator, col_sums = self._graph(ctx, n)
            links = question_links(
                sims, str(s["link"]), float(stored_settings.get("threshold", 0.27)),
                int(s["link_m"]), float(s["link_ratio"]),
            )  # fmt: skip
            self_weight = 1.0 if stored_settings.get("self_loops", True) else 0.0
            qg = QueryGraph(operator, col_sums, links, self_weight)
            result = qg.personalised(alpha, max_iter=max_iter, tol=tol / (n + 1))
            walk = result.scores[:n]
            info.update(
                iterations=result.iterations,
                converged=result.converged,
                linked=int((links > 0).sum()),
            )
        if len(walk) != n:
            raise IndexDamagedError("mixpr index is damaged: PageRank and nodes disagree")
        info["link"] = s["link"]
        share = float(s["sim_share"]) if mode == "local" else 0.0
        chosen = combine_ranking(np.asarray(walk, dtype=np.float64), sims, top_k, share)
        rank = {int(i): r + 1 for r, i in enumerate(chosen)}
        nodes = dict(zip(rank, ctx.stored.nodes_at(rank), strict=True))
        items = [
            item_from_node(nodes[i], float(walk[i]), rank=rank[i], similarity=float(sims[i]))
            for i in sorted(rank, key=lambda j: (nodes[j].spans[0][0] if nodes[j].spans else 0, j))
        ]
        return Evidence(self.name, items, info=info, usage=usage)

    @staticmethod
    def _graph(ctx: QueryContext, n: int) -> tuple[Any, np.ndarray]:
        """The stored graph as a ready operator and its column sums, made once per reader."""
        from lcr.graph import GraphOperator

        def make() -> tuple[GraphOperator, np.ndarray]:
            graph = ctx.stored.csr("graph")
            col_sums = ctx.stored.array("col_sums")
            if graph.shape != (n, n) or len(col_sums) != n:
                raise IndexDamagedError("mixpr index is damaged: graph and nodes disagree")
            return GraphOperator(graph, workers=_threads()), col_sums

        result: tuple[Any, np.ndarray] = ctx.stored.memoised("mixpr:graph", make)
        return result

    @staticmethod
    def _question_sims(ctx: QueryContext, question: str, n: int) -> np.ndarray:
        """Cosine of the question with every chunk, by the stored vectoriser."""
        from lcr.models.tfidf import TfidfModel

        model = ctx.stored.memoised("mixpr:tfidf", lambda: TfidfModel.load(ctx.stored))
        emb = ctx.stored.csr("tfidf")
        if emb.shape[0] != n:
            raise IndexDamagedError("mixpr index is damaged: TF-IDF rows and nodes disagree")
        q = model.transform([question])
        return np.asarray((emb @ q.T).toarray(), dtype=np.float64).ravel()
