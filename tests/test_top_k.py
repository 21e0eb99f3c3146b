"""The shared top-k selection: exactly a full sort's choice, ties to the earlier node."""

from __future__ import annotations

import numpy as np
import pytest

from lcr.methods.base import top_candidates, top_indices


def full_sort(scores: np.ndarray, k: int) -> list[int]:
    keep = np.flatnonzero(~np.isnan(scores))
    return keep[np.lexsort((keep, -scores[keep]))][:k].tolist()


@pytest.mark.parametrize("n", [1, 7, 500, 70_000, 300_000])
def test_top_indices_equals_a_full_sort(n: int) -> None:
    rng = np.random.default_rng(n)
    for decimals in (0, 1, 3, 12):  # from almost all tied to almost none
        scores = np.round(rng.random(n), decimals)
        for k in (1, 5, 100, n):
            assert top_indices(scores, k).tolist() == full_sort(scores, k)


def test_mostly_zero_scores_keep_the_earliest_zeros() -> None:
    """A question sharing words with a few chunks: the rest tie at zero."""
    scores = np.zeros(200_000)
    scores[[150_000, 7, 99_999]] = [0.2, 0.5, 0.2]
    assert top_indices(scores, 6).tolist() == [7, 99_999, 150_000, 0, 1, 2]


def test_candidates_hold_every_score_at_the_cut_and_nan_never() -> None:
    rng = np.random.default_rng(1)
    scores = np.floor(rng.random(100_000) * 50)  # a few thousand share each value
    scores[rng.integers(0, 100_000, 50)] = np.nan
    cand = top_candidates(scores, 40)
    kth = np.sort(scores[~np.isnan(scores)])[-40]
    assert cand.tolist() == np.flatnonzero(scores >= kth).tolist()
    assert top_indices(scores, 40).tolist() == full_sort(scores, 40)
    assert top_indices(np.array([np.nan, 1.0, np.nan]), 3).tolist() == [1]
