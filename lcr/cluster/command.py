"""``lcr index FILE... --ray ADDRESS``: what the command checks before any worker
starts, and what it prints as each document's build comes back (the printing itself
is the CLI's, passed in)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from lcr.cluster.build import cluster_jobs, index_on_cluster
from lcr.cluster.worker import BuildRecipe, JobResult
from lcr.errors import UsageError
from lcr.models.spec import ModelSpec
from lcr.pipeline.plans import ParsedSets

if TYPE_CHECKING:
    from lcr.pipeline import BuildReport
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
    add: bool,
    out: str | None,
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

    if address is None:
        raise UsageError("--workers says how many Ray workers: give --ray ADDRESS too")
    if out is not None or add:
        raise UsageError(
            "--ray builds one index beside each file; one index over many (-o, --add) "
            "is not built on a cluster yet"
        )
    if stdin:
        raise UsageError("--ray reads files the workers can reach, not stdin ('-')")
    plan_builds(expand_methods(methods), Models(spec=spec), sets)  # refused here, not on a worker
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
            listed, recipe, address=address, workers=workers, progress=progress, on_result=show
        )
