"""Attention Graph Construction (section 3.1): the hierarchical weighted DAG.

Level 0 (the paper's level 1) is the text cut into chunks of ``chunk_tokens``
tokens of the LLM's tokenizer (sentences kept whole where they fit). Per level,
consecutive nodes are batched up to ``s`` tokens and the LLM writes bullet-point
Information Points (Table A1); each point becomes a node one level up, with an
edge to every node of its batch weighted by the attention its tokens paid to
that node's tokens while they were generated (normalised to sum to 1). Levels
repeat until a level is one batch's points (``top="summary"``, the default: the
paper builds summary levels even over documents shorter than ``s``, or its
queries on 2K-token MuSiQue documents could not cost less than reading them
whole) or until a level's text fits one batch (``top="fit"``: that level is
the top, so a document under ``s`` tokens has no summary at all), or until a
level is no shorter, in tokens, than the level below (a guard the paper does
not state: a small model restating its input would otherwise add levels that
summarise nothing). ``graph="tree"`` is Table 2's "w/o IP-based Graph" ablation:
each batch becomes one summary node (:func:`tree_node`).

A level's batches not yet in the index's LLM cache are sent ``llm_batch`` at a time
(decoded together where the backend can: :func:`_level_points`); each group's points
and weights go to the cache the moment the group is done, so a killed build resumes
without generating any finished batch again. The replies, and so the graph, do not
depend on ``llm_batch`` (to float rounding in the attention weights).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from lcr.errors import SettingError
from lcr.methods.base import BuildContext
from lcr.methods.pecan.graph import (
    batch_nodes,
    information_points,
    merge_spans,
    point_weights,
    tokens_in,
)
from lcr.methods.pecan.prompts import (
    PROMPT_VERSION,
    WindowedTokens,
    build_overhead,
    build_prompt,
    segment_line,
)
from lcr.methods.pecan.settings import MAX_LEVELS, PecanBuild
from lcr.methods.toolkit import LLMCalls, chunk_nodes
from lcr.models.base import attention_batch_rows, generate_with_attention_batch
from lcr.store import Node

if TYPE_CHECKING:
    from lcr.models.base import AttendedGeneration, AttentionLLM
    from lcr.progress import Task


@dataclass
class Graph:
    """Nodes of every level in order, and the edges (higher, lower, weight)."""

    nodes: list[Node] = field(default_factory=list)
    edges: list[tuple[int, int, float]] = field(default_factory=list)
    levels: list[int] = field(default_factory=list)  # nodes per level, bottom first
    stop: str = ""
    empty_batches: int = 0  # batches whose reply held no information point
    level: int = 0  # the level being built above (0: the chunks' batches)
    llm_batch: int = 0  # the most batches the LLM decoded together (0: none paid for)


def effective_s(llm: WindowedTokens, params: PecanBuild) -> int:
    """``s``, lowered when a batch of ``s`` tokens plus the prompt and the reply would not
    fit the model's window (a small model's window is below the paper's 8K)."""
    room = llm.context_window - build_overhead(llm) - params.points_max_new_tokens - 1
    if room < params.chunk_tokens:
        raise SettingError(
            f"pecan: {llm.model_id}'s window of {llm.context_window} tokens leaves {room} for a "
            f"batch; lower pecan.points_max_new_tokens or pecan.chunk_tokens"
        )
    return min(params.s, room)


def leaf_nodes(
    documents: Iterable[tuple[int, int, str]], count: Callable[[str], int], chunk_tokens: int
) -> list[Node]:
    """Level 0: ``chunk_tokens``-token chunks by the model's own count (the build's and
    the estimate's one chunker)."""
    from lcr.text.chunking import token_windows

    return chunk_nodes(
        documents,
        lambda text, start: token_windows(text, chunk_tokens, count=count, offset=start),
        tokens=lambda text: count(segment_line(text)),
    )


def _points_of(llm: AttentionLLM, gen: AttendedGeneration) -> dict[str, Any]:
    """One batch's reply as the cache keeps it: its points, each point's weights over the
    batch's nodes (the mean attention of its tokens), and what the call cost."""
    attention = gen.attention.numpy()
    ends = llm.token_char_ends(gen.tokens)
    points = information_points(gen.text)
    weights = [
        [float(x) for x in point_weights(attention, tokens_in(ends, p.start, p.end))]
        for p in points
    ]
    return {
        "points": [p.text for p in points],
        "weights": weights,
        "prompt_tokens": gen.prompt_tokens,
        "completion_tokens": gen.completion_tokens,
    }


def _cached_points(hit: Any) -> bool:
    return isinstance(hit, dict) and isinstance(hit.get("points"), list)


def _level_points(
    llm: AttentionLLM,
    batches: list[list[str]],
    params: PecanBuild,
    calls: LLMCalls,
    graph: Graph,
    task: Task,
) -> list[tuple[list[str], list[list[float]]]]:
    """Each batch's points and weights over its nodes, through the cache: the batches not
    in it are sent ``pecan.llm_batch`` at a time (0: as many as the backend takes), and
    each group's replies are stored the moment the group is done, so a killed build
    resumes without paying for any finished batch again."""
    new = params.points_max_new_tokens
    prompts = [build_prompt(llm, texts) for texts in batches]
    keys = [calls.key(PROMPT_VERSION, llm, p.ids, new) for p in prompts]
    got: list[Any] = [calls.lookup(key, _cached_points) for key in keys]
    task.advance(sum(hit is not None for hit in got))
    twins: dict[str, list[int]] = {}  # the batches not in the cache, by key
    for i, hit in enumerate(got):
        if hit is None:
            twins.setdefault(keys[i], []).append(i)
    pending = [same[0] for same in twins.values()]  # a repeated batch is paid for once
    size = params.llm_batch or attention_batch_rows(
        llm, [len(prompts[i].ids) for i in pending], new
    )
    for start in range(0, len(pending), size):
        group = pending[start : start + size]
        with calls.paying(f"writing PECAN level {graph.level + 1}"):
            gens = generate_with_attention_batch(
                llm,
                [prompts[i].ids for i in group],
                spans=[prompts[i].spans for i in group],
                max_new_tokens=new,
            )
            values = [_points_of(llm, gen) for gen in gens]
        for i, value in zip(group, values, strict=True):
            calls.store(keys[i], value)
            got[i] = value
            for twin in twins[keys[i]][1:]:  # then read from the cache, as before batching
                got[twin] = calls.lookup(keys[i], _cached_points)
            task.advance(len(twins[keys[i]]))
        graph.llm_batch = max(graph.llm_batch, len(group))
    return [
        ([str(p) for p in hit["points"]], [[float(x) for x in w] for w in hit["weights"]])
        for hit in got
    ]


def tree_node(points: list[str], weights: list[list[float]]) -> tuple[list[str], list[list[float]]]:
    """Table 2's "w/o IP-based Graph": the batch's reply as one summary node (many-to-one,
    a tree, as RAPTOR), its edges the mean of its points' weights (still summing to 1).

    The same Table A1 call as the IP graph, so its cached replies serve both.
    """
    mean = np.asarray(weights, dtype=np.float64).mean(axis=0)
    return [" ".join(points)], [[float(x) for x in mean]]


def build_graph(ctx: BuildContext[PecanBuild], llm: AttentionLLM, calls: LLMCalls) -> Graph:
    params = ctx.settings
    s = effective_s(llm, params)
    graph = Graph(nodes=leaf_nodes(ctx.doc_texts(), llm.count_tokens, params.chunk_tokens))
    current = list(range(len(graph.nodes)))
    graph.levels.append(len(current))
    level = 0
    while True:
        tokens = [int(graph.nodes[i].meta["tokens"]) for i in current]
        if params.top == "fit" and sum(tokens) <= s:
            graph.stop = f"level {level} fits one batch of {s} tokens"
            break
        if level >= MAX_LEVELS:
            graph.stop = f"{MAX_LEVELS} levels reached"
            break
        batches = batch_nodes(tokens, s)
        task = ctx.progress.task(
            f"pecan: level {level + 1}: {len(batches)} batches", total=len(batches)
        )
        new: list[int] = []
        graph.level = level
        texts = [[graph.nodes[current[j]].text for j in batch] for batch in batches]
        replies = _level_points(llm, texts, params, calls, graph, task)
        for batch, (points, weights) in zip(batches, replies, strict=True):
            members = [current[j] for j in batch]
            if not points:
                graph.empty_batches += 1
            elif params.graph == "tree":
                points, weights = tree_node(points, weights)
            spans = merge_spans([sp for m in members for sp in graph.nodes[m].spans])
            for text, w in zip(points, weights, strict=True):
                idx = len(graph.nodes)
                graph.nodes.append(
                    Node(
                        f"p{level + 1}-{len(new)}",
                        level + 1,
                        text,
                        spans,
                        graph.nodes[members[0]].doc,
                        children=[graph.nodes[m].id for m in members],
                        meta={"tokens": llm.count_tokens(segment_line(text))},
                    )
                )
                graph.edges.extend((idx, m, wt) for m, wt in zip(members, w, strict=True))
                new.append(idx)
        level += 1
        graph.levels.append(len(new))
        if not new:
            graph.stop = f"level {level} has no information points"
            graph.levels.pop()
            level -= 1
            break
        new_total = sum(int(graph.nodes[i].meta["tokens"]) for i in new)
        current = new
        if params.top == "summary" and len(batches) == 1:
            graph.stop = f"level {level} summarises a single batch"
            break
        if new_total >= sum(tokens):
            graph.stop = f"level {level} is no shorter than the level below"
            break
    ctx.out.stats["s_effective"] = s
    if s < params.s:
        ctx.warn(
            f"pecan: batches capped at {s} tokens (pecan.s={params.s}) to fit "
            f"{llm.model_id}'s window of {llm.context_window}"
        )
    return graph


def stats_of(graph: Graph, calls: LLMCalls) -> dict[str, Any]:
    return {
        "levels": graph.levels,
        "stop": graph.stop,
        "edges": len(graph.edges),
        "llm_batches": calls.calls,
        "llm_batch_size": graph.llm_batch,
        "llm_cached": calls.cached,
        "llm_empty_batches": graph.empty_batches,
        "llm_prompt_tokens": calls.prompt_tokens,
        "llm_completion_tokens": calls.completion_tokens,
        "llm_seconds": round(calls.seconds, 3),
    }
