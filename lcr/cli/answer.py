"""How ``ask`` and ``retrieve`` show a result: on a terminal the answer appears as the
model writes it (:class:`AnswerScreen`); ``--answer-only`` prints the answer alone;
``--evidence N`` bounds the evidence listed. ``--json`` and output to a pipe or a file
are whole results only: nothing is printed until the result is complete.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

from lcr.cli.output import (
    WIDTH,
    echo,
    note,
    print_result,
    printable,
    quote_lines,
    say,
    withheld_why,
    wrapped,
)
from lcr.errors import UsageError
from lcr.progress import bars_paused

if TYPE_CHECKING:
    from lcr.pipeline import Result

DEFAULT_EVIDENCE = 5
_INDENT = "   "  # under "A: ", as the plain answer is wrapped


class EvidenceCount(click.ParamType):
    """``--evidence``: a count of items, or ``all`` (None)."""

    name = "N|all"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if value is None or isinstance(value, int):
            return value
        text = str(value).strip().lower()
        if text == "all":
            return None
        if text.isdigit():
            return int(text)
        self.fail(f"{value!r} is not a count of items or 'all'", param, ctx)


def evidence_option(f: Any) -> Any:
    return click.option(
        "--evidence",
        "evidence",
        type=EvidenceCount(),
        metavar="N|all",
        default=str(DEFAULT_EVIDENCE),
        show_default=True,
        help="Evidence items listed in plain output, best first (N or all); "
        "--json always has every one.",
    )(f)


def answer_only_option(f: Any) -> Any:
    return click.option(
        "--answer-only",
        is_flag=True,
        help="Print only each answer, as the model wrote it (a string for scripts).",
    )(f)


def verbose_option(f: Any) -> Any:
    return click.option(
        "--verbose",
        "-v",
        is_flag=True,
        envvar="LCR_VERBOSE",
        help="Also print the method's and the answer step's counts (info:) and the LLM's "
        "calls and tokens (usage:). [env: LCR_VERBOSE=1]",
    )(f)


def stdout_is_terminal() -> bool:
    return sys.stdout.isatty()


@dataclass
class ResultOutput:
    """What the options ask for, for every result of one command."""

    as_json: bool
    answer_only: bool = False
    evidence: int | None = DEFAULT_EVIDENCE  # items listed; None: all
    trace: bool = False
    quiet: bool = False
    verbose: bool = False  # the info: and usage: lines

    def __post_init__(self) -> None:
        if self.as_json and self.answer_only:
            raise UsageError("--answer-only and --json are two different outputs: give one")

    @contextmanager
    def screen(self, question: str, answering: bool) -> Iterator[AnswerScreen | None]:
        """An :class:`AnswerScreen` when the answer can be shown as it is written (plain
        output to a terminal); its line is ended whatever happens inside."""
        if not answering or self.as_json or self.answer_only or not stdout_is_terminal():
            yield None
            return
        shown = AnswerScreen(question, say_reading=not self.quiet)
        with shown:
            yield shown

    def show(self, result: Result, answer: bool, screen: AnswerScreen | None) -> None:
        if self.as_json:
            echo(json.dumps(result.to_json(), ensure_ascii=False))
        elif self.answer_only:
            echo(printable(result.answer or ""))
        else:
            if screen is not None:
                answer_text = result.answer or ""
                why = withheld_why(result) if screen.replaced(answer_text) else ""
                screen.settle(answer_text, quote_lines(result, why=not why), why)
            print_result(
                result,
                answer=answer and screen is None,
                trace=self.trace,
                most=self.evidence,
                verbose=self.verbose,
            )


class AnswerScreen:
    """``lcr ask`` on a terminal: the question, how much evidence the model reads (on
    stderr, a progress line), then the answer word by word as the model writes it,
    wrapped to 80 columns as the whole answer would be. The answer step may change the
    reply after it was shown (a reply saying the evidence lacks the answer becomes
    "not found in the document", or a check withholds it): :meth:`settle` then
    adds one line, ``final answer: ...``, so what was shown is never taken for the
    answer when it is not. Progress bars are off the screen while it writes."""

    def __init__(self, question: str, *, say_reading: bool = True) -> None:
        self.question = question
        self.shown = ""  # the reply's text as written so far
        self._say_reading = say_reading
        self._begun = False
        self._line: _LineWrapper | None = None
        self._exits = ExitStack()

    def __enter__(self) -> AnswerScreen:
        return self

    def __exit__(self, *exc: object) -> None:
        self._end_line()
        self._exits.close()

    def reading(self, tokens: int) -> None:
        self._begin()
        if self._say_reading:
            note(f"reading {tokens:,} tokens of evidence")

    def text(self, piece: str) -> None:
        self._begin()
        if self._line is None:
            piece = piece.lstrip()  # the answer is shown as it is kept: stripped
            if not piece:
                return
            self._line = _LineWrapper(_write, start="A: ")
        self.shown += piece
        self._line.feed(printable(piece))

    def replaced(self, answer: str) -> bool:
        """Whether the screen showed a reply that ``answer`` replaces."""
        return bool(self.shown) and " ".join(self.shown.split()) != " ".join(answer.split())

    def settle(self, answer: str, quotes: Sequence[str] = (), why: str = "") -> None:
        """After the answer step: whatever of the answer the screen has not shown, then
        the lines under it (``quotes``: what it quotes, or why it was withheld). A reply
        the quote check must pass is never streamed (the step does not stream it), so it
        appears here whole, once verified, or as "not found in the document". A reply
        shown and then withheld is followed by ``final answer: ...`` and, in the same
        line, ``why`` the reply above was withheld."""
        self._end_line()
        self._exits.close()
        if not self._begun:
            say(wrapped(f"Q: {self.question}"))
        if not self.shown:
            say(wrapped(f"A: {answer}"))
        elif self.replaced(answer):
            because = f" (the answer above was withheld: {why})" if why else ""
            say(wrapped(f"final answer: {answer}{because}"))
        for line in quotes:
            say(line)
        say()

    def _begin(self) -> None:
        if not self._begun:
            self._begun = True
            self._exits.enter_context(bars_paused())
            say(wrapped(f"Q: {self.question}"))

    def _end_line(self) -> None:
        if self._line is not None and self._line.open:
            self._line.close()


def _write(text: str) -> None:
    click.echo(text, nl=False)  # flushed at once: each word appears as it is written


class _LineWrapper:
    """Text laid out as it arrives, as ``textwrap`` lays out a whole paragraph: a word
    is written once it is complete, on the current line if it fits :data:`WIDTH`,
    else on the next under :data:`_INDENT`; a word longer than a line is cut."""

    def __init__(self, write: Callable[[str], None], start: str) -> None:
        self._write = write
        write(start)
        self._column = len(start)
        self._word = ""
        self._space = False  # a space is due before the next word
        self.open = True

    def feed(self, text: str) -> None:
        for ch in text:
            if ch == "\n":
                self._flush()
                self._write("\n")
                self._column, self._space = 0, False
            elif ch.isspace():
                self._flush()
                self._space = self._column > 0
            else:
                self._word += ch

    def close(self) -> None:
        self._flush()
        self._write("\n")
        self.open = False

    def _flush(self) -> None:
        word, self._word = self._word, ""
        while word:
            gap = 1 if self._space else 0
            if self._column + gap + len(word) <= WIDTH:
                self._write(" " * gap + word)
                self._column += gap + len(word)
                break
            room = WIDTH - self._column - gap
            if self._column > len(_INDENT) and (len(word) <= WIDTH - len(_INDENT) or room < 1):
                self._write("\n" + _INDENT)  # the word goes whole onto the next line
                self._column = len(_INDENT)
            else:  # longer than a line: as much as fits here, the rest below
                self._write(" " * gap + word[:room] + "\n" + _INDENT)
                word, self._column = word[room:], len(_INDENT)
            self._space = False
