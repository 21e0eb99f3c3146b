"""``lcr index FILE... --ray ADDRESS``: what the command checks before any worker
starts, and what it prints as each document's build comes back (the printing itself
is the CLI's, passed in)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from lcr.cluster.build import cluster_jobs, index_on_cluster
from lcr.cluster.worker import BuildJob, BuildRecipe, JobResult
from lcr.errors import UsageError
from lcr.models.spec import ModelSpec
from lcr.pipeline.plans import ParsedSets

if TYPE_CHECKING:
    from lcr.pipeline import BuildReport
    from lcr.text.document import Document
    from lcr.text.inputs import InputFile


def index_with_ray(
    address: str | None,
    workers: int | None,
    jobs: Sequence[tuple[list[InputFile], Path, bool]],
    methods: Sequence[str],
    sets: ParsedSets,
    spec: ModelSpec,
    *,
    on_report: Callable[[str, BuildReport], None],
    warn: Callable[[str], None],
    note: Callable[[str], None],
    quiet: bool,
    force: bool,
    stdin: bool,
    doc_format: str,
    password: str | None,
) -> None:
    """Every refusal first (one line, exit 2), every build's needs checked here as a
    serial run checks them, then the builds on the cluster, each result printed as it
    comes: its reports as ``lcr index`` prints them, a failure as ``lcr: DOC failed: why``."""
    from lcr.models.container import Models
    from lcr.pipeline.plans import expand_methods, plan_builds
    from lcr.progress import progress_for, progress_mode

    where = refuse(address, stdin)
    # refused here, not on a worker
    plans = plan_builds(expand_methods(methods), Models(spec=spec), sets)
    llm = any(p.needs.uses_llm for p in plans) and not spec.base_url  # a GPU each, if any
    recipe = BuildRecipe(
        spec,
        tuple(methods),
        sets,
        force=force,
        doc_format=None if doc_format == "auto" else doc_format,
        password=password,
    )
    listed = cluster_jobs([(f.path, target, walked) for (f,), target, walked in jobs])
    given = {
        job.target: (f.path, str(target))
        for job, ((f,), target, _) in zip(listed, jobs, strict=True)
    }

    def show(result: JobResult) -> None:
        assert isinstance(result.job, BuildJob)
        for message in result.warnings:
            warn(message)
        for message in result.notes:
            note(message)
        for report in result.reports:
            on_report(given[result.job.target][1], report)
        if result.error:  # the document as it was named, and why, in one line
            note(f"{given[result.job.target][0]} failed: {result.error}")

    with progress_for(progress_mode(quiet)) as progress:
        index_on_cluster(
            listed, recipe, address=where, workers=workers, llm=llm, progress=progress,
            on_result=show,
        )  # fmt: skip


def refuse(address: str | None, stdin: bool) -> str:
    """The address, or one line: ``--workers`` without ``--ray``, or stdin."""
    if address is None:
        raise UsageError("--workers says how many Ray workers: give --ray ADDRESS too")
    if stdin:
        raise UsageError("--ray reads files the workers can reach, not stdin ('-')")
    return address


def read_with_ray(
    address: str | None,
    workers: int | None,
    files: Sequence[InputFile],
    spec: ModelSpec,
    *,
    warn: Callable[[str], None],
    quiet: bool,
    stdin: bool,
    doc_format: str,
    password: str | None,
) -> list[Document]:
    """One index over many files (``-o``, ``--add``): every file read and extracted on the
    cluster, in the order and with the names of a serial run, for this process to build
    and commit as the index's one writer."""
    from lcr.cluster.build import read_on_cluster
    from lcr.progress import progress_for, progress_mode

    where = refuse(address, stdin)
    recipe = BuildRecipe(
        spec,
        (),
        ParsedSets(),
        doc_format=None if doc_format == "auto" else doc_format,
        password=password,
    )
    with progress_for(progress_mode(quiet)) as progress:
        return read_on_cluster(
            files, recipe, address=where, workers=workers, progress=progress, warn=warn
        )
