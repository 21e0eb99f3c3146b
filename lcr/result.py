"""What a query returns (:class:`Result`, what ``--json`` prints) and how its evidence
is cited: one home for both, shared by the pipeline, ``lcr eval`` and the API."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from lcr.evidence import Evidence, EvidenceItem, Usage
from lcr.text.citation import Citer, PageRange

if TYPE_CHECKING:
    from lcr.answer.quotes import Quote
    from lcr.store import SourceDoc
    from lcr.text.layout import DocumentLayout


class Citable(Protocol):
    """What citing reads of an index: its documents and their layouts (an
    :class:`~lcr.store.Index`, or the pooled text of several: lcr.pipeline.many)."""

    @property
    def documents(self) -> list[SourceDoc]: ...

    @property
    def layouts(self) -> tuple[DocumentLayout, ...]: ...


@dataclass(frozen=True)
class Result:
    """One question's outcome: what ``--json`` prints, one object per line. Frozen: the
    retrieval makes one, the answer phase a new one from it with the answer's fields.

    ``evidence`` is always what the method retrieved (best first, cited); ``read`` is
    what the answer step read (selected, merged, fitted to the window: None when
    nothing was answered), and ``answer_info`` what the step did. Output shows
    :meth:`basis`: what was read, or, with no answer, what was retrieved.
    """

    question: str
    method: str
    evidence: Evidence
    answer: str | None = None
    usage: Usage = field(default_factory=Usage)
    timings: dict[str, float] = field(default_factory=dict)
    models: dict[str, str] = field(default_factory=dict)
    dropped: int = 0
    # what the answer step was set to (AnswerSettings.to_json() and "step": "shared" or
    # the method whose own prompt answered); None when nothing was answered
    answer_settings: dict[str, Any] | None = None
    # the checks' fields (AnswerResult.support_json, and the quotes cited by
    # cite_quotes): none when no check ran
    support: dict[str, Any] = field(default_factory=dict)
    read: list[EvidenceItem] | None = None
    answer_info: dict[str, Any] = field(default_factory=dict)
    index: str | None = None  # the index asked (one index, or each of several)
    indexes: list[str] | None = None  # the indexes pooled into one answer

    @property
    def quotes(self) -> list[dict[str, Any]]:
        """The answer's quotes, cited (:func:`cite_quotes`): ``--json``'s ``quotes``."""
        quotes = self.support.get("quotes", [])
        return quotes if isinstance(quotes, list) else []

    def basis(self) -> list[EvidenceItem]:
        """The items the result rests on: those the answer step read, else (retrieval
        alone) those retrieved. ``--json``'s and ``lcr eval``'s ``evidence``."""
        return self.read if self.read is not None else self.evidence.items

    @property
    def info(self) -> dict[str, Any]:
        """The retrieval's ``info``, then what the answer step added (``--json``'s ``info``)."""
        return {**self.evidence.info, **self.answer_info}

    def to_json(self) -> dict[str, Any]:
        out = {
            "question": self.question,
            "answer": self.answer,
            "method": self.method,
            "evidence": [it.to_json() for it in self.basis()],
            "info": self.info,
            "usage": self.usage.to_json(),
            "timings": {k: round(v, 4) for k, v in self.timings.items()},
            "models": self.models,
            **self.support,
        }
        if self.index is not None:
            out["index"] = self.index
        if self.indexes is not None:
            out["indexes"] = self.indexes
        if self.answer_settings is not None:  # answered: quotes always listed, [] for none
            out["answer_settings"] = self.answer_settings
            out.setdefault("quotes", [])
        return out


def cite(index: Citable, items: Sequence[EvidenceItem]) -> list[EvidenceItem]:
    """Each final evidence item with its document's name and its spans' citations (file,
    offsets within it, pages, section): done where items are finished, so every output
    (plain, ``--json``, ``lcr eval``, the API) cites the same way."""
    documents = index.documents
    citer = Citer(documents, index.layouts)
    cited = []
    for item in items:
        citations = citer.cite_spans(item.spans)
        if 0 <= item.doc < len(documents):
            document = documents[item.doc].name
        else:  # not a document of this index: name what the spans point at instead
            document = citations[0].document if citations else str(item.doc)
        cited.append(dataclasses.replace(item, document=document, citations=citations))
    return cited


def cite_quotes(index: Citable, quotes: Sequence[Quote]) -> list[dict[str, Any]]:
    """The answer's quotes as ``--json`` and eval records give them: the document's
    text, the evidence item it was read in, its span in source.txt (first to last
    piece; ``spans`` when an ellipsis elides between pieces), and where a person
    finds it: file, pages, section (``citations``, one per span and document)."""
    citer = Citer(index.documents, index.layouts)
    out: list[dict[str, Any]] = []
    for quote in quotes:
        citations = citer.cite_spans(list(quote.spans))
        record: dict[str, Any] = {
            "text": quote.text,
            "evidence": quote.item,
            "span": [quote.spans[0][0], quote.spans[-1][1]],
            "found_by": quote.found_by,
        }
        if len(quote.spans) > 1:
            record["spans"] = [[s, e] for s, e in quote.spans]
        first = citations[0] if citations else None
        # every piece of an elided quote: its pages run from the first's to the last's
        # (in the first's document: a quote is read in one evidence item)
        last = next((c for c in reversed(citations) if first and c.doc == first.doc), first)
        pages = None
        if first and last and first.pages and last.pages:
            p, q = first.pages, last.pages
            pages = PageRange(p.first, q.last, p.first_label, q.last_label).text()
        record["document"] = first.document if first else None
        record["pages"] = pages
        record["section"] = list(first.section) if first else []
        if first and last:
            record["start"], record["end"] = first.start, last.end
        record["citations"] = [c.to_json() for c in citations]
        out.append(record)
    return out
