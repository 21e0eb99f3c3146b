"""Text for people: control sequences kept off the terminal, file names shown as they
are on disk, sizes in units, evidence cited as a person cites; and standard output
guarded, so a closed or full stdout is one clear line. Shared by every command module."""

from __future__ import annotations

import errno
import io
import locale
import os
import re
import sys
import textwrap
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import click

from lcr.errors import OutputError
from lcr.evidence import EvidenceItem
from lcr.progress import print_above_bars
from lcr.text.citation import Citation, PageRange

if TYPE_CHECKING:
    from lcr.pipeline import Result

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


_CONTROL_CHAR = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def visible(text: str) -> str:
    """``text`` on one line with control characters shown escaped (``\\n``, ``\\x1b``):
    for file names and messages, where dropping them would print a name other than the
    one on disk, and a newline in a name would split one message into two lines."""
    return _CONTROL_CHAR.sub(lambda m: _NAMED.get(m.group(), f"\\x{ord(m.group()):02x}"), text)


def counted(n: int, plural: str) -> str:
    """``1 node``, ``2 nodes``: an index's counts are named by their plural."""
    return f"{n} {plural[:-1] if n == 1 and plural.endswith('s') else plural}"


def say(text: str = "") -> None:
    """One line of plain output, cleaned and flushed at once (click.echo flushes)."""
    echo(printable(text))


def err(message: str) -> None:
    """``lcr: message`` on stderr, as one line."""
    note(visible(f"lcr: {message}"))


def note(line: str) -> None:
    """A line on stderr, above any progress bars. A stderr that is closed or full leaves
    nowhere to say anything, so that is not an error of its own."""
    with suppress(OSError, ValueError):
        echo(line, err=True)


def echo(text: str, *, err: bool = False) -> None:
    """``click.echo`` that never lands inside progress bars: the one way commands write."""
    if not print_above_bars(text):
        click.echo(text, err=err)


class NonEmptyPath(click.Path):
    """A path option or argument that refuses ``""``: it would mean the current folder,
    which nobody asks for by typing nothing (``-o "$UNSET_VARIABLE"``)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not value:
            self.fail("an empty path; give a file or folder name", param, ctx)
        return super().convert(value, param, ctx)


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
    if "index" in item.extra:  # pooled from several indexes: which one
        where = f"{item.extra['index']}: {where}"
    level = f"  level {item.level}" if item.level else ""
    by = f" ({item.extra['ranked_by']})" if "ranked_by" in item.extra else ""
    line = f"[{rank}] score {item.score:.4g}{by}  {where}{level}"
    line = visible(printable(line))  # a name's escape sequences gone, its newline shown
    if len(line) <= width:
        return [line]
    return textwrap.wrap(line, width=width, subsequent_indent="    ", break_on_hyphens=False)


# ------------------------------------------------------------------ standard output
_WHY = {
    errno.EBADF: "standard output is closed",
    errno.ENOSPC: "no space left on the device standard output goes to",
    errno.EDQUOT: "disk quota exceeded on the device standard output goes to",
    errno.EFBIG: "standard output's file reached this system's file-size limit (ulimit -f)",
    errno.EIO: "input/output error on standard output",
}


def output_failure(code: int | None) -> OutputError:
    """The one-line error for a write to standard output that failed with ``code``."""
    why = _WHY.get(code or 0) or f"standard output failed ({os.strerror(code or errno.EIO)})"
    return OutputError(f"cannot print the output: {why}")


class _StdoutWriter(io.RawIOBase):
    """File descriptor 1 behind ``sys.stdout``. The first failed write raises
    :class:`OutputError` saying why; later output is dropped, so nothing (the
    interpreter's last flush included) fails a second time. A closed pipe stays
    ``BrokenPipeError``: a reader that has gone is not an error (``lcr ... | head``)."""

    def __init__(self, closed: bool) -> None:
        super().__init__()
        self.failure: OutputError | None = output_failure(errno.EBADF) if closed else None
        self._dropping = False

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return 1

    def isatty(self) -> bool:
        return self.failure is None and os.isatty(1)

    def close(self) -> None:  # fd 1 belongs to the process, not to this object
        self.drop_the_rest()

    def drop_the_rest(self) -> None:
        self._dropping = True

    def write(self, data: bytes | bytearray | memoryview) -> int:  # type: ignore[override]
        if self._dropping:
            return len(data)
        if self.failure is None:
            try:
                return os.write(1, data)
            except BrokenPipeError:
                raise
            except OSError as exc:
                self.failure = output_failure(exc.errno)
        self._dropping = True
        raise self.failure


def check_stdout() -> None:
    """Raise now if stdout is known to be closed: for commands whose whole product is
    their output, before they do (or pay for) any work."""
    raw = getattr(getattr(sys.stdout, "buffer", None), "raw", None)
    if isinstance(raw, _StdoutWriter) and raw.failure is not None:
        raw.drop_the_rest()
        raise raw.failure


def _reopen_closed_std_fds() -> set[int]:
    """Put /dev/null on descriptors 0-2 that the caller closed (``>&-``), so that no file
    lcr opens later lands on them, where a library's print would write into an index."""
    closed = set()
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            closed.add(fd)
    for fd in sorted(closed):
        opened = os.open(os.devnull, os.O_RDWR)
        if opened != fd:
            os.dup2(opened, fd)
            os.close(opened)
    return closed


@contextmanager
def guarded_stdout() -> Iterator[_StdoutWriter | None]:
    """The process's standard streams made safe for one run of ``lcr``: closed ones
    reopened on /dev/null, and stdout behind a :class:`_StdoutWriter`, so a closed or
    full stdout is an :class:`OutputError` where it is written. Yields the writer (None
    when a caller such as pytest has replaced stdout, which is then left alone)."""
    closed = _reopen_closed_std_fds()
    if 0 in closed and sys.stdin is None:
        sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115 - the process's
    if 2 in closed and sys.stderr is None:
        sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    original = sys.stdout
    if original is not None and original is not sys.__stdout__:
        yield None
        return
    if original is not None:
        with suppress(OSError, ValueError):
            original.flush()
    writer = _StdoutWriter(closed=1 in closed)
    sys.stdout = io.TextIOWrapper(
        io.BufferedWriter(writer),
        encoding=getattr(original, "encoding", None) or locale.getpreferredencoding(False),
        errors=getattr(original, "errors", None) or "strict",
        line_buffering=bool(getattr(original, "line_buffering", False)),
    )
    try:
        yield writer
    finally:
        writer.drop_the_rest()
        with suppress(OSError, ValueError):
            sys.stdout.flush()
        sys.stdout = original


class UnprintedReports:
    """Build reports that could not be printed (stdout closed or full). The build they
    report is committed, so that is a warning, not a failure: the build carries on, and
    the command ends with one line saying what was committed."""

    def __init__(self) -> None:
        self.failure: OutputError | None = None
        self.committed: dict[str, list[str]] = {}

    def echo(self, line: str, target: str, method: str) -> None:
        if self.failure is None:
            try:
                echo(line)
                return
            except OutputError as exc:
                self.failure = exc
        self.committed.setdefault(target, []).append(method)

    def warn(self) -> None:
        if self.failure is not None:
            why = str(self.failure).removeprefix("cannot print the output: ")
            done = "; ".join(f"{t}: {', '.join(ms)}" for t, ms in self.committed.items())
            err(
                f"warning: the build succeeded and is committed ({done}), "
                f"but its report could not be printed: {why}"
            )


# info entries too long for the one-line summary (--json and --trace show them)
_LONG_INFO = frozenset({"trace", "notebooks"})


def print_result(
    result: Result,
    *,
    answer: bool,
    trace: bool = False,
    most: int | None = None,
    verbose: bool = False,
) -> None:
    """Answer first, then the evidence best first (as ``--json``): score, document, span,
    excerpt, with terminal control sequences removed; with ``trace``, the method's steps.
    ``most`` items are listed (None: all), then how many more there are. The method's
    and the answer step's counts (``info:``) and the LLM's (``usage:``) are internals:
    shown with ``verbose`` (``-v``) only."""
    if answer:  # wrapped to 80 columns, as the rest; --json keeps them as they are
        say(wrapped(f"Q: {result.question}"))
        say(wrapped(f"A: {result.answer}"))
        for line in quote_lines(result):
            say(line)
        say()
    items = result.basis()  # what the answer read; retrieval alone: what was retrieved
    shown = items if most is None else items[:most]
    if result.answer is not None and not items:  # answered, nothing read: no list to head
        say(f"Evidence ({result.method}): none read")
    else:
        say(f"Evidence ({result.method}, {len(items)} node{'' if len(items) == 1 else 's'}):")
    # numbered by position, best first as in --json: the sentences selected from one
    # chunk share its rank, which numbered them 1, 2, 3, 4, 4 (#54)
    for position, it in enumerate(shown, 1):
        for line in evidence_heading(position, it):
            say(line)
        excerpt = " ".join(it.text.split())
        excerpt = excerpt if len(excerpt) <= 220 else excerpt[:217] + "..."
        say(textwrap.fill(excerpt, width=WIDTH, initial_indent="    ", subsequent_indent="    "))
    if len(items) > len(shown):
        say(f"... and {len(items) - len(shown)} more (use --evidence all / --json)")
    info = {k: v for k, v in result.info.items() if k not in _LONG_INFO} if verbose else {}
    note = result.info.get("note")
    if not verbose and isinstance(note, str):  # a sentence for people, not a count
        say(textwrap.fill("note: " + note, WIDTH, subsequent_indent="      "))
    if info:
        listed = ", ".join(f"{k}={v}" for k, v in info.items())
        say(textwrap.fill("info: " + listed, WIDTH, subsequent_indent="      "))
    if trace:
        for step in result.info.get("trace", []):
            say("trace: " + ", ".join(f"{k}={v!r}" for k, v in step.items()))
    u = result.usage
    if u.calls and verbose:
        calls = "1 LLM call" if u.calls == 1 else f"{u.calls} LLM calls"
        say(f"usage: {calls}, {u.prompt_tokens} prompt + {u.completion_tokens} completion tokens")


def quote_place(quote: dict[str, Any]) -> str:
    """Where a quote (``--json``'s ``quotes``) is found: file, pages or characters, and
    the innermost section, as an evidence item is cited."""
    citations = quote.get("citations") or [{}]
    first = citations[0]
    start, end = quote.get("start", first.get("start", "?")), quote.get("end", first.get("end"))
    where = quote.get("pages") or f"chars {start}-{'?' if end is None else end}"
    section = quote.get("section") or []
    text = f"{quote.get('document') or first.get('document', '')} {where}".strip()
    return text + (f", {section[-1]}" if section else "")


def withheld_why(result: Result) -> str:
    """In plain words, why the model's answer was withheld as "not found in the
    document" (the check that withheld it); "" when nothing was withheld."""
    if "withheld_answer" not in result.support:
        return ""
    info = result.info
    check = result.support.get("quote_check")
    if isinstance(check, dict) and check.get("problem"):
        return f"its quote failed the check ({printable(str(check['problem']))})"
    if info.get("restates"):
        return "it only repeats the question's words"
    held, _, asked = str(info.get("unrelated", "")).partition("/")
    if held.isdigit() and asked.isdigit():
        word = "word" if held == "1" else "words"
        return (
            f"the passage that holds it shares only {held} {word} with the question's "
            f"{asked}, so it may answer something else"
        )
    if info.get("off_question"):
        return "the sentences that hold its words never name what was asked"
    found, _, total = str(info.get("located_words", "")).partition("/")
    if found.isdigit() and total.isdigit() and found != total:
        if found == "0":
            return "none of its own words is in the evidence read"
        return f"only {found} of its {total} own words are in the evidence read"
    if info.get("unquoted") or info.get("located") == 0:
        return "no sentence of the evidence read holds its words"
    score = result.support.get("support")
    floor = (result.answer_settings or {}).get("support")
    if isinstance(score, int | float) and isinstance(floor, int | float):
        return f"the evidence read supports it too weakly (score {score:.2f}, below {floor:g})"
    return "lcr's checks found no support for it in the evidence read"


def quote_lines(result: Result, *, why: bool = True) -> list[str]:
    """Under the answer: each quote it rests on and where it is, or, when a check
    withheld the model's answer, why (the answer itself is not shown: it has no words
    of the document behind it); ``why`` False leaves that out (said already)."""
    lines: list[str] = []
    for quote in result.quotes:
        text = printable(" ".join(str(quote.get("text", "")).split()))
        lines.append(
            textwrap.fill(
                f"\u201c{text}\u201d", WIDTH, initial_indent="   ", subsequent_indent="    "
            )
        )
        lines.append(
            textwrap.fill(
                f"-- {printable(quote_place(quote))}",
                WIDTH,
                initial_indent="     ",
                subsequent_indent="       ",
            )
        )
    said = not why and "withheld_answer" in result.support
    share = "" if said else _located_line(result.info, bool(result.quotes))
    if share:
        lines.append(textwrap.fill(share, WIDTH, initial_indent="   ", subsequent_indent="    "))
    check = result.support.get("quote_check")
    if (
        not said
        and isinstance(check, dict)
        and check.get("problem")
        and "withheld_answer" in result.support
    ):
        lines.append(
            textwrap.fill(
                f"(the model's answer was withheld: {printable(str(check['problem']))})",
                WIDTH,
                initial_indent="   ",
                subsequent_indent="    ",
            )
        )
    return lines


def _located_line(info: dict[str, Any], quoted: bool) -> str:
    """Why the model was not asked: a term of the question the document never writes.
    For a long answer lcr grounded by several quotes (``info.located_words``), how much
    of it they hold, when not all; or, when they hold too little to ground it, that it
    has no quote, and why; or that the passage of its one quote is about something else.
    Empty for any other answer."""
    absent = [w for w in str(info.get("absent", "")).split(", ") if w]
    if absent:
        terms = ", ".join(f"\u201c{printable(w)}\u201d" for w in absent)
        plural = "s" if len(absent) > 1 else ""
        never = f"the document never writes the question's word{plural}"
        return f"(the model was not asked: {never} {terms})"
    held, _, asked = str(info.get("unrelated", "")).partition("/")
    if held.isdigit() and asked.isdigit():
        return f"(no quote: its passage has only {held} of the question's {asked} words)"
    words = str(info.get("located_words", ""))
    found, _, total = words.partition("/")
    partial = found.isdigit() and total.isdigit() and found != total
    if info.get("unquoted") and not info.get("off_question") and not partial:
        return "(no quote: no run of sentences read holds the answer's words)"
    if not (found.isdigit() and total.isdigit()) or (found == total and quoted):
        return ""
    held = f"{found} of the answer's {total} words"
    missing = str(info.get("unlocated", ""))
    if quoted:
        return f"(the quotes hold {held}; not in them: {printable(missing)})"
    if info.get("off_question"):
        return "(no quote: the sentences holding its words never name what was asked)"
    return f"(no quote: the sentences read hold only {held})"


def wrapped(text: str) -> str:
    """``text`` filled to :data:`WIDTH` columns, its own line breaks kept, later lines
    indented under the first's text (``Q: ``, ``A: ``)."""
    return "\n".join(
        textwrap.fill(line, width=WIDTH, subsequent_indent="   ") if line else line
        for line in text.splitlines() or [""]
    )
