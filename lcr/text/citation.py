"""Spans into ``source.txt`` turned into what a person cites: the file, the page, the section.

Every span an index stores points into the joined text of all its documents, which
means nothing to a reader ("chars 255825-256189" of a 2 KB file). A
:class:`Citer` maps each span back to its document, to offsets within that
document's own text, to the pages it lies on (by their printed labels) and to the
headings that enclose its start. Pure: no I/O, so the same answers come from the
CLI, the API and ``lcr eval``; binary search, so citing a span costs O(log n) in
the number of documents, pages and headings.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from lcr.text.layout import DocumentLayout, Heading

__all__ = ["Citation", "Citer", "DocumentPlace", "PageRange", "heading_lines", "section_paths"]


class DocumentPlace(Protocol):
    """Where a document's text lies in source.txt (``lcr.store.SourceDoc`` is one)."""

    @property
    def name(self) -> str: ...

    @property
    def start(self) -> int: ...

    @property
    def end(self) -> int: ...


@dataclass(frozen=True)
class PageRange:
    """The pages a span lies on: 1-based positions in the document (what a viewer's
    "go to page" takes) and their printed labels (what a person cites)."""

    first: int
    last: int
    first_label: str
    last_label: str

    def text(self) -> str:
        """``p. 42`` for one page, ``pp. 41-42`` for several."""
        if self.first == self.last:
            return f"p. {self.first_label}"
        return f"pp. {self.first_label}-{self.last_label}"

    def to_json(self) -> dict[str, Any]:
        return {
            "first": self.first_label,
            "last": self.last_label,
            "first_number": self.first,
            "last_number": self.last,
        }


@dataclass(frozen=True)
class Citation:
    """One span as a person cites it: ``doc`` (the manifest's position) and
    ``document`` (its name), ``[start, end)`` within that document's own text, the
    pages (None when the document has no pages, as plain text) and the section path,
    outermost heading first (empty before the first heading or without headings)."""

    doc: int
    document: str
    start: int
    end: int
    pages: PageRange | None = None
    section: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "document": self.document,
            "start": self.start,
            "end": self.end,
            "pages": self.pages.to_json() if self.pages is not None else None,
            "section": list(self.section),
        }


def section_paths(headings: Sequence[Heading]) -> list[tuple[str, ...]]:
    """For each heading (in order), the titles of the headings enclosing it and itself.

    A heading closes every open heading of its level or deeper, so a level-3 heading
    under a level-1 one (a skipped level) nests in it, and the next level-2 heading
    closes both the level-3 one and nothing above."""
    open_headings: list[tuple[int, str]] = []
    paths: list[tuple[str, ...]] = []
    for heading in headings:
        while open_headings and open_headings[-1][0] >= heading.level:
            open_headings.pop()
        open_headings.append((heading.level, heading.title))
        paths.append(tuple(title for _, title in open_headings))
    return paths


@dataclass(frozen=True)
class _DocumentIndex:
    """One document's layout ready for binary search."""

    page_starts: list[int]
    page_labels: list[str]
    heading_starts: list[int]
    paths: list[tuple[str, ...]]

    @classmethod
    def of(cls, layout: DocumentLayout) -> _DocumentIndex:
        pages = sorted(layout.pages, key=lambda p: p.start)
        headings = sorted(layout.headings, key=lambda h: h.start)  # stable: nesting kept
        return cls(
            page_starts=[p.start for p in pages],
            page_labels=[p.label or str(i) for i, p in enumerate(pages, 1)],
            heading_starts=[h.start for h in headings],
            paths=section_paths(headings),
        )

    def pages(self, start: int, end: int) -> PageRange | None:
        """The pages of ``[start, end)``: the page of its first character to that of its
        last (text before the first page's start counts as the first page)."""
        if not self.page_starts:
            return None
        first = max(bisect_right(self.page_starts, start) - 1, 0)
        last = max(bisect_right(self.page_starts, max(start, end - 1)) - 1, first)
        return PageRange(first + 1, last + 1, self.page_labels[first], self.page_labels[last])

    def section(self, start: int) -> tuple[str, ...]:
        at = bisect_right(self.heading_starts, start) - 1
        return self.paths[at] if at >= 0 else ()


class Citer:
    """Cites spans of one index: its documents (in source.txt order) and their layouts.

    Each document's layout is prepared for search the first time one of its spans is
    cited, so an index of thousands of documents costs only for those cited."""

    def __init__(
        self, documents: Sequence[DocumentPlace], layouts: Sequence[DocumentLayout]
    ) -> None:
        if len(documents) != len(layouts):
            raise ValueError(f"{len(documents)} documents but {len(layouts)} layouts")
        self._documents = list(documents)
        self._layouts = list(layouts)
        self._starts = [d.start for d in self._documents]
        self._ends = [d.end for d in self._documents]
        self._prepared: dict[int, _DocumentIndex] = {}

    def cite(self, start: int, end: int) -> list[Citation]:
        """The span ``[start, end)`` of source.txt, one citation per document it covers
        (a span never should cross documents, but one that does is cited in each).
        A span that covers no document's text (the blank line between two, or an empty
        span) is cited, as an empty range, in the document it starts in or follows."""
        if not self._documents:
            return []
        out: list[Citation] = []
        doc = bisect_right(self._ends, start)  # the first document ending after start
        while doc < len(self._documents) and self._documents[doc].start < end:
            d = self._documents[doc]
            out.append(self._cite_in(doc, max(start, d.start), min(end, d.end)))
            doc += 1
        if not out:  # as Index.doc_at: the blank line after a document is its own
            doc = max(bisect_right(self._starts, start) - 1, 0)
            d = self._documents[doc]
            at = min(max(start, d.start), d.end)
            out.append(self._cite_in(doc, at, at))
        return out

    def cite_spans(self, spans: Sequence[tuple[int, int]]) -> list[Citation]:
        """Every span's citations, in the order of ``spans``."""
        return [c for s, e in spans for c in self.cite(int(s), int(e))]

    def _cite_in(self, doc: int, start: int, end: int) -> Citation:
        """``[start, end)`` of source.txt, known to lie within document ``doc``."""
        d = self._documents[doc]
        local_start, local_end = start - d.start, end - d.start
        prepared = self._prepared.get(doc)
        if prepared is None:
            prepared = self._prepared[doc] = _DocumentIndex.of(self._layouts[doc])
        return Citation(
            doc=doc,
            document=d.name,
            start=local_start,
            end=local_end,
            pages=prepared.pages(local_start, local_end),
            section=prepared.section(local_start),
        )


def heading_lines(
    documents: Sequence[DocumentPlace], layouts: Sequence[DocumentLayout], source: str
) -> list[tuple[int, int]]:
    """The spans of source.txt where a heading's title is printed on a line of its own
    start ("Chapter One" above "The keeper's log ..."): from the heading's start to the
    end of its title, for each heading whose title is printed there (blanks aside). A
    quote holds body text, never these."""
    out: list[tuple[int, int]] = []
    for doc, layout in zip(documents, layouts, strict=False):
        for heading in layout.headings:
            start = doc.start + heading.start
            if not doc.start <= start < doc.end:
                continue
            words = heading.title.split()
            if not words:
                continue
            title = r"\s*" + r"\s+".join(re.escape(w) for w in words)
            printed = re.compile(title, re.IGNORECASE).match(source, start, doc.end)
            if printed is not None:
                out.append((start, printed.end()))
    return out
