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


def test_a_long_generation_logs_tokens_and_rate_at_most_once_a_minute() -> None:
    """Issue #31: eight minutes of one PECAN call said nothing; now a line a minute."""
    from lcr.progress import LineProgress, TokenMeter

    now = [0.0]
    lines: list[str] = []
    progress = LineProgress(lines.append, every=60.0, clock=lambda: now[0])
    meter = TokenMeter(progress, "generating with m", 512, clock=lambda: now[0])
    now[0] = 30.0  # reading the prompt
    for _ in range(300):  # 2 tokens/s
        meter.step()
        now[0] += 0.5
    meter.finish()
    assert len(lines) == 3, lines  # at 1m30s and 2m30s, then the last one
    # no ETA: the model stops before its limit of 512 tokens, mostly far before
    assert lines[0].startswith("generating with m (2.0 tokens/s, at most 512): ")
    assert "eta" not in lines[0]
    assert lines[-1].endswith(", done") and "300/300" in lines[-1]
    short = TokenMeter(progress, "generating with m", 8, clock=lambda: now[0])
    for _ in range(8):
        short.step()
    short.finish()
    assert len(lines) == 3  # a short call stays silent


def test_a_log_hears_from_a_long_call_every_period_with_an_eta_from_the_first_call() -> None:
    """Issue #41: a RAPTOR build wrote nothing to its log for 2 minutes (one call ran);
    now the newest unfinished task speaks every period, its ETA from the rate so far."""
    lines: list[str] = []
    clock = FakeClock()
    progress = LineProgress(lines.append, every=30, clock=clock)
    old = progress.task("chunking", total=None)  # never finished: not the one spoken for
    task = progress.task("raptor: layer 1: summaries", total=4)
    for now in (10, 29, 31, 45):
        clock.now = now
        progress.tick()
    assert lines == ["raptor: layer 1: summaries: 0/4, 0m31s elapsed"]
    clock.now = 40
    task.advance()  # the first call returns: 40 s a call
    clock.now = 61
    progress.tick()
    assert lines[-1] == "raptor: layer 1: summaries: 1/4, 1m01s elapsed, eta 3m03s"
    progress.log("a note")
    clock.now = 80
    progress.tick()  # the log spoke at 61 s: quiet until 91 s
    assert len(lines) == 3
    task.advance(3)
    assert lines[-1] == "raptor: layer 1: summaries: 4/4, 1m20s elapsed, done"
    clock.now = 200
    progress.tick()  # every task is done but the stale one, which is older: silence
    assert lines[-1].endswith("done")
    old.advance()


def test_large_counts_are_digits_not_exponents() -> None:
    """Issue #41: a model's join said "8.28375e+08/1.11732e+09" in a log."""
    lines: list[str] = []
    clock = FakeClock()
    progress = LineProgress(lines.append, every=30, clock=clock)
    task = progress.task("joining the parts of m", total=1_117_320_000)
    clock.now = 31
    task.advance(828_375_040)
    assert lines == ["joining the parts of m: 828,375,040/1,117,320,000, 0m31s elapsed, eta 0m11s"]
