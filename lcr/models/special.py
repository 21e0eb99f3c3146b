"""Evidence is data: text in a message never becomes a control token.

A chat template joins messages with control tokens (``<|im_start|>``,
``<|im_end|>``); a tokenizer that parses special tokens in the rendered text
would turn the same characters written inside a document into real turns, and
the model would read a forged conversation (issue 54). Every backend passes
each message's content through :func:`defang` before the template sees it: a
word joiner (U+2060, invisible) goes after the first character of every
special token's text, so the characters stay for the model to read, but no
tokenizer can match the token any more.

The in-process backends know their vocabulary's special tokens exactly; a
server's vocabulary is unknown, so its messages are defanged against
:data:`TEMPLATE_TOKEN`, the shapes of the control tokens chat templates use.
Pure: text in, text out.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from functools import lru_cache
from typing import Any

from lcr.models.base import Message

JOINER = "\u2060"
"""The word joiner put inside a special token's text: invisible, and never a token's part."""

TEMPLATE_TOKEN = re.compile(
    r"<\|[^|<>\s]{1,64}\|>"  # ChatML, Llama 3, Phi: <|im_start|>, <|eot_id|>, <|end|>
    r"|<｜[^｜<>\s]{1,64}｜>"  # DeepSeek's full-width bars
    r"|</?[A-Za-z_][\w.-]{0,40}>"  # <s>, </s>, <tool_call>, <start_of_turn>, <filename>
    r"|\[/?[A-Z][A-Z_]{1,40}\]"  # [INST], [/INST], [TOOL_CALLS]
)
"""The control-token shapes of common chat templates, for a backend whose vocabulary
lcr cannot read (a server): a superset of every preset's special tokens. It breaks
markup such as ``<p>`` too, invisibly: the model reads the same characters."""


def _break(token: str) -> str:
    return token[0] + JOINER + token[1:]


@lru_cache(maxsize=8)
def _pattern(specials: frozenset[str]) -> re.Pattern[str] | None:
    # longest first, so a token that holds a shorter one is matched whole
    alternatives = sorted((s for s in specials if len(s) > 1), key=len, reverse=True)
    if not alternatives:
        return None
    return re.compile("|".join(re.escape(s) for s in alternatives))


def defang(text: str, specials: Collection[str] | None = None) -> str:
    """``text`` with every special token's text broken by :data:`JOINER`: ``specials``
    (a vocabulary's), or the template shapes of :data:`TEMPLATE_TOKEN` when None."""
    if specials is None:
        return TEMPLATE_TOKEN.sub(lambda m: _break(m.group(0)), text)
    pattern = _pattern(frozenset(specials))
    if pattern is None:
        return text
    return pattern.sub(lambda m: _break(m.group(0)), text)


def tokenizer_special_texts(tokenizer: Any) -> frozenset[str]:
    """The text of every token ``tokenizer`` splits out whole: its added tokens (special
    or not) and its named special tokens. A transformers tokenizer, or a ``tokenizers``
    one (its ``get_added_tokens_decoder``), as the estimate reads a model folder."""
    added = getattr(tokenizer, "added_tokens_decoder", None)
    if added is None and hasattr(tokenizer, "get_added_tokens_decoder"):
        added = tokenizer.get_added_tokens_decoder()
    found = {str(getattr(t, "content", t)) for t in (added or {}).values()}
    found.update(str(t) for t in getattr(tokenizer, "all_special_tokens", ()))
    return frozenset(t for t in found if t)


def defang_messages(
    messages: Sequence[Message], specials: Collection[str] | None = None
) -> list[Message]:
    """Each message with its content defanged (:func:`defang`); roles as they were."""
    return [{**m, "content": defang(m["content"], specials)} for m in messages]
