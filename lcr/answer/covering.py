"""Quotes for long answers: an answer of several parts, or a summary, grounded by a few
located quotes that together hold its words (issue 53).

:func:`lcr.answer.quotes.answer_quote` grounds an answer in one run of one or two
sentences. A long answer (a date and a name, a finder, place and year, the plot of a
story) spreads its words over the document, so no one run holds them. Here such an
answer gets a small set of quotes instead, each the same kind of run (one or two
consecutive sentences of one evidence item the model read, one span of source.txt),
chosen greedily to cover the answer's words (:func:`long_keys`: its content words the
question does not give, other than :data:`FRAME_WORDS`, in any tense or number):

1. only an answer that the single-run rule does not ground and that has at least
   :data:`LONG_FROM` words that rule looks for comes here; a shorter answer keeps the
   single-run rule alone, unchanged;
2. each quote must hold at least :data:`MIN_NEW` words no earlier quote holds (one
   common word a sentence happens to share is not a part of the answer found);
3. at most :data:`MAX_QUOTES` quotes, the run adding the most words first (then the
   shortest, then retrieval's order);
4. the answer is grounded when the quotes hold at least :data:`COVER_SHARE` of its
   words and, where the question names someone or something (a capitalised word after
   its first), the evidence item of at least one quote holds such a name: excerpts
   that never name what the question asks about show the answer's words, not that
   they speak of it (an answer copied from another document's excerpts, the name left
   to the question; the name may sit in a sentence beside the quote: "They called the
   girl Elsie").
   The share, and the words no quote holds, say how much of it stands on the quotes.

Pure: text in, spans and shares out; it costs no tokens, and every quote is the
document's text by construction. It grounds the answer's words, not its reasoning.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from lcr.answer.injection_guard import not_support
from lcr.answer.quotes import (
    Quote,
    Span,
    _segments,
    answer_keys,
    bare,
    body_of,
    content_words,
    held_stems,
    in_source,
    listing,
    run_sentences,
    word_forms,
)
from lcr.evidence import EvidenceItem

LONG_FROM = 4
"""The fewest answer words (stems the question does not give) for the several-quote rule: below
it the single-run rule of :func:`lcr.answer.quotes.enough` decides alone. Chosen by hand, not
measured: of the 86 stored HotpotQA answers none reaches it
(bench/results/answer-step-log.md#quotes-for-long-answers-issue-53)."""
MAX_QUOTES = 4
"""The most quotes one answer is grounded by. Chosen by hand on SQuALITY dev's 12 own answers,
not measured against another value
(bench/results/answer-step-log.md#quotes-for-long-answers-issue-53)."""
MIN_NEW = 2
"""The fewest answer words a quote must add to those the earlier quotes hold. Chosen by hand,
not measured against another value
(bench/results/answer-step-log.md#quotes-for-long-answers-issue-53)."""
RUN_SENTENCES = 2
"""The most consecutive sentences of one evidence item one quote spans: the located quote's
(:data:`lcr.answer.quotes.LOCATE_SENTENCES`), chosen by hand, not measured
(bench/results/answer-step-log.md#quotes-for-long-answers-issue-53)."""
COVER_SHARE = 0.75
"""The share of the answer's words the quotes must hold for the answer to be grounded. Chosen by
hand on SQuALITY dev's 12 own answers, not measured against another value: with it no own answer
met another story's evidence grounded (top share 0.33)
(bench/results/answer-step-log.md#quotes-for-long-answers-issue-53)."""
LOCATED_FLOOR = 0.25
"""``answer.located_floor``'s default: below this share of its own words in the quotes (a
short answer's: anywhere in the excerpts read), an answer was not read but written from the
model's own knowledge ("R is named R because it was created by the R Foundation" asked of
R's manuals, none of its words found); chosen
below the lowest share of the SQuALITY dev answers on their own story that any quote held
(0.43) (docs/answer-step.md#answers-from-words-never-read-issue-53)."""
RELATED_FLOOR = 0.2
"""``answer.related_floor``'s default: below this share of the question's content words in
the passage a located quote comes from, the quote speaks of something else ("Konrad KM-011."
under "Who was the chief executive officer of the second largest US car rental company?").
Chosen on HotpotQA dev: the highest value that withholds none of the 38 answerable
questions' answers (docs/answer-step.md#a-quote-about-the-question-issue-53)."""


_FRAME_WORD_LIST = """story character characters described describes shown shows plot
narrator reader author throughout however also ultimately eventually overall could would
will can may might must shall should some any every each all both only very more most
much many other another such own same just even ever still then while into onto through
about over after before during between upon until within"""
FRAME_WORDS = frozenset(_FRAME_WORD_LIST.split())
"""Words a long answer says about the document or uses to join its parts ("X is a
character in the story who is described as ..."), which hold none of its facts: they
are not words to find (on top of :mod:`lcr.answer.quotes`'s function words)."""

_ENDINGS = (("'s", ""), ("ies", "y"), ("ied", "y"), ("ing", ""), ("ed", ""), ("es", ""))


def root(word: str) -> str:
    """A word (lower case, as :func:`lcr.answer.quotes.content_words` gives it) with a
    possessive, plural or verb ending dropped, and a final ``e``: "moves", "moved" and
    "move" are one word here, "invaded" and "invade", "stories" and "story" (a long
    answer retells in its own tense what the document says in another)."""
    for ending, put in _ENDINGS:
        if word.endswith(ending) and len(word) - len(ending) >= 3:
            word = word[: -len(ending)] + put
            break
    else:
        if word.endswith("s") and not word.endswith("ss") and len(word) > 3:
            word = word[:-1]
    return word[:-1] if word.endswith("e") and len(word) > 3 else word


def long_keys(answer: str, question: str) -> list[str]:
    """The words to find for a long answer: its content words (as :func:`root` gives
    them), less :data:`FRAME_WORDS`, single letters (the initials of "T.R.S.
    Aphrodite" name nothing alone) and the question's words, each once."""
    given = {root(w) for w in content_words(question)}
    keys: list[str] = []
    for word in content_words(answer):
        key = root(word)
        letter = len(word) == 1 and word.isalpha()
        if not letter and word not in FRAME_WORDS and key not in given and key not in keys:
            keys.append(key)
    return keys


@dataclass(frozen=True)
class Cover:
    """The quotes found for a long answer (in the order of the answer's words they
    hold), how many of its words they hold, and the words none holds."""

    quotes: tuple[Quote, ...]
    found: int
    keys: int
    missing: tuple[str, ...]
    on_question: bool = True  # a quote's item holds a name the question gives, if any

    @property
    def share(self) -> float:
        return self.found / self.keys if self.keys else 0.0

    @property
    def grounded(self) -> bool:
        return bool(self.quotes) and self.share >= COVER_SHARE and self.on_question


@dataclass(frozen=True)
class _Run:
    span: Span
    item: str
    rank: int
    held: frozenset[int]  # the answer words' positions in its keys
    asked: bool  # its item holds a name the question gives


def _runs(
    keys: Sequence[str],
    asked: set[str],
    items: Sequence[EvidenceItem],
    source: str,
    answer: str = "",
    question: str = "",
    headings: Sequence[Span] = (),
) -> list[_Run]:
    """Every run of one to :data:`RUN_SENTENCES` sentences of an item that stands as one
    span of source.txt and holds at least :data:`MIN_NEW` of the answer's words (words it
    states, not those it denies; heading lines and lines of lists left out)."""
    out: list[_Run] = []
    for rank, item in enumerate(items):
        segments = _segments(item, source)
        if segments is None:
            continue  # text of its own (a summary): nothing in source.txt to quote
        sentences = run_sentences(item.text, segments)
        named = [{root(w) for w in word_forms(c.text)} for c in sentences]
        about = any(asked & s for s in named)  # the item names what the question names
        for first in range(len(sentences)):
            for last in range(first, min(first + RUN_SENTENCES, len(sentences))):
                start, end = sentences[first].start, sentences[last].end
                span = in_source(segments, start, end)
                if span is None:  # never across the selection's gap mark
                    continue
                span = body_of(span, headings, source)
                if span is None:
                    continue
                text = source[span[0] : span[1]]
                if listing(text) or bare(text):
                    continue
                stems = held_stems([text], answer, question, root)
                held = frozenset(i for i, k in enumerate(keys) if k in stems)
                if len(held) >= MIN_NEW and not not_support(text, source):
                    out.append(_Run(span, item.id, rank, held, about))
    return out


_NAME = re.compile(r"[^\W\d_]+")
_TITLES = frozenset({"Mr", "Mrs", "Ms", "Miss", "Dr", "I"})


def question_names(question: str) -> set[str]:
    """The names the question gives: its capitalised words after the first (titles
    such as "Mr" aside), as :func:`root` gives them."""
    words = _NAME.findall(question)[1:]
    return {root(w.lower()) for w in words if w[0].isupper() and w not in _TITLES}


def _overlaps(span: Span, taken: Sequence[Span]) -> bool:
    return any(span[0] < e and s < span[1] for s, e in taken)


def cover_quotes(
    answer: str,
    question: str,
    items: Sequence[EvidenceItem],
    source: str,
    *,
    headings: Sequence[Span] = (),
) -> Cover | None:
    """The quotes that together hold the most of a long answer's words (the module's
    rules), as they stand in source.txt, whether they ground it or not; None for an
    answer of fewer than :data:`LONG_FROM` words the question does not give (the
    single-run rule's)."""
    short, from_question = answer_keys(answer, question)
    if from_question or len(short) < LONG_FROM:
        return None
    keys = long_keys(answer, question)
    asked = question_names(question)
    runs = _runs(keys, asked, items, source, answer, question, headings)
    covered: set[int] = set()
    chosen: list[tuple[_Run, int]] = []  # each run, and the first answer word it added
    while len(chosen) < MAX_QUOTES:
        taken = [r.span for r, _ in chosen]
        best: tuple[tuple[int, int, int, int], _Run] | None = None
        for run in runs:
            new = len(run.held - covered)
            if new < MIN_NEW or _overlaps(run.span, taken):
                continue
            order = (-new, run.span[1] - run.span[0], run.rank, run.span[0])
            if best is None or order < best[0]:
                best = (order, run)
        if best is None:
            break
        chosen.append((best[1], min(best[1].held - covered)))
        covered |= best[1].held
    runs = [r for r, _ in sorted(chosen, key=lambda pair: pair[1])]  # the answer's order
    quotes = tuple(Quote(source[r.span[0] : r.span[1]], r.item, (r.span,), "lcr") for r in runs)
    on_question = not asked or any(r.asked for r in runs)
    return Cover(quotes, len(covered), len(keys), _missing(answer, keys, covered), on_question)


def _missing(answer: str, keys: Sequence[str], covered: set[int]) -> tuple[str, ...]:
    """The answer's words (lower case) that no quote holds, each once."""
    left = {k for i, k in enumerate(keys) if i not in covered}
    out: list[str] = []
    for word in content_words(answer):
        if root(word) in left:
            out.append(word)
            left.discard(root(word))
    return tuple(out)
