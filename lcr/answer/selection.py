"""Evidence selection: keep the sentences of the evidence most likely to answer.

A retriever returns chunks of a few hundred tokens; the answer to a short question
usually sits in one or two of their sentences, and a small model reads it worse
among a thousand tokens of near-misses. Selection splits each chunk into
its sentences (exact sub-spans of the chunk's span), scores every sentence against
the question, and keeps the best ones up to a token budget, read in document order.
Evidence that is not a plain slice of the source (a RAPTOR summary, a GraphReader
note) has no sentences of its own: it is kept or dropped whole.

Splitting, fusing ranks and choosing within the budget are pure: they take the
scores as arrays. The scorers at the end of the module make those arrays, and
the embedder's and the LLM's call their model (loaded at first use).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from lcr.evidence import EvidenceItem
from lcr.models.base import LLM, Embedder, Message
from lcr.text.chunking import split_sentences

Span = tuple[int, int]

RRF_K = 60
"""Reciprocal-rank fusion's constant (Cormack et al., 2009): rank r counts 1 / (60 + r). The
paper's value, not measured here."""


@dataclass(frozen=True)
class Unit:
    """One selectable piece of the evidence: a sentence of a chunk, or a whole item."""

    item: int  # position of its evidence item in the list given
    spans: tuple[Span, ...]  # where it stands in the source
    text: str
    lead: Unit | None = None  # the first sentence of its paragraph, when it is not that


def leaf_span(item: EvidenceItem, source: str) -> Span | None:
    """The item's one span when its text is exactly that slice of the source (a chunk)."""
    if len(item.spans) != 1:
        return None
    s, e = item.spans[0]
    return (s, e) if 0 <= s < e <= len(source) and source[s:e] == item.text else None


def _paragraph_lead(source: str, start: int) -> Span | None:
    """The first sentence of the paragraph (text between blank lines) holding ``start``."""
    para = source.rfind("\n\n", 0, start)
    para = 0 if para < 0 else para + 2
    end = source.find("\n\n", para)
    end = len(source) if end < 0 else end
    first = split_sentences(source[para:end], offset=para)
    return (first[0].start, first[0].end) if first else None


def paragraph_leads(spans: Sequence[Span], source: str) -> list[str]:
    """The first sentence of each paragraph these spans start in, once each, when the
    span does not already begin there: where a paragraph names what its later
    sentences call "he" or "it" (a Wikipedia paragraph's title line)."""
    leads: list[str] = []
    for start, _ in spans:
        lead = _paragraph_lead(source, start) if 0 <= start < len(source) else None
        if lead is not None and lead[0] != start:
            text = source[lead[0] : lead[1]]
            if text not in leads:
                leads.append(text)
    return leads


def split_units(items: Sequence[EvidenceItem], source: str) -> list[Unit]:
    """Every sentence of every chunk (with the first sentence of its paragraph, for
    context such as an article's title line), then each item without sentence spans
    of its own as one unit. Sentences two items share (overlapping chunks) count once."""
    units: list[Unit] = []
    seen: set[Span] = set()
    for i, item in enumerate(items):
        leaf = leaf_span(item, source)
        if leaf is None:
            units.append(Unit(i, tuple(item.spans), item.text))
            continue
        for sentence in split_sentences(item.text, offset=leaf[0]):
            span = (sentence.start, sentence.end)
            if span in seen:
                continue
            seen.add(span)
            lead_span = _paragraph_lead(source, sentence.start)
            lead = None
            if lead_span is not None and lead_span != span:
                lead = Unit(i, (lead_span,), source[lead_span[0] : lead_span[1]])
            units.append(Unit(i, (span,), sentence.text, lead))
    return units


def rank_fusion(*scores: np.ndarray) -> np.ndarray:
    """Reciprocal-rank fusion of several scorings of the same units (ties share a rank)."""
    fused = np.zeros(len(scores[0]), dtype=np.float64)
    for s in scores:
        order = np.argsort(-np.asarray(s, dtype=np.float64), kind="stable")
        ranks = np.empty(len(order), dtype=np.float64)
        ranks[order] = np.arange(1, len(order) + 1)
        fused += 1.0 / (RRF_K + ranks)
    return fused


def bridge_question(question: str, picked: str) -> str:
    """The question with the first pick appended: the second hop of a multi-hop question
    is found by what the first answer names (a person, a film, a place)."""
    return f"{question} {picked}"


@dataclass(frozen=True)
class Selection:
    """The kept units in document order, what they cost, and how many were weighed."""

    units: list[Unit]
    tokens: int
    candidates: int


def choose(
    units: Sequence[Unit],
    scores: np.ndarray,
    budget: int,
    count_tokens: Callable[[str], int],
    *,
    with_lead: bool = True,
    rescore: Callable[[Unit], np.ndarray] | None = None,
    first_item: bool = False,
) -> Selection:
    """Greedy by score until ``budget`` tokens: a unit that does not fit is passed over
    for the next one that does, and a unit scoring 0 or less (no word in common with
    the question, or not among the LLM's candidates) is never kept. ``with_lead`` adds
    a kept sentence's paragraph lead when both fit (counted in the budget).
    ``rescore(first)`` gives new scores once the best unit is kept (the bridge hop: the
    question with that unit added), and the rest are taken in their order.

    ``first_item``: the units of item 0 (retrieval's rank 1) are kept first, best
    first, whatever they score, up to half the budget (at least the best one, when it
    fits at all): retrieval ranks a whole passage better than a sentence scorer ranks
    its sentences out of it, and its answering sentence may share no word with the
    question ("how many parts" against "has four components")."""
    if not units:
        return Selection([], 0, 0)
    order = list(np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable"))
    kept: dict[tuple[Span, ...], Unit] = {}
    spent = 0

    def cost(parts: list[Unit]) -> int:
        return sum(count_tokens(p.text) + 1 for p in parts if p.spans not in kept)

    def take(unit: Unit) -> bool:
        nonlocal spent
        if unit.spans in kept:
            return False
        parts = [unit]
        if with_lead and unit.lead is not None and unit.lead.spans not in kept:
            parts.insert(0, unit.lead)
            if spent + cost(parts) > budget:
                parts = [unit]  # the sentence alone, when its lead does not fit too
        price = cost(parts)
        if spent + price > budget:
            return False
        for p in parts:
            kept.setdefault(p.spans, p)
        spent += price
        return True

    base = np.asarray(scores, dtype=np.float64)
    if first_item:
        for n, i in enumerate(i for i in order if units[i].item == 0):
            if n == 0 or spent + cost([units[i]]) <= budget // 2:
                take(units[i])
    first = next(
        (i for i in order if base[i] > 0 and (units[i].spans in kept or take(units[i]))), None
    )
    if first is not None and rescore is not None:
        base = np.asarray(rescore(units[first]), dtype=np.float64)
        order = list(np.argsort(-base, kind="stable"))
    for i in order:
        if i != first and spent < budget and base[i] > 0:
            take(units[i])
    chosen = sorted(kept.values(), key=lambda u: (u.spans[0], u.item))
    return Selection(chosen, spent, len(units))


PIECE_GAP = " … "
"""Between two kept pieces of one paragraph that do not touch in the source."""


def _paragraph_start(source: str, position: int) -> int:
    blank = source.rfind("\n\n", 0, position)
    return 0 if blank < 0 else blank + 2


def selected_items(
    selection: Selection, items: Sequence[EvidenceItem], source: str
) -> list[EvidenceItem]:
    """The kept units as evidence items, one per paragraph: its kept sentences and lead
    in source order, sentences that touch read as one piece and pieces apart joined by
    :data:`PIECE_GAP`, each piece an exact span of the source. A paragraph's item is
    named after the best-ranked item it drew from (``c12[300:420]``; that item's own
    id when it is kept whole) and says so in ``extra["selected_from"]``. An item
    without sentences of its own comes back as it was."""
    groups: dict[tuple[int, int], list[Unit]] = {}
    whole: list[EvidenceItem] = []
    for unit in selection.units:
        item = items[unit.item]
        if len(unit.spans) != 1 or leaf_span(item, source) is None:
            whole.append(item)
            continue
        key = (item.doc, _paragraph_start(source, unit.spans[0][0]))
        groups.setdefault(key, []).append(unit)
    out = list(whole)
    for units in groups.values():
        pieces: list[list[int]] = []
        for unit in sorted(units, key=lambda u: u.spans[0]):
            s, e = unit.spans[0]
            if pieces and touching(source, pieces[-1][1], s):
                pieces[-1][1] = max(pieces[-1][1], e)
            else:
                pieces.append([s, e])
        best = items[min(u.item for u in units)]
        spans = [(s, e) for s, e in pieces]
        if spans == list(best.spans):
            out.append(best)
            continue
        out.append(
            EvidenceItem(
                id=f"{best.id}[{spans[0][0]}:{spans[-1][1]}]",
                doc=best.doc,
                level=best.level,
                score=best.score,
                text=PIECE_GAP.join(source[s:e] for s, e in spans),
                spans=spans,
                extra={**best.extra, "selected_from": best.id},
            )
        )
    return out


def touching(source: str, end: int, start: int) -> bool:
    """Whether text starting at ``start`` overlaps or follows text ending at ``end``
    with only blanks between them (one piece, one passage)."""
    return start <= end or not source[end:start].strip()


SentenceScorer = Callable[[str, Sequence[str]], np.ndarray]
"""Scores of sentences against a question (higher is better; only the order counts)."""


def bm25_scorer() -> SentenceScorer:
    """BM25 of the sentences, with the bm25 baseline's default tokenisation (English
    stop words, Snowball stems) and statistics from the sentences themselves."""
    from lcr.scoring.bm25 import bm25_scores, bm25_tokenize

    def score(question: str, texts: Sequence[str]) -> np.ndarray:
        q, *docs = bm25_tokenize([question, *texts], "en", "english")
        return bm25_scores(q, docs)

    return score


def embedder_scorer(embedder: Callable[[], Embedder]) -> SentenceScorer:
    """Cosine of the question's and each sentence's embeddings (loaded at first use)."""

    def score(question: str, texts: Sequence[str]) -> np.ndarray:
        vectors = embedder().encode([question, *texts])
        return np.asarray(vectors[1:] @ vectors[0], dtype=np.float64)

    return score


def fused_scorer(*scorers: SentenceScorer) -> SentenceScorer:
    """The rank fusion of several scorers (:func:`rank_fusion`)."""

    def score(question: str, texts: Sequence[str]) -> np.ndarray:
        return rank_fusion(*(s(question, texts) for s in scorers))

    return score


LLM_CANDIDATES = 16
"""Sentences the LLM judges (``answer.select=llm``): BM25's best, one short call each. Chosen by
hand, not measured against another value (bench/results/answer-step-log.md#measured-issue-27
measured ``llm`` with it)."""

RELEVANCE_SYSTEM = "You judge whether a sentence from a document helps answer a question."


def relevance_messages(question: str, sentence: str) -> list[Message]:
    """The question before the sentence, so consecutive calls share their prefix (a
    backend that keeps its KV cache encodes only the sentence and the ask)."""
    user = (
        f"Question: {question}\n\nSentence: {sentence}\n\n"
        "Does the sentence help answer the question? Reply Yes or No."
    )
    return [{"role": "system", "content": RELEVANCE_SYSTEM}, {"role": "user", "content": user}]


def llm_scorer(llm: Callable[[], LLM], candidates: int = LLM_CANDIDATES) -> SentenceScorer:
    """The LLM's P(yes) that a sentence helps, for BM25's best ``candidates`` sentences
    (those sharing no word with the question are not asked about); the rest score 0."""
    prefilter = bm25_scorer()

    def score(question: str, texts: Sequence[str]) -> np.ndarray:
        base = prefilter(question, texts)
        ranks = np.argsort(-base, kind="stable")
        out = np.zeros(len(texts), dtype=np.float64)  # not judged: never kept
        model = llm()
        for i in ranks[:candidates]:
            if base[i] > 0:
                out[i] = model.choice_probability(relevance_messages(question, texts[i]))
        return out

    return score


def sentence_scorer(
    kind: str, embedder: Callable[[], Embedder], llm: Callable[[], LLM]
) -> SentenceScorer:
    """The scorer ``answer.select=KIND`` names: ``bm25``, ``embedder``, ``fused`` or
    ``llm``; the models are loaded at first use."""
    if kind == "bm25":
        return bm25_scorer()
    if kind == "embedder":
        return embedder_scorer(embedder)
    if kind == "fused":
        return fused_scorer(bm25_scorer(), embedder_scorer(embedder))
    if kind == "llm":
        return llm_scorer(llm)
    raise ValueError(f"no sentence scorer {kind!r}")
