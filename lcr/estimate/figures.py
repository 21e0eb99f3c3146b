"""The figures an estimate is made of: pure records, no models, no I/O.

Each method's ``estimate`` hook (``lcr.methods.base.Method.estimate``) returns a
:class:`BuildEstimate` computed from the same chunking code its build runs, so a
count the input decides (GraphReader's extraction calls, LightPAL's pairs,
PECAN's first level, RAPTOR's leaves) is exact, and a count the LLM's replies
decide is a :class:`Range` with the reasoning that bounds it in ``basis``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Range:
    """An expected value and an upper bound (equal when the input decides it).

    ``likely``, where measured, is where most builds land (e.g. the 10th-90th
    percentile of real builds around the expected value): the bound says what
    cannot be exceeded, which for a stochastic count is far from what is typical.
    It is the figure's own and is not carried through sums.
    """

    expected: float
    high: float
    likely: tuple[float, float] | None = None

    @classmethod
    def exact(cls, value: float) -> Range:
        return cls(value, value)

    @property
    def is_exact(self) -> bool:
        return self.expected == self.high

    def __add__(self, other: Range) -> Range:
        return Range(self.expected + other.expected, self.high + other.high)

    def scaled(self, factor: float) -> Range:
        return Range(self.expected * factor, self.high * factor)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"expected": _rounded(self.expected), "high": _rounded(self.high)}
        if self.likely is not None:
            out["likely"] = [_rounded(self.likely[0]), _rounded(self.likely[1])]
        return out


ZERO = Range(0, 0)


def _rounded(value: float) -> float:
    return round(value) if abs(value) >= 100 or value == int(value) else float(f"{value:.4g}")


@dataclass(frozen=True)
class LLMWork:
    """What a build asks of one LLM role, as the backend's usage counters will count it.

    ``encoded_tokens`` are the prompt tokens actually computed (a shared prefix
    counted in ``prompt_tokens`` but reused from the KV cache is not): time
    follows them. ``batched`` calls decode several at a time (``generate_batch``).
    """

    role: str  # "llm" or "scorer"
    model: str
    calls: Range
    prompt_tokens: Range
    completion_tokens: Range
    encoded_tokens: Range
    batched: bool = True
    kind: str = "generate"  # generate | score (log-probs, no decoding) | attention
    # sum over reply tokens of the context each is decoded after (prompt + reply so far):
    # a decoded token costs more the longer its context (measured: 4x at 1.6k tokens)
    decode_context: Range = Range(0, 0)
    # sum over calls of each call's encoded prompt tokens squared: where a prompt's
    # tokens cost more the longer it is (PECAN's batches on transformers), the time
    # model's superlinear term reads it; 0 prices every prompt token alike
    prompt_square: Range = Range(0, 0)
    # the prompt length the calls run at, where a probe there is wanted (0: none)
    probe_length: int = 0
    # decoding passes per call where calls go to the GPU together and share their steps
    # (PECAN's batches on CUDA: a group of four decoded in one batch's time on an H200);
    # None: one pass a call. Applied on CUDA only: on a CPU a step of g rows costs g
    decode_share_on_gpu: Range | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "model": self.model,
            "calls": self.calls.to_json(),
            "prompt_tokens": self.prompt_tokens.to_json(),
            "completion_tokens": self.completion_tokens.to_json(),
            "encoded_tokens": self.encoded_tokens.to_json(),
            "decode_context": self.decode_context.to_json(),
            "kind": self.kind,
            "decode_share_on_gpu": (
                self.decode_share_on_gpu.to_json() if self.decode_share_on_gpu else None
            ),
        }


@dataclass(frozen=True)
class BuildEstimate:
    """One method's build, estimated: the LLM work, embedder passes, what is stored.

    ``basis`` says, per figure, where it comes from ("exact: one extraction per
    chunk", "range: ..."), for the user and for ``--json``.
    """

    llm: LLMWork | None = None
    embedder_texts: Range = ZERO  # texts the embedder encodes (one pass each)
    nodes: Range = ZERO  # stored nodes (for disk)
    stored_text_chars: Range = ZERO  # characters of stored node text
    vectors: Range = ZERO  # stored embedding rows
    # CPU seconds a first build in a process pays whatever the input's size: the
    # libraries it imports and their first calls (MixPR's 1.7 s against its 0.3 s of
    # work on a 103k-token book); divided by the CPU share the load leaves
    setup_cpu_s: float = 0.0
    basis: dict[str, str] = field(default_factory=dict)
