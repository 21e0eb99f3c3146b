"""Every answer on the words it stands on: after any answer step (the shared one or a
method's own), an answer given without the model's verified quotes gets the quote lcr
finds for it in the evidence read (:func:`lcr.answer.quotes.answer_quote`), so a reader
sees the document's sentence under it, with its file, page and section. A long answer
(several parts, a summary) that no one run of sentences grounds gets a few quotes that
together hold its words (:func:`lcr.answer.covering.cover_quotes`), and ``info.located``
says what share of its words they hold. With ``answer.check=located`` an answer lcr
finds no such sentence for, or a long one whose quotes hold less than
:data:`lcr.answer.covering.COVER_SHARE` of its words, is withheld as "not found": its
words are not in what the model read.

It reads only the reply, the question and the evidence, so it costs no tokens.
"""

from __future__ import annotations

import dataclasses

from lcr.answer.covering import cover_quotes
from lcr.answer.quotes import answer_quote
from lcr.answer.replies import NOT_FOUND
from lcr.answer.shared import AnswerResult, AnswerSettings


def ground(question: str, out: AnswerResult, settings: AnswerSettings, source: str) -> AnswerResult:
    """``out`` with the quote lcr located for its answer (``info.located`` 1); for a long
    answer no one quote grounds, the quotes that hold at least the share of its words
    :func:`~lcr.answer.covering.cover_quotes` asks (``info.located`` that share,
    ``info.located_words`` found of all, ``info.unlocated`` the words no quote holds,
    ``info.off_question`` 1 when no quote holds a word of the question);
    with ``answer.check=located`` and neither, withheld (``info.located`` 0, or the
    share found). An answer that already has the model's verified quotes, or none to
    give, is left as it is."""
    if out.text == NOT_FOUND or out.quotes or not out.used:
        return out
    quote = answer_quote(out.text, question, out.used, source)
    if quote is not None:
        return dataclasses.replace(out, quotes=(quote,), info={**out.info, "located": 1})
    info = {**out.info, "located": 0}
    cover = cover_quotes(out.text, question, out.used, source)
    if cover is not None:
        info.update(located=round(cover.share, 2), located_words=f"{cover.found}/{cover.keys}")
        if cover.missing:
            info["unlocated"] = ", ".join(cover.missing)
        if not cover.on_question:
            info["off_question"] = 1  # no quote holds a word of the question
        if cover.grounded:
            return dataclasses.replace(out, quotes=cover.quotes, info=info)
    if settings.check == "located" and settings.not_found != "guess":
        return dataclasses.replace(out, text=NOT_FOUND, withheld=out.text, info=info)
    return out if cover is None else dataclasses.replace(out, info=info)
