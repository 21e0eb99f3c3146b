"""Every answer on the words it stands on: after any answer step (the shared one or a
method's own), an answer given without the model's verified quotes gets the quote lcr
finds for it in the evidence read (:func:`lcr.answer.quotes.answer_quote`), so a reader
sees the document's sentence under it, with its file, page and section. With
``answer.check=located`` an answer lcr finds no such sentence for is withheld as
"not found": its words are not in what the model read.

It reads only the reply, the question and the evidence, so it costs no tokens.
"""

from __future__ import annotations

import dataclasses

from lcr.answer.quotes import answer_quote
from lcr.answer.replies import NOT_FOUND
from lcr.answer.shared import AnswerResult, AnswerSettings


def ground(question: str, out: AnswerResult, settings: AnswerSettings, source: str) -> AnswerResult:
    """``out`` with the quote lcr located for its answer (``info.located`` 1), or, with
    ``answer.check=located`` and none found, withheld (``info.located`` 0). An answer
    that already has the model's verified quotes, or none to give, is left as it is."""
    if out.text == NOT_FOUND or out.quotes or not out.used:
        return out
    quote = answer_quote(out.text, question, out.used, source)
    if quote is not None:
        return dataclasses.replace(out, quotes=(quote,), info={**out.info, "located": 1})
    if settings.check == "located" and settings.not_found != "guess":
        info = {**out.info, "located": 0}
        return dataclasses.replace(out, text=NOT_FOUND, withheld=out.text, info=info)
    return out
