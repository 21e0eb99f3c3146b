"""Progress reporting that methods can use without knowing about the terminal.

Methods receive a :class:`Progress`; the CLI passes a rich-backed one when stdout
is a terminal and ``--quiet`` is off, everything else gets :data:`NULL_PROGRESS`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol


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
    """Rich progress bars with ETA on stderr; one bar per task."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )
        from rich.progress import Progress as _RichProgress

        self._console = Console(stderr=True)
        self._progress = _RichProgress(
            SpinnerColumn(),
            TextColumn("[progress.description]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            console=self._console,
            transient=True,
        )

    def __enter__(self) -> RichProgress:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()

    def task(self, description: str, total: float | None = None) -> Task:
        return _RichTask(self._progress, self._progress.add_task(description, total=total))

    def log(self, message: str) -> None:
        self._console.print(message)


class _RichTask:
    def __init__(self, progress: object, task_id: object) -> None:
        self._progress = progress
        self._id = task_id

    def advance(self, n: float = 1) -> None:
        self._progress.advance(self._id, n)  # type: ignore[attr-defined]

    def update(self, *, total: float | None = None, description: str | None = None) -> None:
        kwargs: dict[str, object] = {}
        if total is not None:
            kwargs["total"] = total
        if description is not None:
            kwargs["description"] = description
        self._progress.update(self._id, **kwargs)  # type: ignore[attr-defined]


@contextmanager
def progress_for(enabled: bool) -> Iterator[Progress]:
    """Rich bars when ``enabled`` (a terminal, not --quiet), silence otherwise."""
    if not enabled:
        yield NULL_PROGRESS
        return
    with RichProgress() as rp:
        yield rp
