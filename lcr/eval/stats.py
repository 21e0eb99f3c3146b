"""Bootstrap confidence intervals and the paired bootstrap test between two methods.

Per-question scores are few (20-50) and far from normal (0/1 recall), so means
get percentile bootstrap intervals, and two methods are compared on the same
questions by resampling questions (paired), as in Koehn (2004).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

RESAMPLES = 2000
SEED = 0


@dataclass(frozen=True)
class Interval:
    mean: float
    low: float
    high: float
    n: int

    def to_json(self) -> dict[str, float | int]:
        return {"mean": self.mean, "low": self.low, "high": self.high, "n": self.n}


@dataclass(frozen=True)
class PairedTest:
    """Mean of (a - b) over shared questions, its interval and a two-sided p-value."""

    diff: float
    low: float
    high: float
    p_value: float
    n: int

    def to_json(self) -> dict[str, float | int]:
        return {
            "diff": self.diff,
            "low": self.low,
            "high": self.high,
            "p_value": self.p_value,
            "n": self.n,
        }


def _resample_means(values: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(values), size=(resamples, len(values)))
    return np.asarray(values[idx].mean(axis=1))


def bootstrap_mean(
    values: Sequence[float], *, level: float = 0.95, resamples: int = RESAMPLES, seed: int = SEED
) -> Interval:
    """Mean of ``values`` with a percentile bootstrap interval (fixed seed: repeatable)."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.size == 0:
        return Interval(float("nan"), float("nan"), float("nan"), 0)
    mean = float(arr.mean())
    if arr.size == 1:
        return Interval(mean, mean, mean, 1)
    means = _resample_means(arr, resamples, seed)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return Interval(mean, float(low), float(high), int(arr.size))


def paired_bootstrap(
    a: Sequence[float],
    b: Sequence[float],
    *,
    level: float = 0.95,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> PairedTest:
    """Paired test of mean(a) - mean(b); ``a[i]`` and ``b[i]`` score the same question.

    The p-value is twice the smaller share of resampled differences on either
    side of zero (at least 1 / resamples, never exactly 0).
    """
    if len(a) != len(b):
        raise ValueError("paired samples must have the same length")
    diff = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    if diff.size == 0:
        return PairedTest(float("nan"), float("nan"), float("nan"), float("nan"), 0)
    mean = float(diff.mean())
    if diff.size == 1 or np.all(diff == diff[0]):
        p = 1.0 if mean == 0 else 1.0 / resamples
        return PairedTest(mean, mean, mean, p if diff.size > 1 else 1.0, int(diff.size))
    means = _resample_means(diff, resamples, seed)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    below = float(np.mean(means <= 0))
    above = float(np.mean(means >= 0))
    p = min(1.0, max(2 * min(below, above), 1.0 / resamples))
    return PairedTest(mean, float(low), float(high), p, int(diff.size))
