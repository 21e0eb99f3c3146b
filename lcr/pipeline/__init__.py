"""The library API behind the CLI and the evaluator: index, retrieve, ask.

Everything a command does that is not parsing arguments or printing lives here,
so ``lcr eval`` and scripts run exactly the code the CLI runs.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lcr import config
from lcr.answer.shared import AnswerStream
from lcr.config import Settings
from lcr.errors import InputError, SettingError
from lcr.estimate.throughput import observe_build
from lcr.methods.base import BuildContext, Needs, QueryContext
from lcr.models.backends import (
    cpu_configuration,
    describe_configuration,
    llm_configuration,
)
from lcr.models.base import Role
from lcr.models.container import Models
from lcr.models.spec import DEFAULT_EMBEDDER, DEFAULT_LLM
from lcr.pipeline.accounting import spending
from lcr.pipeline.answering import answer_evidence, plan_answer
from lcr.pipeline.integrity import check_evidence, retired_reading, stored_build_settings
from lcr.pipeline.plans import AnyMethod, BuildPlan, QueryPlan, bind, require
from lcr.pipeline.plans import answer_settings as answer_settings
from lcr.pipeline.plans import build_settings as build_settings

# re-exported: the pipeline's callers (the CLI, lcr.api, lcr eval) plan here too
from lcr.pipeline.plans import checked_question as checked_question
from lcr.pipeline.plans import expand_methods as expand_methods
from lcr.pipeline.plans import plan_builds as plan_builds
from lcr.pipeline.plans import plan_query as plan_query
from lcr.pipeline.plans import query_settings as query_settings
from lcr.progress import NULL_PROGRESS, Progress
from lcr.result import Result, cite
from lcr.store import Document, Index, MethodReader
from lcr.store.writing import writer_lock

if TYPE_CHECKING:
    from lcr.text.formats import ExtractOptions
    from lcr.text.inputs import InputFile


def load_documents(
    files: Sequence[InputFile],
    warn: Callable[[str], None] | None = None,
    options: ExtractOptions | None = None,
) -> list[Document]:
    """Read every file, named relative to the inputs' common folder. A file a folder
    walk found that lcr cannot read is skipped with a warning; one given by name
    stops the run with its one-line reason."""
    from lcr.text.formats import ExtractOptions
    from lcr.text.inputs import document_names

    opts = options if options is not None else ExtractOptions()
    if opts.warn is None:
        opts = dataclasses.replace(opts, warn=warn)
    docs = []
    for f, name in zip(files, document_names(files), strict=True):
        try:
            docs.append(read_document(f, name, opts))
        except InputError as exc:
            if not f.found:
                raise
            if warn is not None:
                warn(f"skipped: {exc}")
    return some_documents(docs)


def read_document(f: InputFile, name: str, options: ExtractOptions) -> Document:
    """One file read as :func:`load_documents` reads it (a cluster's worker calls this):
    named ``name``, its absolute path recorded."""
    from lcr.text.loading import load_document

    d = load_document(f.path, options=options, name=name)
    where = "-" if str(f.path) == "-" else os.path.abspath(f.path)
    return dataclasses.replace(d, path=where)


def some_documents(docs: list[Document]) -> list[Document]:
    """``docs``, or one line when a folder walk found nothing lcr could read."""
    if not docs:
        raise InputError("none of the files found could be read (see the warnings above)")
    return docs


def default_index_path(source: str | Path) -> Path:
    """``book.txt`` -> ``book.idx`` beside it; stdin -> ``stdin.idx`` here."""
    if str(source) == "-":
        return Path("stdin.idx")
    p = Path(source)
    return p.with_name(p.stem + ".idx") if p.suffix else p.with_name(p.name + ".idx")


@dataclass
class BuildReport:
    method: str
    built: bool  # False when an identical build was already there
    seconds: float
    counts: dict[str, int] = field(default_factory=dict)
    # an up-to-date build made with another LLM configuration than this run's
    note: str = ""


def build_models_record(needs: Needs, models: Models) -> dict[str, str]:
    """The models a build used, recorded in the manifest (a change means a rebuild)."""
    rec: dict[str, str] = {}
    if needs.uses_llm:
        rec["llm"] = models.llm_id()
    if needs.embedder:
        rec["embedder"] = models.embedder_id()
    if needs.scorer:
        rec["scorer"] = models.model_id(Role.SCORER)
    return rec


def build(
    index: Index,
    plans: Sequence[BuildPlan],
    models: Models,
    *,
    force: bool = False,
    progress: Progress = NULL_PROGRESS,
    warn: Callable[[str], None] | None = None,
    on_report: Callable[[BuildReport], None] | None = None,
    note: Callable[[str], None] | None = None,
) -> list[BuildReport]:
    """Build each of ``plans`` (made with :func:`~lcr.pipeline.plans.plan_builds`, every
    setting and need checked) into ``index``; an identical, undamaged existing build is
    kept.

    ``on_report`` hears of each method as soon as it is committed (or found up to
    date), so a caller can print it before the next build starts; ``note`` hears
    that the build waits for another process writing the same index.
    """
    report_to = on_report or (lambda report: None)
    reports = []
    for plan in plans:
        method, settings, needs = plan.method, plan.settings, plan.needs
        # this build's models: the run's binding, the scorer the method names
        roles = bind(dataclasses.replace(models, binding=plan.binding), needs)
        record = build_models_record(needs, roles)
        index.wait_for_writers(note)  # another process may be building this very method
        existing = index.methods.get(method.name)
        if (
            not force
            and existing is not None
            and method.name not in index.damaged
            and _same_settings(method, existing.settings, settings)
            and _same_models(existing.models, record)
        ):
            differs = _configuration_note(existing.stats, needs, roles)
            reports.append(BuildReport(method.name, False, 0.0, dict(existing.counts), differs))
            report_to(reports[-1])
            continue
        with index.building(
            method.name,
            settings=settings.to_json(),
            models=record,
            rebuild_args=rebuild_args(method, settings, record),
            note=note,
        ) as out:
            before = roles.usage_snapshot()
            method.build(
                BuildContext(
                    source=index.source,
                    documents=index.documents,
                    out=out,
                    models=roles,
                    settings=settings,
                    progress=progress,
                    cache=index.llm_cache(method.name),
                    warn=warn or (lambda message: None),
                    read_layouts=lambda: index.layouts,
                )
            )
            if needs.uses_llm or needs.scorer:
                # what this build paid; summaries reused from the index's cache cost nothing
                out.stats["llm_usage"] = roles.usage_snapshot().minus(before).to_json()
                role = Role.LLM if needs.uses_llm else Role.SCORER
                if roles.loaded(role):
                    out.stats["llm_backend"] = str(roles.backend_of(role))
                    out.stats["llm_configuration"] = roles.configuration(role)
        entry = index.methods[method.name]
        observe_build(method.name, needs.uses_llm, roles, entry)  # for lcr index --estimate
        # the build's own time, from the manifest: a wait for another writer is not in it
        reports.append(BuildReport(method.name, True, entry.build_seconds, dict(entry.counts)))
        report_to(reports[-1])
    return reports


def _configuration_note(stats: dict[str, Any], needs: Needs, models: Models) -> str:
    """Why an up-to-date build may differ from what this run would make: it was built
    with another backend, device, dtype or quantisation (empty when the same or unknown)."""
    if not (needs.uses_llm or needs.scorer):
        return ""
    recorded = stats.get("llm_configuration")
    if not isinstance(recorded, dict):
        backend = stats.get("llm_backend")
        if not backend:
            return ""
        recorded = cpu_configuration(str(backend))  # recorded before configurations were
    now = models.configuration(Role.LLM if needs.uses_llm else Role.SCORER)
    if now is None or now == recorded:
        return ""
    return (
        f"built with {describe_configuration(recorded)}, not this run's "
        f"{describe_configuration(now)}; --force rebuilds it"
    )


def rebuild_args(method: AnyMethod, settings: Settings, record: dict[str, str]) -> list[str]:
    """The ``lcr index`` options that build ``method`` again as now: every setting that
    is not its default, and every model that is not lcr's default."""
    defaults = method.build_settings().to_json()
    args = [
        f"--set {shlex.quote(f'{method.name}.{key}={config.value_text(value)}')}"
        for key, value in settings.to_json().items()
        if value != defaults.get(key)
    ]
    for role, default in (("llm", DEFAULT_LLM), ("embedder", DEFAULT_EMBEDDER)):
        if role in record and record[role] != default:
            args.append(f"--{role} {shlex.quote(record[role])}")
    return args


def _same_models(recorded: dict[str, str], now: dict[str, str]) -> bool:
    """Whether an existing build was made with the models ``now`` names. A role the
    build did not record (lcr 0.1.0 left out LightPAL's ``scorer=llm`` LLM) is
    taken as the same, so such an index is not rebuilt, and paid for, again."""
    return set(recorded) <= set(now) and all(recorded.get(k, v) == v for k, v in now.items())


def _same_settings(method: AnyMethod, stored: dict[str, Any], settings: Settings) -> bool:
    """Whether an existing build was made with ``settings``: its recorded values read as
    written (a build an older lcr made in a way no setting reproduces now is not)."""
    if retired_reading(method, stored) is not None:
        return False
    try:
        return method.build_settings.from_stored(stored).to_json() == settings.to_json()
    except SettingError:  # a recorded value of the wrong type: rebuilt, which repairs it
        return False


def index_files(
    files: Sequence[InputFile],
    out: str | Path,
    plans: Sequence[BuildPlan],
    models: Models,
    *,
    force: bool = False,
    progress: Progress = NULL_PROGRESS,
    warn: Callable[[str], None] | None = None,
    on_report: Callable[[BuildReport], None] | None = None,
    note: Callable[[str], None] | None = None,
    extract: ExtractOptions | None = None,
    loaded: Sequence[Document] | None = None,
) -> tuple[Index, list[BuildReport]]:
    """Create (or reuse) the index of ``files`` (``lcr.text.inputs.expand_inputs``, once,
    where the paths were given) at ``out`` and build each of ``plans`` into it.

    A file named twice is indexed once, with a warning. An index this call created
    is removed again if its first build fails before anything was committed or paid.
    ``loaded``: ``files`` already read (by a cluster's workers), in their order.
    """
    docs = list(loaded) if loaded is not None else load_documents(files, warn, extract)
    # one writer from the first look at ``out`` to the commit: a concurrent run waits,
    # then builds on what this one committed (or refuses other documents, saying why)
    with writer_lock(Path(out), note):
        index = Index.create(out, docs, force=force, note=note)
        staged = index.target is not None
        held: list[BuildReport] = []  # a staged replacement's reports wait for its commit
        try:
            reports = build(
                index,
                plans,
                models,
                force=force and not staged,  # a staged index has nothing to keep
                progress=progress,
                warn=warn,
                on_report=held.append if staged else on_report,
                note=note,
            )
            index = index.commit()
        except BaseException:
            if index.created:
                index.discard_if_unused()
            raise
    if on_report is not None:
        for report in held:
            on_report(report)
    return index, reports


def query_models(
    reader_models: dict[str, str],
    plan: QueryPlan,
    models: Models,
    note: Callable[[str], None] | None = None,
) -> Models:
    """The models a query works with: the embedder the index was built with (vectors
    must match), whatever ``--embedder`` asked for; the caller's models are not changed.

    The index chooses the model, so the user hears which one is loaded when it is
    not the one asked for. Loading itself takes presets, local folders and hub ids,
    never a model's own code (``lcr.models.embedder``).
    """
    needs = plan.needs
    built_with = reader_models.get("embedder")
    if built_with and not models.embedder_loaded and models.spec.embedder != built_with:
        if note is not None and needs.embedder:
            note(
                f"the index was built with the embedder {built_with}: loading it instead of "
                f"--embedder {models.spec.embedder}"
            )
        return bind(models, needs, built_with)
    return bind(models, needs)


def retrieval_llm_note(plan: QueryPlan, models: Models) -> str | None:
    """What to tell the user when a retrieval is about to load the LLM; None if it is not.

    Retrieval alone usually needs no LLM, so loading one (gigabytes, seconds to
    minutes) must not happen silently. Said once: after the load there is nothing to say.
    """
    needs = plan.needs
    if not needs.uses_llm or models.llm_loaded:
        return None
    reason = f" ({needs.why})" if needs.why else ""
    return f"{plan.method.name} retrieval loads the LLM {models.spec.llm}{reason}"


def retrieve_query(
    index: Index,
    query: QueryPlan,
    question: str,
    models: Models,
    *,
    progress: Progress = NULL_PROGRESS,
    note: Callable[[str], None] | None = None,
    keep_state: bool = False,
) -> Result:
    """Evidence for ``question`` (checked: :func:`~lcr.pipeline.plans.checked_question`)
    with the plan; ``note`` hears (once) when retrieval loads the LLM. ``keep_state``
    keeps what the method's own answer step needs (``evidence.state``) for
    :func:`ask_query`."""
    models = require(models, query.needs, f"{query.method.name} retrieval")
    reader = index.reader(query.method.name)
    roles = query_models(reader.entry.models, query, models, note)
    return _retrieve(index, reader, query, question, roles, progress, note, keep_state)


def _retrieve(
    index: Index,
    reader: MethodReader,
    query: QueryPlan,
    question: str,
    models: Models,
    progress: Progress,
    note: Callable[[str], None] | None,
    keep_state: bool,
) -> Result:
    """The retrieval itself, from the method's ``reader``, with ``models`` already checked
    and bound for it."""
    method = query.method
    _ = index.layouts  # a damaged layout.json fails here, before any retrieval is paid for
    needs = query.needs
    message = retrieval_llm_note(query, models)
    if note is not None and message is not None:
        note(message)
    ctx = QueryContext(
        index.source,
        index.documents,
        reader,
        models,
        query.settings,
        stored_build_settings(index, method, reader),
        progress,
        answer=query.answer,
    )
    with spending(models) as retrieving:  # measured here, for every method
        found = method.retrieve(ctx, question)
        check_evidence(index, method.name, found.items)
    # one order for every method and output, cited; the state only for an answer step
    items = cite(index, found.in_rank_order())
    evidence = found.finished(items, retrieving.usage, keep_state=keep_state)
    del found  # nothing answers from its state: a KV cache goes at once
    used_models = dict(reader.entry.models)
    if needs.uses_llm and models.llm_loaded:
        used_models["llm"] = models.llm_id()
        used_models["backend"] = str(models.llm.backend)
        used_models["llm_run"] = describe_configuration(llm_configuration(models.llm))
    return Result(
        question=question,
        method=method.name,
        evidence=evidence,
        usage=evidence.usage,
        timings={"retrieve_s": retrieving.seconds},
        models=used_models,
        index=str(index.path),
    )


def ask_query(
    index: Index,
    query: QueryPlan,
    question: str,
    models: Models,
    *,
    progress: Progress = NULL_PROGRESS,
    note: Callable[[str], None] | None = None,
    stream: AnswerStream | None = None,
) -> Result:
    """Retrieve, then answer ``question`` (checked) with the plan: the method's own answer
    step if it has one, else the shared one with the plan's ``answer.*`` settings
    (:mod:`lcr.answer.shared`); ``stream`` watches the shared step."""
    planned = plan_answer(query, models, note)
    query = planned.pool or planned.query
    # the roles bound once for the whole ask: checked above, the index's embedder here
    reader = index.reader(query.method.name)
    roles = query_models(reader.entry.models, query, planned.models, note)
    result = _retrieve(index, reader, query, question, roles, progress, note, keep_state=True)

    return answer_evidence(
        index,
        result,
        planned.step,
        query.settings,
        query.answer,
        roles,
        stream=stream,
        note=note,
    )
