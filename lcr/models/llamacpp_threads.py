"""How many threads llama.cpp should run: the cores other work leaves idle, re-measured.

llama.cpp's threads spin at every barrier, so a thread count above the idle
cores stalls every decode step; :func:`default_threads` picks the count at load
time and :class:`ThreadGovernor` keeps it right while the load changes.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from lcr.errors import UsageError

MAX_THREADS = 512
"""ggml's own limit (``GGML_MAX_N_THREADS``): more crashes llama.cpp rather than failing."""


def fixed_threads() -> int | None:
    """``LCR_THREADS`` when set: a fixed thread count that is never re-measured (a bad
    value is a usage error, exit 2, before anything loads)."""
    raw = os.environ.get("LCR_THREADS", "").strip()
    if not raw:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise UsageError(f"LCR_THREADS must be a whole number, got {raw!r}") from None
    if not 1 <= value <= MAX_THREADS:
        raise UsageError(
            f"LCR_THREADS must be between 1 and {MAX_THREADS}, got {raw}; this machine "
            f"lets lcr use {usable_cores()} cores"
        )
    return value


def usable_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def default_threads() -> int:
    """``LCR_THREADS``, else the cores this process may use that other work leaves idle.

    llama.cpp's threads spin at every barrier, so on a busy machine one thread
    more than there are idle cores is ruinous (docs/speed.md, "Threads"). This is
    the count at load time; `ThreadGovernor` keeps it right as the load changes.
    """
    fixed = fixed_threads()
    if fixed is not None:
        return fixed
    cores = usable_cores()
    return threads_for_load(cores, busy_cores_elsewhere())


def threads_for_load(cores: int, busy_elsewhere: float) -> int:
    """Cores minus the ones other work keeps busy (rounded), at least 1."""
    return max(1, min(cores, cores - int(busy_elsewhere + 0.5)))


CpuSample = tuple[float, float, float]
"""(seconds of busy CPU on the whole machine, seconds of this process's CPU, wall seconds)."""


def cpu_sample() -> CpuSample:
    """Busy CPU time of the machine and of this process, and the wall clock, right now."""
    with open("/proc/stat", encoding="ascii") as f:
        fields = [int(v) for v in f.readline().split()[1:9]]
    ticks = os.sysconf("SC_CLK_TCK")
    busy = (sum(fields) - fields[3] - fields[4]) / ticks
    own = os.times()
    return busy, own.user + own.system, time.monotonic()


def busy_between(a: CpuSample, b: CpuSample) -> float:
    """Cores other processes kept busy between two samples (this process's time taken out)."""
    wall = b[2] - a[2]
    if wall <= 0:
        return 0.0
    return max(0.0, (b[0] - a[0]) - (b[1] - a[1])) / wall


def busy_cores_elsewhere(window_s: float = 0.2) -> float:
    """How many cores other processes keep busy right now (``/proc/stat`` over a short
    window); the 1-minute load average where ``/proc`` is missing."""
    try:
        first = cpu_sample()
        time.sleep(window_s)
        return busy_between(first, cpu_sample())
    except (OSError, ValueError, IndexError):
        return os.getloadavg()[0]


class ThreadGovernor:
    """Re-measures, about once a second while the model works, how many cores other
    processes leave idle, and says when the thread count should change.

    The count chosen at load time goes stale: a job that starts on the other core
    of a 2-core machine halfway through a build made every decode step wait on a
    descheduled thread (a 1.5B GraphReader build crawled at under 1 core's speed).
    """

    def __init__(
        self,
        threads: int,
        cores: int,
        *,
        interval_s: float = 1.0,
        sample: Callable[[], CpuSample] = cpu_sample,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.threads = threads
        self._cores = cores
        self._interval = interval_s
        self._sample = sample
        self._clock = clock
        self._last: CpuSample | None = None
        self._checked_at = float("-inf")
        self.changes = 0

    def check(self) -> int | None:
        """The new thread count when it should change now, else None (a clock read when
        no measurement is due)."""
        now_s = self._clock()
        if now_s - self._checked_at < self._interval:
            return None
        self._checked_at = now_s
        try:
            now = self._sample()
        except (OSError, ValueError, IndexError):
            return None
        last, self._last = self._last, now
        if last is None:
            return None
        wanted = threads_for_load(self._cores, busy_between(last, now))
        if wanted == self.threads:
            return None
        self.threads = wanted
        self.changes += 1
        return wanted
