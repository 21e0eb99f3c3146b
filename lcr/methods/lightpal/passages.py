"""Cutting documents into LightPAL's passages, each with its document and exact span.

Two shapes, after the paper's data (section 5.1): ``chars`` cuts each document
into passages of about ``max_chars`` characters on paragraph, then sentence,
boundaries (its Meeting setting, ~1k characters); ``sections`` keeps each
blank-line-separated block whole (ODSum Story, whose stories come divided
into sections; ``lcr eval prepare odsum`` writes them so).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from lcr.text.chunking import paragraph_windows, split_paragraphs
from lcr.text.tokens import count_tokens

PASSAGE_SHAPES = ("chars", "sections")


@dataclass(frozen=True)
class Passage:
    doc: int
    start: int  # offsets into source.txt
    end: int
    text: str


def cut_passages(
    documents: Iterable[tuple[int, int, str]], shape: str, max_chars: int
) -> list[Passage]:
    """Passages of ``(doc index, start offset, text)`` documents, in document order."""
    if shape not in PASSAGE_SHAPES:
        raise ValueError(f"unknown passage shape {shape!r}")
    out: list[Passage] = []
    for doc, start, text in documents:
        if shape == "sections":
            chunks = split_paragraphs(text, offset=start)
        else:
            chunks = paragraph_windows(text, max_chars, count=len, offset=start)
        out.extend(Passage(doc, c.start, c.end, c.text) for c in chunks)
    return out


def head_of(text: str, max_tokens: int) -> str:
    """The start of ``text`` up to about ``max_tokens`` tokens (lcr's model-free count),
    cut at a word boundary; the whole text when ``max_tokens`` is 0."""
    if max_tokens <= 0:
        return text
    words = text.split(" ")
    total = 0
    for i, word in enumerate(words):
        total += count_tokens(word)
        if total > max_tokens:
            return " ".join(words[:i]) if i else word
    return text
