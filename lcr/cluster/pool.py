"""The workers of every cluster run (``lcr index``, ``lcr eval``, ``lcr ask -`` with
``--ray``): how many and what each claims (:func:`plan_workers`), and a pool of Ray
actors working through a list of tasks. Each worker holds :data:`IN_FLIGHT` tasks, so
the next starts as one ends; a task waits for the one it comes ``after`` (a batch of
questions for its index's build); among the tasks ready, the lowest numbered goes first.

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
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lcr.cluster.connect import Cluster, connect
from lcr.cluster.storage import ProbeReply, ProbeRequest, check_storage
from lcr.errors import LcrError, UsageError
from lcr.progress import Task as Bar

RETRIES = 3  # a task whose worker died under it this many times more fails for good
IN_FLIGHT = 2  # tasks held by each worker: the next starts as one ends
ALIVE_S = 1.0  # the progress bar's count of workers alive, refreshed this often


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


@dataclass(frozen=True)
class WorkerPlan:
    """How many workers, what each claims from Ray, and the llama.cpp (and torch)
    threads each runs: its CPU share, so its replies are those of a run on as many."""

    count: int
    cpus: int
    gpus: int
    threads: int


def plan_workers(
    cpus: int,
    gpus: int,
    node_cpus: int,
    *,
    asked: int | None,
    tasks: int,
    llm: bool,
    threads: int | None = None,
    address: str = "",
) -> WorkerPlan:
    """The workers for ``tasks`` tasks on a cluster offering ``cpus`` CPUs and ``gpus``
    GPUs, ``node_cpus`` on its largest node; never more workers than tasks.

    Work with a local LLM (``llm``) takes one GPU a worker where there are GPUs, one
    worker per GPU by default, and runs ``threads`` (else 1) threads on as many CPUs.
    Otherwise each worker claims an equal share of the CPUs, at most a node's, and runs
    that many threads; ``threads`` (the driver's ``LCR_THREADS``) fixes the share.
    ``asked`` (``--workers``) more than fit is refused in one line."""
    if cpus < 1:
        raise UsageError(f"--ray {address}: the cluster offers no CPU to a worker")
    if threads is not None and threads > node_cpus:
        raise UsageError(
            f"LCR_THREADS={threads}: no node of the cluster has that many CPUs for a worker "
            f"(the largest has {node_cpus})"
        )
    gpu = llm and gpus >= 1
    if gpu and asked is not None and asked > gpus:
        raise UsageError(
            f"--workers {asked}: the cluster offers {gpus} GPU{'s' * (gpus != 1)}, "
            "one for each worker running a local LLM"
        )
    share = threads or 1  # the driver's count, or one CPU each until the CPUs are shared
    fit = min(gpus, cpus // share) if gpu else cpus // share
    if asked is not None and asked > fit:
        each = (
            f"{threads} for each worker (LCR_THREADS={threads})"
            if threads
            else "one for each worker"
        )
        raise UsageError(f"--workers {asked}: the cluster offers {cpus} CPUs, {each}")
    count = max(1, min(asked or fit, tasks))
    if threads is None and not gpu:
        share = max(1, min(cpus // count, node_cpus))
    return WorkerPlan(count, share, int(gpu), share)


class Pool:
    """``count`` actors made by ``make`` (a fresh one replaces each that dies)."""

    def __init__(self, ray: Any, make: Callable[[], Any], count: int) -> None:
        self.ray = ray
        self.make = make
        self.actors: list[Any] = [make() for _ in range(count)]
        self.replaced = 0  # workers that died and were replaced
        self._alive = -1
        self._alive_at = float("-inf")

    def kill_all(self) -> None:
        """End every worker at once, and with it every task it runs or holds."""
        for actor in self.actors:
            with contextlib.suppress(Exception):  # already gone
                self.ray.kill(actor, no_restart=True)

    def each(self, method: str, *args: Any) -> list[Any]:
        """``method(*args)`` on every worker, its replies in the workers' order."""
        return list(self.ray.get([getattr(a, method).remote(*args) for a in self.actors]))

    def run(
        self,
        tasks: Sequence[Task],
        on_done: Callable[[Task, Any], None],
        *,
        on_failed: Callable[[Task, str], None] | None = None,
        bar: Bar | None = None,
        noun: str = "",
    ) -> None:
        """Every task run once, ``on_done`` told of each (in the order they finish). A
        task failed for good raises :class:`TaskFailed`, or with ``on_failed`` is told
        to it (why, in one line) and the run goes on. ``bar`` says ``noun`` and the
        workers alive, counted about once a second."""
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

        def finished(task: Task) -> None:
            for after in waiting.pop(task.number, []):
                heapq.heappush(ready, after)

        def failed(task: Task, why: str) -> None:
            if on_failed is None:
                raise TaskFailed(f"{task.label}: {why}")
            on_failed(task, why)
            finished(task)

        fill()
        while flying:
            wait_s = self._show_alive(bar, noun) if bar is not None else None
            done, _ = ray.wait(list(flying), num_returns=1, timeout=wait_s)
            if not done:
                continue
            task, slot, actor = flying[done[0]]
            # an actor runs its tasks in turn: the oldest it holds is the one it died in
            running = next(t for t, _, a in flying.values() if a is actor)
            del flying[done[0]]
            try:
                value = ray.get(done[0])
            except ray.exceptions.RayActorError as exc:
                if actor is self.actors[slot]:  # the first to hear of it: a fresh worker
                    running.deaths += 1
                    self._replace(slot)
                if task.deaths > RETRIES:
                    failed(task, f"its worker died {task.deaths} times ({type(exc).__name__})")
                else:
                    heapq.heappush(ready, task)  # held by the dead worker: run it again
            except ray.exceptions.RayError as exc:  # the task itself ended (cancelled)
                lines = str(exc).strip().splitlines() or [""]
                failed(task, f"{type(exc).__name__}: {lines[-1]}")
            else:
                on_done(task, value)
                finished(task)
            fill()

    def _show_alive(self, bar: Bar, noun: str) -> float:
        """The workers alive on ``bar`` when the count is due (one query of Ray's
        control store for all of them); the seconds until the next is due."""
        now = time.monotonic()
        if now - self._alive_at >= ALIVE_S:
            self._alive_at = now
            alive = self._count_alive()
            if alive is not None and alive != self._alive:
                self._alive = alive
                bar.update(description=f"{noun} ({alive} of {len(self.actors)} workers alive)")
        return max(0.0, self._alive_at + ALIVE_S - now)

    def _count_alive(self) -> int | None:
        """Workers Ray's control store holds as alive (not starting, not dead); None
        when it cannot say."""
        try:
            from ray._private import state

            table = state.actors()
            return sum(1 for a in self.actors if table[a._actor_id.hex()].get("State") == "ALIVE")
        except Exception:  # an API Ray moved, or not Ray: the bar just does not count
            return None

    def _replace(self, slot: int) -> None:
        with contextlib.suppress(Exception):  # already gone
            self.ray.kill(self.actors[slot], no_restart=True)
        self.actors[slot] = self.make()
        self.replaced += 1


@contextlib.contextmanager
def pool_on(
    address: str,
    asked: int | None,
    worker: type,
    args: tuple[Any, ...],
    *,
    tasks: int,
    llm: bool,
    folders: Sequence[Path] = (),
    sources: Sequence[Path] = (),
) -> Iterator[Pool]:
    """The workers (``worker(threads, *args)``, planned by :func:`plan_workers`) on the
    cluster ``address`` names, started and the storage checked (:mod:`.storage`); at
    the end, or on Ctrl-C or an error, every worker ended and the cluster left."""
    from lcr.models.llamacpp_threads import fixed_threads

    pinned = fixed_threads()  # the driver's LCR_THREADS (a bad one refused here)
    cluster = connect(address, asked)
    pool: Pool | None = None
    try:
        plan = plan_workers(
            *cluster.offer(), asked=asked, tasks=tasks, llm=llm, threads=pinned, address=address
        )
        # threads passed, not inherited: a worker on another node has its own environment
        make = cluster.ray.remote(num_cpus=plan.cpus, num_gpus=plan.gpus, max_restarts=0)(worker)
        pool = Pool(cluster.ray, lambda: make.remote(plan.threads, *args), plan.count)
        _check(cluster, pool, folders, sources)
        yield pool
    finally:
        if pool is not None:
            pool.kill_all()  # done, Ctrl-C or a failure: no worker goes on
        cluster.close()


def _check(cluster: Cluster, pool: Pool, folders: Sequence[Path], sources: Sequence[Path]) -> None:
    """Every worker started, and every folder and source the same on it as here; a
    worker that cannot start (lcr missing on its node) is one line."""

    def ask(request: ProbeRequest) -> list[ProbeReply]:
        try:
            return pool.each("probe", request)
        except cluster.ray.exceptions.RayError as exc:
            lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
            raise UsageError(
                f"--ray {cluster.address}: a Ray worker could not start "
                f"({lines[-1] if lines else type(exc).__name__}): every node needs the "
                "same lcr, with its extras and models"
            ) from None

    check_storage(folders, sources, ask)
