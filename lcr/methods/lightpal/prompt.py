"""The paper's answer prompt (appendix A.2, Story): sections under their story, then the question.

Passages arrive in document order; each document's passages go under one
``# STORY:`` heading (the document's name), each as a ``## SECTION:`` (its id).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from lcr.answer.quotes import ask_for_quote, reply_form
from lcr.evidence import EvidenceItem
from lcr.models.base import Message

INSTRUCTION = (
    "You are a helpful assistant that gives long answer to question based on long stories. "
    "Write an answer based on the following question and the separated sections in the "
    "stories. Please write the answer in approximately {words} words. When summarizing, use "
    "only information explicitly stated in the provided story. Do not use your own knowledge "
    "or make inferences beyond what is directly stated in the text."
)


def summary_prompt(
    names: Sequence[str], words: int, quote: bool = False
) -> Callable[[str, list[EvidenceItem]], list[Message]]:
    """A prompt builder for :func:`lcr.answer.shared.answer`; ``names`` are the documents'
    names. With ``quote`` (``answer.check`` quote or both) the shared step's request for
    the sentence the answer rests on follows the instruction, and its reply form takes
    the place of ``SUMMARY:``."""
    # "story", not "sections": asked for "the sentence of the sections", the default 1.5B
    # model began 5 of 8 quotes with a section id ("Quote: p2") (docs/methods/lightpal.md)
    ask = ask_for_quote("story") if quote else ""
    tail = reply_form("story") if quote else "SUMMARY:"

    def build(question: str, items: list[EvidenceItem]) -> list[Message]:
        parts = [INSTRUCTION.format(words=words) + ask, ""]
        current: int | None = None
        for it in items:
            if it.doc != current:
                current = it.doc
                name = names[it.doc] if 0 <= it.doc < len(names) else str(it.doc)
                parts.append(f"# STORY: {name}")
            parts.append(f"## SECTION: {it.id}")
            parts.append(it.text)
        parts += ["", f"QUESTION: {question}", tail]
        return [{"role": "user", "content": "\n".join(parts)}]

    return build
