"""RAPTOR build and retrieval on the shared method contract.

Build (section 3 of the paper): ~100-token leaves that never cut a sentence,
embedded; per layer, soft UMAP + Gaussian-mixture clusters (``clustering``),
each summarised by the LLM with the paper's prompt (appendix D) and re-embedded
as the next layer; until too few nodes are left to cluster (at most
``reduction_dim + 1``), clustering stops shrinking the layer, or ``max_layers``.
Every summary goes through the index's LLM cache as soon as it is written, so
an interrupted build resumes without paying for it again; a failed LLM call
stops the build with :class:`~lcr.errors.LLMCallError` and stores nothing.

Retrieve (appendix F): collapsed tree (default) or tree traversal (``tree``).

Token counts (leaf size, cluster budget, collapsed-tree budget) use
:func:`lcr.text.tokens.count_tokens`, the model-free approximation shared by all
chunkers, so the tree and the budget do not depend on which LLM reads them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np

from lcr.config import MOST_NEW_TOKENS, Fixed, Settings, SettingValue, retired, setting
from lcr.estimate.figures import BuildEstimate
from lcr.evidence import Evidence, merge_spans
from lcr.methods.base import (
    GENERATE,
    BuildContext,
    EstimateContext,
    KOption,
    Method,
    Needs,
    QueryContext,
    item_from_node,
)
from lcr.methods.raptor.clustering import cluster_layer
from lcr.methods.raptor.tree import collapsed_tree, tree_traversal
from lcr.methods.toolkit import chunk_nodes
from lcr.models.base import Message
from lcr.store import MethodReader, Node
from lcr.text.tokens import count_tokens

SYSTEM_PROMPT = "You are a Summarizing Text Portal"
USER_PROMPT = (
    "Write a summary of the following, including as many key details as possible: {context}:"
)
PROMPT_VERSION = "raptor-summary-v1"


def summary_messages(texts: Sequence[str]) -> list[Message]:
    """The paper's prompt (appendix D); each child on one line, children apart by a blank."""
    context = "\n\n".join(" ".join(t.splitlines()) for t in texts)
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": USER_PROMPT.format(context=context)},
    ]


@dataclass(frozen=True)
class RaptorBuild(Settings):
    chunk_tokens: int = setting(
        100, "leaf size in tokens; sentences are never cut", paper=True, low=1
    )
    # UMAP holds n x reduction_dim floats, and more dimensions than leaves mean nothing
    reduction_dim: int = setting(
        10, "UMAP output dimensions", reference_code=True, low=1, high=1000
    )
    threshold: float = setting(
        0.1, "soft membership: join every cluster above it", reference_code=True, low=0, high=1
    )
    max_clusters: int = setting(
        50,
        "mixture components tried by BIC: fewer than this and than the layer's nodes",
        reference_code=True,
        low=2,
    )
    cluster_max_tokens: int = setting(
        3500,
        "summariser budget; a cluster with more text is clustered again",
        reference_code=True,
        low=1,
    )
    max_layers: int = setting(5, "most summary layers above the leaves", reference_code=True, low=0)
    summary_max_new_tokens: int = setting(
        150,
        "most new tokens per summary (reference code: 100; the paper's average 131 tokens)",
        measured="docs/methods/raptor.md#summary-lengths-with-the-default-model",
        low=1,
        high=MOST_NEW_TOKENS,
    )
    seed: int = setting(
        224,
        "seed of UMAP and of the BIC search's mixtures "
        "(the reference code seeds only the BIC search)",
        reference_code=True,
        low=0,
        high=2**32 - 1,
    )
    fixed = retired(
        local_neighbors=Fixed(10, "the reference code's UMAP n_neighbors in a cluster"),
        global_neighbors_cap=Fixed(50, "bounds UMAP on a large layer; measured"),
        batch_size=Fixed(0, "a whole layer goes to the backend, which batches what it can"),
        embed_long=Fixed("pooled", "lcr's; no measurement chose it: truncated was within chance"),
    )


@dataclass(frozen=True)
class RaptorQuery(Settings):
    mode: Literal["collapsed", "traversal"] = setting(
        "collapsed",
        "collapsed (all layers by cosine, to a token budget) or traversal (top-k per layer)",
        paper=True,
    )
    max_tokens: int = setting(
        2000,
        "collapsed tree: token budget of the context (lcr's model-free token count)",
        paper=True,
        low=1,
    )
    top_k: int = setting(
        5,
        "traversal: nodes kept per layer (the paper's k; -k overrides)",
        reference_code=True,
        low=1,
    )
    max_nodes: int | None = setting(
        None,
        "collapsed tree: at most this many nodes within the budget (-k); none: no cap",
        paper=True,  # the paper's collapsed tree adds nodes until max_tokens, no count
        low=1,
    )
    depth: int = setting(
        0,
        "traversal: layers descended from the root layer (the paper's d); 0 = down to the leaves",
        paper=True,
        low=0,
    )


EMBEDDER = Needs(embedder=True)
SUMMARISE = Needs(llm=GENERATE, embedder=True)  # one summary per cluster, each embedded


def leaf_nodes(
    documents: Iterable[tuple[int, int, str]],
    chunk_tokens: int,
    each_document: Callable[[], object] = lambda: None,
) -> list[Node]:
    """The leaves: ~``chunk_tokens``-token windows that never cut a sentence (the build's
    and the estimate's one chunker)."""
    from lcr.text.chunking import token_windows

    return chunk_nodes(
        documents,
        lambda text, start: token_windows(text, chunk_tokens, offset=start),
        tokens=count_tokens,
        each_document=each_document,
    )


STAGES = ("chunking", "embedding", "clustering", "summarisation")  # a build's "seconds"


@dataclass
class _Tree:
    """The tree as it grows: every node, the leaves under each, each layer's rows."""

    nodes: list[Node]
    leaves_of: list[list[int]]
    embeddings: list[np.ndarray]

    def add_layer(
        self, layer: int, clusters: list[list[int]], texts: list[str], ctx: BuildContext[Any]
    ) -> list[int]:
        """One summary node per cluster of node indices, spanning its leaves' text (merged
        where only whitespace parts them within a document); the new nodes' indices."""
        breaks = [d.start for d in ctx.documents[1:]]
        new_ids: list[int] = []
        for members, text in zip(clusters, texts, strict=True):
            leaves = sorted({leaf for m in members for leaf in self.leaves_of[m]})
            spans = merge_spans(
                [sp for leaf in leaves for sp in self.nodes[leaf].spans], ctx.source, breaks
            )
            self.nodes.append(
                Node(
                    f"s{layer}-{len(new_ids)}",
                    layer,
                    text,
                    spans,
                    self.nodes[leaves[0]].doc,
                    children=[self.nodes[m].id for m in members],
                    meta={"tokens": count_tokens(text), "leaves": len(leaves)},
                )
            )
            new_ids.append(len(self.nodes) - 1)
            self.leaves_of.append(leaves)
        return new_ids


class Raptor(Method[RaptorBuild, RaptorQuery]):
    name = "raptor"
    manual = "docs/methods/raptor.md"
    quick_build_settings: ClassVar[Mapping[str, SettingValue]] = {"summary_max_new_tokens": 40}
    # -k is top_k when traversing, max_nodes on the collapsed tree (k_setting)
    k_option = KOption(setting="max_nodes")
    summary = "tree of recursive cluster summaries (UMAP + GMM + LLM), collapsed-tree retrieval"
    paper = (
        "Sarthi et al. 2024, RAPTOR: Recursive Abstractive Processing for "
        "Tree-Organized Retrieval (ICLR)"
    )
    answer_note = (
        "the shared answer step (the paper fixes no order for the collapsed tree's nodes); "
        "answer.passages=merged joins leaf chunks only, summaries stay whole"
    )
    built_by_default = False
    build_settings = RaptorBuild
    query_settings = RaptorQuery
    needs_to_build = SUMMARISE
    needs_to_retrieve = EMBEDDER

    # ------------------------------------------------------------------ build
    def build(self, ctx: BuildContext[RaptorBuild]) -> None:
        s = ctx.settings
        summariser = ctx.generations(
            prompt_version=PROMPT_VERSION,
            max_new_tokens=s.summary_max_new_tokens,
            # a whole layer at once, the backend batching what it can: 5-7x on a GPU, no cost
            # on a CPU (docs/speed.md#batched-generation-against-one-call-at-a-time-issue-56)
            batch_size=0,
            what="summarising RAPTOR",
            require_text=True,
        )
        with ctx.build_stage("chunking"):
            task = ctx.progress.task("raptor: chunking", total=len(ctx.documents))
            nodes = leaf_nodes(ctx.doc_texts(), s.chunk_tokens, task.advance)
        with ctx.build_stage("embedding"):
            texts = [n.text for n in nodes]
            layer_emb = ctx.embed(texts, "raptor: embedding leaves")
        tree = _Tree(nodes, [[i] for i in range(len(nodes))], [layer_emb])
        layer_nodes = list(range(len(nodes)))
        sizes = [len(nodes)]
        reports: list[dict[str, int]] = []
        stop = f"max_layers ({s.max_layers}) reached"
        for layer in range(1, s.max_layers + 1):
            if len(layer_nodes) <= s.reduction_dim + 1:
                stop = f"too few nodes to cluster ({len(layer_nodes)})"
                break
            with ctx.build_stage("clustering"):
                task = ctx.progress.task(
                    f"raptor: layer {layer}: clustering {len(layer_nodes)} nodes", total=1
                )
                tokens = [int(nodes[i].meta["tokens"]) for i in layer_nodes]
                clusters, report = cluster_layer(layer_emb, tokens, s)
                task.advance()
            reports.append(dict(vars(report), clusters=len(clusters)))
            if len(clusters) >= len(layer_nodes):
                stop = f"clustering no longer shrinks the layer ({len(layer_nodes)} nodes)"
                break
            with ctx.build_stage("summarisation"):
                task = ctx.progress.task(f"raptor: layer {layer}: summaries", total=len(clusters))
                convs = [
                    summary_messages([nodes[layer_nodes[j]].text for j in c]) for c in clusters
                ]
                texts = summariser.run(convs, task, f"summarising RAPTOR layer {layer}")
            members = [[layer_nodes[j] for j in c] for c in clusters]
            layer_nodes = tree.add_layer(layer, members, texts, ctx)
            with ctx.build_stage("embedding"):
                what = f"raptor: embedding layer {layer} summaries"
                layer_emb = ctx.embed(texts, what)
            tree.embeddings.append(layer_emb)
            sizes.append(len(layer_nodes))

        ctx.out.write_nodes(nodes)
        ctx.out.write_array("embeddings", np.concatenate(tree.embeddings, axis=0))
        shape = {"layers": sizes, "stop": stop, "seed": s.seed, "clustering": reports}
        ctx.out.write_json("tree", shape)
        ctx.out.stats.update(
            {
                "layers": sizes,
                "stop": stop,
                "clustering": reports,
                **summariser.stats(),
                "seconds": ctx.stages.to_json(STAGES),
            }
        )

    def estimate(self, ctx: EstimateContext[RaptorBuild]) -> BuildEstimate:
        """The leaves are the build's own; the layers above them are a range (clusters
        depend on the embeddings, summaries on the model)."""
        from lcr.methods.raptor.estimate import REPLY_SHARE, TreeShape, estimate_tree

        s = ctx.settings
        shape = TreeShape(
            s.max_layers,
            s.reduction_dim,
            s.cluster_max_tokens,
            s.summary_max_new_tokens,
            summary_messages,
        )
        leaves = leaf_nodes(ctx.documents, s.chunk_tokens)
        reply = ctx.prior("completion_share", REPLY_SHARE, "smollm2 on the examples")
        return estimate_tree(
            [n.text for n in leaves],
            [int(n.meta["tokens"]) for n in leaves],
            ctx.tokenizer(ctx.llm),
            shape,
            reply,
        )

    # --------------------------------------------------------------- retrieve
    def k_setting(self, settings: RaptorQuery) -> str:
        return "top_k" if settings.mode == "traversal" else "max_nodes"

    def retrieve(self, ctx: QueryContext[RaptorBuild, RaptorQuery], question: str) -> Evidence:
        tree = ctx.stored.memoised("raptor:tree", lambda: StoredTree.load(ctx.stored))
        nodes, emb, tokens = tree.nodes, tree.embeddings, tree.tokens
        if not nodes:
            return Evidence(method=self.name, items=[], info={"mode": ctx.settings.mode})
        q = ctx.models.embedder.encode([question])[0]
        if emb.shape[1] != len(q):
            raise ctx.stored.damage(
                f"embeddings have {emb.shape[1]} dimensions, the embedder {len(q)}"
            )
        scores = emb.astype(np.float32) @ np.asarray(q, dtype=np.float32)
        mode = ctx.settings.mode
        info: dict[str, Any] = {"mode": mode, "tree_layers": max(n.level for n in nodes) + 1}
        if mode == "traversal":
            top_k = ctx.settings.top_k
            children = tree.children
            depth = ctx.settings.depth
            chosen = tree_traversal(scores, [n.level for n in nodes], children, top_k, depth)
            info.update(top_k=top_k, depth=depth)
            info["tokens"] = sum(tokens[i] for i in chosen)
        else:
            budget = ctx.settings.max_tokens
            chosen, used = collapsed_tree(scores, tokens, budget, ctx.settings.max_nodes)
            info.update(max_tokens=budget, tokens=used)
        per_layer: dict[str, int] = {}
        for i in chosen:
            key = str(nodes[i].level)
            per_layer[key] = per_layer.get(key, 0) + 1
        info["nodes_per_layer"] = per_layer
        items = [
            item_from_node(
                nodes[i],
                float(scores[i]),
                rank=r + 1,
                layer=nodes[i].level,
                summary=nodes[i].level > 0,
                tokens=tokens[i],
            )
            for r, i in enumerate(chosen)
        ]
        return Evidence(method=self.name, items=items, info=info)

    def check_stored(self, stored: MethodReader, built: RaptorBuild) -> None:
        StoredTree.load(stored)


@dataclass(frozen=True)
class StoredTree:
    """The tree as retrieval walks it, checked as it loads: one embedding a node, every
    child a known node of a lower layer (so a traversal always ends), token counts."""

    nodes: list[Node]
    embeddings: np.ndarray
    children: list[list[int]]
    tokens: list[int]

    @classmethod
    def load(cls, stored: MethodReader) -> StoredTree:
        nodes = stored.nodes()
        emb = stored.array("embeddings")
        if (nodes and emb.ndim != 2) or emb.shape[0] != len(nodes):
            raise stored.damage(f"embeddings hold {emb.shape} for {len(nodes)} nodes")
        index = {n.id: i for i, n in enumerate(nodes)}
        if len(index) != len(nodes):
            raise stored.damage("nodes.jsonl repeats a node id")
        children: list[list[int]] = []
        for n in nodes:
            kids = [index.get(c, -1) for c in n.children]
            if n.level < 0 or any(c < 0 or nodes[c].level >= n.level for c in kids):
                raise stored.damage(f"nodes.jsonl: node {n.id} has a child not below it")
            children.append(kids)
        tokens = [n.meta.get("tokens") for n in nodes]
        counted = [
            t if type(t) is int and t >= 0 else count_tokens(n.text)
            for t, n in zip(tokens, nodes, strict=True)
        ]
        return cls(nodes, emb, children, counted)
