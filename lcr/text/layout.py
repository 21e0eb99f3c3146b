"""Where each document's pages and headings fall: the index's ``layout.json`` sidecar.

Extraction (PDF, EPUB, HTML, DOCX, Markdown) happens once, at index time, into
the plain text of ``source.txt``; what a person cites a passage by, the page and
the section, is kept beside it here so a span can be turned back into
"bashref.pdf p. 42, 3.2 Shell Commands". Offsets are characters from the start
of the document's own text (not of ``source.txt``), so a document's layout does
not change when other documents are joined before it. A plain-text document has
an empty layout; an index without the file (built before it existed) reads as
all-empty layouts.

File format (``version`` 1)::

    {"version": 1, "documents": [
        {"pages": [[start, "label"], ...], "headings": [[start, level, "title"], ...]},
        ...                                   # one per source, in the manifest's order
    ]}
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lcr.atomic import atomic_write_json

LAYOUT_FILE = "layout.json"
LAYOUT_VERSION = 1


class LayoutError(ValueError):
    """layout.json is not of the documented form (the index reports it as damage)."""


@dataclass(frozen=True)
class Page:
    """A page starts at ``start``; ``label`` is its printed label ("iv", "42") or,
    where the document has none, its 1-based number as text."""

    start: int
    label: str


@dataclass(frozen=True)
class Heading:
    """A heading of depth ``level`` (1 = top) whose section starts at ``start``."""

    start: int
    level: int
    title: str


@dataclass(frozen=True)
class DocumentLayout:
    """One document's pages and headings, each sorted by ``start``."""

    pages: tuple[Page, ...] = ()
    headings: tuple[Heading, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "pages": [[p.start, p.label] for p in self.pages],
            "headings": [[h.start, h.level, h.title] for h in self.headings],
        }

    @classmethod
    def from_json(cls, raw: Any) -> DocumentLayout:
        if not isinstance(raw, dict):
            raise LayoutError("a document's layout is not an object")
        try:
            pages = tuple(Page(_int(s), _str(label)) for s, label in raw.get("pages", []))
            headings = tuple(
                Heading(_int(s), _int(level), _str(title))
                for s, level, title in raw.get("headings", [])
            )
        except (TypeError, ValueError) as exc:
            raise LayoutError(f"a document's layout is malformed ({exc})") from None
        return cls(pages, headings)


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{value!r} is not a non-negative whole number")
    return value


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not text")
    return value


def write_layout(index_dir: Path, layouts: Sequence[DocumentLayout]) -> None:
    """Write ``layout.json`` atomically into ``index_dir``."""
    atomic_write_json(
        index_dir / LAYOUT_FILE,
        {"version": LAYOUT_VERSION, "documents": [d.to_json() for d in layouts]},
    )


def read_layout(index_dir: Path, n_documents: int) -> list[DocumentLayout]:
    """The layouts of an index's ``n_documents`` sources (all empty without the file)."""
    path = index_dir / LAYOUT_FILE
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return [DocumentLayout() for _ in range(n_documents)]
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise LayoutError(f"{LAYOUT_FILE} cannot be read ({exc})") from None
    if not isinstance(raw, dict) or raw.get("version") != LAYOUT_VERSION:
        raise LayoutError(f"{LAYOUT_FILE} is not layout version {LAYOUT_VERSION}")
    docs = raw.get("documents")
    if not isinstance(docs, list) or len(docs) != n_documents:
        raise LayoutError(f"{LAYOUT_FILE} does not list one layout per source")
    return [DocumentLayout.from_json(d) for d in docs]
