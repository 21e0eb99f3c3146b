"""The driver of ``lcr index --ray``: the workers started, the storage checked, one
task per document handed out two at a time to each worker, each result printed as it
comes, a dead worker's task retried, a task that failed for good reported with its
document while the others finish.

Two kinds of task: a document's whole build into the index beside it (``build``), or,
for one index over many documents (``-o``, ``--add``), a document read and extracted
(``read``), its text sent back to the driver, which alone writes the index.

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
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lcr.cluster.connect import Cluster, connect
from lcr.cluster.storage import AskWorkers, ProbeReply, ProbeRequest, check_storage
from lcr.cluster.worker import BuildJob, BuildRecipe, BuildWorker, Job, JobResult, ReadJob
from lcr.errors import InputError, LcrError, UsageError
from lcr.progress import NULL_PROGRESS, Progress, Task

if TYPE_CHECKING:
    from lcr.text.document import Document
    from lcr.text.inputs import InputFile

RESTARTS = 3  # a worker restarted this often, each task retried as often
IN_FLIGHT = 2  # tasks held by each worker: the next starts as one ends
POLL_S = 1.0  # the progress bar's count of workers alive, refreshed this often


class BuildsFailed(LcrError):
    """Some documents' builds failed for good (each said in its own line); exit 1."""


@dataclass(frozen=True)
class WorkerPlan:
    """How many workers, and what each claims from Ray."""

    count: int
    cpus: int = 1
    gpus: int = 0


def plan_workers(
    cpus: int, gpus: int, *, asked: int | None, jobs: int, llm: bool, address: str = ""
) -> WorkerPlan:
    """Workers for ``jobs`` tasks on a cluster offering ``cpus`` CPUs and ``gpus`` GPUs:
    builds of a local LLM method (``llm``) take one GPU each where there are GPUs (one
    worker per GPU by default), everything else one CPU (one worker per CPU); never
    more workers than tasks. ``asked`` more than the cluster holds is refused."""
    if llm and gpus >= 1:
        if asked is not None and asked > gpus:
            raise UsageError(
                f"--workers {asked}: the cluster offers {gpus} GPU{'s' * (gpus != 1)}, "
                "one for each worker of an LLM method"
            )
        return WorkerPlan(max(1, min(asked or gpus, jobs)), 1, 1)
    if cpus < 1:
        raise UsageError(f"--ray {address}: the cluster offers no CPU to a worker")
    if asked is not None and asked > cpus:
        raise UsageError(f"--workers {asked}: the cluster offers {cpus} CPUs, one for each worker")
    return WorkerPlan(max(1, min(asked or cpus, jobs)))


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
    llm: bool = False,
    progress: Progress = NULL_PROGRESS,
    on_result: Callable[[JobResult], None] | None = None,
    check: Callable[[Cluster, AskWorkers], None] | None = None,
) -> list[JobResult]:
    """Build every job on the cluster ``address`` names; the results in the jobs'
    order. ``llm``: the methods call a local LLM (a GPU each where there are GPUs).
    A failure for good is in its result's ``error`` (and raises :class:`BuildsFailed`
    after every other job finished)."""

    def storage(_cluster: Cluster, ask: AskWorkers) -> None:
        folders = [Path(j.target).parent for j in jobs]
        check_storage(folders, [Path(j.source) for j in jobs], ask)

    results = run_on_cluster(
        "build", jobs, recipe, address=address, workers=workers, llm=llm,
        progress=progress, on_result=on_result, check=check or storage,
    )  # fmt: skip
    failed = [r for r in results if r.error]
    if failed:
        raise BuildsFailed(f"{len(failed)} of {len(jobs)} documents failed (see above)")
    return results


def read_on_cluster(
    files: Sequence[InputFile],
    recipe: BuildRecipe,
    *,
    address: str,
    workers: int | None = None,
    progress: Progress = NULL_PROGRESS,
    warn: Callable[[str], None] | None = None,
) -> list[Document]:
    """Every file of one collection read and extracted on the cluster, named as a serial
    run names them, in their order; a file given by name that cannot be read stops the
    run with its one-line reason, as serially (after the others were read: nothing is
    written), one a folder walk found is skipped with a warning."""
    from lcr.pipeline import some_documents
    from lcr.text.inputs import document_names

    jobs = [
        ReadJob(os.path.abspath(f.path), name, f.found)
        for f, name in zip(files, document_names(files), strict=True)
    ]

    def storage(_cluster: Cluster, ask: AskWorkers) -> None:
        check_storage([], [Path(j.source) for j in jobs], ask)  # the driver writes the index

    results = run_on_cluster(
        "read", jobs, recipe, address=address, workers=workers, progress=progress, check=storage
    )
    docs = []
    for result in results:
        for message in result.warnings:
            if warn is not None:
                warn(message)
        if result.error:
            raise InputError(result.error)
        if result.document is not None:
            docs.append(result.document)
    return some_documents(docs)


def run_on_cluster(
    call: str,
    jobs: Sequence[Job],
    recipe: BuildRecipe,
    *,
    address: str,
    workers: int | None,
    check: Callable[[Cluster, AskWorkers], None],
    llm: bool = False,
    progress: Progress = NULL_PROGRESS,
    on_result: Callable[[JobResult], None] | None = None,
) -> list[JobResult]:
    """Run the workers' ``call`` (``build`` or ``read``) on every job; the results in the
    jobs' order, a failure for good in its result's ``error``."""
    cluster = connect(address, workers)
    ray = cluster.ray
    actors: list[Any] = []
    try:
        gpus = int(ray.cluster_resources().get("GPU", 0))
        plan = plan_workers(
            cluster.cpus(), gpus, asked=workers, jobs=len(jobs), llm=llm, address=address
        )
        make = ray.remote(
            num_cpus=plan.cpus,
            num_gpus=plan.gpus,
            max_restarts=RESTARTS,
            max_task_retries=RESTARTS,
        )(BuildWorker)
        actors = [make.remote(recipe) for _ in range(plan.count)]

        def ask(request: ProbeRequest) -> list[ProbeReply]:
            return list(ray.get([a.probe.remote(request) for a in actors]))

        check(cluster, ask)
        noun = "documents read" if call == "read" else "documents built"
        bar = progress.task(noun, total=len(jobs))
        pool = _Pool(ray, actors, lambda: make.remote(recipe), bar, noun)
        return pool.run(call, jobs, on_result)
    except BaseException:
        for actor in actors:  # Ctrl-C or an error: no worker goes on building
            _kill(ray, actor)
        raise
    finally:
        cluster.close()


def _kill(ray: Any, actor: Any) -> None:
    try:
        ray.kill(actor, no_restart=True)
    except Exception:  # already gone
        return


def actor_alive(ray: Any, actor: Any) -> bool | None:
    """Whether Ray's control store holds ``actor`` as alive (not restarting or dead);
    None when it cannot say."""
    try:
        from ray._private import state

        found = state.actors(actor_id=actor._actor_id.hex())
        return bool(found.get("State") == "ALIVE") if isinstance(found, dict) else None
    except Exception:  # an API Ray moved: the bar just does not count
        return None


class _Pool:
    """The workers, their tasks in flight and the progress bar (documents done out of
    all, workers alive)."""

    def __init__(
        self, ray: Any, actors: list[Any], fresh: Callable[[], Any], bar: Task, noun: str
    ) -> None:
        self.ray, self.actors, self.fresh, self.bar, self.noun = ray, actors, fresh, bar, noun
        self.alive = -1

    def show_alive(self) -> None:
        states = [actor_alive(self.ray, a) for a in self.actors]
        if None in states:
            return
        alive = sum(1 for s in states if s)
        if alive != self.alive:
            self.alive = alive
            self.bar.update(
                description=f"{self.noun} ({alive} of {len(self.actors)} workers alive)"
            )

    def run(
        self, call: str, jobs: Sequence[Job], on_result: Callable[[JobResult], None] | None
    ) -> list[JobResult]:
        """Hand the jobs out, ``IN_FLIGHT`` per worker, and collect each result as it
        comes. A worker dead for good (its restarts spent) fails the task it held, and a
        fresh worker takes its place for the jobs left."""
        ray, actors = self.ray, self.actors
        pending = deque(range(len(jobs)))
        flying: dict[Any, tuple[int, int, Any]] = {}  # task ref -> (job, worker slot, worker)
        results: dict[int, JobResult] = {}

        def submit(slot: int) -> None:
            if pending:
                number = pending.popleft()
                actor = actors[slot]
                flying[getattr(actor, call).remote(jobs[number])] = (number, slot, actor)

        for slot in range(len(actors)):
            for _ in range(IN_FLIGHT):
                submit(slot)
        while flying:
            self.show_alive()
            done, _ = ray.wait(list(flying), num_returns=1, timeout=POLL_S)
            if not done:
                continue
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
                actors[slot] = self.fresh()
            except ray.exceptions.RayError as exc:  # the task itself ended (cancelled, a signal)
                lines = str(exc).strip().splitlines() or [""]
                result = JobResult(jobs[number], 0, error=f"{type(exc).__name__}: {lines[-1]}")
            results[number] = result
            self.bar.advance()
            if on_result is not None:
                on_result(result)
            submit(slot)
        return [results[n] for n in range(len(jobs))]


def _died(exc: BaseException) -> str:
    return f"its worker died {RESTARTS + 1} times ({type(exc).__name__})"
