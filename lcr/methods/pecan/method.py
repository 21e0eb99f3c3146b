"""PECAN on the shared method contract: build the attention graph, search it, answer.

Build and query both need the in-process transformers backend (attention
weights, a KV cache that can be cropped); the capability check refuses other
backends before any work, and a loaded LLM of another kind is refused here
with one line. ``retrieve`` keeps the search's KV cache on the evidence
(``evidence.state``, a :class:`~lcr.methods.pecan.search.SecondTurn`) and the
method's answer step (:class:`SecondTurnAnswer`) generates the paper's second
turn from it, not the shared answer prompt.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from lcr.answer.shared import AnswerResult, quoting
from lcr.config import SettingValue
from lcr.estimate.figures import BuildEstimate
from lcr.evidence import Evidence
from lcr.methods.base import (
    AnswerContext,
    AnswerStep,
    BuildContext,
    EstimateContext,
    KOption,
    Method,
    Needs,
    QueryContext,
    item_from_node,
)
from lcr.methods.pecan.build import build_graph, stats_of
from lcr.methods.pecan.graph import edge_matrix
from lcr.methods.pecan.search import SecondTurn, answer_turn, dynamic_search
from lcr.methods.pecan.settings import PecanBuild, PecanQuery
from lcr.models.base import Capability, require_attention
from lcr.store import MethodReader, Node

NEEDS = frozenset(
    {
        Capability.GENERATE,
        Capability.ATTENTION,
        Capability.PREFIX_CACHE,
        Capability.CHOICE_PROBABILITY,
    }
)
# every phase: the in-process LLM (attention, a cache it can crop) and the embedder
LLM_AND_EMBEDDER = Needs(llm=NEEDS, embedder=True)


class Pecan(Method[PecanBuild, PecanQuery]):
    name = "pecan"
    manual = "docs/methods/pecan.md"
    quick_build_settings: ClassVar[Mapping[str, SettingValue]] = {
        "chunk_tokens": 100,
        "s": 256,
        "points_max_new_tokens": 24,
    }
    tested_with_real_llm = True  # its build reads attention, its search a KV cache
    k_option = KOption(setting="max_nodes", counts="nodes the search visits at most")
    summary = (
        "graph of LLM Information Points weighted by attention; LLM-guided search over a "
        "node-level KV cache that stops when the LLM says the question can be answered"
    )
    paper = (
        "PECAN: LLM-Guided Dynamic Progress Control with Attention-Guided Hierarchical "
        "Weighted Graph for Long-Document QA (ACL submission)"
    )
    answer_note = (
        "answers from the search's own KV cache (the paper's second turn): only "
        "--max-new-tokens applies, and answer.check=quote|both (the turn then asks for a "
        "quote, checked against the nodes visited as the shared step checks its excerpts); "
        "answer.order, passages, instruction do not"
    )
    build_settings = PecanBuild
    query_settings = PecanQuery

    # the answer is the second turn, from the search's own model and KV cache
    needs_to_build = needs_to_retrieve = needs_to_answer = LLM_AND_EMBEDDER

    def estimate(self, ctx: EstimateContext[PecanBuild]) -> BuildEstimate:
        """The chunks and first level's batches of the build itself: that level exact."""
        from lcr.methods.pecan.build import effective_s, leaf_nodes
        from lcr.methods.pecan.estimate import REPLY_SHARE, estimate_graph

        tokenizer = ctx.tokenizer(ctx.llm)
        params = ctx.settings
        leaves = leaf_nodes(ctx.documents, tokenizer.count_tokens, params.chunk_tokens)
        reply = ctx.prior("completion_share", REPLY_SHARE, "smollm2 on the examples")
        return estimate_graph(
            [n.text for n in leaves],
            [int(n.meta["tokens"]) for n in leaves],
            tokenizer,
            params,
            effective_s(tokenizer, params),
            reply,
        )

    # ------------------------------------------------------------------ build
    def build(self, ctx: BuildContext[PecanBuild]) -> None:
        llm = require_attention(ctx.models.llm, "building pecan")
        calls = ctx.llm_calls(kept="batches")
        with ctx.build_stage("graph"):
            graph = build_graph(ctx, llm, calls)
        with ctx.build_stage("embedding"):
            texts = [n.text for n in graph.nodes]
            emb = ctx.embed(texts, "pecan: embedding nodes")
        ctx.out.write_nodes(graph.nodes)
        ctx.out.write_csr("edges", edge_matrix(graph.edges, len(graph.nodes)))
        ctx.out.write_array("embeddings", emb)
        ctx.out.write_array("levels", np.asarray([n.level for n in graph.nodes], dtype=np.int32))
        ctx.out.counts["edges"] = len(graph.edges)
        ctx.out.stats.update(stats_of(graph, calls))
        ctx.out.stats["seconds"] = ctx.stages.to_json()

    # --------------------------------------------------------------- retrieve
    def retrieve(self, ctx: QueryContext[PecanBuild, PecanQuery], question: str) -> Evidence:
        """The search, leaving room for the answer's reply in the window; the evidence
        keeps its cache for the answer step (``evidence.state``)."""
        nodes, emb, levels, edges = _stored_graph(ctx.stored)
        n = len(nodes)
        s = ctx.settings
        q = np.asarray(ctx.models.embedder.encode([question])[0], dtype=np.float32)
        if n and emb.shape[1] != len(q):
            raise ctx.stored.damage(
                f"embeddings have {emb.shape[1]} dimensions, the embedder {len(q)}"
            )
        cos = emb.astype(np.float32) @ q if n else np.zeros(0, dtype=np.float32)
        llm = require_attention(ctx.models.llm, "pecan retrieval")
        result = dynamic_search(
            llm,
            question,
            [nd.text for nd in nodes],
            np.asarray(levels),
            edges,
            np.asarray(cos, dtype=np.float64),
            s,
            max_nodes=s.max_nodes,
            answer_tokens=ctx.answer.max_new_tokens,
            quote=quoting(ctx.answer),  # the answer turn asks for quotes: room kept for it
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
            "score": s.score,
            "progress_control": s.progress_control,
        }
        return Evidence(method=self.name, items=items, info=info, state=result.state)

    def record_fields(self, info: dict[str, Any]) -> dict[str, Any]:
        """The nodes the search read and why it stopped: Table 2's fixed-node ablation
        uses the average of the first (docs/methods/pecan.md, ``fixed_nodes``)."""
        if "visited" not in info:
            return {}
        return {"nodes_read": int(info["visited"]), "stop": info.get("stop")}

    def check_stored(self, stored: MethodReader, built: PecanBuild) -> None:
        _stored_graph(stored)

    # ----------------------------------------------------------------- answer
    def answer_step(self, settings: PecanQuery) -> SecondTurnAnswer:
        return SECOND_TURN  # the paper's second turn, from the search's KV cache


class SecondTurnAnswer(AnswerStep[PecanQuery, SecondTurn]):
    """The paper's second turn, generated from the search's KV cache. With
    ``answer.check`` quote or both the turn also asks for the sentence the answer rests
    on (the search built it so), and the reply is checked against the nodes visited as
    the shared step checks its excerpts (:meth:`AnswerContext.checked`)."""

    name = "pecan"
    state_type = SecondTurn

    def answer(
        self, ctx: AnswerContext[PecanQuery], question: str, evidence: Evidence, state: SecondTurn
    ) -> AnswerResult:
        llm = require_attention(ctx.llm, "pecan's answer")
        encoded = evidence.info["encoded_tokens"]
        first_turn: dict[str, Any] = evidence.info.setdefault("first_turn", {})
        text = answer_turn(llm, state, encoded, ctx.answer.max_new_tokens, first_turn)
        return ctx.checked(question, AnswerResult(text, list(evidence.items), 0))


SECOND_TURN = SecondTurnAnswer()


def _stored_graph(stored: MethodReader) -> tuple[list[Node], np.ndarray, np.ndarray, Any]:
    """Nodes, their embeddings, levels and edges, checked against each other as they load."""
    nodes = stored.nodes()
    emb = stored.array("embeddings")
    levels = stored.array("levels")
    edges = stored.csr("edges")
    n = len(nodes)
    if (n and emb.ndim != 2) or emb.shape[0] != n or edges.shape != (n, n):
        raise stored.damage(
            f"embeddings {emb.shape} or edges {edges.shape} disagree with {n} nodes"
        )
    if levels.shape != (n,) or levels.dtype.kind not in "iu":
        raise stored.damage(f"levels hold {levels.shape} {levels.dtype}, not {n} levels")
    if [int(x) for x in levels] != [nd.level for nd in nodes]:
        raise stored.damage("levels disagree with the nodes' levels")
    return nodes, emb, levels, edges
