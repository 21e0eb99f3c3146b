"""The shared answer step: evidence in, answer out, fitted to the model's window.

Every method hands its evidence here in document order; the prompt is the same
for all, so differences in answers come from retrieval alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from lcr.evidence import EvidenceItem, Usage
from lcr.models.base import LLM, Message

SYSTEM_PROMPT = (
    "You answer questions about a document using only the numbered excerpts given. "
    "Answer concisely. If the excerpts do not contain the answer, say that you do not know."
)


def build_messages(question: str, items: list[EvidenceItem]) -> list[Message]:
    excerpts = "\n\n".join(f"[{i}] {it.text}" for i, it in enumerate(items, 1))
    user = f"Excerpts:\n\n{excerpts}\n\nQuestion: {question}\nAnswer:"
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


@dataclass
class FittedEvidence:
    items: list[EvidenceItem]
    dropped: int = 0
    truncated: bool = False


PromptBuilder = Callable[[str, list[EvidenceItem]], list[Message]]
"""Question and evidence to chat messages; a method may bring its paper's own."""


def fit_to_budget(
    question: str,
    items: list[EvidenceItem],
    llm: LLM,
    budget_tokens: int,
    prompt: PromptBuilder = build_messages,
) -> FittedEvidence:
    """Keep items in order while the prompt fits; cut the first single-span item that
    overflows (its span shrinks with it), drop the rest. What is kept is what the
    model reads, so the evidence reported never claims more than was used."""
    overhead = llm.count_tokens("\n".join(m["content"] for m in prompt(question, []))) + 16
    remaining = budget_tokens - overhead
    kept: list[EvidenceItem] = []
    for idx, item in enumerate(items):
        cost = llm.count_tokens(item.text) + 4
        if cost <= remaining:
            kept.append(item)
            remaining -= cost
            continue
        if remaining > 32 and len(item.spans) == 1:
            cut = _cut_to_tokens(item.text, remaining - 4, llm)
            if cut:
                start, _ = item.spans[0]
                kept.append(
                    EvidenceItem(
                        item.id,
                        item.doc,
                        item.level,
                        item.score,
                        cut,
                        [(start, start + len(cut))],
                        {**item.extra, "truncated": True},
                    )
                )
                return FittedEvidence(kept, len(items) - idx - 1, True)
        return FittedEvidence(kept, len(items) - idx, False)
    return FittedEvidence(kept)


def _cut_to_tokens(text: str, max_tokens: int, llm: LLM) -> str:
    """The longest prefix of ``text`` within ``max_tokens`` (binary search on length)."""
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if llm.count_tokens(text[:mid]) <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo]


@dataclass
class AnswerResult:
    text: str
    used: list[EvidenceItem]
    dropped: int
    usage: Usage = field(default_factory=Usage)


def answer(
    question: str,
    items: list[EvidenceItem],
    llm: LLM,
    *,
    max_new_tokens: int = 256,
    context_tokens: int | None = None,
    prompt: PromptBuilder = build_messages,
) -> AnswerResult:
    """Answer ``question`` from ``items`` (already in document order)."""
    window = context_tokens or llm.context_window
    fitted = fit_to_budget(question, items, llm, window - max_new_tokens, prompt)
    before = llm.usage.copy()
    gen = llm.generate(prompt(question, fitted.items), max_new_tokens=max_new_tokens)
    used = llm.usage.minus(before)
    return AnswerResult(gen.text.strip(), fitted.items, fitted.dropped, used)
