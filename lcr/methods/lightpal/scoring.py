"""ContextScore(d_i, d_j) for every passage's candidates, resumable.

Each passage is one call to :meth:`lcr.models.base.LLM.continuation_logprobs`:
d_i is encoded once and all its candidates are scored from it, batched (the
pair cut to ``max_tokens`` together, the paper's 1,024). The score is
``lightpal.context_score``: ``sum``, log P_LM(d_j | d_i) summed over d_j's
scored tokens, the paper's (section 4: ContextScore = P_LM(d_j | d_i), no
length normalisation); or ``mean``, that sum per token, lcr's own choice so
that a long candidate does not lose to a short one for its length alone.

The cache holds both parts per pair (the summed log-probability and the token
count), so one scoring pass serves either score. They are kept per pair, in a
row per passage d_i, so when a passage's candidates change (documents added or
removed: lcr.pipeline.collection) only its new pairs are scored. A passage's row goes
into the index's LLM cache as soon as it is scored, so a killed build resumes
without scoring any pair twice. Entries of the first cache format (a passage's
whole candidate list, means only) are still read by ``mean``; ``sum`` scores
those pairs again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from lcr.errors import LLMCallError
from lcr.methods.toolkit import LLMCalls
from lcr.models.base import LLM, Capability, llm_configuration
from lcr.progress import Task
from lcr.store import LLMCache, cache_key

SCORER_NEEDS = frozenset({Capability.CONTINUATION_LOGPROB, Capability.PREFIX_CACHE})
USE_LLM = "llm"  # lightpal.scorer=llm scores with the --llm model
# said when the scorer model is not there (the pipeline checks before any work)
SMALLER_SCORER = "or score with a smaller model: --set lightpal.scorer=smollm2-135m"
# v2: a row per passage, {"pairs": {pair id: [logprob sum, tokens]}}; v1: {"scores": [mean]}
SCORE_VERSION = "lightpal-context-score-v2"
MEAN_ONLY_VERSION = "lightpal-context-score-v1"

ContextScore = Literal["sum", "mean"]
CONTEXT_SCORES: tuple[ContextScore, ...] = ("sum", "mean")


def context_scores(logprobs: np.ndarray, tokens: np.ndarray, kind: ContextScore) -> np.ndarray:
    """The ContextScore of each pair from its summed log-probability and token count:
    the sum itself (the paper's) or the mean per token (0 for a pair with no token)."""
    logprobs = np.asarray(logprobs, dtype=np.float64)
    if kind == "sum":
        return logprobs
    if kind == "mean":
        counts = np.asarray(tokens, dtype=np.float64)
        return np.divide(logprobs, counts, out=np.zeros_like(logprobs), where=counts > 0)
    raise ValueError(f"context_score must be one of {CONTEXT_SCORES}, got {kind!r}")


@dataclass
class ScoringStats:
    pairs: int = 0  # pairs in the graph
    scored: int = 0  # pairs scored by this build
    cached: int = 0  # pairs read back from the cache
    seconds: float = 0.0
    estimate_s: float | None = None  # the up-front estimate for what was left to score

    @property
    def pairs_per_s(self) -> float:
        return self.scored / self.seconds if self.seconds > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "pairs": self.pairs,
            "pairs_scored": self.scored,
            "pairs_cached": self.cached,
            "scoring_s": round(self.seconds, 3),
            "pairs_per_s": round(self.pairs_per_s, 2),
        }
        if self.estimate_s is not None:
            out["estimate_s"] = round(self.estimate_s, 1)
        return out


@dataclass
class PairScorer:
    """Scores each passage's candidates through the cache; see the module docstring."""

    llm: LLM
    cache: LLMCache
    max_tokens: int
    continuation_tokens: int
    context_score: ContextScore = "sum"
    warn: Callable[[str], None] = field(default=lambda message: None)
    stats: ScoringStats = field(default_factory=ScoringStats)

    def __post_init__(self) -> None:
        self.calls = LLMCalls(self.cache, kept="scores")

    def _key(self, prefix: str, continuations: Sequence[str], version: str = SCORE_VERSION) -> str:
        return cache_key(
            version,
            self.cache.llm_identity(self.llm.model_id, llm_configuration(self.llm)),
            self.max_tokens,
            self.continuation_tokens,
            prefix,
            list(continuations),
        )

    def score_all(
        self,
        texts: Sequence[str],
        continuations: Sequence[str],
        candidates: Sequence[np.ndarray],
        task_of: Callable[[int], Task],
    ) -> list[np.ndarray]:
        """ContextScore of each candidate ``continuations[j]`` after ``texts[i]``, per i.

        ``task_of(pairs to score)`` opens the progress task once the count is known.
        """
        n = len(texts)
        out: list[np.ndarray | None] = [None] * n
        todo: list[int] = []
        for i in range(n):
            self.stats.pairs += len(candidates[i])
            conts = [continuations[j] for j in candidates[i]]
            legacy = self._legacy_means(texts[i], conts)
            if legacy is not None:
                out[i] = legacy
                self.stats.cached += len(conts)
            elif conts:
                todo.append(i)
            else:
                out[i] = np.zeros(0)
        known = {i: self._known_pairs(texts[i], [continuations[j] for j in candidates[i]])
                 for i in todo}  # fmt: skip
        for i in [i for i in todo if None not in known[i][0]]:  # every pair already paid
            out[i] = self._scores(known[i][0])
            self.stats.cached += len(candidates[i])
        todo = [i for i in todo if out[i] is None]
        remaining = sum(parts.count(None) for parts, _ in known.values())
        task = task_of(remaining)
        for step, i in enumerate(todo):
            conts = [continuations[j] for j in candidates[i]]
            parts, row = known[i]
            missing = [m for m, part in enumerate(parts) if part is None]
            before = self.calls.seconds
            fresh = self._score(texts[i], [conts[m] for m in missing]) if missing else []
            elapsed = self.calls.seconds - before
            for m, part in zip(missing, fresh, strict=True):
                parts[m] = part
                row[_pair_id(conts[m])] = [part[0], part[1]]
            if missing:  # one entry per passage: every pair it has scored, old and new
                self.calls.store(self._row_key(texts[i]), {"pairs": row})
            self.stats.seconds += elapsed
            self.stats.scored += len(missing)
            self.stats.cached += len(conts) - len(missing)
            out[i] = self._scores(parts)
            if step == 0 and missing:
                self._estimate(remaining, len(todo), elapsed / len(missing))
            task.advance(len(missing))
            task.update(
                description=f"lightpal: scored {step + 1}/{len(todo)} passages, "
                f"{self.stats.pairs_per_s:.1f} pairs/s"
            )
        return [o if o is not None else np.zeros(0) for o in out]

    def _scores(self, parts: Sequence[tuple[float, int] | None]) -> np.ndarray:
        """The ContextScore of each pair from its (summed log-probability, tokens)."""
        whole = [part for part in parts if part is not None]
        return context_scores(
            np.asarray([p[0] for p in whole]), np.asarray([p[1] for p in whole]), self.context_score
        )

    def _legacy_means(self, prefix: str, conts: list[str]) -> np.ndarray | None:
        """A first-format entry (the passage's whole candidate list, means only) serves
        ``mean`` alone; None otherwise."""
        if self.context_score != "mean" or not conts:
            return None
        old: Any = self.calls.lookup(self._key(prefix, conts, MEAN_ONLY_VERSION))
        return (
            np.asarray(old["scores"], dtype=np.float64) if _valid_means(old, len(conts)) else None
        )

    def _row_key(self, prefix: str) -> str:
        """Where every pair scored after ``prefix`` is kept, whatever its candidates: a
        collection that grows changes some passages' candidates, and the pairs that stay
        must not be paid again (lcr.pipeline.collection)."""
        identity = self.cache.llm_identity(self.llm.model_id, llm_configuration(self.llm))
        return cache_key(
            SCORE_VERSION, "row", identity, self.max_tokens, self.continuation_tokens, prefix
        )

    def _known_pairs(
        self, prefix: str, conts: Sequence[str]
    ) -> tuple[list[tuple[float, int] | None], dict[str, list[float]]]:
        """The (summed log-probability, tokens) already paid for of ``prefix`` before each
        of ``conts`` (None: not yet), and the passage's row of scored pairs to extend."""
        hit = self.calls.lookup(self._row_key(prefix))
        pairs = hit.get("pairs") if isinstance(hit, dict) else None
        row = {
            k: [float(v[0]), float(v[1])]
            for k, v in (pairs.items() if isinstance(pairs, dict) else ())
            if isinstance(v, list) and len(v) == 2 and _numbers(v, 2)
        }
        parts: list[tuple[float, int] | None] = []
        for c in conts:
            got = row.get(_pair_id(c))
            parts.append((got[0], int(got[1])) if got is not None else None)
        return parts, row

    def _score(self, prefix: str, conts: list[str]) -> list[tuple[float, int]]:
        """Each pair's summed log-probability and how many tokens of d_j it covers."""
        with self.calls.paying("scoring lightpal's passage pairs"):
            got = self.llm.continuation_logprobs(prefix, conts, max_tokens=self.max_tokens)
        if len(got) != len(conts):
            raise LLMCallError(f"the scorer returned {len(got)} scores for {len(conts)} pairs")
        return [(float(s.logprob), int(s.tokens)) for s in got]

    def _estimate(self, pairs: int, passages: int, seconds_per_pair: float) -> None:
        self.stats.estimate_s = pairs * seconds_per_pair
        self.warn(
            f"lightpal: {pairs} pairs ({passages} passages) to score with {self.llm.model_id}, "
            f"about {_duration(self.stats.estimate_s)} at {1 / max(seconds_per_pair, 1e-9):.1f} "
            "pairs/s (measured on the first passage); a killed build resumes"
        )


def _numbers(values: Any, n: int) -> bool:
    return (
        isinstance(values, list)
        and len(values) == n
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    )


def _pair_id(continuation: str) -> str:
    return hashlib.sha256(continuation.encode("utf-8")).hexdigest()[:16]


def _valid_means(hit: Any, n: int) -> bool:
    return isinstance(hit, dict) and _numbers(hit.get("scores"), n)


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
