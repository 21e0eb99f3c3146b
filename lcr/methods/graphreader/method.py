"""GraphReader build and retrieval on the shared method contract.

Build (section 3.2): paragraph-preserving chunks of at most ``chunk_tokens``;
per chunk the extraction prompt (Figure 6), sent with ``generate_batch`` and
stored in the index's LLM cache as each batch completes (a killed build pays no
chunk twice); replies parsed by ``extraction``; key elements normalised and
merged (``keys``); nodes and links (``graph``); the key embeddings and the
sparse adjacency in zarr.

Retrieve (section 3.3): the :class:`~lcr.methods.graphreader.agent.Agent`
explores the graph; the evidence is what it read (chunks, with their exact
spans, then the atomic facts of chunks it did not open); its plan, notebooks
and trace go in ``Evidence.info`` (the notebooks also in ``Evidence.state``, as
:class:`Notebooks`, for the answer). Answer (section 3.4, Figure 12): the
notebooks of all paths in, the final answer out (:class:`NotebookAnswer`); with
no notebook written, the shared answer step.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import scipy.sparse as sp

from lcr.answer.shared import AnswerResult
from lcr.config import MOST_NEW_TOKENS, Fixed, Settings, retired, setting
from lcr.estimate.figures import BuildEstimate
from lcr.evidence import AnswerState, Evidence, EvidenceItem
from lcr.methods.base import (
    GENERATE,
    AnswerContext,
    AnswerStep,
    BuildContext,
    EstimateContext,
    KOption,
    Method,
    Needs,
    QueryContext,
    top_indices,
)
from lcr.methods.graphreader import prompts
from lcr.methods.graphreader.agent import CANDIDATES, MAX_NEIGHBORS, Agent
from lcr.methods.graphreader.extraction import (
    ExtractedFact,
    Extraction,
    grounded,
    parse_extraction,
    sentence_facts,
)
from lcr.methods.graphreader.graph import Fact, Graph, build_graph, key_table
from lcr.methods.graphreader.keys import merge_keys
from lcr.methods.toolkit import chunk_nodes as toolkit_chunk_nodes
from lcr.store import MethodReader, Node
from lcr.text.tokens import count_tokens

_FINAL_ANSWER_AT = re.compile(
    r"final answer\b[\s*:#-]*(?:(?:is|was)\b\s*)?(?:that\b\s*)?[\s*:#-]*", re.IGNORECASE
)


_DOCS = "docs/methods/graphreader.md"  # where each measured default is written up
# Key elements at least this similar merge (the paper follows Lu et al. 2023, no number):
# 0.85 merged mostly different things, 0.95 a quarter of 0.9's merges, neither clearly
# better: docs/methods/graphreader.md#merge_threshold-on-a-graphs-key-forms
MERGE_THRESHOLD = 0.9


@dataclass(frozen=True)
class GraphReaderBuild(Settings):
    chunk_tokens: int = setting(
        2000, "chunk size in tokens, paragraphs kept whole (the paper's L)", paper=True, low=16
    )
    extraction_max_new_tokens: int = setting(
        1024,
        "most new tokens per chunk's extraction (the prompt's own limit)",
        paper=True,
        low=16,
        high=MOST_NEW_TOKENS,
    )
    fixed = retired(
        merge_threshold=Fixed(MERGE_THRESHOLD, "measured on a graph's key forms"),
        # the paper's none changed no chunk with the default model and left smollm2's
        # graph empty: docs/methods/graphreader.md#caps-and-the-fallback-on-two-real-graphs
        fallback=Fixed("sentences", "the paper's none built the same graph or none at all"),
        batch_size=Fixed(0, "every pending chunk goes to the backend, which batches"),
    )


@dataclass(frozen=True)
class GraphReaderQuery(Settings):
    initial_nodes: int = setting(
        5,
        "initial nodes, one exploration path each (the paper's N; -k overrides)",
        paper=True,
        low=1,
    )
    # each call is an LLM reply; a path ends when the model says so or at this cap
    max_calls: int = setting(
        10, "function calls per exploration path", paper=True, low=1, high=1000
    )
    rational_plan: bool = setting(
        True, "make a rational plan first (false: Table 4's w/o Rational Plan)", paper=True
    )
    node_selection: Literal["model", "random"] = setting(
        "model",
        "model: the LLM picks initial and neighbour nodes; random: Table 4's w/o Node Selection",
        paper=True,
    )
    read_chunks: bool = setting(
        True, "read text chunks (false: only atomic facts, the coarse level alone)", paper=True
    )
    agent_max_new_tokens: int = setting(
        384,
        "most new tokens per agent reply",
        measured=f"{_DOCS}#caps-and-the-fallback-on-two-real-graphs",
        low=16,
        high=MOST_NEW_TOKENS,
    )
    seed: int = setting(
        0,
        "seed of the random ablation and of sampling (call n samples with seed + n)",
        arbitrary=True,  # no seed is better than another: nothing to measure
        low=0,
        high=2**32 - 1,
    )
    temperature: float = setting(
        0.2,
        "sampling temperature of the agent's and the answer's replies (0 = greedy)",
        paper=True,
        low=0.0,
        high=2.0,
    )
    window: int = setting(
        4096,
        "tokens each agent call may fill, reply included (the paper's 4k; 0 = the model's whole)",
        paper=True,
        low=0,
        high=1_048_576,
    )
    fixed = retired(
        candidates=Fixed(CANDIDATES, "measured on two real graphs"),
        max_neighbors=Fixed(MAX_NEIGHBORS, "measured on two real graphs"),
    )


BUILD_NEEDS = Needs(llm=GENERATE, embedder=True)
RETRIEVE_NEEDS = Needs(
    llm=GENERATE,
    embedder=True,
    why="its agent explores the graph with the LLM; graphreader has no retrieval without one",
)


def chunk_nodes(documents: Iterable[tuple[int, int, str]], chunk_tokens: int) -> list[Node]:
    """The chunks extraction reads: paragraphs kept whole, at most ``chunk_tokens`` each
    (the build's and the estimate's one chunker)."""
    from lcr.text.chunking import paragraph_windows

    return toolkit_chunk_nodes(
        documents,
        lambda text, start: paragraph_windows(text, chunk_tokens, offset=start),
        tokens=count_tokens,
    )


@dataclass
class ChunkFacts:
    """Each chunk's grounded facts, and what reading the replies met."""

    facts: list[list[ExtractedFact]]
    parsed: Extraction
    ungrounded: int  # key elements dropped: not in their chunk's text
    fallback_chunks: int  # chunks whose sentences stand in for facts


def chunk_facts(chunks: list[Node], replies: list[str]) -> ChunkFacts:
    """The facts of each chunk's extraction reply, kept only where grounded in the chunk;
    a chunk left with none takes its sentences as facts."""
    out = ChunkFacts([], Extraction(), 0, 0)
    for chunk, reply in zip(chunks, replies, strict=True):
        ex = parse_extraction(reply)
        out.parsed.malformed += ex.malformed
        out.parsed.echoed += ex.echoed
        facts, dropped = grounded(ex.facts, chunk.text)
        out.ungrounded += dropped
        if not facts:
            facts = sentence_facts(chunk.text)
            out.fallback_chunks += 1
        out.facts.append(facts)
    return out


def graph_nodes(graph: Graph, chunks: list[Node]) -> tuple[list[Node], list[Node]]:
    """The stored records of the graph's atomic facts (level 1, spanning their chunk)
    and key elements (level 2, their facts as children)."""
    fact_nodes = [
        Node(
            f"f{i}",
            1,
            f.text,
            list(chunks[f.chunk].spans),
            chunks[f.chunk].doc,
            meta={"chunk": f.chunk, "nodes": list(f.nodes)},
        )
        for i, f in enumerate(graph.facts)
    ]
    key_nodes = [
        Node(
            f"k{i}",
            2,
            key,
            [],
            chunks[graph.facts[graph.node_facts[i][0]].chunk].doc if graph.node_facts[i] else 0,
            children=[f"f{f}" for f in graph.node_facts[i]],
            meta={"forms": graph.forms[i]} if len(graph.forms[i]) > 1 else {},
        )
        for i, key in enumerate(graph.keys)
    ]
    return fact_nodes, key_nodes


class GraphReader(Method[GraphReaderBuild, GraphReaderQuery]):
    name = "graphreader"
    manual = "docs/methods/graphreader.md"
    k_option = KOption(
        counts="exploration paths, the paper's N", info_key="initial_nodes", setting="initial_nodes"
    )
    traces = True
    summary = (
        "graph of key elements and atomic facts (LLM-extracted), explored by an LLM agent "
        "with a notebook"
    )
    answer_note = (
        "answers with the paper's prompt over its notebooks (Figure 12): the answer.* "
        "settings apply only when no notebook was written and the shared step answers, but "
        "answer.check=quote|both (the prompt then asks for a quote, checked against the "
        "chunks and atomic facts the agent read)"
    )
    paper = (
        "Li et al. 2024, GraphReader: Building Graph-based Agent to Enhance Long-Context "
        "Abilities of Large Language Models (EMNLP Findings)"
    )
    built_by_default = False
    build_settings = GraphReaderBuild
    query_settings = GraphReaderQuery

    # one extraction per chunk (LLM), key elements merged by embedding similarity; the
    # agent (LLM) and its pre-selection of candidate nodes (embedder); Figure 12 over
    # the notebooks, or the shared step: the LLM either way (the default answer needs)
    needs_to_build = BUILD_NEEDS
    needs_to_retrieve = RETRIEVE_NEEDS

    # ------------------------------------------------------------------ build
    def build(self, ctx: BuildContext[GraphReaderBuild]) -> None:
        s = ctx.settings
        with ctx.build_stage("chunking"):
            chunks = chunk_nodes(ctx.doc_texts(), s.chunk_tokens)

        with ctx.build_stage("extraction"):
            extractor = ctx.generations(
                prompt_version=prompts.PROMPT_VERSION,
                max_new_tokens=s.extraction_max_new_tokens,
                # every pending chunk at once, as RAPTOR's summaries (docs/speed.md, issue 56)
                batch_size=0,
                what="extracting GraphReader facts",
            )
            task = ctx.progress.task("graphreader: extracting atomic facts", total=len(chunks))
            max_tokens = s.extraction_max_new_tokens
            replies = extractor.run(
                [prompts.extraction_messages(c.text, max_tokens) for c in chunks], task
            )
        facts = chunk_facts(chunks, replies)

        with ctx.build_stage("keys"):
            table = key_table(facts.facts)
            dim = ctx.models.embedder.dim
            if table.normals:
                shown = [table.display(i) for i in range(len(table.normals))]
                emb = np.asarray(ctx.models.embedder.encode(shown), dtype=np.float32)
            else:
                emb = np.zeros((0, dim), dtype=np.float32)
            merge = merge_keys(emb, table.counts, MERGE_THRESHOLD)

        with ctx.build_stage("graph"):
            texts, docs = [c.text for c in chunks], [c.doc for c in chunks]
            graph = build_graph(texts, docs, facts.facts, table, merge.leader)
            leaders = sorted(set(merge.leader))
            node_emb = emb[leaders] if leaders else np.zeros((0, dim), dtype=np.float32)

        fact_nodes, key_nodes = graph_nodes(graph, chunks)
        ctx.out.write_nodes(chunks)
        ctx.out.write_nodes(fact_nodes, "facts")
        ctx.out.write_nodes(key_nodes, "keys")
        ctx.out.write_csr("adjacency", graph.adjacency)
        ctx.out.write_array("key_embeddings", node_emb.astype(np.float32))
        degrees = np.diff(graph.adjacency.indptr) if graph.n_nodes else np.zeros(0)
        # one "nodes" everywhere: the graph's nodes (key elements), as in the paper and the
        # stats; the build line said "1 nodes" (the chunks file) where `lcr info` said 23
        ctx.out.counts.clear()
        ctx.out.counts.update(
            chunks=len(chunks),
            nodes=graph.n_nodes,
            facts=len(graph.facts),
            edges=int(graph.adjacency.nnz // 2),
        )
        ctx.out.stats.update(
            {
                "chunks": len(chunks),
                "facts": len(graph.facts),
                "nodes": graph.n_nodes,
                "edges": int(graph.adjacency.nnz // 2),
                "mean_neighbors": round(float(degrees.mean()), 2) if len(degrees) else 0.0,
                "key_forms": len(table.normals),
                "keys_merged_by_similarity": merge.merged,
                "malformed_lines": facts.parsed.malformed,
                "example_echoes": facts.parsed.echoed,
                "ungrounded_keys": facts.ungrounded,
                "fallback_chunks": facts.fallback_chunks,
                **extractor.stats(),
                "seconds": ctx.stages.to_json(),
            }
        )

    def estimate(self, ctx: EstimateContext[GraphReaderBuild]) -> BuildEstimate:
        """One extraction per chunk of the build's own chunker: calls and prompts exact."""
        from lcr.methods.graphreader.estimate import (
            KEYS_PER_REPLY_TOKEN,
            REPLY_SHARE,
            estimate_extraction,
        )

        s = ctx.settings
        chunks = [c.text for c in chunk_nodes(ctx.documents, s.chunk_tokens)]
        share = ctx.prior("completion_per_prompt_token", REPLY_SHARE, "smollm2 on the examples")
        keys = ctx.prior("keys_per_completion_token", KEYS_PER_REPLY_TOKEN, "smollm2")
        return estimate_extraction(
            chunks, ctx.tokenizer(ctx.llm), s.extraction_max_new_tokens, share, keys
        )

    # --------------------------------------------------------------- retrieve
    def _graph(
        self, ctx: QueryContext[GraphReaderBuild, GraphReaderQuery]
    ) -> tuple[Graph, np.ndarray, list[Node]]:
        result: tuple[Graph, np.ndarray, list[Node]] = ctx.stored.memoised(
            "graph", lambda: _stored_graph(ctx.stored)
        )
        return result

    def check_stored(self, stored: MethodReader, built: GraphReaderBuild) -> None:
        _stored_graph(stored)

    def retrieve(
        self,
        ctx: QueryContext[GraphReaderBuild, GraphReaderQuery],
        question: str,
    ) -> Evidence:
        graph, emb, chunks = self._graph(ctx)
        settings = ctx.settings

        def rank(text: str) -> list[int]:
            if graph.n_nodes == 0:
                return []
            q = np.asarray(ctx.models.embedder.encode([text])[0], dtype=np.float32)
            if emb.shape[1] != len(q):
                raise ctx.stored.damage(
                    f"key_embeddings have {emb.shape[1]} dimensions, the embedder {len(q)}"
                )
            scores = emb.astype(np.float32) @ q
            return [int(i) for i in top_indices(scores, min(CANDIDATES, graph.n_nodes))]

        result = Agent(ctx.models.llm, graph, settings, rank).run(question)

        items: list[EvidenceItem] = []
        n_read = len(result.chunks_read)
        for r, c in enumerate(result.chunks_read):
            node = chunks[c]
            items.append(
                EvidenceItem(
                    node.id,
                    node.doc,
                    0,
                    float(n_read - r),
                    node.text,
                    list(node.spans),
                    {"read": "chunk", "rank": r + 1},
                )
            )
        opened = set(result.chunks_read)
        for r, f in enumerate(result.facts_seen):
            fact = graph.facts[f]
            if fact.chunk in opened:
                continue
            node = chunks[fact.chunk]
            items.append(
                EvidenceItem(
                    f"f{f}",
                    node.doc,
                    1,
                    1.0 / (r + 2),
                    fact.text,
                    list(node.spans),
                    {"read": "atomic_fact", "chunk": node.id},
                )
            )
        calls = result.calls_per_path
        info: dict[str, Any] = {
            "plan": result.plan,
            "initial_nodes": [graph.keys[i] for i in result.initial_nodes],
            "notebooks": result.notebooks,
            "function_calls_per_path": calls,
            "mean_function_calls": round(sum(calls) / len(calls), 2) if calls else 0.0,
            "chunks_read": len(result.chunks_read),
            "facts_seen": len(result.facts_seen),
            "counts": dict(sorted(result.counters.items())),
            "prompt_tokens": result.prompt_tokens,
            "repeated_prefix_tokens": result.repeated_prefix_tokens,
            "trace": result.trace,
        }
        # the notebooks again, for the answer step (info is what the user sees)
        state = Notebooks(list(result.notebooks))
        return Evidence(method=self.name, items=items, info=info, state=state)

    # ----------------------------------------------------------------- answer
    def answer_step(self, settings: GraphReaderQuery) -> NotebookAnswer:
        return NOTEBOOK_ANSWER  # its notebooks (the shared step only when there is none)


@dataclass
class Notebooks(AnswerState):
    """What the answer reads besides the evidence: every exploration path's notebook."""

    paths: list[str] = field(default_factory=list)


class NotebookAnswer(AnswerStep[GraphReaderQuery, Notebooks]):
    """Figure 12 over every path's notebook; with no notebook at all, the shared step.
    With ``answer.check`` quote or both, Figure 12 also asks for the sentence the answer
    rests on, and the reply is checked against what the agent read (its chunks and
    atomic facts) as the shared step checks its excerpts (:meth:`AnswerContext.checked`)."""

    name = "graphreader"
    state_type = Notebooks

    def answer(
        self,
        ctx: AnswerContext[GraphReaderQuery],
        question: str,
        evidence: Evidence,
        state: Notebooks,
    ) -> AnswerResult:
        notebooks = list(state.paths)
        if not any(n.strip() for n in notebooks):
            return ctx.shared(question, evidence.items)
        llm = ctx.llm
        max_new_tokens = ctx.answer.max_new_tokens
        window = llm.context_window
        if ctx.settings.window:
            window = min(window, ctx.settings.window)
        budget = window - max_new_tokens - 64
        messages = prompts.answer_messages(question, notebooks, ctx.quoting)
        while sum(llm.count_tokens(m["content"]) for m in messages) > budget and any(notebooks):
            notebooks = [n[: len(n) * 3 // 4] for n in notebooks]
            messages = prompts.answer_messages(question, notebooks, ctx.quoting)
        gen = llm.generate(
            messages,
            max_new_tokens=max_new_tokens,
            temperature=ctx.settings.temperature,
            seed=ctx.settings.seed,
        )
        # quoting: the notebooks are the agent's words, so a quote holds only where it is
        # the document's, in a chunk the agent read (or an atomic fact copying one)
        out = AnswerResult(final_answer(gen.text), evidence.in_document_order(), 0)
        return ctx.checked(question, out)


NOTEBOOK_ANSWER = NotebookAnswer()


def final_answer(reply: str) -> str:
    """The text after the last "Final answer:" of a Figure-12 reply (else the whole reply).

    Small models also write it in prose ("the final answer is that the apple is in
    the kitchen"): the linking "is" / "that" goes too, so the answer is what follows.
    """
    matches = list(_FINAL_ANSWER_AT.finditer(reply))
    if not matches:
        return reply.strip()
    tail = reply[matches[-1].end() :].strip()
    return tail or reply.strip()


def _stored_graph(stored: MethodReader) -> tuple[Graph, np.ndarray, list[Node]]:
    """The graph as the agent walks it, every reference between records checked."""
    chunks = stored.nodes()
    fact_nodes = stored.nodes("facts")
    key_nodes = stored.nodes("keys")
    adjacency = stored.csr("adjacency")
    emb = stored.array("key_embeddings")
    n = len(key_nodes)
    if (n and emb.ndim != 2) or emb.shape[0] != n or adjacency.shape != (n, n):
        raise stored.damage(f"key_embeddings {emb.shape} or adjacency disagree with {n} keys")
    try:
        facts = [
            Fact(f.text, int(f.meta["chunk"]), tuple(int(x) for x in f.meta["nodes"]))
            for f in fact_nodes
        ]
        node_facts = [[int(c[1:]) for c in k.children] for k in key_nodes]
        forms = [list(k.meta.get("forms", [k.text])) for k in key_nodes]
    except (KeyError, ValueError, TypeError):
        raise stored.damage("facts.jsonl or keys.jsonl holds a malformed record") from None
    if (
        any(not 0 <= f.chunk < len(chunks) for f in facts)
        or any(not 0 <= k < n for f in facts for k in f.nodes)
        or any(not 0 <= i < len(facts) for fs in node_facts for i in fs)
        or not all(isinstance(x, str) for fs in forms for x in fs)
    ):
        raise stored.damage("facts.jsonl or keys.jsonl refers to a record that is not there")
    graph = Graph(
        [c.text for c in chunks],
        [c.doc for c in chunks],
        facts,
        [k.text for k in key_nodes],
        node_facts,
        sp.csr_array(adjacency),
        forms,
    )
    return graph, emb, chunks
