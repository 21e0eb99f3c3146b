"""PDF through PDFium (pypdfium2): the text layer page by page, the outline as
headings, the printed page labels where the PDF defines them.

Chosen over pypdf after measuring both on Debian's bash and debmake manuals
(bench/README.md): 10-18x the pages per second, the same reading order, and no
missing glyph maps. Pages are read and closed one at a time, so memory stays
bounded by the text, whatever the page count. A PDF without any text layer
(scanned) is refused with the way out (OCR); one with some image-only pages is
indexed with a warning naming them (blank pages, with neither text nor image, are
not worth one).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lcr.errors import InputError
from lcr.progress import NULL_PROGRESS, Progress
from lcr.text.formats.assemble import TextAssembler, tidy_block

_SECTION_NUMBER = re.compile(r"(?:[0-9]+|[A-Z])(?:\.[0-9]+)*\.? +")


def extractor_version() -> str:
    import pypdfium2

    return f"{pypdfium2.version.PYPDFIUM_INFO} (pdfium {pypdfium2.version.PDFIUM_INFO.build})"


def extract_pdf(
    source: Path | bytes,
    name: str,
    *,
    password: str | None = None,
    progress: Progress = NULL_PROGRESS,
    warn: Callable[[str], None] | None = None,
) -> TextAssembler:
    """The PDF's text, one block per page, with its pages and outline recorded."""
    import pypdfium2 as pdfium

    try:
        pdf = pdfium.PdfDocument(source, password=password)
    except pdfium.PdfiumError as exc:
        raise InputError(_open_error(name, exc, password)) from None
    try:
        out = TextAssembler()
        starts = _read_pages(pdf, name, out, progress, warn)
        if not out.text().strip():
            raise InputError(
                f"{name} is a PDF with no text layer (scanned?); OCR it first, e.g. "
                f"ocrmypdf {name} out.pdf, then index out.pdf"
            )
        _outline(pdf, out, starts, name, warn)
        return out
    finally:
        pdf.close()


def _open_error(name: str, exc: Any, password: str | None) -> str:
    import pypdfium2.raw as raw

    code = getattr(exc, "err_code", None)
    if code == raw.FPDF_ERR_PASSWORD:
        if password:
            return f"{name} is an encrypted PDF and the password given does not open it"
        return f"{name} is an encrypted PDF; give its password with --password"
    if code == raw.FPDF_ERR_SECURITY:
        return f"{name} is a PDF with an unsupported security handler"
    if code == raw.FPDF_ERR_FILE:
        return f"cannot read {name}"
    return f"{name} is not a readable PDF (damaged or truncated)"


def _read_pages(
    pdf: Any,
    name: str,
    out: TextAssembler,
    progress: Progress,
    warn: Callable[[str], None] | None,
) -> list[tuple[int, str]]:
    """Append every page's text; return each page's (start, text) for the outline."""
    import pypdfium2 as pdfium

    count = len(pdf)
    task = progress.task(f"reading {name}", total=count)
    starts: list[tuple[int, str]] = []
    pictures: list[str] = []  # pages without text that show an image: scanned?
    blank = 0
    for i in range(count):
        label = pdf.get_page_label(i) or str(i + 1)
        out.page(label)
        try:
            page = pdf[i]
            textpage = page.get_textpage()
            text = tidy_block(_hyphens_shown(textpage.get_text_range()))
            textpage.close()
            if not text:
                if _shows_an_image(page):
                    pictures.append(label)
                else:
                    blank += 1
            page.close()
        except pdfium.PdfiumError as exc:
            raise InputError(f"{name} is damaged: page {i + 1} cannot be read ({exc})") from None
        start = out.add(text)
        starts.append((out.offset if start is None else start, text))
        task.advance()
    if blank == count:
        raise InputError(f"{name} is a PDF whose pages are all blank (no text, no images)")
    if pictures and len(pictures) + blank < count and warn is not None:
        shown = ", ".join(pictures[:10]) + (", ..." if len(pictures) > 10 else "")
        warn(
            f"{name}: {len(pictures)} of {count} pages are images without a text layer "
            f"(p. {shown}); OCR them (e.g. ocrmypdf) to index their text"
        )
    return starts


def _shows_an_image(page: Any) -> bool:
    """Whether a page draws an image (a scan), itself or inside a form XObject; a page
    with neither text nor image is blank (a left-hand page left empty), not scanned."""
    import pypdfium2.raw as raw

    for _obj in page.get_objects(filter=(raw.FPDF_PAGEOBJ_IMAGE,), max_depth=8):
        return True
    return False


class _Kept(logging.Handler):
    """What pypdfium2 logs while the outline is read (a looping or too deep outline),
    kept to be said once as lcr's warning rather than printed raw."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _outline(
    pdf: Any,
    out: TextAssembler,
    starts: list[tuple[int, str]],
    name: str = "",
    warn: Callable[[str], None] | None = None,
) -> None:
    """The outline's entries as headings: at the title's first occurrence on the page
    it points to (after an earlier heading on the same page), else the page's start."""
    floor: dict[int, int] = {}
    logger = logging.getLogger("pypdfium2")
    kept, propagate = _Kept(), logger.propagate
    logger.addHandler(kept)
    logger.propagate = False
    try:
        bookmarks = list(pdf.get_toc(max_depth=16))
    except Exception:
        return
    finally:
        logger.removeHandler(kept)
        logger.propagate = propagate
    if kept.messages and warn is not None:
        looping = any("circular" in m for m in kept.messages)
        why = "loops back on itself" if looping else "is nested deeper than 16 levels"
        warn(f"{name}'s outline {why}: the headings past that point are not recorded")
    for bm in bookmarks:
        dest = bm.get_dest()
        index = dest.get_index() if dest is not None else None
        if index is None or not 0 <= index < len(starts):
            continue
        title = " ".join(bm.get_title().split())
        page_start, page_text = starts[index]
        at, printed = _find_title(page_text, title, floor.get(index, 0))
        floor[index] = at
        out.heading(bm.level + 1, printed, page_start + at)


def _hyphens_shown(text: str) -> str:
    """PDFium marks a hyphen at a line's end with U+FFFE and drops the line break
    ("hyphen\ufffeated"): the page prints a hyphen there and breaks the line, so the
    text says so too, and no noncharacter reaches the index."""
    return text.replace("\ufffe", "-\n")


def _find_title(page_text: str, title: str, after: int) -> tuple[int, str]:
    """Where ``title`` is printed on the page (whitespace-insensitively), from ``after``,
    and the title as printed: a section number before it on its line ("3.2 " where the
    outline says only "Shell Commands") belongs to the heading, as a reader cites it.
    A line the title begins (after such a number) wins over a first mention inside a
    running header or a sentence ("Annual Report - Results")."""
    if not title:
        return after, title
    found = _line_led_by(page_text, title, after)
    if found < 0:
        found = page_text.find(title, after)
    if found < 0:
        words = title.split()
        found = page_text.find(words[0], after) if words else -1
        if found >= 0 and " ".join(page_text[found:].split())[: len(title)] != title:
            found = -1
    if found < 0:
        return after, title
    line_start = page_text.rfind("\n", 0, found) + 1
    number = page_text[line_start:found]
    if line_start >= after and _SECTION_NUMBER.fullmatch(number):
        return line_start, f"{number.strip()} {title}"
    return found, title


def _line_led_by(page_text: str, title: str, after: int) -> int:
    """The first place from ``after`` where ``title`` begins its line (perhaps after a
    section number), or -1."""
    found = page_text.find(title, after)
    while found >= 0:
        line_start = page_text.rfind("\n", 0, found) + 1
        if _SECTION_NUMBER.fullmatch(page_text[line_start:found]) or line_start == found:
            return found
        found = page_text.find(title, found + 1)
    return -1
