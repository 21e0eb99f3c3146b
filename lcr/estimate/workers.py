"""What N workers buy: the indexes' build times spread over N workers, longest first,
each to the worker that is free soonest (the order a cluster run hands them out in,
near enough). A pure function of the estimates, no I/O.

The longest index bounds the run: no number of workers makes it shorter than that.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

from lcr.estimate.figures import Range


def longest_first(durations: Sequence[float], workers: int) -> float:
    """The wall time of ``durations`` on ``workers`` workers, each next-longest task going
    to the worker free soonest (greedy, longest first: at most 4/3 of the best order)."""
    if workers < 1:
        raise ValueError("workers must be at least 1")
    loads = [0.0] * min(workers, max(1, len(durations)))
    for duration in sorted(durations, reverse=True):
        heapq.heapreplace(loads, loads[0] + duration)
    return max(loads)


@dataclass(frozen=True)
class Spread:
    """One run's time on ``workers`` workers, against one worker, and the longest index."""

    workers: int
    seconds: Range
    serial: Range
    longest: Range

    def to_json(self) -> dict[str, object]:
        return {
            "workers": self.workers,
            "seconds": self.seconds.to_json(),
            "serial_seconds": self.serial.to_json(),
            "longest_seconds": self.longest.to_json(),
        }


def spread(times: Sequence[Range], workers: int) -> Spread:
    """Each index's time (every method it builds) spread over ``workers`` workers: the
    expected times longest first, and the upper bounds likewise."""
    expected = [t.expected for t in times]
    high = [t.high for t in times]
    return Spread(
        workers,
        Range(longest_first(expected, workers), longest_first(high, workers)),
        Range(sum(expected), sum(high)),
        Range(max(expected, default=0.0), max(high, default=0.0)),
    )
