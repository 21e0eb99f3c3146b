"""Stage 2 of the answer step, reading: which of the evidence the model reads, and in
what order. ``answer.select`` keeps the evidence's best sentences
(:mod:`lcr.answer.selection`), ``answer.passages`` merges touching chunks
(:mod:`lcr.answer.passages`), ``answer.order`` lays them out, and
:func:`fit_to_budget` keeps what fits the model's window. Its settings are declared
here; the selection's fixed choices are constants, each with the measurement that
chose it (docs/answer-step.md)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from lcr.answer.passages import cut_to_tokens, excerpt_heading, merge_passages, ordered
from lcr.answer.selection import (
    Selection,
    SentenceScorer,
    Unit,
    bridge_question,
    choose,
    selected_items,
    split_units,
)
from lcr.config import Settings, setting
from lcr.evidence import EvidenceItem
from lcr.models.base import LLM, Message

BRIDGE = True
"""Rescore after the best sentence with it added to the question: +0.02-0.04 "found" on
150 HotpotQA dev questions (bench/results/answer-step-log.md#measured-issue-27)."""
LEAD = True
"""A kept sentence read with its paragraph's first sentence (a title line): the same
measurement, +0.02-0.04 "found" (bench/results/answer-step-log.md#measured-issue-27)."""
KEEP_FIRST = True
"""The rank-1 item's best sentences always kept, up to half the budget: the Debian
Policy answer selection dropped (docs/answer-step.md#answers-that-quote-issue-53)."""


@dataclass(frozen=True)
class ReadSettings(Settings):
    order: Literal["document", "rank"] = setting(
        "document", "excerpts in document order, or the method's best first (rank)"
    )
    passages: Literal["chunks", "merged"] = setting(
        "chunks", "merged: adjacent chunks of one document read as one passage under its name"
    )
    select: Literal["off", "bm25", "embedder", "fused", "llm"] = setting(
        "off",
        "keep only the evidence's best sentences, scored by bm25, the embedder, both, or the LLM",
    )
    budget: int = setting(
        300, "answer.select: tokens of evidence kept (sentence leads included)", low=16
    )
    pool: int = setting(
        0,
        "answer.select: evidence items retrieved to select from; 0: the method's k (-k wins)",
        low=0,
    )
    # constants, not settings (--set cannot reach them); tests and bench/ vary them
    bridge: bool = BRIDGE
    lead: bool = LEAD
    keep_first: bool = KEEP_FIRST


def prepare_evidence(
    items: Sequence[EvidenceItem],
    settings: ReadSettings,
    source: str,
    names: Sequence[str],
) -> list[EvidenceItem]:
    """What the shared step reads, before fitting: merged if asked, in the order asked."""
    chosen = merge_passages(items, source, names) if settings.passages == "merged" else items
    return ordered(chosen, settings.order)


def select_evidence(
    question: str,
    items: Sequence[EvidenceItem],
    settings: ReadSettings,
    source: str,
    scorer: SentenceScorer,
    count_tokens: Callable[[str], int],
) -> tuple[list[EvidenceItem], Selection]:
    """``answer.select``: the best sentences of ``items`` (in rank order) up to
    ``answer.budget`` tokens, as sub-spans of their items (:mod:`lcr.answer.selection`), by
    the rank of the item each came from; and what the selection weighed and kept. The
    best sentences of the rank-1 item are always kept (``choose``'s ``first_item``)."""
    units = split_units(items, source)
    if not units:
        return [], Selection([], 0, 0)
    texts = [u.text for u in units]

    def rescore(first: Unit) -> np.ndarray:
        return scorer(bridge_question(question, first.text), texts)

    picked = choose(
        units,
        scorer(question, texts),
        settings.budget,
        count_tokens,
        with_lead=settings.lead,
        rescore=rescore if settings.bridge else None,
        first_item=settings.keep_first,
    )
    ranks = {it.id: r for r, it in enumerate(items)}
    kept = selected_items(picked, items, source)
    kept.sort(key=lambda it: ranks.get(str(it.extra.get("selected_from", it.id)), 0))
    return kept, picked


def read(
    question: str,
    items: Sequence[EvidenceItem],
    settings: ReadSettings,
    *,
    source: str,
    names: Sequence[str],
    scorer: SentenceScorer | None,
    count_tokens: Callable[[str], int],
) -> tuple[list[EvidenceItem], dict[str, int]]:
    """The read stage: ``items`` (best first) selected (``answer.select``, scored by
    ``scorer``), merged and ordered as asked; and what the selection did (``info``)."""
    info: dict[str, int] = {}
    if settings.select != "off":
        if scorer is None:
            raise ValueError(f"answer.select={settings.select} needs a sentence scorer")
        found = len(items)
        items, picked = select_evidence(question, items, settings, source, scorer, count_tokens)
        info = {"selected": len(picked.units), "sentences": picked.candidates, "from": found}
    return prepare_evidence(items, settings, source, names), info


@dataclass
class FittedEvidence:
    items: list[EvidenceItem]
    dropped: int = 0
    truncated: bool = False


PromptBuilder = Callable[[str, list[EvidenceItem]], list[Message]]
"""Question and evidence to chat messages; a method may bring its paper's own."""


def fit_to_budget(
    question: str,
    items: list[EvidenceItem],
    llm: LLM,
    budget_tokens: int,
    prompt: PromptBuilder,
) -> FittedEvidence:
    """Keep items in order while the prompt fits; cut the first single-span item that
    overflows (its span shrinks with it), drop the rest. What is kept is what the
    model reads, so the evidence reported never claims more than was used. A merged
    passage's heading (its document's name) is counted with it."""
    overhead = llm.count_tokens("\n".join(m["content"] for m in prompt(question, []))) + 16
    remaining = budget_tokens - overhead
    kept: list[EvidenceItem] = []
    for idx, item in enumerate(items):
        heading = excerpt_heading(item)
        cost = llm.count_tokens(heading + item.text) + 4
        if cost <= remaining:
            kept.append(item)
            remaining -= cost
            continue
        room = remaining - (llm.count_tokens(heading) if heading else 0)
        if room > 32 and len(item.spans) == 1:
            cut = cut_to_tokens(item.text, room - 4, llm.count_tokens)
            if cut:
                start, _ = item.spans[0]
                kept.append(
                    EvidenceItem(
                        item.id,
                        item.doc,
                        item.level,
                        item.score,
                        cut,
                        [(start, start + len(cut))],
                        {**item.extra, "truncated": True},
                    )
                )
                return FittedEvidence(kept, len(items) - idx - 1, True)
        return FittedEvidence(kept, len(items) - idx, False)
    return FittedEvidence(kept)
