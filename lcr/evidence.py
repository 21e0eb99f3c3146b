"""What a retrieval returns and what an answer costs: shared by every method."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from lcr.text.citation import Citation

Configuration = dict[str, str | None]
"""What besides the model id decides an LLM's outputs: backend, device, dtype, quantize
(lcr.models.base makes one from a loaded LLM; a cache key and a result record it)."""


def cpu_configuration(backend: str) -> Configuration:
    """How a backend ran before lcr recorded configurations: on the CPU, unquantised
    (lcr's GPU paths had never run), llama.cpp with the GGUF as it is, transformers in
    fp32; an OpenAI-compatible server as a server. What older cache keys belong to."""
    dtype = {"llamacpp": "gguf", "transformers": "float32"}.get(backend)
    device = "server" if backend == "openai" else "cpu"
    return {"backend": backend, "device": device, "dtype": dtype, "quantize": None}


@dataclass
class Usage:
    """LLM cost counters; methods and the answer step add to the same object."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0
    # prompt tokens served from a reused cache (a shared prefix) instead of being
    # encoded again; included in prompt_tokens, so the tokens actually encoded
    # are prompt_tokens - cached_tokens
    cached_tokens: int = 0

    def add(
        self, prompt_tokens: int, completion_tokens: int, calls: int = 1, cached_tokens: int = 0
    ) -> None:
        self.prompt_tokens += prompt_tokens
        self.completion_tokens += completion_tokens
        self.calls += calls
        self.cached_tokens += cached_tokens

    def copy(self) -> Usage:
        return Usage(self.prompt_tokens, self.completion_tokens, self.calls, self.cached_tokens)

    def merged(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.calls + other.calls,
            self.cached_tokens + other.cached_tokens,
        )

    def minus(self, earlier: Usage) -> Usage:
        """What was spent since ``earlier``, a copy taken of the same counters."""
        return Usage(
            self.prompt_tokens - earlier.prompt_tokens,
            self.completion_tokens - earlier.completion_tokens,
            self.calls - earlier.calls,
            self.cached_tokens - earlier.cached_tokens,
        )

    def to_json(self) -> dict[str, int]:
        return asdict(self)


@dataclass(frozen=True)
class EvidenceItem:
    """One retrieved node: its text and the exact spans of source.txt it rests on.

    ``spans`` are ``(start, end)`` character offsets into the index's source.txt;
    a summary node points at its leaves' spans, so every answer traces back.
    ``document`` (the name of document ``doc``) and ``citations`` (one per span and
    document: offsets within the document, pages, section) are what a person reads;
    the pipeline gives them once an item is final (:func:`lcr.result.cite` returns the
    cited copy); an item is never changed after it is made.
    """

    id: str
    doc: int
    level: int
    score: float
    text: str
    spans: list[tuple[int, int]]
    extra: dict[str, Any] = field(default_factory=dict)
    document: str | None = None
    citations: list[Citation] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "doc": self.doc,
            "level": self.level,
            "score": float(self.score),
            "text": self.text,
            "spans": [[int(s), int(e)] for s, e in self.spans],
        }
        out.update(self.extra)
        if self.document is not None:
            out["document"] = self.document
            out["citations"] = [c.to_json() for c in self.citations]
        return out


class AnswerState:
    """What a retrieval keeps for its method's own answer step (PECAN's KV cache,
    GraphReader's notebooks): each such step declares its subclass
    (:class:`lcr.answer.step.AnswerStep`'s ``state_type``)."""


@dataclass(frozen=True)
class Evidence:
    """A method's answer to ``retrieve``: items in the order the LLM should read them.

    ``info`` carries method-specific facts worth showing (MixPR's mode, RAPTOR's
    traversal, iterations used); ``usage`` counts LLM calls made while retrieving
    (measured by the pipeline around the phase). ``state`` is what the method's own
    answer step reads besides the items; it is never serialised, and the pipeline
    lets it go once nothing will answer from it (a copy without it, :meth:`finished`).
    """

    method: str
    items: list[EvidenceItem]
    info: dict[str, Any] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    state: AnswerState | None = field(default=None, repr=False, compare=False)

    def finished(
        self, items: Sequence[EvidenceItem], usage: Usage, *, keep_state: bool = False
    ) -> Evidence:
        """This evidence as the pipeline hands it on: its final items, what retrieving
        cost, and its state only while an answer step will read it."""
        state = self.state if keep_state else None
        return dataclasses.replace(self, items=list(items), usage=usage, state=state)

    def in_rank_order(self) -> list[EvidenceItem]:
        """:func:`rank_order` of the items."""
        return rank_order(self.items)

    def in_document_order(self) -> list[EvidenceItem]:
        """:func:`document_order` of the items."""
        return document_order(self.items)


def document_order(items: Sequence[EvidenceItem]) -> list[EvidenceItem]:
    """Where they stand in source.txt (first span's start, then id): the view of rank
    order that is shown or read in document order, never stored as the evidence's."""
    return sorted(items, key=lambda it: (min((s for s, _ in it.spans), default=0), it.id))


def rank_order(items: Sequence[EvidenceItem]) -> list[EvidenceItem]:
    """Best first: by the method's ``rank`` where every item has one, else by score
    (ties keep the method's order); an item without a rank gets its position."""
    ranked = list(items)
    if all(isinstance(it.extra.get("rank"), int) for it in ranked):
        ranked.sort(key=lambda it: int(it.extra["rank"]))
    else:
        ranked.sort(key=lambda it: -it.score)
    return [
        it if "rank" in it.extra else dataclasses.replace(it, extra={**it.extra, "rank": n})
        for n, it in enumerate(ranked, 1)
    ]


def merge_spans(
    spans: Sequence[tuple[int, int]],
    source: str | None = None,
    breaks: Sequence[int] = (),
) -> list[tuple[int, int]]:
    """Sorted union of ``[start, end)`` spans; overlapping or touching ones become one.

    Empty spans are dropped. With ``source``, spans separated only by whitespace
    count as touching (chunks do not own the blanks between them), unless one of
    ``breaks`` (the start offsets of documents) lies in the gap: a span never
    crosses documents.
    """
    out: list[tuple[int, int]] = []
    for s, e in sorted((s, e) for s, e in spans if e > s):
        if out:
            ps, pe = out[-1]
            gap_blank = (
                source is not None
                and s > pe
                and not source[pe:s].strip()
                and not any(pe < b <= s for b in breaks)
            )
            if s <= pe or gap_blank:
                out[-1] = (ps, max(pe, e))
                continue
        out.append((s, e))
    return out
