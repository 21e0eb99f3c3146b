"""A pytest plugin: a quick-tier test (not marked ``slow``) that takes more than a few
seconds of CPU fails, and the slowest quick tests are listed at the end.

CPU time (this process and the subprocesses it waited for), not wall time: on a
shared 2-core machine a test's wall time follows the load, its CPU time follows
the test. The limit is ``LCR_QUICK_TEST_SECONDS`` (default 20 s: twenty times
what a quick test should take, so a loaded machine never trips it while a test
that loads a real model, which takes minutes, always does).
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Iterator

import pytest

LIMIT_ENV = "LCR_QUICK_TEST_SECONDS"
DEFAULT_LIMIT = 20.0
SHOWN = 5
_timings: list[tuple[float, float, str]] = []  # (CPU s, wall s, test id)


def limit() -> float:
    return float(os.environ.get(LIMIT_ENV, DEFAULT_LIMIT))


def cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    if item.get_closest_marker("slow") is not None:
        return (yield)
    cpu, wall = cpu_seconds(), time.perf_counter()
    result = yield
    cpu, wall = cpu_seconds() - cpu, time.perf_counter() - wall
    _timings.append((cpu, wall, item.nodeid))
    if cpu > limit():
        pytest.fail(
            f"a quick-tier test took {cpu:.1f} s of CPU ({wall:.1f} s wall), over "
            f"{limit():g} s ({LIMIT_ENV}): make it quicker or mark it slow",
            pytrace=False,
        )
    return result


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _timings:
        return
    terminalreporter.section(f"slowest quick-tier tests (limit {limit():g} s of CPU)")
    for cpu, wall, nodeid in sorted(_timings, reverse=True)[:SHOWN]:
        terminalreporter.write_line(f"{cpu:7.2f} s CPU {wall:7.2f} s wall  {nodeid}")
