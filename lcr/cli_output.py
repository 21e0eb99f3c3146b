"""Text for people: control sequences kept off the terminal, file names shown as they
are on disk, sizes in units, evidence cited as a person cites. Shared by every command
module."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field

import click

from lcr.citation import Citation, PageRange
from lcr.evidence import EvidenceItem

WIDTH = 80  # plain output fits a classic terminal

# terminal control sequences (CSI, OSC, other escapes) and every other C0/C1 control
# character but tab and newline: text shown to people never drives their terminal
_CONTROL = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves, erasing
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC: window title, hyperlinks
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"  # DCS, SOS, PM, APC strings
    r"|\x1b[ -/]*[0-~]?"  # two- and three-byte escapes (reset, charsets), a lone ESC
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f]"
)


def printable(text: str) -> str:
    """``text`` without terminal control sequences, for output read by people (not JSON)."""
    return _CONTROL.sub("", text)


_CONTROL_CHAR = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def visible(text: str) -> str:
    """``text`` with control characters shown as ``\\xNN``: for file names and messages,
    where dropping them would print a name other than the one on disk."""
    return _CONTROL_CHAR.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def say(text: str = "") -> None:
    """One line of plain output, cleaned and flushed at once (click.echo flushes)."""
    click.echo(printable(text))


def err(message: str) -> None:
    click.echo(visible(f"lcr: {message}"), err=True)


def human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


@dataclass
class _Place:
    """Consecutive citations of one document and section, read as one place: their
    pages joined into one range where they touch, or their character ranges listed."""

    doc: int
    document: str
    section: tuple[str, ...]
    pages: PageRange | None
    chars: list[tuple[int, int]] = field(default_factory=list)

    def absorbs(self, c: Citation) -> bool:
        """Take ``c`` in if it is the same document and section, and its pages touch
        these (or neither has pages); False leaves it for a place of its own."""
        if (c.doc, c.section) != (self.doc, self.section):
            return False
        if self.pages is None and c.pages is None:
            self.chars.append((c.start, c.end))
            return True
        mine, theirs = self.pages, c.pages
        if mine is None or theirs is None:
            return False
        if theirs.first > mine.last + 1 or theirs.last < mine.first - 1:
            return False
        low = mine if mine.first <= theirs.first else theirs
        high = mine if mine.last >= theirs.last else theirs
        self.pages = PageRange(low.first, high.last, low.first_label, high.last_label)
        return True

    def pieces(self) -> int:
        return 1 if self.pages is not None else len(self.chars)


def _places(citations: Sequence[Citation]) -> list[_Place]:
    places: list[_Place] = []
    for c in citations:
        if not places or not places[-1].absorbs(c):
            chars = [(c.start, c.end)] if c.pages is None else []
            places.append(_Place(c.doc, c.document, c.section, c.pages, chars))
    return places


def cite_text(citations: Sequence[Citation], most: int = 3) -> str:
    """Citations as a person writes them: ``bashref.pdf p. 42, 3.2 Shell Commands``,
    ``pp. 41-42`` for a range, ``notes.txt chars 120-480`` (offsets within the file)
    where a document has no pages; the section is the innermost heading. Places are
    joined by ``;`` (a repeated file name left out); past ``most`` pages or character
    ranges, ``(+N more)``."""
    places = _places(citations)
    parts: list[str] = []
    shown = 0
    previous: int | None = None
    for place in places:
        if shown >= most:
            break
        if place.pages is not None:
            where, shown = place.pages.text(), shown + 1
        else:
            taken = place.chars[: most - shown]
            where, shown = "chars " + ", ".join(f"{s}-{e}" for s, e in taken), shown + len(taken)
        text = where if place.doc == previous else f"{place.document} {where}"
        if place.section:
            text += f", {place.section[-1]}"
        parts.append(text)
        previous = place.doc
    more = sum(p.pieces() for p in places) - shown
    return "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")


def evidence_heading(rank: int, item: EvidenceItem, width: int = WIDTH) -> list[str]:
    """An evidence item's first line(s): rank, score, where it is cited from, and its
    level for a summary; wrapped under a four-space indent past ``width``."""
    where = cite_text(item.citations) or item.document or f"document {item.doc}"
    level = f"  level {item.level}" if item.level else ""
    line = f"[{rank}] score {item.score:.4g}  {where}{level}"
    if len(line) <= width:
        return [line]
    return textwrap.wrap(line, width=width, subsequent_indent="    ", break_on_hyphens=False)
