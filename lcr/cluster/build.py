"""The driver of ``lcr index --ray``: one task per document on the workers of
:mod:`lcr.cluster.pool`, each result printed as it comes, a dead worker's task run
again on a fresh worker, a task that failed for good reported with its document while
the others finish.

Two kinds of task: a document's whole build into the index beside it (``build``), or,
for one index over many documents (``-o``, ``--add``), a document read and extracted
(``read``), its text sent back to the driver, which alone writes the index.

A build killed midway left its index as before (builds are staged and committed
atomically, and the writer lock is a ``flock`` its process held), so the task run
again resumes from what was committed and from the index's LLM cache.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from lcr.cluster.pool import Task, pool_on
from lcr.cluster.worker import BuildJob, BuildRecipe, BuildWorker, Job, JobResult, ReadJob
from lcr.errors import InputError, LcrError
from lcr.progress import NULL_PROGRESS, Progress

if TYPE_CHECKING:
    from lcr.text.document import Document
    from lcr.text.inputs import InputFile


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
    llm: bool = False,
    progress: Progress = NULL_PROGRESS,
    on_result: Callable[[JobResult], None] | None = None,
) -> list[JobResult]:
    """Build every job on the cluster ``address`` names; the results in the jobs'
    order. ``llm``: the methods call a local LLM (a GPU each where there are GPUs).
    A failure for good is in its result's ``error`` (and raises :class:`BuildsFailed`
    after every other job finished)."""
    results = run_on_cluster(
        "build", jobs, recipe, address=address, workers=workers, llm=llm, progress=progress,
        on_result=on_result, folders=[Path(j.target).parent for j in jobs],
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
    results = run_on_cluster(
        "read", jobs, recipe, address=address, workers=workers, progress=progress
    )  # the driver writes the index: only the sources are checked
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
    llm: bool = False,
    progress: Progress = NULL_PROGRESS,
    on_result: Callable[[JobResult], None] | None = None,
    folders: Sequence[Path] = (),
) -> list[JobResult]:
    """The workers' ``call`` (``build``, ``read``) on every job, every source and the
    ``folders`` checked first; the results in the jobs' order, a failure for good in its
    result's ``error`` while the others finish."""
    noun = "documents read" if call == "read" else "documents built"
    results: dict[int, JobResult] = {}

    def done(task: Task, result: JobResult) -> None:
        results[task.number] = result
        bar.advance()
        if on_result is not None:
            on_result(result)

    def failed(task: Task, why: str) -> None:
        done(task, JobResult(jobs[task.number], 0, error=why))

    sources = [Path(j.source) for j in jobs]
    with pool_on(address, workers, BuildWorker, (recipe,), tasks=len(jobs), llm=llm,
                 folders=folders, sources=sources) as pool:  # fmt: skip
        bar = progress.task(noun, total=len(jobs))
        tasks = [Task(n, call, (job,), job.source) for n, job in enumerate(jobs)]
        pool.run(tasks, done, on_failed=failed, bar=bar, noun=noun)
    return [results[n] for n in range(len(jobs))]
