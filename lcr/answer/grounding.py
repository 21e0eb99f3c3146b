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
located "quote" would show the question's words, not an answer.

It reads only the reply, the question and the evidence, so it costs no tokens.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from lcr.answer.covering import cover_quotes, question_names, root
from lcr.answer.quotes import YES_NO, answer_keys, answer_quote, content_words, stem, word_forms
from lcr.answer.replies import NOT_FOUND
from lcr.answer.shared import AnswerResult, AnswerSettings
from lcr.evidence import EvidenceItem


def ground(question: str, out: AnswerResult, settings: AnswerSettings, source: str) -> AnswerResult:
    """``out`` with the quote lcr located for its answer (``info.located`` 1); for a long
    answer no one quote grounds, the quotes that hold at least the share of its words
    :func:`~lcr.answer.covering.cover_quotes` asks (``info.located`` that share,
    ``info.located_words`` found of all, ``info.unlocated`` the words no quote holds,
    ``info.off_question`` 1 when no quote holds a word of the question);
    with ``answer.check=located`` and neither, withheld (``info.located`` 0, or the
    share found). Under abstain, also withheld below ``answer.located_floor`` of its own
    words read (``info.located_words``), or when it only restates the question
    (``info.restates``). An answer that already has the model's verified quotes, or none
    to give, is left as it is."""
    if out.text == NOT_FOUND or out.quotes or not out.used:
        return out
    floor = settings.located_floor if settings.not_found == "abstain" else 0.0
    if floor > 0 and restates_question(out.text, question):
        info = {**out.info, "located": 0, "restates": 1}
        return dataclasses.replace(out, text=NOT_FOUND, withheld=out.text, info=info)
    quote = answer_quote(out.text, question, out.used, source)
    if quote is not None:
        return dataclasses.replace(out, quotes=(quote,), info={**out.info, "located": 1})
    info = {**out.info, "located": 0}
    cover = cover_quotes(out.text, question, out.used, source)
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
        if cover.grounded:
            return dataclasses.replace(out, quotes=cover.quotes, info=info)
        unread = cover.share < floor
    if unread or (settings.check == "located" and settings.not_found != "guess"):
        return dataclasses.replace(out, text=NOT_FOUND, withheld=out.text, info=info)
    return dataclasses.replace(out, info=info)


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
    choice ("X or Y?"), or made of names the question gives (a single named as its album
    is, "Love Drunk")."""
    forms = word_forms(answer)
    if not forms or (forms[0] in YES_NO and len(content_words(answer)) <= 1):
        return False
    keys, from_question = answer_keys(answer, question)
    if not keys or not from_question or _CHOICE.search(question):
        return False
    names = question_names(question)
    return not all(root(word) in names for word in content_words(answer))
