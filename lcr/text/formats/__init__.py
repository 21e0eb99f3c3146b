"""Document formats: which one a file is (by its content, then its name) and its
text and layout (pages, headings), extracted once, at index time.

Each format's module turns the file into blocks of a
:class:`~lcr.text.formats.assemble.TextAssembler`; this module picks the module
and records what extracted the text (the library, its version, lcr's own rules),
so a later build can tell whether the extraction would come out differently.
"""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lcr.errors import InputError
from lcr.progress import NULL_PROGRESS, Progress
from lcr.text.layout import DocumentLayout

FORMATS = ("text", "markdown", "html", "pdf", "epub", "docx")
# lcr's own extraction rules, per format: raised when a change would give other text
# (pdf 2, docx 2: line-end hyphens, merged and nested cells; session 69. html 2, epub 2:
# text hidden by an inline style and headings' permalink marks dropped; docx 3: hidden
# runs dropped; #72, #73)
RULES_VERSION = {"text": 1, "markdown": 1, "html": 2, "pdf": 2, "epub": 2, "docx": 3}

_EXTENSIONS = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".mdown": "markdown",
    ".mkd": "markdown",
    ".html": "html",
    ".htm": "html",
    ".xhtml": "html",
    ".xht": "html",
    ".pdf": "pdf",
    ".epub": "epub",
    ".docx": "docx",
}
_BINARY_FORMATS = frozenset({"pdf", "epub", "docx"})


@dataclass(frozen=True)
class Extracted:
    """A document's text and layout, and what made them."""

    text: str
    layout: DocumentLayout
    format: str
    extractor: str
    extractor_version: str
    options: dict[str, Any] = field(default_factory=dict)
    encoding: str = ""


@dataclass(frozen=True)
class ExtractOptions:
    """What the user chose: a forced format, a PDF password; where notes go."""

    format: str | None = None
    password: str | None = None
    progress: Progress = NULL_PROGRESS
    warn: Callable[[str], None] | None = None


def detect_format(head: bytes, name: str, source: Path | bytes) -> str:
    """The format by magic bytes (PDF, and EPUB/DOCX by their zip's entries), then by
    markup at the start (HTML), then by extension (of the name inside a ``.gz``);
    plain text otherwise. A name that
    promises a binary format its content does not have is refused as damaged."""
    if b"%PDF-" in head[:1024]:
        return "pdf"
    if head.startswith(b"PK\x03\x04"):
        return _zip_kind(source, name)
    by_name = _EXTENSIONS.get(Path(inner_name(name)).suffix.lower())
    if by_name in _BINARY_FORMATS:
        kind = by_name.upper()
        article = "an" if kind[0] in "AEIOU" else "a"
        raise InputError(f"{name} is not {article} {kind} (its content is not; damaged?)")
    if by_name is not None:
        return by_name
    start = head.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if start.startswith((b"<!doctype html", b"<html")) or (
        start.startswith(b"<?xml") and b"<html" in start[:1024]
    ):
        return "html"
    return "text"


def inner_name(name: str) -> str:
    """The name of the document a gzip file holds: ``notes.md.gz`` holds ``notes.md``."""
    return name[:-3] if name.lower().endswith(".gz") and len(name) > 3 else name


def _zip_kind(source: Path | bytes, name: str) -> str:
    import io

    try:
        with zipfile.ZipFile(source if isinstance(source, Path) else io.BytesIO(source)) as zf:
            names = set(zf.namelist()[:100_000])
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
        raise InputError(f"{name} is a damaged zip file ({exc})") from None
    if "META-INF/container.xml" in names:
        return "epub"
    if "word/document.xml" in names:
        return "docx"
    raise InputError(
        f"{name} is a zip archive that is not an EPUB or DOCX; extract its files first"
    )


def extract(source: Path | bytes, raw_head: bytes, name: str, options: ExtractOptions) -> Extracted:
    """Read ``source`` (a regular file's path, or the bytes of stdin or a FIFO)."""
    fmt = options.format or detect_format(raw_head, name, source)
    chosen = {"forced": True} if options.format else {}
    rules = {"rules": RULES_VERSION[fmt], **chosen}
    if fmt == "pdf":
        from lcr.text.formats import pdf

        assembled = pdf.extract_pdf(
            source, name, password=options.password, progress=options.progress, warn=options.warn
        )
        return Extracted(
            assembled.text(), assembled.layout(), fmt, "pypdfium2", pdf.extractor_version(), rules
        )
    if fmt == "docx":
        from lcr.text.formats import docx

        assembled = docx.extract_docx(source, name)
        return Extracted(
            assembled.text(),
            assembled.layout(),
            fmt,
            "python-docx",
            docx.extractor_version(),
            rules,
        )
    if fmt == "epub":
        from lcr.text.formats import epub

        assembled = epub.extract_epub(source, name, warn=options.warn)
        return Extracted(
            assembled.text(), assembled.layout(), fmt, "lcr-epub (lxml)", _lxml_version(), rules
        )
    raw = source if isinstance(source, bytes) else _read(source)
    if fmt == "html":
        from lcr.text.formats.assemble import TextAssembler
        from lcr.text.formats.html import HtmlWalker, decode_markup, parse_html

        out = TextAssembler()
        HtmlWalker(out).walk(parse_html(decode_markup(raw, name, options.warn), name))
        if not out.text().strip():
            raise InputError(f"{name} has no text outside its markup")
        return Extracted(out.text(), out.layout(), fmt, "lcr-html (lxml)", _lxml_version(), rules)
    from lcr.text.decoding import decode_bytes

    text, encoding = decode_bytes(raw, name=name, warn=options.warn)
    if fmt == "markdown":
        from lcr.text.formats.markdown import markdown_layout

        return Extracted(text, markdown_layout(text), fmt, "lcr", "", rules, encoding)
    return Extracted(text, DocumentLayout(), "text", "lcr", "", rules, encoding)


def _lxml_version() -> str:
    from lxml import etree

    return ".".join(str(n) for n in etree.LXML_VERSION)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except PermissionError:
        raise InputError(f"cannot read {path}: permission denied") from None
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
