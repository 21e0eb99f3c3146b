"""What a query's phases spend: LLM tokens and calls, and wall time.

The pipeline opens :func:`spending` around retrieval and around answering, so
every method is measured the same way and none has to time or count itself.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from lcr.evidence import Usage

if TYPE_CHECKING:
    from lcr.models.container import Models


@dataclass
class Spent:
    """What one phase spent; filled in when its ``with`` block ends (an exception too)."""

    usage: Usage = field(default_factory=Usage)
    seconds: float = 0.0


@contextmanager
def spending(models: Models) -> Iterator[Spent]:
    """Measure the block: the LLM usage of every role ``models`` holds (a model loaded
    inside the block counts from zero) and the wall time."""
    spent = Spent()
    before = models.usage_snapshot()
    started = time.perf_counter()
    try:
        yield spent
    finally:
        spent.seconds = time.perf_counter() - started
        spent.usage = models.usage_snapshot().minus(before)
