"""A fast approximate token count, for chunk sizes when no model tokenizer is given.

Chunk sizes in the papers are in model tokens (RAPTOR 100, PECAN 300,
GraphReader 2k). Loading a tokenizer only to cut chunks is slow and ties the
index to one model, so by default words, numbers and punctuation marks are
counted, a word of more than six characters counting as one token per six
characters. On English prose this lands close to a BPE tokenizer (measured
ratios in tests/test_text.py). The count is additive over whitespace:
``count_tokens(a + " " + b) == count_tokens(a) + count_tokens(b)``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["TokenCounter", "count_tokens"]

TokenCounter = Callable[[str], int]
"""Any function from text to a token count (e.g. a model tokenizer's length)."""

# \w{1,6} cuts a word of length L into ceil(L / 6) matches; each punctuation
# mark or symbol is a token of its own.
_TOKEN = re.compile(r"\w{1,6}|[^\w\s]")


def count_tokens(text: str) -> int:
    """Approximate number of LLM tokens in ``text`` (no tokenizer needed)."""
    return len(_TOKEN.findall(text))
