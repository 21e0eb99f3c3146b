"""ContextScore(d_i, d_j) = P_LM(d_j | d_i) for every passage's candidates, resumable.

Each passage is one call to :meth:`lcr.models.base.LLM.continuation_logprobs`:
d_i is encoded once and all its candidates are scored from it, batched; the
score is the mean log-probability per token of d_j (the pair cut to
``max_tokens`` together, the paper's 1,024). The mean is lcr's reading: the
paper's section 4 writes ContextScore as P_LM(d_j | d_i), with no length
normalisation; the mean keeps long candidates from losing to short ones. A
passage's scores go into the index's LLM cache as soon as they exist, so a
killed build resumes without scoring any pair twice; they are kept per pair (a
passage's row), so when its candidates change (documents added or removed) only
the new pairs are scored.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lcr.errors import LcrError, LLMCallError, ModelError
from lcr.models.base import LLM, Capability, Role
from lcr.models.container import Models
from lcr.progress import Task
from lcr.store import LLMCache, cache_key

SCORER_NEEDS = frozenset({Capability.CONTINUATION_LOGPROB, Capability.PREFIX_CACHE})
USE_LLM = "llm"  # lightpal.scorer=llm scores with the --llm model
SCORE_VERSION = "lightpal-context-score-v1"


def check_scorer(name: str) -> None:
    """Fail before any work when the scorer model is not there, saying how to get it."""
    if name == USE_LLM:
        return
    from lcr.models.loading import check_available

    try:
        check_available(name, "llm", "scorer")
    except ModelError as exc:
        raise ModelError(
            f"lightpal's scorer: {exc}; or score with a smaller model: "
            "--set lightpal.scorer=smollm2-135m"
        ) from None


def load_scorer(models: Models, name: str) -> LLM:
    """The scorer LLM, ``models.scorer``: ``--llm`` itself for ``llm`` or when it is the same
    model, else a second model on a backend able to give log-probabilities (checked first)."""
    models.spec.scorer = None if name == USE_LLM else name
    models.require_role(Role.SCORER, SCORER_NEEDS, "lightpal's scorer")
    return models.scorer


@dataclass
class ScoringStats:
    pairs: int = 0  # pairs in the graph
    scored: int = 0  # pairs scored by this build
    cached: int = 0  # pairs read back from the cache
    passages_scored: int = 0
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
    warn: Callable[[str], None] = field(default=lambda message: None)
    stats: ScoringStats = field(default_factory=ScoringStats)

    def _key(self, prefix: str, continuations: Sequence[str]) -> str:
        return cache_key(
            SCORE_VERSION,
            self.cache.llm_identity(self.llm),
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
        """Mean log-prob of each candidate ``continuations[j]`` after ``texts[i]``, per i.

        ``task_of(pairs to score)`` opens the progress task once the count is known.
        """
        n = len(texts)
        out: list[np.ndarray | None] = [None] * n
        keys = [self._key(texts[i], [continuations[j] for j in candidates[i]]) for i in range(n)]
        todo: list[int] = []
        for i in range(n):
            self.stats.pairs += len(candidates[i])
            hit = self.cache.get(keys[i])
            if isinstance(hit, dict) and _valid(hit, len(candidates[i])):
                out[i] = np.asarray(hit["scores"], dtype=np.float64)
                self.stats.cached += len(candidates[i])
            elif len(candidates[i]):
                todo.append(i)
            else:
                out[i] = np.zeros(0)
        known = {i: self._known_pairs(texts[i], [continuations[j] for j in candidates[i]])
                 for i in todo}  # fmt: skip
        remaining = sum(scores.count(None) for scores, _ in known.values())
        task = task_of(remaining)
        for step, i in enumerate(todo):
            conts = [continuations[j] for j in candidates[i]]
            scores, row = known[i]
            missing = [n for n, score in enumerate(scores) if score is None]
            started = time.perf_counter()
            fresh = self._score(texts[i], [conts[n] for n in missing]) if missing else []
            elapsed = time.perf_counter() - started
            for n, value in zip(missing, fresh, strict=True):
                scores[n] = value
                row[_pair_id(conts[n])] = value
            if missing:  # one entry per passage: every pair it has scored, old and new
                self.cache.put(self._row_key(texts[i]), {"pairs": row})
            self.stats.seconds += elapsed
            self.stats.scored += len(missing)
            self.stats.cached += len(conts) - len(missing)
            self.stats.passages_scored += 1 if missing else 0
            out[i] = np.asarray(scores, dtype=np.float64)
            if step == 0 and missing:
                self._estimate(remaining, len(todo), elapsed / len(missing))
            task.advance(len(conts))
            task.update(
                description=f"lightpal: scored {step + 1}/{len(todo)} passages, "
                f"{self.stats.pairs_per_s:.1f} pairs/s"
            )
        return [o if o is not None else np.zeros(0) for o in out]

    def _row_key(self, prefix: str) -> str:
        """Where every pair scored after ``prefix`` is kept, whatever its candidates: a
        collection that grows changes some passages' candidates, and the pairs that stay
        must not be paid again (lcr.collection)."""
        identity = self.cache.llm_identity(self.llm)
        return cache_key(
            SCORE_VERSION, "row", identity, self.max_tokens, self.continuation_tokens, prefix
        )

    def _known_pairs(
        self, prefix: str, conts: Sequence[str]
    ) -> tuple[list[float | None], dict[str, float]]:
        """The scores already paid for of ``prefix`` before each of ``conts`` (None: not
        yet), and the passage's row of scored pairs to extend."""
        hit = self.cache.get(self._row_key(prefix))
        pairs = hit.get("pairs") if isinstance(hit, dict) else None
        row = {
            k: float(v)
            for k, v in (pairs.items() if isinstance(pairs, dict) else ())
            if isinstance(v, (int, float)) and not isinstance(v, bool)
        }
        return [row.get(_pair_id(c)) for c in conts], row

    def _score(self, prefix: str, conts: list[str]) -> list[float]:
        try:
            got = self.llm.continuation_logprobs(prefix, conts, max_tokens=self.max_tokens)
        except LcrError:
            raise
        except Exception as exc:
            raise LLMCallError(
                f"the scorer failed ({exc.__class__.__name__}: {exc}); scores already "
                "written are kept, run the same command again to resume"
            ) from exc
        if len(got) != len(conts):
            raise LLMCallError(f"the scorer returned {len(got)} scores for {len(conts)} pairs")
        return [float(s.mean) for s in got]

    def _estimate(self, pairs: int, passages: int, seconds_per_pair: float) -> None:
        self.stats.estimate_s = pairs * seconds_per_pair
        self.warn(
            f"lightpal: {pairs} pairs ({passages} passages) to score with {self.llm.model_id}, "
            f"about {_duration(self.stats.estimate_s)} at {1 / max(seconds_per_pair, 1e-9):.1f} "
            "pairs/s (measured on the first passage); a killed build resumes"
        )


def _pair_id(continuation: str) -> str:
    return hashlib.sha256(continuation.encode("utf-8")).hexdigest()[:16]


def _valid(hit: Any, n: int) -> bool:
    return (
        isinstance(hit, dict)
        and isinstance(hit.get("scores"), list)
        and len(hit["scores"]) == n
        and all(isinstance(s, (int, float)) for s in hit["scores"])
    )


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
