"""A pool of Ray actors working through a list of tasks, for ``lcr eval --ray`` and
``lcr ask - --ray``: each worker holds :data:`IN_FLIGHT` tasks, so the next starts
as one ends; a task waits for the one it comes ``after`` (a batch of questions for
its index's build); among the tasks ready, the lowest numbered goes first.

A worker that dies (killed, out of memory, its node lost) is replaced by a fresh one
and the tasks it held go back to the queue, to run on whichever worker is free: a
task is failed for good only when its worker died under it :data:`RETRIES` + 1 times.
The actors are made with no restarts of Ray's own, so ``ray.kill`` and a killed
process are met the same way. A task's own failure is its worker's to return as a
value; the caller decides what it means.
"""

from __future__ import annotations

import contextlib
import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from lcr.errors import LcrError, UsageError

RETRIES = 3  # a task whose worker died under it this many times more fails for good
IN_FLIGHT = 2  # tasks held by each worker: the next starts as one ends


class TaskFailed(LcrError):
    """A task that could not be run: its workers kept dying, or Ray ended it."""


@dataclass(order=True)
class Task:
    """One call of an actor's method: ``number`` its place (lower runs first among the
    ready), ``after`` the number of the task that must finish first."""

    number: int
    method: str = field(compare=False)
    args: tuple[Any, ...] = field(compare=False, default=())
    label: str = field(compare=False, default="")  # what it is, for a message
    after: int | None = field(compare=False, default=None)
    deaths: int = field(compare=False, default=0)


def worker_count(cpus: int, address: str, workers: int | None, tasks: int) -> int:
    """``--workers`` checked against the CPUs the cluster offers (one per worker); the
    default one per CPU, never more than there are tasks."""
    if cpus < 1:
        raise UsageError(f"--ray {address}: the cluster offers no CPU to a worker")
    if workers is not None and workers > cpus:
        raise UsageError(
            f"--workers {workers}: the cluster offers {cpus} CPUs, one for each worker"
        )
    return max(1, min(workers or cpus, tasks))


class Pool:
    """``count`` actors made by ``make`` (a fresh one replaces each that dies)."""

    def __init__(self, ray: Any, make: Callable[[], Any], count: int) -> None:
        self.ray = ray
        self.make = make
        self.actors: list[Any] = [make() for _ in range(count)]
        self.replaced = 0  # workers that died and were replaced

    def kill_all(self) -> None:
        """End every worker at once, and with it every task it runs or holds."""
        for actor in self.actors:
            with contextlib.suppress(Exception):  # already gone
                self.ray.kill(actor, no_restart=True)

    def each(self, method: str, *args: Any) -> list[Any]:
        """``method(*args)`` on every worker, its replies in the workers' order."""
        return list(self.ray.get([getattr(a, method).remote(*args) for a in self.actors]))

    def run(self, tasks: Sequence[Task], on_done: Callable[[Task, Any], None]) -> None:
        """Every task run once, ``on_done`` told of each (in the order they finish)."""
        ray = self.ray
        ready: list[Task] = [t for t in tasks if t.after is None]
        heapq.heapify(ready)
        waiting: dict[int, list[Task]] = {}
        for t in tasks:
            if t.after is not None:
                waiting.setdefault(t.after, []).append(t)
        flying: dict[Any, tuple[Task, int, Any]] = {}  # ref -> (task, slot, actor)

        def fill() -> None:
            for slot, actor in enumerate(self.actors):
                held = sum(1 for _, s, a in flying.values() if s == slot and a is actor)
                for _ in range(IN_FLIGHT - held):
                    if not ready:
                        return
                    task = heapq.heappop(ready)
                    flying[getattr(actor, task.method).remote(*task.args)] = (task, slot, actor)

        fill()
        while flying:
            done, _ = ray.wait(list(flying), num_returns=1)
            task, slot, actor = flying.pop(done[0])
            try:
                value = ray.get(done[0])
            except ray.exceptions.RayActorError as exc:
                if actor is self.actors[slot]:  # the first to hear of it: a fresh worker
                    task.deaths += 1
                    self._replace(slot)
                    if task.deaths > RETRIES:
                        raise TaskFailed(
                            f"{task.label}: its worker died {task.deaths} times "
                            f"({type(exc).__name__})"
                        ) from None
                heapq.heappush(ready, task)  # held by the dead worker: run it again
                fill()
                continue
            except ray.exceptions.RayError as exc:  # the task itself ended (cancelled)
                lines = str(exc).strip().splitlines() or [""]
                raise TaskFailed(f"{task.label}: {type(exc).__name__}: {lines[-1]}") from None
            on_done(task, value)
            for after in waiting.pop(task.number, []):
                heapq.heappush(ready, after)
            fill()

    def _replace(self, slot: int) -> None:
        with contextlib.suppress(Exception):  # already gone
            self.ray.kill(self.actors[slot], no_restart=True)
        self.actors[slot] = self.make()
        self.replaced += 1
