"""DOCX through python-docx: body paragraphs and tables in document order, the
"Heading N" paragraph styles as headings. Hidden text (Word's "Hidden" font effect,
``w:vanish``) is not read: it is neither printed nor shown; nor are comments,
which are not the document's text.

A Word document has no fixed pages (they depend on the printer and the fonts),
so no pages are recorded. Table cells are separated by tabs, rows by newlines;
a merged cell is written once. The container passes the zip-bomb limits before
python-docx opens it.
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

from lcr.errors import InputError
from lcr.text.formats.assemble import TextAssembler, tidy_block
from lcr.text.formats.zipsafe import open_zip

_HEADING_STYLE = re.compile(r"^heading\s*([1-9])$", re.IGNORECASE)


def extractor_version() -> str:
    from importlib.metadata import version

    return version("python-docx")


def extract_docx(source: Path | bytes, name: str) -> TextAssembler:
    import docx
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    open_zip(source, name, "DOCX").close()  # the limits, before python-docx reads it all
    try:
        document = docx.Document(str(source) if isinstance(source, Path) else io.BytesIO(source))
    except Exception as exc:
        raise InputError(f"{name} is not a readable DOCX ({type(exc).__name__}: {exc})") from None
    shown = _Shown(document)
    out = TextAssembler()
    for block in document.iter_inner_content():
        if isinstance(block, Paragraph):
            text = tidy_block(shown.text(block))
            level = _heading_level(block)
            start = out.add(text)
            if start is not None and level is not None:
                out.heading(level, text, start)
        elif isinstance(block, Table):
            out.add(_table_text(block, shown))
    if not out.text().strip():
        raise InputError(f"{name} has no text")
    return out


def _heading_level(paragraph: Any) -> int | None:
    style = paragraph.style
    while style is not None:
        m = _HEADING_STYLE.match(style.name or "")
        if m is not None:
            return int(m.group(1))
        style = style.base_style
    return None


def _table_text(table: Any, shown: _Shown) -> str:
    rows: list[str] = []
    # the whole table's cells, held (so no element's id is reused): a cell merged across
    # repeats along its row, one merged down on each row it spans
    seen: set[Any] = set()
    for row in table.rows:
        cells: list[str] = []
        for cell in row.cells:
            if cell._tc in seen:
                continue
            seen.add(cell._tc)
            cells.append(" ".join(tidy_block(_cell_text(cell, shown)).split()))
        rows.append("\t".join(cells))
    return tidy_block("\n".join(rows))


def _cell_text(cell: Any, shown: _Shown) -> str:
    """A cell's paragraphs and the tables nested in it, in order (``cell.text`` has
    only the paragraphs)."""
    parts = [
        _table_text(block, shown) if hasattr(block, "rows") else shown.text(block)
        for block in cell.iter_inner_content()
    ]
    return "\n".join(parts)


_OFF = frozenset({"0", "false", "off"})


class _Shown:
    """A paragraph's text as Word shows it: without its hidden runs (``w:vanish``, Word's
    "Hidden" font effect, set on the run, by its character style or by its paragraph's
    style), which are not printed and not shown unless the reader asks for hidden
    text. A document with no hidden text anywhere reads as python-docx gives it."""

    def __init__(self, document: Any) -> None:
        from docx.oxml.ns import qn

        self._qn = qn
        styles = document.styles.element
        self._any = bool(document.element.xpath(".//w:vanish") or styles.xpath(".//w:vanish"))
        self._styles = {st.get(qn("w:styleId")): st for st in styles.xpath("./w:style")}
        self._default = next(
            (
                st.get(qn("w:styleId"))
                for st in styles.xpath("./w:style[@w:type='paragraph']")
                if st.get(qn("w:default")) in ("1", "true", "on")
            ),
            None,
        )
        self._by_style: dict[str, bool | None] = {}

    def text(self, paragraph: Any) -> str:
        if not self._any:
            return str(paragraph.text)
        p = paragraph._p
        qn = self._qn
        style_ids = p.xpath("./w:pPr/w:pStyle/@w:val")
        in_paragraph = self._style_vanish(style_ids[0] if style_ids else self._default)
        parts: list[str] = []
        for child in p.xpath("./w:r | ./w:hyperlink/w:r"):
            hidden = self._vanish(child.find(qn("w:rPr")))
            if hidden is None:
                char_style = child.xpath("./w:rPr/w:rStyle/@w:val")
                hidden = self._style_vanish(char_style[0]) if char_style else None
            if hidden is None:
                hidden = in_paragraph
            if not hidden:
                parts.append(child.text)
        return "".join(parts)

    def _vanish(self, rpr: Any) -> bool | None:
        """What a run-properties element says of hiding: True, False, or nothing."""
        if rpr is None:
            return None
        el = rpr.find(self._qn("w:vanish"))
        if el is None:
            return None
        return (el.get(self._qn("w:val")) or "true").lower() not in _OFF

    def _style_vanish(self, style_id: str | None, depth: int = 0) -> bool | None:
        """Whether a style (or one it is based on) hides its text."""
        if style_id is None or depth > 32:  # a loop of basedOn
            return None
        if style_id not in self._by_style:
            self._by_style[style_id] = None  # a loop meets this first
            st = self._styles.get(style_id)
            found = None if st is None else self._vanish(st.find(self._qn("w:rPr")))
            if found is None and st is not None:
                based = st.xpath("./w:basedOn/@w:val")
                found = self._style_vanish(based[0], depth + 1) if based else None
            self._by_style[style_id] = found
        return self._by_style[style_id]
