"""Progress reporting that methods can use without knowing about the terminal.

Methods receive a :class:`Progress`; the CLI passes rich bars on a terminal,
plain lines (:class:`LineProgress`) when stderr goes to a log or a pipe, and
:data:`NULL_PROGRESS` under ``--quiet``, in scripts and in tests.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Literal, Protocol

ProgressMode = Literal["bars", "lines", "off"]
LINE_SECONDS = 30.0  # a log line at least this often during long work, and none for short work
METER_AFTER_S = 2.0  # a generation call shows its tokens once it has run this long


class Task(Protocol):
    def advance(self, n: float = 1) -> None: ...

    def update(self, *, total: float | None = None, description: str | None = None) -> None: ...


class Progress(Protocol):
    def task(self, description: str, total: float | None = None) -> Task: ...

    def log(self, message: str) -> None: ...


class _NullTask:
    def advance(self, n: float = 1) -> None:
        return None

    def update(self, *, total: float | None = None, description: str | None = None) -> None:
        return None


class NullProgress:
    """Reports nothing: for scripts, tests and non-terminal output."""

    def task(self, description: str, total: float | None = None) -> Task:
        return _NullTask()

    def log(self, message: str) -> None:
        return None


NULL_PROGRESS: Progress = NullProgress()


class OneTask:
    """A Progress whose every task is one given task: lets a step report into its
    caller's bar (an embedder encoding a method's chunks)."""

    def __init__(self, task: Task) -> None:
        self._task = task

    def task(self, description: str, total: float | None = None) -> Task:
        return self._task

    def log(self, message: str) -> None:
        return None


class RichProgress:
    """Rich progress bars with ETA on stderr; one bar per task.

    Bars are redrawn in place, so anything else written to the terminal while they
    are shown goes through :func:`print_above_bars` (``lcr.cli.output.echo`` does).
    """

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            SpinnerColumn,
            TextColumn,
        )
        from rich.progress import Progress as _RichProgress
        from rich.table import Column

        self._console = Console(stderr=True)
        # the description and the bar give way on a narrow terminal, never the numbers
        self._progress = _RichProgress(
            SpinnerColumn(),
            TextColumn(
                "[progress.description]{task.description}",
                table_column=Column(no_wrap=True, overflow="ellipsis", ratio=3),
            ),
            BarColumn(bar_width=None, table_column=Column(ratio=1, min_width=5)),
            _numbers_column(),
            console=self._console,
            transient=True,
            expand=True,
            redirect_stdout=False,
            redirect_stderr=False,
        )

    def __enter__(self) -> RichProgress:
        global _SHOWN
        self._progress.start()
        _SHOWN = self
        return self

    def __exit__(self, *exc: object) -> None:
        global _SHOWN
        _SHOWN = None
        self._progress.stop()

    def pause(self) -> None:
        """Take the bars off the terminal (their redraws would tear a half-written line)."""
        global _SHOWN
        _SHOWN = None
        self._progress.stop()
        # rich keeps the erased bars' height, and its first draw after start() moves up
        # over that many lines and erases them: the answer written meanwhile (#54). The
        # bars are gone from the screen, so nothing is above the cursor to redraw.
        live_render = getattr(self._progress.live, "_live_render", None)
        if live_render is not None:
            live_render._shape = None

    def resume(self) -> None:
        global _SHOWN
        self._progress.start()
        _SHOWN = self

    def print(self, text: str) -> None:
        """One line above the bars (on their terminal), which are drawn again below it."""
        self._console.print(text, markup=False, highlight=False, emoji=False, soft_wrap=True)

    def task(self, description: str, total: float | None = None) -> Task:
        return _RichTask(self._progress, self._progress.add_task(description, total=total))

    def log(self, message: str) -> None:
        self.print(message)


def _numbers_column() -> Any:
    """done/total, time elapsed and the ETA, worked out as the log lines do."""
    from rich.progress import ProgressColumn
    from rich.progress import Task as RichTask
    from rich.table import Column
    from rich.text import Text

    class NumbersColumn(ProgressColumn):
        def render(self, task: RichTask) -> Text:
            elapsed = task.elapsed or 0.0
            done = task.completed
            text = _count_text(done, task.total)
            text += f" {_clock_text(elapsed)}"
            if task.total is not None and done < task.total:
                eta = eta_seconds(elapsed, done, task.total)
                text += f" eta {'?' if eta is None else _clock_text(eta)}"
            return Text(text, style="progress.remaining")

    return NumbersColumn(table_column=Column(no_wrap=True))


_SHOWN: RichProgress | None = None  # the bars on the terminal now, if any


def print_above_bars(text: str) -> bool:
    """Print ``text`` above the progress bars if bars are shown (and say whether they were).

    Bars are only drawn when stdout and stderr are both the terminal, so a result line
    printed through the bars' console lands where the user reads it; printed past them,
    it would be erased by the next redraw or glued onto a bar.
    """
    shown = _SHOWN
    if shown is None:
        return False
    shown.print(text)
    return True


@contextmanager
def bars_paused() -> Iterator[None]:
    """No bars on the terminal inside: for output written a piece at a time, mid-line
    (an answer as the model writes it); the bars, if any, come back after."""
    shown = _SHOWN
    if shown is None:
        yield
        return
    shown.pause()
    try:
        yield
    finally:
        shown.resume()


class _RichTask:
    def __init__(self, progress: object, task_id: object) -> None:
        self._progress = progress
        self._id = task_id

    def remove(self) -> None:
        """Take the bar away (a generation's bar once its call returns)."""
        self._progress.remove_task(self._id)  # type: ignore[attr-defined]

    def advance(self, n: float = 1) -> None:
        self._progress.advance(self._id, n)  # type: ignore[attr-defined]

    def update(self, *, total: float | None = None, description: str | None = None) -> None:
        kwargs: dict[str, object] = {}
        if total is not None:
            kwargs["total"] = total
        if description is not None:
            kwargs["description"] = description
        self._progress.update(self._id, **kwargs)  # type: ignore[attr-defined]


class LineProgress:
    """Plain progress lines for a log file (``nohup lcr index book.txt 2> log``).

    A task says nothing until it has run ``every`` seconds, so short commands
    stay silent; then one line at most every ``every`` seconds, and a last
    line when a task that has spoken finishes. :meth:`tick` (called once a second
    by :func:`progress_for`) speaks for the newest unfinished task when nothing
    was written for ``every`` seconds, so a log shows life even while one long
    LLM call runs.
    """

    def __init__(
        self,
        write: Callable[[str], None],
        every: float = LINE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._write_line = write
        self._every = every
        self._clock = clock
        self._last_line = clock()
        self._tasks: list[_LineTask] = []  # the newest task only
        self._lock = threading.RLock()  # the heartbeat's thread speaks too

    def task(self, description: str, total: float | None = None) -> Task:
        task = _LineTask(self, description, total)
        with self._lock:
            self._tasks = [task]
        return task

    def log(self, message: str) -> None:
        self._write(message)

    def tick(self) -> None:
        """A line for the newest task, if unfinished, when the log has been quiet ``every``
        seconds (an older task left open, such as a count without a total, is over)."""
        with self._lock:
            newest = self._tasks[-1] if self._tasks else None
        if newest is not None and newest.open and self._clock() - self._last_line >= self._every:
            newest.say()

    def _write(self, line: str) -> None:
        self._last_line = self._clock()
        self._write_line(line)


class _LineTask:
    def __init__(self, owner: LineProgress, description: str, total: float | None) -> None:
        self._owner = owner
        self._description = description
        self._total = total
        self._done = 0.0
        self._start = owner._clock()
        self._last = self._start
        self._state: Literal["silent", "spoke", "ended"] = "silent"

    @property
    def open(self) -> bool:
        return self._state != "ended" and not self._finished()

    def _finished(self) -> bool:
        return self._total is not None and self._done >= self._total

    def advance(self, n: float = 1) -> None:
        self._done += n
        self._maybe_say()

    def update(self, *, total: float | None = None, description: str | None = None) -> None:
        if total is not None:
            self._total = total
        if description is not None:
            self._description = description
        self._maybe_say()

    def _maybe_say(self) -> None:
        if self._state == "ended":
            return
        due = self._owner._clock() - self._last >= self._owner._every
        if due or (self._finished() and self._state == "spoke"):
            self.say()

    def say(self) -> None:
        """One line: done/total, elapsed, and the ETA at the rate measured so far."""
        with self._owner._lock:
            self._say()

    def _say(self) -> None:
        if self._state == "ended":
            return
        now = self._owner._clock()
        self._last = now
        finished = self._finished()
        elapsed = now - self._start
        count = _count_text(self._done, self._total)
        line = f"{self._description}: {count}, {_clock_text(elapsed)} elapsed"
        if finished:
            line += ", done"
        else:
            eta = eta_seconds(elapsed, self._done, self._total)
            if eta is not None:
                line += f", eta {_clock_text(eta)}"
        self._owner._write(line)
        self._state = "ended" if finished else "spoke"


def eta_seconds(elapsed: float, done: float, total: float | None) -> float | None:
    """Time left at the throughput measured since the task began; none before the
    first piece of work is done (an ETA guessed from nothing misleads)."""
    if total is None or done <= 0 or done >= total:
        return None
    return elapsed / done * (total - done)


class TokenMeter:
    """Tokens one generation call has produced, with tokens/s, as a task of its own.

    A batch task advances only when a call returns, so a long generation showed
    nothing for minutes (a PECAN build: 8 minutes, then "1/1, done"). A backend
    calls :meth:`step` per decoding step; the task appears only once the call has
    run ``after_s`` seconds (short calls stay silent), and in a log it says a line
    every :data:`LINE_SECONDS` like every task.
    """

    def __init__(
        self,
        progress: Progress,
        label: str,
        total: int,
        *,
        after_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._progress = progress
        self._label = label
        self._total = total
        self._after = METER_AFTER_S if after_s is None else after_s
        self._clock = clock
        self._start = clock()
        self._done = 0
        self._shown = 0
        self._first = (self._start, 0)
        self._task: Task | None = None

    def step(self, tokens: int = 1) -> None:
        now = self._clock()
        if self._done == 0:
            self._first = (now, tokens)  # the prompt is read by now: the rate starts here
        self._done += tokens
        if self._task is None:
            if now - self._start < self._after or self._progress is NULL_PROGRESS:
                return
            # no total: the call stops where the model does, mostly well before its
            # limit, and an ETA counted to the limit lied (14 minutes for 1.5)
            self._task = self._progress.task(f"{self._label} (at most {self._total})")
        self._task.advance(self._done - self._shown)
        self._shown = self._done
        since, first = self._first
        if now > since and self._done > first:
            rate = (self._done - first) / (now - since)
            self._task.update(
                description=f"{self._label} ({rate:.1f} tokens/s, at most {self._total})"
            )

    def finish(self) -> None:
        """The call returned: a last line in a log where the task spoke, the bar removed."""
        if self._task is None:
            return
        self._task.update(total=self._done)
        remove = getattr(self._task, "remove", None)
        if remove is not None:
            remove()
        self._task = None


def _heartbeat(lines: LineProgress, stop: threading.Event) -> None:
    while not stop.wait(1.0):
        lines.tick()


def _count_text(done: float, total: float | None) -> str:
    """``3/10``; whole counts in digits (a join's bytes were ``8.28375e+08``)."""

    def number(x: float) -> str:
        return f"{int(x):,}" if float(x).is_integer() else f"{x:g}"

    return number(done) if total is None else f"{number(done)}/{number(total)}"


def _clock_text(seconds: float) -> str:
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"


def progress_mode(quiet: bool, *, bars_need_stdout: bool = True) -> ProgressMode:
    """Bars on a terminal, lines when stderr is a log or a pipe, nothing under --quiet.

    ``bars_need_stdout``: results stream to stdout (ask, retrieve), so bars
    only when both are the terminal; lines otherwise.
    """
    if quiet:
        return "off"
    terminal = sys.stderr.isatty() and (sys.stdout.isatty() or not bars_need_stdout)
    return "bars" if terminal else "lines"


@contextmanager
def progress_for(mode: ProgressMode) -> Iterator[Progress]:
    """Rich bars, plain lines on stderr, or silence."""
    if mode == "off":
        yield NULL_PROGRESS
        return
    if mode == "lines":
        lines = LineProgress(
            lambda line: print(f"lcr: {line}", file=sys.stderr, flush=True), every=LINE_SECONDS
        )
        stop = threading.Event()
        beat = threading.Thread(target=_heartbeat, args=(lines, stop), daemon=True)
        beat.start()
        try:
            yield lines
        finally:
            stop.set()
            beat.join()
        return
    with RichProgress() as rp:
        yield rp
