"""HTML and XHTML: the text a reader sees, in document order, with h1-h6 as headings.

Parsed with lxml's HTML parser (libxml2), which never fetches anything and
does not expand DTD entities. Dropped: what is not shown as reading text
(script, style, templates, embedded objects, elements marked ``hidden`` or hidden by
their inline style, headings' permalink marks such as "¶") and
the page's navigation boilerplate (``nav``, and ``header``/``footer`` outside an
article or section, where they are the site's banner). Nothing is added but
whitespace: blocks are separated by blank lines, table cells by tabs, table
rows and ``<br>`` by newlines.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable
from typing import Any

import lxml.html
from lxml import etree

from lcr.errors import InputError
from lcr.text.decoding import decode_bytes, normalise_newlines
from lcr.text.formats.assemble import TextAssembler, tidy_block

_DROPPED = frozenset(
    {"script", "style", "noscript", "template", "head", "nav", "iframe", "object", "embed"}
    | {"canvas", "svg", "select", "datalist"}
)
_BANNER = frozenset({"header", "footer"})
_SECTIONING = frozenset({"article", "section", "main", "aside"})
_BLOCKS = frozenset(
    {"address", "article", "aside", "blockquote", "body", "caption", "center", "dd", "details"}
    | {"dialog", "div", "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form"}
    | {"h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "html", "legend", "li", "main"}
    | {"ol", "p", "pre", "section", "summary", "table", "ul", "menu", "listing", "xmp"}
)
_HEADINGS = {f"h{n}": n for n in range(1, 7)}
# what a permalink anchor shows beside a heading (Sphinx, MkDocs "¶", rustdoc "§")
_PERMALINK_MARKS = frozenset({"\u00b6", "\u00a7", "#", "\U0001f517", "\u2693", "\u26d3"})
_PERMALINK_CLASSES = frozenset(
    {"headerlink", "anchor", "heading-anchor", "anchor-link", "hash-link", "header-anchor"}
    | {"anchorjs-link", "anchor-heading"}
)
_STYLED = frozenset({"display", "visibility", "opacity", "font-size"})
_ZERO = re.compile(r"[+-]?0*\.?0+%?")  # opacity: 0, 0.0, 0%
_ZERO_SIZE = re.compile(r"[+-]?0*\.?0+(?:px|pt|pc|em|rem|ex|ch|%|vw|vh|mm|cm|in|q)?")
_SOURCE_SPACE = re.compile(r"[ \t\n\r\f\v]+")
_XML_DECLARATION = re.compile(r"^\s*<\?xml[^>]*\?>")
_DECLARED = (
    re.compile(rb"<meta[^>]+charset\s*=\s*[\"']?\s*([A-Za-z0-9._:-]+)", re.IGNORECASE),
    re.compile(rb"<\?xml[^>]+encoding\s*=\s*[\"']([A-Za-z0-9._:-]+)", re.IGNORECASE),
)


def declared_charset(raw: bytes) -> str | None:
    """The encoding the page declares in its first 4 KB (``<meta charset>``, the
    http-equiv form, or an XML declaration), if Python knows it."""
    head = raw[:4096]
    for pattern in _DECLARED:
        m = pattern.search(head)
        if m is not None:
            name = m.group(1).decode("ascii", "replace")
            try:
                return codecs.lookup(name).name
            except LookupError:
                return None
    return None


def decode_markup(raw: bytes, name: str, warn: Callable[[str], None] | None) -> str:
    """The page's text in the charset it declares (a legacy page says ``windows-1252``
    or ``iso-8859-1`` in a ``<meta>``); undeclared or wrongly declared, the bytes are
    decoded as any text file is (UTF-8, else a guessed legacy encoding, with a warning)."""
    declared = declared_charset(raw)
    if declared is not None and not raw.startswith((b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")):
        try:
            return normalise_newlines(raw.decode(declared))
        except UnicodeDecodeError:
            if warn is not None:
                warn(f"{name} declares {declared} but is not; its encoding was guessed")
    return decode_bytes(raw, name=name, warn=warn)[0]


_LIBXML_HINT = re.compile(r",?\s*(?:use|try) XML_PARSE_HUGE(?: option)?", re.IGNORECASE)


def parse_html(text: str, name: str) -> Any:
    """The document's root element; one line for what lxml cannot read. libxml2's
    default limits (255 nested elements, a 10 MB text node) silently cut a page short,
    so they are raised (``huge_tree``); past the raised depth the page is refused with
    its reason rather than read in part."""
    text = _XML_DECLARATION.sub("", text, count=1)
    parser = lxml.html.HTMLParser(huge_tree=True)
    try:
        root = lxml.html.document_fromstring(text, parser=parser)
    except (etree.ParserError, ValueError) as exc:
        raise InputError(f"{name} has no readable HTML ({exc})") from None
    for entry in parser.error_log:
        if entry.type_name == "ERR_RESOURCE_LIMIT":
            reason = _LIBXML_HINT.sub("", entry.message.strip())
            raise InputError(
                f"{name} cannot be read whole: {reason} (line {entry.line}); "
                "lcr reads no page in part: simplify its markup or save it as text"
            )
    return root


class HtmlWalker:
    """Walks one parsed page into a :class:`TextAssembler`, recording element ids
    (``anchors``) so a table of contents can point into the text."""

    def __init__(self, out: TextAssembler, *, headings: bool = True) -> None:
        self.out = out
        self.record_headings = headings
        self.anchors: dict[str, int] = {}
        self.first_heading: str | None = None
        # every h1-h6 as (level, title, start), recorded or not
        self.headings: list[tuple[int, str, int]] = []
        self._buffer: list[str] = []
        self._pre = 0
        self._table = 0
        self._heading: tuple[int, int] | None = None  # (level, buffer length at its start)

    def walk(self, root: Any) -> None:
        end = object()
        # each element with whether the text around it (its parent's) is unseen
        stack: list[tuple[Any, object | None, bool]] = [(root, None, False)]
        while stack:
            el, phase, around = stack.pop()
            if phase is end:
                self._close(el)
                self._inline(el.tail, around)
                continue
            if not isinstance(el.tag, str):
                self._inline(el.tail, around)  # a comment's tail is page text
                continue
            if self._dropped(el):
                self._anchor(el)  # a link may point at it: the place it would have been
                self._inline(el.tail, around)  # a dropped element's tail is page text
                continue
            style = el.get("style")
            said = muted_by_style(style) if style else None
            inside = around if said is None else said
            self._open(el, inside)
            stack.append((el, end, around))
            stack.extend((child, None, inside) for child in reversed(el))
        self._flush()

    # ----------------------------------------------------------------- events
    def _dropped(self, el: Any) -> bool:
        tag = el.tag.lower()
        if tag in _DROPPED or el.get("hidden") is not None:
            return True
        if el.get("style") and hidden_by_style(el.get("style")):
            return True
        if tag == "a" and is_permalink(el):
            return True
        if tag in _BANNER:
            return not any(
                isinstance(a.tag, str) and a.tag.lower() in _SECTIONING for a in el.iterancestors()
            )
        return False

    def _open(self, el: Any, unseen: bool = False) -> None:
        tag = el.tag.lower()
        if tag in _BLOCKS and not self._table:
            self._flush()
            if tag in _HEADINGS:
                self._heading = (_HEADINGS[tag], 0)
        self._anchor(el)
        if tag == "br":
            self._buffer.append("\n")
        elif tag in ("td", "th") and self._table:
            self._buffer.append("\t")
        if tag == "pre":
            self._pre += 1
        if tag == "table":
            self._table += 1
        self._inline(el.text, unseen)

    def _anchor(self, el: Any) -> None:
        for key in ("id", "name") if el.tag.lower() == "a" else ("id",):
            anchor = el.get(key)
            if anchor and anchor not in self.anchors:
                self.anchors[anchor] = self._here()

    def _close(self, el: Any) -> None:
        tag = el.tag.lower()
        if tag == "table":
            self._table -= 1
        if tag == "tr" and self._table:
            self._buffer.append("\n")
        elif tag in _BLOCKS and not self._table:
            self._flush()
        if tag == "pre":
            self._pre -= 1

    def _here(self) -> int:
        """The offset the text buffered so far leads up to: an anchor inside a paragraph
        (an EPUB page break) points at its own place, not the paragraph's start."""
        raw = "".join(self._buffer)
        done = _tidy_pre(raw) if self._pre else tidy_block(raw)
        if not done:
            return self.out.offset
        gap = 1 if raw[-1:].isspace() and not self._pre else 0  # the space before what follows
        return self.out.offset + len(done) + gap

    def _inline(self, text: str | None, unseen: bool = False) -> None:
        if text and not unseen:
            self._buffer.append(text if self._pre else _SOURCE_SPACE.sub(" ", text))

    def _flush(self) -> None:
        raw = "".join(self._buffer)
        self._buffer.clear()
        heading, self._heading = self._heading, None
        text = _tidy_pre(raw) if self._pre else tidy_block(raw)
        start = self.out.add(text)
        if start is not None and heading is not None:
            if self.first_heading is None:
                self.first_heading = text
            self.headings.append((heading[0], text, start))
            if self.record_headings:
                self.out.heading(heading[0], text, start)


def _declarations(style: str) -> dict[str, str]:
    """The inline style's declarations lcr reads, the last of each winning (as in CSS,
    unless an earlier one is ``!important``)."""
    found: dict[str, tuple[str, bool]] = {}
    for declaration in style.split(";"):
        prop, colon, value = declaration.partition(":")
        prop = prop.strip().lower()
        if colon and prop in _STYLED:
            value = value.strip().lower()
            important = value.endswith("!important")
            value = value.removesuffix("!important").strip()
            if prop in found and found[prop][1] and not important:
                continue  # an earlier !important one holds
            found[prop] = (value, important)
    return {prop: value for prop, (value, _important) in found.items()}


def hidden_by_style(style: str) -> bool:
    """Whether an inline ``style`` hides its element and all it holds: ``display: none``
    or ``opacity: 0``, which nothing inside can undo."""
    found = _declarations(style)
    return found.get("display") == "none" or bool(_ZERO.fullmatch(found.get("opacity", "")))


def muted_by_style(style: str) -> bool | None:
    """Whether an inline ``style`` makes its text unseen in a way its children may undo
    (``visibility: hidden``/``collapse``, ``font-size: 0``): True; made seen again
    (``visibility: visible``, a font size above 0): False; neither: None."""
    found = _declarations(style)
    visibility, size = found.get("visibility"), found.get("font-size")
    if visibility in ("hidden", "collapse") or (size and _ZERO_SIZE.fullmatch(size)):
        return True
    if visibility == "visible" or (size and size not in ("inherit", "unset")):
        return False
    return None


def is_permalink(el: Any) -> bool:
    """A heading's permalink anchor: Sphinx's and MkDocs' ``<a class="headerlink">``, or a
    link within the page whose whole text is a mark such as ``¶``, ``§``, ``#`` or 🔗."""
    classes = set((el.get("class") or "").lower().split())
    text = "".join(el.itertext()).strip().strip("\u200b\u200c\u200d\u2060\ufeff\ufe0e\ufe0f")
    if "headerlink" in classes:
        return True
    href = el.get("href") or ""
    if not href.startswith("#"):
        return False
    return text in _PERMALINK_MARKS or (not text and bool(classes & _PERMALINK_CLASSES))


def _tidy_pre(raw: str) -> str:
    """Preformatted text keeps its spaces; only newlines are normalised and blank
    lines at its ends trimmed."""
    return raw.replace("\r\n", "\n").replace("\r", "\n").strip("\n").rstrip()
