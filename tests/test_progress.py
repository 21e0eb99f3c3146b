"""Plain progress lines for logs: silent for short work, throttled for long work."""

from __future__ import annotations

from lcr.progress import LineProgress, progress_mode


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_short_work_says_nothing() -> None:
    lines: list[str] = []
    clock = FakeClock()
    progress = LineProgress(lines.append, every=60, clock=clock)
    task = progress.task("pecan: level 1: 3 batches", total=3)
    for _ in range(3):
        clock.now += 15
        task.advance()
    assert lines == []


def test_long_work_reports_at_most_once_a_period_and_when_it_ends() -> None:
    lines: list[str] = []
    clock = FakeClock()
    progress = LineProgress(lines.append, every=60, clock=clock)
    task = progress.task("eval", total=10)
    for _ in range(10):
        clock.now += 25
        task.advance()
    # due at 75 s (3 done) and 150 s (6 done, 75 s after the first), 225 s (9); then the end
    assert lines == [
        "eval: 3/10, 1m15s elapsed, eta 2m55s",
        "eval: 6/10, 2m30s elapsed, eta 1m40s",
        "eval: 9/10, 3m45s elapsed, eta 0m25s",
        "eval: 10/10, 4m10s elapsed, done",
    ]
    clock.now += 100
    task.advance()  # past the total: nothing more
    task.update(description="eval again")
    assert len(lines) == 4


def test_a_task_without_total_counts_and_messages_pass_through() -> None:
    lines: list[str] = []
    clock = FakeClock()
    progress = LineProgress(lines.append, every=10, clock=clock)
    task = progress.task("summaries")
    clock.now = 3600 + 61
    task.advance(4)
    progress.log("waiting for another lcr process")
    assert lines == ["summaries: 4, 1h01m01s elapsed", "waiting for another lcr process"]


def test_mode_is_lines_off_a_terminal_and_off_when_quiet() -> None:
    # pytest captures stderr: not a terminal
    assert progress_mode(False) == "lines"
    assert progress_mode(False, bars_need_stdout=False) == "lines"
    assert progress_mode(True) == "off"
