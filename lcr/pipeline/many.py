"""One question, many indexes (issue 53): retrieve from each, answer once from the best
evidence across them, every item naming the index and document it came from.

Scores from different indexes are not on one scale (BM25's IDF is each index's own
collection's; a dense cosine depends on the index's embedder; MixPR's PageRank mass
sums to one per index), so they are never compared. The pooled items are scored
again, together, by one scorer: Lucene BM25 over the pooled texts alone (stemmed,
English stop words, the collection statistics taken from the pool), ties broken by
each item's rank in its own index. An index whose passages share no word with the
question falls to the end, whatever its own scores said.

The shared answer step reads spans of one source text, so the answer is read from a
:class:`PooledText`: the paragraphs around the pooled items, copied out of their
indexes' ``source.txt`` and laid end to end, one region a document of its own (so no
passage merges across two of them). What it read is mapped back onto each index's
own spans and cited there.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lcr.answer.quotes import Quote
from lcr.answer.shared import AnswerStream
from lcr.errors import IndexNotFoundError, UsageError
from lcr.evidence import Evidence, EvidenceItem, Usage
from lcr.models.container import Models
from lcr.pipeline.answering import answer_evidence, plan_answer
from lcr.pipeline.plans import QueryPlan
from lcr.progress import NULL_PROGRESS, Progress
from lcr.result import Result, cite, cite_quotes
from lcr.scoring.bm25 import bm25_scores, bm25_tokenize
from lcr.store import Index, SourceDoc
from lcr.text.layout import DocumentLayout, Heading, Page

Span = tuple[int, int]
# between two regions of the pooled text: a visible mark, so that no passage of one
# region is read as touching the next (whitespace alone would join them)
REGION_GAP = "\n\n\u2042\n\n"


def index_paths(paths: Sequence[str | Path]) -> list[Path]:
    """The indexes ``paths`` name: an index itself, or a folder whose sub-folders are
    indexes (each of them, sorted by name). A folder holding none is a usage error."""
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if (p / "manifest.json").exists() or not p.is_dir():
            out.append(p)  # an index, or a path Index.open explains
            continue
        found = sorted(c for c in p.iterdir() if (c / "manifest.json").is_file())
        if not found:
            raise IndexNotFoundError(f"{p} is neither an lcr index nor a folder of indexes")
        out.extend(found)
    seen: set[Path] = set()
    unique = []
    for p in out:
        key = p.resolve()
        if key not in seen:
            seen.add(key)
            unique.append(p)
    return unique


def check_poolable(plan: QueryPlan, remedy: str = "ask each index on its own") -> None:
    """A method whose own answer step reads its search's state (PECAN's KV cache,
    GraphReader's notebooks) cannot answer once from several indexes; ``remedy`` is
    the way out in the caller's own terms (a CLI flag, an API argument)."""
    step = plan.method.answer_step(plan.settings)
    if not step.shared_settings:
        raise UsageError(
            f"{plan.method.name} answers from its own search of one index, which cannot "
            f"be pooled across indexes: {remedy}"
        )


def pooled_ranking(question: str, items: Sequence[EvidenceItem]) -> tuple[list[int], list[float]]:
    """Positions of ``items`` best first, by one BM25 over the pooled texts, and each
    item's score; ties (and items sharing no word with the question) in their own
    index's rank order."""
    texts = [it.text for it in items]
    tokens = bm25_tokenize([question, *texts], "en", "english")
    scores = [float(x) for x in bm25_scores(tokens[0], tokens[1:])]
    own_rank = [int(it.extra.get("rank", 0) or 0) for it in items]
    order = sorted(range(len(items)), key=lambda i: (-scores[i], own_rank[i], i))
    return order, scores


@dataclass
class _Region:
    """A stretch of one index's source.txt copied into the pooled text at ``at``."""

    index: int  # position in the indexes
    doc: int  # the document in that index
    start: int
    end: int
    at: int = 0


@dataclass
class PooledText:
    """The paragraphs around pooled items, from several indexes, as one source text
    that the shared answer step reads; :meth:`to_pooled` and :meth:`back` map items
    between it and their own indexes."""

    indexes: list[Index]
    regions: list[_Region] = field(default_factory=list)
    source: str = ""
    documents: list[SourceDoc] = field(default_factory=list)

    @property
    def layouts(self) -> tuple[DocumentLayout, ...]:
        """Each region's pages and headings from its own document's layout, on the
        region's offsets: those in force where it starts at 0, those within it shifted."""
        return tuple(self._layout_of(reg) for reg in self.regions)

    def _layout_of(self, region: _Region) -> DocumentLayout:
        index = self.indexes[region.index]
        own = index.layouts[region.doc]
        low = region.start - index.documents[region.doc].start
        high = low + region.end - region.start
        before = [p for p in own.pages if p.start <= low][-1:]
        pages = [Page(0, p.label) for p in before]
        pages += [Page(p.start - low, p.label) for p in own.pages if low < p.start < high]
        headings = [
            Heading(max(h.start - low, 0), h.level, h.title) for h in own.headings if h.start < high
        ]
        return DocumentLayout(tuple(pages), tuple(headings))

    def own_spans(self, spans: Sequence[Span]) -> tuple[int, list[Span]]:
        """Spans of the pooled text as the index they come from (its position) and their
        spans in that index's source.txt."""
        out: list[Span] = []
        index = -1
        for s, e in spans:
            reg = next((g for g in self.regions if g.at <= s and e <= g.at + g.end - g.start), None)
            if reg is None or index not in (-1, reg.index):
                raise ValueError(f"span {s}-{e} is not within one index's region")
            index = reg.index
            out.append((s - reg.at + reg.start, e - reg.at + reg.start))
        return index, out

    def cite_quote(self, record: dict[str, Any]) -> dict[str, Any]:
        """A quote as :func:`~lcr.result.cite_quotes` gave it on the pooled text, cited
        instead on its own index: the same document, offsets, pages and section as the
        same quote asked of that index alone, and the index named (``index``)."""
        pooled = record.get("spans") or [record["span"]]
        i, spans = self.own_spans([(int(s), int(e)) for s, e in pooled])
        found = Quote(record["text"], record["evidence"], tuple(spans), record["found_by"])
        index = self.indexes[i]
        return {**cite_quotes(index, [found])[0], "index": str(index.path)}

    @classmethod
    def of(cls, indexes: list[Index], items: Sequence[EvidenceItem]) -> PooledText:
        wanted: dict[tuple[int, int], list[Span]] = {}
        for it in items:
            i = int(it.extra["index_no"])
            src = indexes[i].source
            doc = indexes[i].documents[it.doc]
            for s, e in it.spans:
                wanted.setdefault((i, it.doc), []).append(
                    _paragraph_around(src, s, e, doc.start, doc.end)
                )
        pooled = cls(indexes)
        parts: list[str] = []
        at = 0
        for (i, d), spans in sorted(wanted.items()):
            for s, e in _merged(spans, indexes[i].source):
                if parts:
                    parts.append(REGION_GAP)
                    at += len(REGION_GAP)
                text = indexes[i].source[s:e]
                pooled.regions.append(_Region(i, d, s, e, at))
                name = indexes[i].documents[d].name
                pooled.documents.append(SourceDoc(name, "", len(text), at, at + len(text)))
                parts.append(text)
                at += len(text)
        pooled.source = "".join(parts)
        return pooled

    def _region_of(self, index: int, doc: int, s: int, e: int) -> int:
        for r, reg in enumerate(self.regions):
            if reg.index == index and reg.doc == doc and reg.start <= s and e <= reg.end:
                return r
        raise ValueError(f"span {s}-{e} of index {index} is outside the pooled text")

    def to_pooled(self, item: EvidenceItem) -> EvidenceItem:
        """The item with spans into the pooled text and its region as its document."""
        i = int(item.extra["index_no"])
        regions = [self._region_of(i, item.doc, s, e) for s, e in item.spans]
        shift = [self.regions[r].at - self.regions[r].start for r in regions]
        spans = [(s + d, e + d) for d, (s, e) in zip(shift, item.spans, strict=True)]
        return dataclasses.replace(
            item, doc=regions[0], spans=spans, extra=dict(item.extra), citations=[]
        )

    def back(self, item: EvidenceItem) -> EvidenceItem:
        """An item the answer step made from the pooled text, on its own index's spans."""
        spans: list[Span] = []
        region = self.regions[item.doc]
        for s, e in item.spans:
            reg = next(g for g in self.regions if g.at <= s and e <= g.at + g.end - g.start)
            region = reg
            spans.append((s - reg.at + reg.start, e - reg.at + reg.start))
        extra = {**item.extra, "index": str(self.indexes[region.index].path)}
        extra.pop("index_no", None)
        return dataclasses.replace(item, doc=region.doc, spans=spans, extra=extra, citations=[])


def _paragraph_around(source: str, s: int, e: int, lo: int, hi: int) -> Span:
    """The blank-line-bounded stretch of ``source[lo:hi]`` holding ``[s, e)``."""
    before = source.rfind("\n\n", lo, s)
    after = source.find("\n\n", e, hi)
    start = lo if before < 0 else before + 2
    return min(start, s), hi if after < 0 else max(after, e)


def _merged(spans: list[Span], source: str) -> list[Span]:
    """Overlapping stretches, or stretches with only whitespace between, as one."""
    out: list[Span] = []
    for s, e in sorted(spans):
        if out and (s <= out[-1][1] or not source[out[-1][1] : s].strip()):
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def _default_k(query: QueryPlan) -> int:
    """The items one index gives (its method's ``-k`` setting, ``-k`` written in)."""
    value = query.k
    return value if value is not None and value > 0 else 10


def ask_pooled(
    indexes: Sequence[Index],
    query: QueryPlan,
    question: str,
    models: Models,
    *,
    progress: Progress = NULL_PROGRESS,
    note: Callable[[str], None] | None = None,
    stream: AnswerStream | None = None,
) -> Result:
    """Retrieve ``question`` from every index, pool and re-rank the items
    (:func:`pooled_ranking`), keep as many as one index would give, and answer once
    with the shared step; the result's items name their index (``index``)."""
    from lcr.pipeline import query_models, retrieve_query  # the package this module is in

    check_poolable(query)
    method = query.method
    planned = plan_answer(query, models, note)
    query, models, step = planned.pool or planned.query, planned.models, planned.step
    keep = query.answer.pool if planned.pool else _default_k(query)
    results = [
        retrieve_query(idx, query, question, models, progress=progress, note=note)
        for idx in indexes
    ]
    pooled_items: list[EvidenceItem] = []
    for i, (idx, res) in enumerate(zip(indexes, results, strict=True)):
        for it in res.evidence.items:
            named = {**it.extra, "index": str(idx.path), "index_no": i}
            pooled_items.append(dataclasses.replace(it, extra=named))
    order, scores = pooled_ranking(question, pooled_items)
    chosen = []
    for rank, j in enumerate(order[:keep], 1):
        it = pooled_items[j]  # its own index's rank and score kept beside the pooled ones
        extra = {**it.extra, "index_rank": it.extra.get("rank"), "index_score": it.score}
        extra.update(rank=rank, ranked_by="pooled bm25")
        chosen.append(dataclasses.replace(it, score=scores[j], extra=extra))
    text = PooledText.of(list(indexes), chosen)
    usage = Usage()
    for res in results:
        usage = usage.merged(res.usage)
    evidence = Evidence(
        method=method.name,
        items=[text.to_pooled(it) for it in chosen],
        info={"indexes": len(indexes), "pooled": len(pooled_items)},
        usage=usage,
    )
    shown = [
        dataclasses.replace(it, extra={k: v for k, v in it.extra.items() if k != "index_no"})
        for it in chosen
    ]
    pooled = Result(
        question=question,
        method=method.name,
        evidence=evidence,
        usage=evidence.usage,
        timings={"retrieve_s": sum(r.timings.get("retrieve_s", 0.0) for r in results)},
        models=dict(results[0].models) if results else {},
    )
    bound = query_models(indexes[0].reader(method.name).entry.models, query, models)
    answered = answer_evidence(
        text, pooled, step, query.settings, query.answer, bound, stream=stream, note=note
    )
    read = None
    if answered.read is not None:  # on each index's own spans, cited there
        back = [text.back(it) for it in answered.read]
        cited: dict[int, EvidenceItem] = {}
        for idx in indexes:
            mine = [it for it in back if it.extra["index"] == str(idx.path)]
            cited.update(zip(map(id, mine), cite(idx, mine), strict=True))
        read = [cited[id(it)] for it in back]
    support = dict(answered.support)
    if answered.quotes:  # cited on each quote's own index, as a one-index ask cites it
        support["quotes"] = [text.cite_quote(q) for q in answered.quotes]
    return dataclasses.replace(
        answered,
        support=support,
        evidence=Evidence(method.name, shown, evidence.info, evidence.usage),
        read=read,
        indexes=[str(idx.path) for idx in indexes],
    )


def retrieve_pooled(
    indexes: Sequence[Index],
    query: QueryPlan,
    question: str,
    models: Models,
    *,
    progress: Progress = NULL_PROGRESS,
    note: Callable[[str], None] | None = None,
) -> Result:
    """``lcr retrieve`` of several indexes: each retrieved from as alone, the items
    pooled and ranked again together (:func:`pooled_ranking`), and as many kept as the
    most one index gave; each item keeps its own index's spans and citations and names
    its index (``index``, ``index_rank``, ``index_score``), as :func:`ask_pooled`'s do."""
    from lcr.pipeline import retrieve_query  # the package this module is in

    results = [
        retrieve_query(idx, query, question, models, progress=progress, note=note)
        for idx in indexes
    ]
    pooled_items: list[EvidenceItem] = []
    for idx, res in zip(indexes, results, strict=True):
        for it in res.evidence.items:
            pooled_items.append(dataclasses.replace(it, extra={**it.extra, "index": str(idx.path)}))
    order, scores = pooled_ranking(question, pooled_items)
    keep = max((len(res.evidence.items) for res in results), default=0)
    chosen = []
    for rank, j in enumerate(order[:keep], 1):
        it = pooled_items[j]
        extra = {**it.extra, "index_rank": it.extra.get("rank"), "index_score": it.score}
        extra.update(rank=rank, ranked_by="pooled bm25")
        chosen.append(dataclasses.replace(it, score=scores[j], extra=extra))
    usage = Usage()
    for res in results:
        usage = usage.merged(res.usage)
    info = {"indexes": len(indexes), "pooled": len(pooled_items)}
    return Result(
        question=question,
        method=query.method.name,
        evidence=Evidence(query.method.name, chosen, info, usage),
        usage=usage,
        timings={"retrieve_s": sum(r.timings.get("retrieve_s", 0.0) for r in results)},
        models=dict(results[0].models) if results else {},
        indexes=[str(idx.path) for idx in indexes],
    )
