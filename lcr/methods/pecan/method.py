"""PECAN on the shared method contract: build the attention graph, search it, answer.

Build and query both need the in-process transformers backend (attention
weights, a KV cache that can be cropped); the capability check refuses other
backends before any work, and a loaded LLM of another kind is refused here
with one line. ``lcr ask`` takes the answer from the search's own KV cache
(the paper's second turn), not from the shared answer prompt.
"""

from __future__ import annotations

import time
from typing import Any, Literal

import numpy as np

from lcr.config import Setting
from lcr.errors import IndexDamagedError
from lcr.evidence import Evidence
from lcr.methods.base import BuildContext, Method, QueryContext, item_from_node
from lcr.methods.pecan.build import (
    BuildCounters,
    BuildParams,
    build_graph,
    embed_nodes,
    stats_of,
)
from lcr.methods.pecan.graph import edge_matrix
from lcr.methods.pecan.prompts import SECOND_TURNS
from lcr.methods.pecan.search import SCORES, SearchParams, SearchResult, dynamic_search
from lcr.models.base import Capability, require_attention

NEEDS = frozenset(
    {
        Capability.GENERATE,
        Capability.ATTENTION,
        Capability.PREFIX_CACHE,
        Capability.CHOICE_PROBABILITY,
    }
)


class Pecan(Method):
    name = "pecan"
    summary = (
        "graph of LLM Information Points weighted by attention; LLM-guided search over a "
        "node-level KV cache that stops when the LLM says the question can be answered"
    )
    needs = "build: embedder + transformers LLM (attention); retrieve and answer: the same"
    paper = (
        "PECAN: LLM-Guided Dynamic Progress Control with Attention-Guided Hierarchical "
        "Weighted Graph for Long-Document QA (ACL submission)"
    )
    build_uses_llm = True
    build_uses_embedder = True
    answers_in_retrieval = True
    answer_note = (
        "answers from the search's own KV cache (the paper's second turn): only "
        "--max-new-tokens applies; answer.order, passages, instruction, not_found do not"
    )
    build_settings = (
        Setting(
            "chunk_tokens",
            300,
            "level-1 chunk size in tokens of the LLM's tokenizer (sentences kept whole)",
            paper=True,
            low=16,
        ),
        Setting(
            "s",
            8192,
            "batch size in tokens: nodes are batched in order up to s and summarised into "
            "Information Points (see pecan.top for where the levels stop; lowered to fit a "
            "smaller model window, with a warning)",
            paper=True,
            low=64,
        ),
        Setting(
            "max_new_tokens",
            512,
            "most tokens of one batch's bullet-point reply (the paper gives no limit)",
            low=8,
        ),
        Setting(
            "top",
            "summary",
            "where the levels stop: 'summary' summarises until a level is one batch's "
            "points (the paper's costs imply a summary level even over documents shorter "
            "than s); 'fit' stops at the first level that fits one batch, so a short "
            "document's top level is its chunks",
            choices=("summary", "fit"),
            paper=True,
        ),
        Setting(
            "max_levels", 10, "most levels above the chunks (a guard; the paper has none)", low=1
        ),
    )
    query_settings = (
        Setting(
            "patience",
            1,
            "stop after the LLM has said Yes this many times (the paper's p)",
            paper=True,
            low=1,
        ),
        Setting(
            "yes_threshold",
            0.5,
            "a check counts as Yes when P(Yes) / (P(Yes) + P(No)) is above this",
            low=0.0,
            high=1.0,
        ),
        Setting(
            "score",
            "attention+embedding",
            "node score: z = E^T r plus embedding cosine (paper), or Table 2's ablations "
            "'embedding' (w/o attention guidance) and 'attention' (w/o embedding similarity)",
            choices=SCORES,
            paper=True,
        ),
        Setting(
            "progress_control",
            True,
            "ask the LLM Yes/No after each node (paper); false: Table 2's ablation, a fixed "
            "number of nodes (pecan.fixed_nodes) and no checks",
            paper=True,
        ),
        Setting(
            "fixed_nodes",
            10,
            "nodes visited without progress control (the paper used its average; unknown)",
            low=1,
        ),
        Setting(
            "second_turn",
            "question",
            "the answer turn: 'paper' is Table A2's second turn word for word; 'question' "
            "(default) restates the question after it, because with the paper's turn "
            "qwen2.5-coder-1.5b keeps the first turn's one-word format and answers 'Yes'",
            choices=SECOND_TURNS,
        ),
        Setting(
            "max_context",
            8192,
            "the search's input window in tokens (the paper caps it by s = 8K); also capped "
            "by the model's window",
            paper=True,
            low=256,
        ),
    )

    def retrieval_uses_llm(self, settings: dict[str, Any]) -> bool:
        return True

    def retrieval_uses_embedder(self, settings: dict[str, Any]) -> bool:
        return True

    def llm_needs(
        self, phase: Literal["build", "query"], settings: dict[str, Any]
    ) -> frozenset[Capability]:
        return NEEDS

    # ------------------------------------------------------------------ build
    def build(self, ctx: BuildContext) -> None:
        s = ctx.settings
        llm = require_attention(ctx.models.llm, "building pecan")
        params = BuildParams(
            chunk_tokens=int(s["chunk_tokens"]),
            s=int(s["s"]),
            max_new_tokens=int(s["max_new_tokens"]),
            max_levels=int(s["max_levels"]),
            top=str(s["top"]),
        )
        counters = BuildCounters()
        started = time.perf_counter()
        graph = build_graph(ctx, llm, params, counters)
        built = time.perf_counter()
        emb = embed_nodes(ctx, graph.nodes)
        ctx.out.write_nodes(graph.nodes)
        ctx.out.write_csr("edges", edge_matrix(graph.edges, len(graph.nodes)))
        ctx.out.write_array("embeddings", emb)
        ctx.out.write_array("levels", np.asarray([n.level for n in graph.nodes], dtype=np.int32))
        ctx.out.counts["edges"] = len(graph.edges)
        ctx.out.stats.update(stats_of(graph, counters))
        ctx.out.stats["seconds"] = {
            "graph": round(built - started, 3),
            "embedding": round(time.perf_counter() - built, 3),
        }

    # --------------------------------------------------------------- retrieve
    def retrieve(self, ctx: QueryContext, question: str, k: int | None) -> Evidence:
        return self._search(ctx, question, k, None)[0]

    def retrieve_and_answer(
        self, ctx: QueryContext, question: str, k: int | None, max_new_tokens: int
    ) -> tuple[Evidence, str]:
        evidence, result = self._search(ctx, question, k, max_new_tokens)
        return evidence, result.answer or ""

    def _search(
        self, ctx: QueryContext, question: str, k: int | None, answer_tokens: int | None
    ) -> tuple[Evidence, SearchResult]:
        nodes = ctx.stored.nodes()
        emb = ctx.stored.array("embeddings")
        levels = ctx.stored.array("levels")
        edges = ctx.stored.csr("edges")
        n = len(nodes)
        if emb.shape[0] != n or levels.shape[0] != n or edges.shape != (n, n):
            raise IndexDamagedError("pecan index is damaged: nodes, embeddings and graph disagree")
        s = ctx.settings
        params = SearchParams(
            patience=int(s["patience"]),
            yes_threshold=float(s["yes_threshold"]),
            score=str(s["score"]),
            progress_control=bool(s["progress_control"]),
            fixed_nodes=int(s["fixed_nodes"]),
            max_context=int(s["max_context"]),
            max_nodes=k,
            answer_tokens=answer_tokens if answer_tokens is not None else 256,
            second_turn=str(s["second_turn"]),
        )
        q = np.asarray(ctx.models.embedder.encode([question])[0], dtype=np.float32)
        cos = emb.astype(np.float32) @ q if n else np.zeros(0, dtype=np.float32)
        llm = require_attention(ctx.models.llm, "pecan retrieval")
        before = llm.usage.copy()
        result = dynamic_search(
            llm,
            question,
            [nd.text for nd in nodes],
            np.asarray(levels),
            edges,
            np.asarray(cos, dtype=np.float64),
            params,
            answer=answer_tokens is not None,
        )
        items = [
            item_from_node(
                nodes[st.node],
                st.score,
                step=rank,
                rank=rank,  # visiting order is PECAN's ranking
                z=st.z,
                cos=round(st.cos, 6),
                r=st.r,
                p_yes=st.p_yes,
            )
            for rank, st in enumerate(result.steps, 1)
        ]
        info: dict[str, Any] = {
            "levels": int(levels.max()) + 1 if n else 0,
            "visited": len(result.steps),
            "checks": [round(p, 6) for p in result.checks],
            "stop": result.stop,
            "context_tokens": result.context_tokens,
            "encoded_tokens": result.encoded,
            "score": params.score,
            "progress_control": params.progress_control,
        }
        usage = llm.usage.minus(before)
        return Evidence(method=self.name, items=items, info=info, usage=usage), result
