"""Dynamic Graph Search (section 3.2, appendices B and C) over a node-level KV cache.

The visited set starts as the top-level nodes. While the LLM does not answer
"Yes" (read from the logits after the first-turn suffix, which is then rolled
back), the node with the best z = E^T r + cos(embedding, question) is appended
to the cache; r is each visited node's attention to the question's tokens
times its position (the question is position 1). The search stops after
``patience`` Yes answers, when the next node would not fit the window, or when
the graph is exhausted. The answer is the second turn, from the same cache
(:func:`answer_turn`), after the first-turn reply the last check read; when no
check ran (progress control off, or the window full at the top level), the
check is made once before answering, so the reply in the transcript is always
the model's own Yes or No.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from lcr.errors import ModelError
from lcr.evidence import AnswerState
from lcr.methods.pecan.graph import attention_scores, best_candidate, position_weighted
from lcr.methods.pecan.prompts import SearchPrompt, search_prompt, segment_line
from lcr.methods.pecan.settings import FIXED_NODES, PecanQuery

if TYPE_CHECKING:
    from lcr.models.base import AttentionLLM, NodeCache

SCORES = ("attention+embedding", "attention", "embedding")  # PecanQuery.score


@dataclass
class Step:
    """One visited node: why it was chosen and what the LLM said after it joined."""

    node: int
    score: float  # the score it was chosen by (initial top-level nodes: their cosine)
    z: float | None  # E^T r at selection (None for the initial top-level nodes)
    cos: float
    r: float = 0.0  # its attention to the question, times its position
    p_yes: float | None = None  # P(Yes) of the check made right after it joined


@dataclass
class SecondTurn(AnswerState):
    """What the answer turn needs from the search: the cache of the visited nodes
    (suffixes rolled back), the prompt's pieces, and the first-turn reply the last
    check read (``None`` when no check ran: the answer turn makes one)."""

    cache: NodeCache
    prompt: SearchPrompt
    last_word: str | None
    yes_ids: frozenset[int] = frozenset()
    no_ids: frozenset[int] = frozenset()
    yes_threshold: float = 0.5


@dataclass
class SearchResult:
    steps: list[Step] = field(default_factory=list)
    checks: list[float] = field(default_factory=list)
    stop: str = ""
    context_tokens: int = 0
    encoded: dict[str, int] = field(default_factory=dict)
    state: SecondTurn | None = None


def initial_nodes(
    levels: np.ndarray, cos: np.ndarray, settings: PecanQuery, max_nodes: int | None
) -> list[int]:
    """The top-level nodes in order; with a node budget (fixed count or -k, ``max_nodes``),
    at most budget / levels of them (at least 1), the most similar first chosen (Table 2's
    rule)."""
    top = [int(i) for i in np.flatnonzero(levels == levels.max())] if len(levels) else []
    budget = max_nodes if settings.progress_control or max_nodes else FIXED_NODES
    if budget is None:
        return top
    n_levels = int(levels.max()) + 1 if len(levels) else 1
    cap = max(1, budget // n_levels) if not settings.progress_control else budget
    cap = min(cap, budget)
    if len(top) <= cap:
        return top
    order = sorted(top, key=lambda i: (-float(cos[i]), i))[:cap]
    return sorted(order)


def combined_scores(z: np.ndarray, cos: np.ndarray, score: str) -> np.ndarray:
    """The final retrieval score (section 3.2.2) or one of Table 2's ablations."""
    if score == "embedding":
        return cos.astype(np.float64)
    if score == "attention":
        return z
    return z + cos


def dynamic_search(
    llm: AttentionLLM,
    question: str,
    texts: list[str],
    levels: np.ndarray,
    edges: sp.csr_array,
    cos: np.ndarray,
    settings: PecanQuery,
    *,
    max_nodes: int | None,
    answer_tokens: int,
    quote: bool = False,
) -> SearchResult:
    """The search; ``result.state`` keeps what :func:`answer_turn` answers from.

    ``max_nodes`` caps the nodes visited (``-k``; None: no cap); ``answer_tokens`` is
    the room kept in the window for the answer turn's reply; ``quote``: the answer
    turn asks for quotes (its longer suffix is room kept too)."""
    prompt = search_prompt(llm, question, settings.second_turn, quote)
    yes_ids, no_ids = llm.first_token_ids("Yes"), llm.first_token_ids("No")
    if yes_ids & no_ids:
        raise ModelError(f"{llm.model_id}: Yes and No start with the same token")
    window = min(llm.context_window, settings.max_context)
    reserve = max(len(prompt.check), *(len(a) for a in prompt.answers.values()))
    reserve += answer_tokens
    result = SearchResult()
    cache = llm.node_cache(prompt.prefix, prompt.question)
    encoded = {"prefix": len(prompt.prefix), "nodes": 0, "checks": 0, "answer": 0}
    r = np.zeros(len(texts), dtype=np.float64)
    visited: set[int] = set()
    budget = max_nodes if settings.progress_control or max_nodes else FIXED_NODES

    def visit(i: int, score: float, z: float | None) -> bool:
        ids = llm.encode(segment_line(texts[i]))
        if len(cache) + len(ids) + reserve > window:
            result.stop = (
                f"context window full: {len(cache)} tokens in use, the next node needs "
                f"{len(ids)} more and the answer {reserve} (window {window})"
            )
            return False
        raw = cache.append(ids)
        encoded["nodes"] += len(ids)
        position = len(result.steps) + 2  # the question is position 1
        r[i] = position_weighted(raw, position)
        visited.add(i)
        result.steps.append(Step(i, score, z, float(cos[i]), float(r[i])))
        return True

    full = False
    for i in initial_nodes(levels, cos, settings, max_nodes):
        if not visit(i, float(cos[i]), None):
            full = True
            break
    yes_count = 0
    last_word: str | None = None
    while not full:
        if settings.progress_control and result.steps:
            p = cache.yes_probability(prompt.check, yes_ids, no_ids)
            encoded["checks"] += len(prompt.check)
            result.checks.append(p)
            result.steps[-1].p_yes = p
            last_word = "Yes" if p > settings.yes_threshold else "No"
            if last_word == "Yes":
                yes_count += 1
                if yes_count >= settings.patience:
                    result.stop = f"the LLM said Yes {yes_count} time(s)"
                    break
        if budget is not None and len(result.steps) >= budget:
            result.stop = f"{budget} nodes visited"
            break
        z = attention_scores(edges, r)
        scores = combined_scores(z, cos, settings.score)
        nxt = best_candidate(scores, visited)
        if nxt is None:
            result.stop = "every node visited"
            break
        if not visit(nxt, float(scores[nxt]), float(z[nxt])):
            break
    result.context_tokens = len(cache)
    result.encoded = encoded
    result.state = SecondTurn(cache, prompt, last_word, yes_ids, no_ids, settings.yes_threshold)
    return result


def answer_turn(
    llm: AttentionLLM,
    state: SecondTurn,
    encoded: dict[str, int],
    max_new_tokens: int,
    first_turn: dict[str, Any] | None = None,
) -> str:
    """The second turn (Table A2) from the search's cache, at most ``max_new_tokens``
    long; ``encoded`` (the search's token counts) gains the answer's suffix and the
    tokens generated, ``first_turn`` the first-turn reply in the transcript."""
    word = state.last_word
    p_yes: float | None = None
    if word is None:  # no check ran: ask it now rather than put a "Yes" in the model's mouth
        p_yes = state.cache.yes_probability(state.prompt.check, state.yes_ids, state.no_ids)
        encoded["final_check"] = len(state.prompt.check)
        word = "Yes" if p_yes > state.yes_threshold else "No"
    if first_turn is not None:
        first_turn.update({"reply": word, "checked_before_answer": p_yes is not None})
        if p_yes is not None:
            first_turn["p_yes"] = round(float(p_yes), 6)
    suffix = state.prompt.answers[word]
    before = llm.usage.completion_tokens
    text, _ = state.cache.answer(suffix, max_new_tokens)
    encoded["answer"] = len(suffix)
    encoded["generated"] = llm.usage.completion_tokens - before
    return text
