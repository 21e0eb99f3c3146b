"""How the shared answer step lays evidence out for the model: overlapping or touching
pieces of one document merged into passages (``answer.passages=merged``), and the
order they are read in (``answer.order``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from lcr.answer.selection import leaf_span, touching
from lcr.evidence import EvidenceItem, document_order, merge_spans


def merge_passages(
    items: Sequence[EvidenceItem], source: str, names: Sequence[str]
) -> list[EvidenceItem]:
    """Chunks of one document that overlap or touch (only blanks between them) become
    one passage: the source text from the first chunk's start to the last one's end,
    with every span it covers, the best score and rank, and its document's name
    (``extra["document"]``) for the heading. Items that are not plain slices of the
    source (summaries, notes) stay as they are, headed by their document's name too.
    The result is in document order; :func:`ordered` puts it in the order asked for.
    """

    def name_of(doc: int) -> str:
        return names[doc] if 0 <= doc < len(names) else str(doc)

    runs: list[list[tuple[tuple[int, int], EvidenceItem]]] = []
    alone: list[EvidenceItem] = []
    leaves = []
    for it in items:
        span = leaf_span(it, source)
        if span is None:
            alone.append(
                EvidenceItem(
                    it.id,
                    it.doc,
                    it.level,
                    it.score,
                    it.text,
                    list(it.spans),
                    {**it.extra, "document": name_of(it.doc)},
                )
            )
        else:
            leaves.append((span, it))
    leaves.sort(key=lambda pair: (pair[1].doc, pair[0]))
    for span, it in leaves:
        last = runs[-1] if runs else None
        if last is not None and last[0][1].doc == it.doc:
            end = max(e for (_, e), _ in last)
            if touching(source, end, span[0]):
                last.append((span, it))
                continue
        runs.append([(span, it)])
    merged = [_passage(run, source, name_of(run[0][1].doc)) for run in runs]
    return document_order(merged + alone)


def _passage(
    run: list[tuple[tuple[int, int], EvidenceItem]], source: str, name: str
) -> EvidenceItem:
    first = run[0][1]
    start = min(s for (s, _), _ in run)
    end = max(e for (_, e), _ in run)
    ranks = [it.extra["rank"] for _, it in run if isinstance(it.extra.get("rank"), int)]
    extra: dict[str, Any] = {"document": name}
    if ranks:
        extra["rank"] = min(ranks)
    if len(run) == 1:
        return EvidenceItem(
            first.id,
            first.doc,
            first.level,
            first.score,
            first.text,
            list(first.spans),
            {**first.extra, **extra},
        )
    extra["merged"] = [it.id for _, it in run]
    return EvidenceItem(
        id="+".join(it.id for _, it in run),
        doc=first.doc,
        level=0,
        score=max(it.score for _, it in run),
        text=source[start:end],
        spans=merge_spans([span for span, _ in run]),
        extra=extra,
    )


def excerpt_heading(item: EvidenceItem) -> str:
    """A merged passage's first line: its document's name; nothing for a plain chunk."""
    name = item.extra.get("document")
    return f"Document: {name}\n" if isinstance(name, str) else ""


def ordered(items: Sequence[EvidenceItem], order: str) -> list[EvidenceItem]:
    """``document``: where they stand in the source; ``rank``: the method's best first
    (by ``extra["rank"]``, then score; ties keep the given order)."""
    if order == "rank":

        def rank_key(pair: tuple[int, EvidenceItem]) -> tuple[float, float, int]:
            position, it = pair
            rank = it.extra.get("rank")
            return (float(rank) if isinstance(rank, int) else float("inf"), -it.score, position)

        return [it for _, it in sorted(enumerate(items), key=rank_key)]
    return document_order(items)


def cut_to_tokens(text: str, max_tokens: int, count_tokens: Callable[[str], int]) -> str:
    """The longest prefix of ``text`` within ``max_tokens`` (binary search on length): the
    last excerpt that fits the window only in part is read up to where it fits."""
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count_tokens(text[:mid]) <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo]
