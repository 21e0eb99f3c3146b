"""Every answer on the words it stands on: after any answer step (the shared one or a
method's own), an answer given without the model's verified quotes gets the quote lcr
finds for it in the evidence read (:func:`lcr.answer.quotes.answer_quote`), so a reader
sees the document's sentence under it, with its file, page and section. A long answer
(several parts, a summary) that no one run of sentences grounds gets a few quotes that
together hold its words (:func:`lcr.answer.covering.cover_quotes`), and ``info.located``
says what share of its words they hold. With ``answer.check=located`` an answer lcr
finds no such sentence for, or a long one whose quotes hold less than
:data:`lcr.answer.covering.COVER_SHARE` of its words, is withheld as "not found": its
words are not in what the model read. Under ``answer.not_found=abstain`` (the default),
whatever the check, two answers are withheld for words never read
(``answer.located_floor``): a long answer whose quotes hold less than that share of its
words, and an answer that only restates the question (:func:`restates_question`), whose
located "quote" would show the question's words, not an answer. A third is withheld for a
quote about something else (``answer.related_floor``): the passage its one quote comes from
holds too few of the question's words (:func:`passage_share`). And with
``answer.unquoted=withhold`` (the default) no answer is shown without a quote: one whose
words were read, but in no run of sentences lcr can show, is withheld too.

It reads only the reply, the question and the evidence, so it costs no tokens. One
rule comes before the step instead (:func:`unwritten_terms`): a question whose rare word
the document never writes is "not found" without asking any model.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Protocol

from lcr.answer.covering import cover_quotes, question_names, root
from lcr.answer.quotes import (
    Quote,
    Span,
    answer_keys,
    answer_quote,
    body_of,
    content_words,
    is_yes_or_no,
    missing_words,
    quotable,
    stem,
    word_forms,
)
from lcr.answer.replies import NOT_FOUND
from lcr.answer.result import AnswerResult
from lcr.answer.terms import absent_terms, question_terms
from lcr.evidence import EvidenceItem
from lcr.text.chunking import split_sentences


class GroundingSettings(Protocol):
    """What grounding reads of the answer step's settings (``AnswerSettings`` has them
    all): a protocol, so that grounding, which the stages call, never imports the
    module that chains them."""

    @property
    def not_found(self) -> str: ...
    @property
    def check(self) -> str: ...
    @property
    def term_zipf(self) -> float: ...
    @property
    def located_floor(self) -> float: ...
    @property
    def related_floor(self) -> float: ...
    @property
    def unquoted(self) -> str: ...


def unwritten_terms(question: str, settings: GroundingSettings, source: str) -> list[str]:
    """Before any answer step: the question's terms (:mod:`lcr.answer.terms`) that
    ``source`` never writes, under ``answer.not_found=abstain`` (none otherwise, or with
    ``answer.term_zipf`` 0). Any one means "not found", and no model is asked."""
    if settings.not_found != "abstain":
        return []
    return absent_terms(question_terms(question, settings.term_zipf), source)


def ground(
    question: str,
    out: AnswerResult,
    settings: GroundingSettings,
    source: str,
    *,
    headings: Sequence[Span] = (),
) -> AnswerResult:
    """``out`` with the quote lcr located for its answer (``info.located`` 1); for a long
    answer no one quote grounds, the quotes that hold at least the share of its words
    :func:`~lcr.answer.covering.cover_quotes` asks (``info.located`` that share,
    ``info.located_words`` found of all, ``info.unlocated`` the words no quote holds,
    ``info.off_question`` 1 when no quote holds a word of the question);
    with ``answer.check=located`` and neither, withheld (``info.located`` 0, or the
    share found). Under abstain, also withheld below ``answer.located_floor`` of its own
    words read (``info.located_words``), or when it only restates the question
    (``info.restates``), or when the passage of its one quote holds less than
    ``answer.related_floor`` of the question's words (``info.related``, and
    ``info.unrelated`` when withheld). A long answer its quotes hold in part, past the
    floor, is given with them; any other answer without a quote is withheld under
    ``answer.unquoted=withhold`` (``info.unquoted``). Unless ``answer.not_found=guess``,
    an answer of one sentence is shown with quotes only when they hold every one of its
    own words (``info.unlocated`` names the others; it is then an answer without a
    quote, withheld under ``answer.unquoted=withhold``): "... and its chemical symbol is
    Fe" is not shown under a quote about the bell's bracket. The part they hold is
    shown only for an answer of several sentences (a summary). A quote
    never takes in a heading's line (``headings``: spans of source.txt). An answer that
    already has the model's verified quotes keeps them (less any heading line they took
    in), and one with none to give is left as it is."""
    if out.quotes and headings:
        out = dataclasses.replace(
            out, quotes=tuple(body_quote(q, headings, source) for q in out.quotes)
        )
    if out.text == NOT_FOUND or out.quotes or not out.used:
        return out
    floor = settings.located_floor if settings.not_found == "abstain" else 0.0
    if floor > 0 and restates_question(out.text, question):
        info = {**out.info, "located": 0, "restates": 1}
        return dataclasses.replace(out, text=NOT_FOUND, withheld=out.text, info=info)
    readable = quotable(out.used, source)  # a summary read: the text it was made from
    strict = settings.not_found != "guess" and len(split_sentences(out.text)) <= 1
    quote = answer_quote(out.text, question, readable, source, headings=headings)
    unlocated: list[str] = []
    if quote is not None and strict:
        unlocated = missing_words(out.text, question, [quote.text])
        if unlocated:  # the rule's tolerance (a state, a middle name) is not a quote's
            quote = None
    if quote is not None:
        info = {**out.info, "located": 1}
        held, asked = (0, 0) if is_yes_or_no(out.text) else passage_share(question, quote, source)
        if asked:
            info["related"] = round(held / asked, 2)
        related = settings.related_floor if settings.not_found == "abstain" else 0.0
        if asked and held / asked < related:
            info["unrelated"] = f"{held}/{asked}"
            return dataclasses.replace(out, text=NOT_FOUND, withheld=out.text, info=info)
        return dataclasses.replace(out, quotes=(quote,), info=info)
    info = {**out.info, "located": 0}
    if unlocated:
        info["unlocated"] = ", ".join(unlocated)
    cover = cover_quotes(out.text, question, readable, source, headings=headings)
    if cover is None:  # a short answer no run holds: are its own words read at all?
        found, keys = words_read(out.text, question, out.used)
        if keys and found < keys:
            info.update(located_words=f"{found}/{keys}")
        unread = keys > 0 and found / keys < floor
    else:
        info.update(located=round(cover.share, 2), located_words=f"{cover.found}/{cover.keys}")
        if cover.missing:
            info["unlocated"] = ", ".join(cover.missing)
        if not cover.on_question:
            info["off_question"] = 1  # no quote holds a word of the question
        if cover.grounded and (not strict or not cover.missing):
            return dataclasses.replace(out, quotes=cover.quotes, info=info)
        unread = cover.share < floor
    located = settings.check == "located" and settings.not_found != "guess"
    if unread or located:
        return dataclasses.replace(out, text=NOT_FOUND, withheld=out.text, info=info)
    if cover is not None and cover.quotes and cover.on_question and not strict:
        return dataclasses.replace(out, quotes=cover.quotes, info=info)  # the part they hold
    if settings.unquoted == "withhold" and settings.not_found == "abstain":
        info["unquoted"] = 1  # read, but in no run of sentences lcr could show
        return dataclasses.replace(out, text=NOT_FOUND, withheld=out.text, info=info)
    return dataclasses.replace(out, info=info)


def body_quote(quote: Quote, headings: Sequence[Span], source: str) -> Quote:
    """``quote`` without the heading lines at the start or end of its pieces (a piece that
    is all heading, or has one inside, is kept as it is)."""
    spans = [body_of(span, headings, source) or span for span in quote.spans]
    if spans == list(quote.spans):
        return quote
    text = " \u2026 ".join(source[s:e] for s, e in spans)
    return dataclasses.replace(quote, text=text, spans=tuple(spans))


def words_read(answer: str, question: str, items: Sequence[EvidenceItem]) -> tuple[int, int]:
    """How many of the answer's own words (:func:`~lcr.answer.quotes.answer_keys`, those
    the question does not give) occur anywhere in the excerpts read, and how many it has
    (0 for an answer made of the question's words): "80 characters" asked of a manual
    that never says 80 has none of its own read."""
    keys, from_question = answer_keys(answer, question)
    if from_question:
        return 0, 0
    read = {stem(word) for item in items for word in word_forms(item.text)}
    return sum(key in read for key in keys), len(keys)


_CHOICE = re.compile(r"\bor\b", re.IGNORECASE)


def restates_question(answer: str, question: str) -> bool:
    """Whether ``answer`` says nothing the question did not: every content word of it is
    the question's ("What genre is the novel from which the fast-food restaurant ... derives
    its name?" "Fast-food"), and it is not a yes or no, the pick of a question offering a
    choice ("X or Y?"), or one of two names the question compares ("Between Greyia and
    Calibanus, which genus contains more species?" "Greyia"). A name the question gives
    for another reason is a restatement: "Foo::Bar" to "What should the Debian package of
    the Perl module Foo::Bar be named?"."""
    if not word_forms(answer) or is_yes_or_no(answer):
        return False
    keys, from_question = answer_keys(answer, question)
    if not keys or not from_question or _CHOICE.search(question):
        return False
    names = question_names(question)
    named = all(root(word) in names for word in content_words(answer))
    return not (named and compared(answer, question))


def compared(name: str, question: str) -> bool:
    """Whether the question sets ``name`` beside another as one of two to choose from:
    "between NAME", "NAME and ...", "... and NAME", "than NAME" (its case aside)."""
    text = re.escape(name.strip(" .,;:!?\"'"))
    if not text:
        return False
    pattern = rf"\b(?:and|or|between|than|versus|vs\.?)\s+{text}\b|\b{text}\s*,?\s+(?:and|or)\b"
    return re.search(pattern, question, re.IGNORECASE) is not None


PASSAGE_REACH = 1500
"""The most characters either side of a quote that its passage reaches, within its
paragraph: a text with no blank lines (a book as one paragraph) still has a passage.
Chosen by hand, not measured against another value; ``related_floor`` was measured with it
(bench/results/answer-step-log.md#a-quote-about-the-question-issue-53)."""
PASSAGE_FLOOR = 200
"""A paragraph shorter than this is a term or a heading: its passage takes in the next.
Chosen by hand; taking in the next paragraph was measured on four held-out manual questions
("not found" from 70 of 83 other documents, 67 taking in paragraphs until 200 characters
both ways): bench/results/answer-step-log.md#no-answer-without-a-quote-issue-53."""


def passage_around(source: str, start: int, end: int, reach: int = PASSAGE_REACH) -> str:
    """The paragraph of ``source`` (between blank lines) that holds ``source[start:end]``,
    cut at ``reach`` characters either side of it. A paragraph shorter than
    :data:`PASSAGE_FLOOR` (a heading, a list's term, a line of an HTML page) takes in the
    one paragraph after it, which explains it: "6.3. Upstream-Contact" by "Line-based
    list: the preferred address(es) to reach the upstream project"."""
    low, high = max(0, start - reach), min(len(source), end + reach)
    left = source.rfind("\n\n", low, start)
    right = source.find("\n\n", end, high)
    first = low if left < 0 else left + 2
    last = high if right < 0 else right
    if last - first < PASSAGE_FLOOR and last < high:  # a term: the paragraph that explains it
        after = source.find("\n\n", last + 2, high)
        last = high if after < 0 else after
    return source[first:last]


def passage_share(question: str, quote: Quote, source: str) -> tuple[int, int]:
    """How many of the question's content words (plural and possessive endings aside) the
    passage a quote comes from holds, and how many there are: a right answer's quote sits
    in a passage about what was asked, while an answer the model brought from elsewhere is
    found under a title or in a sentence on another subject ("Konrad KM-011." asked who ran
    a car rental company). The passage, not the quote, so that a two-step answer found
    under its own title ("Danna Paola.") keeps the paragraph that links it to the question."""
    asked = {stem(word) for word in content_words(question)}
    if not asked or not quote.spans:
        return 0, 0
    passage = passage_around(source, quote.spans[0][0], quote.spans[-1][1])
    held = {stem(word) for word in word_forms(passage)}
    return len(asked & held), len(asked)
