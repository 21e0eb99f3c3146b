"""Joining extracted pieces into one document text while recording its layout.

Every extractor hands its blocks (paragraphs, pages, table rows) to a
:class:`TextAssembler`, which joins them with blank lines and notes, at the
moment each page or heading begins, its offset in the text being built. The
offsets are then exact by construction: nothing is recomputed by searching.
"""

from __future__ import annotations

import re

from lcr.text.layout import DocumentLayout, Heading, Page

BLOCK_SEPARATOR = "\n\n"
_NEWLINES = re.compile(r"\r\n?")
_BLANK_RUN = re.compile(r"\n{3,}")
_INLINE_SPACE = re.compile(r"[ \f\v\u00a0\u2000-\u200a\u3000]+")
_CELL_GAP = re.compile(r" *\t *")


def tidy_block(text: str) -> str:
    """One block's text with newlines normalised, spaces within lines collapsed (a tab,
    which separates table cells, kept alone) and runs of blank lines cut to one; no
    character is added."""
    text = _NEWLINES.sub("\n", text)
    lines = [_CELL_GAP.sub("\t", _INLINE_SPACE.sub(" ", line)).strip() for line in text.split("\n")]
    return _BLANK_RUN.sub("\n\n", "\n".join(lines)).strip("\n")


class TextAssembler:
    """Blocks of text in reading order, joined by blank lines, with their layout."""

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._length = 0
        self._pages: list[Page] = []
        self._headings: list[Heading] = []

    @property
    def offset(self) -> int:
        """Where the next block will start."""
        return self._length + (len(BLOCK_SEPARATOR) if self._parts else 0)

    def add(self, text: str) -> int | None:
        """Append a block (already tidied); return its start, None if it was empty."""
        if not text:
            return None
        start = self.offset
        if self._parts:
            self._parts.append(BLOCK_SEPARATOR)
        self._parts.append(text)
        self._length = start + len(text)
        return start

    def page(self, label: str, start: int | None = None) -> None:
        """A page begins at ``start`` (default: the next block; an empty page starts
        where the next one does)."""
        self._pages.append(Page(self.offset if start is None else start, label))

    def heading(self, level: int, title: str, start: int | None = None) -> None:
        """A heading whose section starts at ``start`` (default: the next block)."""
        title = " ".join(title.split())
        if title:
            at = self.offset if start is None else start
            self._headings.append(Heading(at, max(1, level), title))

    def text(self) -> str:
        return "".join(self._parts)

    def layout(self) -> DocumentLayout:
        """Pages and headings, sorted by start, clamped to the text (a trailing empty
        page starts at the end of the text, not past it)."""
        end = self._length
        pages = tuple(
            sorted((Page(min(p.start, end), p.label) for p in self._pages), key=lambda p: p.start)
        )
        headings = tuple(
            sorted(
                (Heading(min(h.start, end), h.level, h.title) for h in self._headings),
                key=lambda h: h.start,
            )
        )
        return DocumentLayout(pages, headings)
