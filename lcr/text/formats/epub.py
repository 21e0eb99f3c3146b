"""EPUB (2 and 3): the spine's documents in reading order, the table of contents
(the EPUB 3 navigation document, else the EPUB 2 NCX) as headings, and the print
edition's pages where the navigation document has a page list.

Read with the standard library's zipfile behind zip-bomb limits; the package
XML (container, OPF, NCX) with an lxml parser that resolves no entities, loads
no DTD and touches no network; each content document with the HTML walker, so
the same markup rules hold for a web page and a chapter. The chapters' h1-h6 are
headings as well as the table of contents' entries (a table often lists only the
chapters, or only the book): those it lists are not repeated.
"""

from __future__ import annotations

import bisect
import posixpath
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urldefrag

from lxml import etree

from lcr.errors import InputError
from lcr.text.formats.assemble import TextAssembler
from lcr.text.formats.html import HtmlWalker, decode_markup, parse_html
from lcr.text.formats.zipsafe import open_zip, read_entry

_CONTAINER_NS = "{urn:oasis:names:tc:opendocument:xmlns:container}"
_OPF_NS = "{http://www.idpf.org/2007/opf}"
_NCX_NS = "{http://www.daisy.org/z3986/2005/ncx/}"

TocEntry = tuple[int, str, str]  # level, title, target (path in the zip, "#fragment" kept)


def _safe_xml(data: bytes, name: str, what: str) -> Any:
    parser = etree.XMLParser(
        resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False, recover=True
    )
    try:
        root = etree.fromstring(data, parser)
    except etree.XMLSyntaxError as exc:
        raise InputError(f"{name} is damaged: its {what} is not XML ({exc})") from None
    if root is None:
        raise InputError(f"{name} is damaged: its {what} is empty")
    return root


def extract_epub(
    source: Path | bytes, name: str, *, warn: Callable[[str], None] | None = None
) -> TextAssembler:
    with open_zip(source, name, "EPUB") as zf:
        opf_path = _rootfile(zf, name)
        opf = _safe_xml(read_entry(zf, opf_path, name), name, opf_path)
        spine, toc_path, nav_path = _spine(opf, posixpath.dirname(opf_path))
        if not spine:
            raise InputError(f"{name} is damaged: its spine lists no documents")
        toc = _toc(zf, name, nav_path, toc_path)
        page_list = _nav_links(zf, name, nav_path, "page-list") if nav_path else []
        out = TextAssembler()
        anchors: dict[str, int] = {}
        chapters: list[tuple[int, list[tuple[int, str, int]]]] = []  # each one's h1-h6
        for path in spine:
            walker = HtmlWalker(out, headings=False)
            anchors[path] = out.offset
            data = read_entry(zf, path, name)
            walker.walk(parse_html(decode_markup(data, f"{name}:{path}", warn), f"{name}:{path}"))
            anchors.update({f"{path}#{k}": v for k, v in walker.anchors.items()})
            chapters.append((anchors[path], walker.headings))
        listed: list[tuple[int, str, int]] = []
        for level, title, target in toc:
            start = anchors.get(target, anchors.get(urldefrag(target)[0]))
            if start is not None and title.split():
                listed.append((level, " ".join(title.split()), start))
        for level, title, start in merge_headings(listed, chapters):
            out.heading(level, title, start)
        for _level, label, target in page_list:  # the print edition's pages, where given
            start = anchors.get(target)
            if start is not None and label.strip():
                out.page(" ".join(label.split()), start)
        if not out.text().strip():
            raise InputError(f"{name} has no text (an EPUB of images only?)")
        return out


def merge_headings(
    listed: list[tuple[int, str, int]],
    chapters: list[tuple[int, list[tuple[int, str, int]]]],
) -> list[tuple[int, str, int]]:
    """The table of contents' entries (level, title, start) and each chapter's own
    h1-h6 (``chapters``: the chapter's start and its headings), as one outline.

    A table of contents often lists only the chapters (or only the book), so the
    sections inside a chapter are named by its headings. A heading the table already
    lists (the last entry of its chapter before it, with the same title, or at the
    same place with a title that holds the other) is not repeated. The others are
    levelled under the table: as the chapter's listed heading says (an h1 listed at
    level 2 puts the chapter's h2 at level 3), else one level below the last entry
    before the chapter's headings.
    Without a table, the headings as they are."""
    if not listed:
        return [h for _start, chapter in chapters for h in chapter]
    entries = sorted(listed, key=lambda e: e[2])
    starts = [e[2] for e in entries]
    merged = list(listed)
    for begins, chapter in chapters:
        if not chapter:
            continue
        found = [_listed_as(entries, starts, begins, title, start) for _l, title, start in chapter]
        matched = [(h[0], e[0]) for h, e in zip(chapter, found, strict=True) if e is not None]
        if matched:  # a heading the table lists: the rest are levelled as it is
            shift = matched[0][1] - matched[0][0]
        else:  # below the last entry before them (the chapter's, a part's, the book's)
            before = _last_before(entries, starts, chapter[0][2])
            top = min(level for level, _title, _start in chapter)
            shift = before[0] + 1 - top if before is not None else 0
        for (level, title, start), entry in zip(chapter, found, strict=True):
            if entry is None:
                merged.append((max(1, level + shift), title, start))
    return sorted(merged, key=lambda e: e[2])


def _listed_as(
    entries: list[tuple[int, str, int]], starts: list[int], begins: int, title: str, start: int
) -> tuple[int, str, int] | None:
    """The table's entry for a chapter's heading, or None: the last entry at or before
    it, within its chapter (from ``begins``), with the same title, or at the same place
    with a title that holds the other ("1. Setup" and "Setup")."""
    before = _last_before(entries, starts, start)
    if before is None or before[2] < begins:
        return None
    listed, shown = before[1].casefold(), title.casefold()
    at_it = before[2] == start and (listed in shown or shown in listed)
    return before if listed == shown or at_it else None


def _last_before(
    entries: list[tuple[int, str, int]], starts: list[int], start: int
) -> tuple[int, str, int] | None:
    """The last entry starting at or before ``start`` (``entries`` sorted by start,
    ``starts`` their starts)."""
    i = bisect.bisect_right(starts, start)
    return entries[i - 1] if i else None


def _rootfile(zf: zipfile.ZipFile, name: str) -> str:
    container = _safe_xml(read_entry(zf, "META-INF/container.xml", name), name, "container")
    for rootfile in container.iter(f"{_CONTAINER_NS}rootfile"):
        path = rootfile.get("full-path")
        if path:
            return path
    raise InputError(f"{name} is damaged: its container names no package document")


def _spine(opf: Any, base: str) -> tuple[list[str], str | None, str | None]:
    """The spine's documents (paths in the zip), the NCX's path and the nav document's."""
    items: dict[str, tuple[str, str]] = {}
    nav_path: str | None = None
    for item in opf.iter(f"{_OPF_NS}item"):
        href, ident = item.get("href"), item.get("id")
        if not href or not ident:
            continue
        path = _join(base, href)
        items[ident] = (path, item.get("media-type", ""))
        if "nav" in (item.get("properties") or "").split():
            nav_path = path
    spine: list[str] = []
    toc_path: str | None = None
    for spine_el in opf.iter(f"{_OPF_NS}spine"):
        toc_id = spine_el.get("toc")
        if toc_id in items:
            toc_path = items[toc_id][0]
        for ref in spine_el.iter(f"{_OPF_NS}itemref"):
            found = items.get(ref.get("idref", ""))
            if found is not None and urldefrag(found[0])[0] not in spine:
                spine.append(urldefrag(found[0])[0])
    return spine, toc_path, nav_path


def _join(base: str, href: str) -> str:
    """A path in the zip from an href relative to ``base`` ("#frag" kept)."""
    path, frag = urldefrag(unquote(href))
    joined = posixpath.normpath(posixpath.join(base, path)) if path else base
    return f"{joined}#{frag}" if frag else joined


def _toc(
    zf: zipfile.ZipFile, name: str, nav_path: str | None, ncx_path: str | None
) -> list[TocEntry]:
    if nav_path is not None:
        entries = _nav_links(zf, name, nav_path, "toc")
        if entries:
            return entries
    if ncx_path is not None:
        return _ncx_toc(_safe_xml(read_entry(zf, ncx_path, name), name, ncx_path), ncx_path)
    return []


def _nav_links(zf: zipfile.ZipFile, name: str, nav_path: str, kind: str) -> list[TocEntry]:
    """EPUB 3: the links of ``<nav epub:type="toc">`` (their depth the list nesting), or
    of the ``page-list`` nav, which maps the print edition's page numbers into the text.
    A document without a typed ``toc`` nav has its first nav taken as the toc."""
    where = f"{name}:{nav_path}"
    root = parse_html(decode_markup(read_entry(zf, nav_path, name), where, None), where)
    navs = [n for n in root.iter("nav") if kind in (n.get("epub:type") or "").split()]
    if not navs and kind == "toc":
        navs = [n for n in root.iter("nav") if not n.get("epub:type")]
    if not navs:
        return []
    base = posixpath.dirname(nav_path)
    entries: list[TocEntry] = []
    for link in navs[0].iter("a"):
        href = link.get("href")
        if not href:
            continue
        depth = sum(1 for a in link.iterancestors() if a.tag == "ol") or 1
        entries.append((depth, link.text_content(), _join(base, href)))
    return entries


def _ncx_toc(ncx: Any, ncx_path: str) -> list[TocEntry]:
    """EPUB 2: the NCX's navPoints, their depth the nesting."""
    base = posixpath.dirname(ncx_path)
    entries: list[TocEntry] = []
    for point in ncx.iter(f"{_NCX_NS}navPoint"):
        label = point.find(f"{_NCX_NS}navLabel/{_NCX_NS}text")
        content = point.find(f"{_NCX_NS}content")
        if label is None or content is None or not content.get("src"):
            continue
        depth = sum(1 for a in point.iterancestors(f"{_NCX_NS}navPoint")) + 1
        entries.append((depth, label.text or "", _join(base, content.get("src"))))
    return entries
