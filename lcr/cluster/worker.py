"""The Ray actor: a worker that loads its models once and builds one document's index
per task (every method asked for, so the index's lock and LLM cache stay in one
place), through the same :func:`lcr.pipeline.index_files` a serial run calls.

Plain classes: :func:`lcr.cluster.pool.pool_on` makes them actors (``ray.remote``) only when
``--ray`` is given. What a build says (reports, warnings, notes) comes back as data
and the driver prints it; an error comes back as one line, never as a traceback.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from lcr.cluster.storage import ProbeReply, ProbeRequest, probe_here
from lcr.errors import InputError, LcrError
from lcr.models.spec import ModelSpec
from lcr.pipeline.plans import ParsedSets

if TYPE_CHECKING:
    from lcr.models.container import Models
    from lcr.pipeline import BuildReport
    from lcr.pipeline.plans import BuildPlan
    from lcr.text.document import Document


@dataclass(frozen=True)
class BuildRecipe:
    """What every worker builds with, sent once when the worker starts."""

    spec: ModelSpec
    methods: tuple[str, ...]
    sets: ParsedSets
    force: bool = False
    doc_format: str | None = None
    password: str | None = None


@dataclass(frozen=True)
class BuildJob:
    """One document's build: ``source`` (absolute) into the index ``target`` beside it;
    ``walked``: a folder walk found it (unreadable, it is skipped, as serially)."""

    source: str
    target: str
    walked: bool = False


@dataclass(frozen=True)
class ReadJob:
    """One document of a collection (``-o``, ``--add``) read and extracted on a worker:
    ``source`` (absolute), named ``name`` as a serial run names it; ``walked``: a folder
    walk found it (unreadable, it is skipped, as serially)."""

    source: str
    name: str
    walked: bool = False


Job = BuildJob | ReadJob


@dataclass
class JobResult:
    job: Job
    worker_pid: int
    reports: list[BuildReport] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: str = ""  # one line: the build failed for good
    document: Document | None = None  # a ReadJob's document (None: skipped or failed)


def one_line(text: str) -> str:
    return " ".join(text.split())


class Worker:
    """What every worker does: run ``threads`` threads in llama.cpp and torch (set before
    any model loads, :mod:`lcr.models.llamacpp_threads`), answer a storage probe, and
    say what it was given."""

    def __init__(self, threads: int) -> None:
        os.environ["LCR_THREADS"] = str(threads)

    def probe(self, request: ProbeRequest) -> ProbeReply:
        node = ""
        try:
            import ray

            node = ray.util.get_node_ip_address()
        except Exception:  # outside Ray (a test calling the class itself)
            node = ""
        return probe_here(request, node)

    def claims(self, *_task: object) -> dict[str, object]:
        """What Ray gave this worker (``CPU``, ``GPU``), its threads and its process,
        for the tests and the docs."""
        import ray

        given = dict(ray.get_runtime_context().get_assigned_resources())
        return {**given, "threads": os.environ["LCR_THREADS"], "pid": os.getpid()}


class BuildWorker(Worker):
    """One worker's state: the recipe, and the models and plans made from it on its
    first task (loaded once, reused by every later one)."""

    def __init__(self, threads: int, recipe: BuildRecipe) -> None:
        super().__init__(threads)
        self.recipe = recipe
        self._models: Models | None = None
        self._plans: list[BuildPlan] = []

    def read(self, job: ReadJob) -> JobResult:
        """One document of a collection read and extracted here, as a serial run reads it."""
        from lcr.pipeline import read_document
        from lcr.text.formats import ExtractOptions
        from lcr.text.inputs import InputFile

        result = JobResult(job, os.getpid())
        options = ExtractOptions(
            format=self.recipe.doc_format,
            password=self.recipe.password,
            warn=result.warnings.append,
        )
        try:
            given = InputFile(job.source, os.path.dirname(job.source), job.walked)
            result.document = read_document(given, job.name, options)
        except Exception as exc:
            _failed(result, exc, job.walked)
        return result

    def _ready(self) -> tuple[Models, list[BuildPlan]]:
        if self._models is None:
            from lcr.models.container import Models
            from lcr.pipeline.plans import expand_methods, plan_builds

            models = Models(spec=self.recipe.spec)
            self._plans = plan_builds(expand_methods(self.recipe.methods), models, self.recipe.sets)
            self._models = models
        return self._models, self._plans

    def build(self, job: BuildJob) -> JobResult:
        from lcr.pipeline import index_files
        from lcr.text.formats import ExtractOptions
        from lcr.text.inputs import InputFile

        result = JobResult(job, os.getpid())
        try:
            models, plans = self._ready()
            index_files(
                [InputFile(job.source, os.path.dirname(job.source))],
                job.target,
                plans,
                models,
                force=self.recipe.force,
                warn=result.warnings.append,
                on_report=result.reports.append,
                note=result.notes.append,
                extract=ExtractOptions(
                    format=self.recipe.doc_format,
                    password=self.recipe.password,
                    warn=result.warnings.append,
                ),
            )
        except Exception as exc:
            _failed(result, exc, job.walked)
        return result


def _failed(result: JobResult, exc: Exception, walked: bool) -> None:
    """A document's failure as one line, as a serial run says it: a file found by walking
    a folder that cannot be read is skipped with a warning; a bug is still one line."""
    if isinstance(exc, InputError) and walked:
        result.warnings.append(f"skipped: {one_line(str(exc))}")
    elif isinstance(exc, LcrError):
        result.error = one_line(str(exc))
    else:
        result.error = one_line(f"{type(exc).__name__}: {exc}")
