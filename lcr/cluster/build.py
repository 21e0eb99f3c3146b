"""The driver of ``lcr index --ray``: the workers started, the storage checked, one
task per document handed out two at a time to each worker, each result printed as it
comes, a dead worker's task retried, a task that failed for good reported with its
document while the others finish.

Retries: each worker is an actor restarted up to :data:`RESTARTS` times, and a task
it was running or holding is run again on the restarted worker (``max_task_retries``).
A build killed midway left its index as before (builds are staged and committed
atomically, and the writer lock is a ``flock`` its process held), so the retry
resumes from what was committed and from the index's LLM cache.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lcr.cluster.connect import Cluster, connect
from lcr.cluster.storage import AskWorkers, ProbeReply, ProbeRequest, check_storage
from lcr.cluster.worker import BuildJob, BuildRecipe, BuildWorker, JobResult
from lcr.errors import LcrError, UsageError
from lcr.progress import NULL_PROGRESS, Progress

RESTARTS = 3  # a worker restarted this often, each task retried as often
IN_FLIGHT = 2  # tasks held by each worker: the next starts as one ends


class BuildsFailed(LcrError):
    """Some documents' builds failed for good (each said in its own line); exit 1."""


def cluster_jobs(jobs: Sequence[tuple[str, Path, bool]]) -> list[BuildJob]:
    """``(source, index, walked)`` as the CLI lists them, with absolute paths: a worker's
    working folder is not the driver's."""
    return [BuildJob(os.path.abspath(s), os.path.abspath(t), w) for s, t, w in jobs]


def index_on_cluster(
    jobs: Sequence[BuildJob],
    recipe: BuildRecipe,
    *,
    address: str,
    workers: int | None = None,
    progress: Progress = NULL_PROGRESS,
    on_result: Callable[[JobResult], None] | None = None,
    check: Callable[[Cluster, AskWorkers], None] | None = None,
) -> list[JobResult]:
    """Build every job on the cluster ``address`` names; the results in the jobs'
    order. A failure for good is in its result's ``error`` (and raises
    :class:`BuildsFailed` after every other job finished)."""
    cluster = connect(address, workers)
    ray = cluster.ray
    actors: list[Any] = []
    try:
        count = _worker_count(cluster, workers, len(jobs))
        make = ray.remote(num_cpus=1, max_restarts=RESTARTS, max_task_retries=RESTARTS)(BuildWorker)
        actors = [make.remote(recipe) for _ in range(count)]

        def ask(request: ProbeRequest) -> list[ProbeReply]:
            return list(ray.get([a.probe.remote(request) for a in actors]))

        (check or _check_paths(jobs))(cluster, ask)
        results = _run(ray, actors, make, recipe, jobs, progress, on_result)
    except BaseException:
        for actor in actors:  # Ctrl-C or an error: no worker goes on building
            _kill(ray, actor)
        raise
    finally:
        cluster.close()
    failed = [r for r in results if r.error]
    if failed:
        raise BuildsFailed(f"{len(failed)} of {len(jobs)} documents failed (see above)")
    return results


def _check_paths(jobs: Sequence[BuildJob]) -> Callable[[Cluster, AskWorkers], None]:
    def check(_cluster: Cluster, ask: AskWorkers) -> None:
        folders = [Path(j.target).parent for j in jobs]
        check_storage(folders, [Path(j.source) for j in jobs], ask)

    return check


def _worker_count(cluster: Cluster, workers: int | None, jobs: int) -> int:
    cpus = cluster.cpus()
    if cpus < 1:
        raise UsageError(f"--ray {cluster.address}: the cluster offers no CPU to a worker")
    if workers is not None and workers > cpus:
        raise UsageError(
            f"--workers {workers}: the cluster offers {cpus} CPUs, one for each worker"
        )
    return max(1, min(workers or cpus, jobs))


def _kill(ray: Any, actor: Any) -> None:
    try:
        ray.kill(actor, no_restart=True)
    except Exception:  # already gone
        return


def _run(
    ray: Any,
    actors: list[Any],
    make: Any,
    recipe: BuildRecipe,
    jobs: Sequence[BuildJob],
    progress: Progress,
    on_result: Callable[[JobResult], None] | None,
) -> list[JobResult]:
    """Hand the jobs out, ``IN_FLIGHT`` per worker, and collect each result as it
    comes. A worker dead for good (its restarts spent) fails the task it held, and a
    fresh worker takes its place for the jobs left."""
    bar = progress.task("documents", total=len(jobs))
    pending = deque(range(len(jobs)))
    flying: dict[Any, tuple[int, int, Any]] = {}  # task ref -> (job, worker slot, worker)
    results: dict[int, JobResult] = {}

    def submit(slot: int) -> None:
        if pending:
            number = pending.popleft()
            actor = actors[slot]
            flying[actor.build.remote(jobs[number])] = (number, slot, actor)

    for slot in range(len(actors)):
        for _ in range(IN_FLIGHT):
            submit(slot)
    while flying:
        done, _ = ray.wait(list(flying), num_returns=1)
        number, slot, actor = flying.pop(done[0])
        try:
            result = ray.get(done[0])
        except ray.exceptions.RayActorError as exc:
            if actor is not actors[slot]:  # held by a worker already replaced: run it again
                pending.appendleft(number)
                submit(slot)
                continue
            result = JobResult(jobs[number], 0, error=_died(exc))
            _kill(ray, actor)  # its restarts spent: a fresh worker takes its slot
            actors[slot] = make.remote(recipe)
        except ray.exceptions.RayError as exc:  # the task itself ended (cancelled, a signal)
            lines = str(exc).strip().splitlines() or [""]
            result = JobResult(jobs[number], 0, error=f"{type(exc).__name__}: {lines[-1]}")
        results[number] = result
        bar.advance()
        if on_result is not None:
            on_result(result)
        submit(slot)
    return [results[n] for n in range(len(jobs))]


def _died(exc: BaseException) -> str:
    return f"its worker died {RESTARTS + 1} times ({type(exc).__name__})"
