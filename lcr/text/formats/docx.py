"""DOCX through python-docx: body paragraphs and tables in document order, the
"Heading N" paragraph styles as headings.

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
    out = TextAssembler()
    for block in document.iter_inner_content():
        if isinstance(block, Paragraph):
            text = tidy_block(block.text)
            level = _heading_level(block)
            start = out.add(text)
            if start is not None and level is not None:
                out.heading(level, text, start)
        elif isinstance(block, Table):
            out.add(_table_text(block))
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


def _table_text(table: Any) -> str:
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
            cells.append(" ".join(tidy_block(_cell_text(cell)).split()))
        rows.append("\t".join(cells))
    return tidy_block("\n".join(rows))


def _cell_text(cell: Any) -> str:
    """A cell's paragraphs and the tables nested in it, in order (``cell.text`` has
    only the paragraphs)."""
    parts = [
        _table_text(block) if hasattr(block, "rows") else block.text
        for block in cell.iter_inner_content()
    ]
    return "\n".join(parts)
