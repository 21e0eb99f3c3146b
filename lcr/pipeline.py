"""The library API behind the CLI and the evaluator: index, retrieve, ask.

Everything a command does that is not parsing arguments or printing lives here,
so ``lcr eval`` and scripts run exactly the code the CLI runs.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lcr import config
from lcr.accounting import spending
from lcr.answer import ANSWER_TARGET, AnswerSettings, AnswerStream, resolve_answer_settings
from lcr.answer_needs import require_answer
from lcr.answering import answer_evidence
from lcr.config import Settings
from lcr.errors import InputError, SettingError, UsageError
from lcr.estimate.throughput import observe_build
from lcr.evidence import EvidenceItem
from lcr.integrity import check_evidence, stored_build_settings
from lcr.methods import get_method, method_names
from lcr.methods.base import BuildContext, Method, Needs, QueryContext
from lcr.models.backends import (
    cpu_configuration,
    describe_configuration,
    llm_configuration,
)
from lcr.models.base import Role
from lcr.models.container import Models
from lcr.models.spec import DEFAULT_EMBEDDER, DEFAULT_LLM
from lcr.progress import NULL_PROGRESS, Progress
from lcr.result import Result, cite
from lcr.store import DocumentInput, Index
from lcr.store.writing import writer_lock

if TYPE_CHECKING:
    from lcr.text.formats import ExtractOptions
    from lcr.text.inputs import InputFile


def load_documents(
    files: Sequence[InputFile],
    warn: Callable[[str], None] | None = None,
    options: ExtractOptions | None = None,
) -> list[DocumentInput]:
    """Read every file, named relative to the inputs' common folder. A file a folder
    walk found that lcr cannot read is skipped with a warning; one given by name
    stops the run with its one-line reason."""
    from lcr.text.formats import ExtractOptions
    from lcr.text.inputs import document_names
    from lcr.text.loading import load_document

    opts = options if options is not None else ExtractOptions()
    if opts.warn is None:
        opts = dataclasses.replace(opts, warn=warn)
    docs = []
    for f, name in zip(files, document_names(files), strict=True):
        try:
            d = load_document(f.path, options=opts, name=name)
        except InputError as exc:
            if not f.found:
                raise
            if warn is not None:
                warn(f"skipped: {exc}")
            continue
        docs.append(
            DocumentInput(
                d.name,
                d.text,
                d.sha256,
                d.size,
                format=d.format,
                layout=d.layout,
                extractor=d.extractor,
                extractor_version=d.extractor_version,
                options=d.options,
                path="-" if str(f.path) == "-" else os.path.abspath(f.path),
            )
        )
    if not docs:
        raise InputError("none of the files found could be read (see the warnings above)")
    return docs


def default_index_path(source: str | Path) -> Path:
    """``book.txt`` -> ``book.idx`` beside it; stdin -> ``stdin.idx`` here."""
    if str(source) == "-":
        return Path("stdin.idx")
    p = Path(source)
    return p.with_name(p.stem + ".idx") if p.suffix else p.with_name(p.name + ".idx")


AnyMethod = Method[Any, Any]


def check_sets(sets: Sequence[str]) -> None:
    """Every ``--set`` names a known method (or ``answer``) and setting with a valid value."""
    resolve_answer_settings(sets)  # answer.KEY=VALUE: the shared answer step's settings
    method_sets = [s for s in sets if config.split_assignment(s)[0] != ANSWER_TARGET]
    named = {config.split_assignment(s)[0] for s in method_sets}
    declared: dict[str, tuple[type[config.Settings], ...]] = {}
    for name in method_names():  # only the methods named are loaded (a plugin may fail)
        m = get_method(name) if name in named else None
        declared[name] = (m.build_settings, m.query_settings) if m is not None else ()
    config.check_targets(method_sets, declared)


def answer_settings(
    method: AnyMethod, sets: Sequence[str], max_new_tokens: int = 256
) -> AnswerSettings:
    """The :class:`~lcr.answer.AnswerSettings` ``method`` answers with: lcr's defaults,
    the values its paper fixes (``Method.answer_paper``), then ``--set answer.*``."""
    return resolve_answer_settings(sets, max_new_tokens, method.answer_paper)


def build_settings(method: AnyMethod, sets: Sequence[str]) -> Settings:
    """``method``'s typed build settings: its defaults overridden by ``--set``."""
    values = config.parse_sets(
        method.name, method.build_settings, sets, phase="build", other_phase=method.query_settings
    )
    return method.build_settings.build(values, label=method.name)


def query_settings(method: AnyMethod, sets: Sequence[str]) -> Settings:
    """``method``'s typed query settings: its defaults overridden by ``--set``."""
    values = config.parse_sets(
        method.name, method.query_settings, sets, phase="query", other_phase=method.build_settings
    )
    return method.query_settings.build(values, label=method.name)


def require(models: Models, needs: Needs, purpose: str) -> None:
    """Check, before any work, that the backends can do what ``needs`` asks of each role
    (a second LLM role is pointed at the model the method names for it first)."""
    if needs.llm:
        models.require_role(Role.LLM, needs.llm, purpose)
    if needs.scorer:
        models.spec.scorer = needs.scorer_model or None
        models.require_role(Role.SCORER, needs.scorer, purpose)


@dataclass
class BuildReport:
    method: str
    built: bool  # False when an identical build was already there
    seconds: float
    counts: dict[str, int] = field(default_factory=dict)
    # an up-to-date build made with another LLM configuration than this run's
    note: str = ""


def expand_methods(requested: Sequence[str]) -> list[str]:
    """``all`` means every method; nothing means the methods that need no LLM."""
    from lcr.methods import default_build_methods

    if not requested:
        return default_build_methods()
    names: list[str] = []
    for name in requested:
        for n in method_names() if name == "all" else [name]:
            get_method(n)  # unknown names fail here, before any work
            if n not in names:
                names.append(n)
    return names


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
    methods: Sequence[str],
    models: Models,
    sets: Sequence[str] = (),
    *,
    force: bool = False,
    progress: Progress = NULL_PROGRESS,
    warn: Callable[[str], None] | None = None,
    on_report: Callable[[BuildReport], None] | None = None,
    note: Callable[[str], None] | None = None,
) -> list[BuildReport]:
    """Build ``methods`` into ``index``; an identical, undamaged existing build is kept.

    ``on_report`` hears of each method as soon as it is committed (or found up to
    date), so a caller can print it before the next build starts; ``note`` hears
    that the build waits for another process writing the same index.
    """
    report_to = on_report or (lambda report: None)
    check_sets(sets)
    # every method's settings and needs are checked before any work starts
    plans = []
    for method in (get_method(n) for n in methods):
        settings = build_settings(method, sets)
        needs = method.build_needs(settings)
        require(models, needs, f"building {method.name}")
        plans.append((method, settings, needs))
    reports = []
    for method, settings, needs in plans:
        require(models, needs, f"building {method.name}")  # points each role at its model
        record = build_models_record(needs, models)
        index.wait_for_writers(note)  # another process may be building this very method
        existing = index.methods.get(method.name)
        if (
            not force
            and existing is not None
            and method.name not in index.damaged
            and _same_settings(method, existing.settings, settings)
            and _same_models(existing.models, record)
        ):
            differs = _configuration_note(existing.stats, needs, models)
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
            before = models.usage_snapshot()
            method.build(
                BuildContext(
                    source=index.source,
                    documents=index.documents,
                    out=out,
                    models=models,
                    settings=settings,
                    progress=progress,
                    cache=index.llm_cache(method.name),
                    warn=warn or (lambda message: None),
                )
            )
            if needs.uses_llm or needs.scorer:
                # what this build paid; summaries reused from the index's cache cost nothing
                out.stats["llm_usage"] = models.usage_snapshot().minus(before).to_json()
                role = Role.LLM if needs.uses_llm else Role.SCORER
                if models.loaded(role):
                    out.stats["llm_backend"] = str(models.backend_of(role))
                    out.stats["llm_configuration"] = models.configuration(role)
        entry = index.methods[method.name]
        observe_build(method.name, needs.uses_llm, models, entry)  # for lcr index --estimate
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
    """Whether an existing build was made with ``settings``: its recorded values read
    under today's names (a renamed setting's old name maps to the new one), so an index
    built before a rename still counts as up to date."""
    try:
        return method.build_settings.from_stored(stored).to_json() == settings.to_json()
    except SettingError:  # a recorded value of the wrong type: rebuilt, which repairs it
        return False


def index_files(
    paths: Sequence[str | Path],
    out: str | Path,
    methods: Sequence[str],
    models: Models,
    sets: Sequence[str] = (),
    *,
    force: bool = False,
    progress: Progress = NULL_PROGRESS,
    warn: Callable[[str], None] | None = None,
    on_report: Callable[[BuildReport], None] | None = None,
    note: Callable[[str], None] | None = None,
    globs: Sequence[str] = (),
    excludes: Sequence[str] = (),
    extract: ExtractOptions | None = None,
) -> tuple[Index, list[BuildReport]]:
    """Create (or reuse) the index of ``paths`` (files and folders) at ``out`` and build
    ``methods`` into it.

    A file named twice is indexed once, with a warning. An index this call created
    is removed again if its first build fails before anything was committed or paid.
    """
    names = expand_methods(methods)
    check_sets(sets)
    with warnings.catch_warnings():  # a renamed setting is warned about once, by build()
        warnings.simplefilter("ignore", config.SettingRenamed)
        for n in names:  # a bad --set or a backend that cannot build it fails before any read
            method = get_method(n)
            require(models, method.build_needs(build_settings(method, sets)), f"building {n}")
    from lcr.text.inputs import expand_inputs

    files = expand_inputs(paths, globs=globs, excludes=excludes, warn=warn)
    docs = load_documents(files, warn=warn, options=extract)
    # one writer from the first look at ``out`` to the commit: a concurrent run waits,
    # then builds on what this one committed (or refuses other documents, saying why)
    with writer_lock(Path(out), note):
        index = Index.create(out, docs, force=force, note=note)
        staged = index.target is not None
        held: list[BuildReport] = []  # a staged replacement's reports wait for its commit
        try:
            reports = build(
                index,
                names,
                models,
                sets,
                force=force and not staged,  # a staged index has nothing to keep
                progress=progress,
                warn=warn,
                on_report=held.append if staged else on_report,
                note=note,
            )
            index.commit()
        except BaseException:
            if index.created:
                index.discard_if_unused()
            raise
    if on_report is not None:
        for report in held:
            on_report(report)
    return index, reports


@dataclass(frozen=True)
class Query:
    """A question resolved once, where the library is entered: the question checked,
    ``-k`` checked, the method's typed query settings and the answer step's settings
    built from ``--set``. Everything below takes it as it is."""

    method: AnyMethod
    question: str
    settings: Settings
    answer: AnswerSettings
    k: int | None = None

    def with_question(self, question: str) -> Query:
        """The same query for another question (``lcr ask INDEX -``: one a line)."""
        return dataclasses.replace(self, question=checked_question(question))

    @property
    def needs(self) -> Needs:
        """What retrieving this query needs (answering adds ``answer_needs``)."""
        return self.method.retrieve_needs(self.settings)


def checked_question(question: str) -> str:
    q = question.strip()
    if not q:
        raise UsageError("the question is empty")
    return q


def resolve_query(
    method_name: str,
    question: str,
    sets: Sequence[str] = (),
    *,
    k: int | None = None,
    max_new_tokens: int = 256,
) -> Query:
    """Check everything a query carries before any index opens or model loads: the
    question, ``k``, and every ``--set`` (even one for another method)."""
    method = get_method(method_name)
    check_sets(sets)
    if k is not None and k < 1:
        raise UsageError("-k must be at least 1")
    if max_new_tokens < 1:
        raise UsageError("--max-new-tokens must be at least 1")
    return Query(
        method=method,
        question=checked_question(question),
        settings=query_settings(method, sets),
        answer=answer_settings(method, sets, max_new_tokens),
        k=k,
    )


def _align_models(
    reader_models: dict[str, str],
    models: Models,
    note: Callable[[str], None] | None = None,
    uses_embedder: bool = True,
) -> None:
    """Query with the embedder the index was built with (vectors must match).

    The index chooses the model, so the user hears which one is loaded when it is
    not the one asked for. Loading itself takes presets, local folders and hub ids,
    never a model's own code (``lcr.models.embedder``).
    """
    built_with = reader_models.get("embedder")
    if built_with and not models.embedder_loaded and models.spec.embedder != built_with:
        if note is not None and uses_embedder:
            note(
                f"the index was built with the embedder {built_with}: loading it instead of "
                f"--embedder {models.spec.embedder}"
            )
        models.spec.embedder = built_with


def retrieval_llm_note(query: Query, models: Models) -> str | None:
    """What to tell the user when a retrieval is about to load the LLM; None if it is not.

    Retrieval alone usually needs no LLM, so loading one (gigabytes, seconds to
    minutes) must not happen silently. Said once: after the load there is nothing to say.
    """
    needs = query.needs
    if not needs.uses_llm or models.llm_loaded:
        return None
    reason = f" ({needs.why})" if needs.why else ""
    return f"{query.method.name} retrieval loads the LLM {models.spec.llm}{reason}"


def retrieve(
    index: Index,
    method_name: str,
    question: str,
    models: Models,
    sets: Sequence[str] = (),
    *,
    k: int | None = None,
    progress: Progress = NULL_PROGRESS,
    note: Callable[[str], None] | None = None,
) -> Result:
    """Evidence for ``question``; ``note`` hears (once) when retrieval loads the LLM."""
    query = resolve_query(method_name, question, sets, k=k)
    return retrieve_query(index, query, models, progress=progress, note=note)


def retrieve_query(
    index: Index,
    query: Query,
    models: Models,
    *,
    progress: Progress = NULL_PROGRESS,
    note: Callable[[str], None] | None = None,
    keep_state: bool = False,
) -> Result:
    """:func:`retrieve` for a resolved :class:`Query`; ``keep_state`` keeps what the
    method's own answer step needs (``evidence.state``) for :func:`ask_query`."""
    method = query.method
    reader = index.reader(method.name)
    _ = index.layouts  # a damaged layout.json fails here, before any retrieval is paid for
    needs = query.needs
    require(models, needs, f"{method.name} retrieval")
    _align_models(reader.entry.models, models, note, needs.embedder)
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
        evidence = method.retrieve(ctx, query.question, query.k)
        check_evidence(index, method.name, evidence.items)
        if not keep_state:
            evidence.state = None  # nothing answers from it: let a KV cache go at once
    evidence.usage = retrieving.usage
    evidence.items = evidence.in_rank_order()  # one order for every method and output
    cite(index, evidence.items)
    used_models = dict(reader.entry.models)
    if needs.uses_llm and models.llm_loaded:
        used_models["llm"] = models.llm_id()
        used_models["backend"] = str(getattr(models.llm, "backend", "unknown"))
        used_models["llm_run"] = describe_configuration(llm_configuration(models.llm))
    return Result(
        question=query.question,
        method=method.name,
        evidence=evidence,
        usage=evidence.usage,
        timings={"retrieve_s": retrieving.seconds},
        models=used_models,
    )


def ask(
    index: Index,
    method_name: str,
    question: str,
    models: Models,
    sets: Sequence[str] = (),
    *,
    k: int | None = None,
    max_new_tokens: int = 256,
    progress: Progress = NULL_PROGRESS,
    note: Callable[[str], None] | None = None,
) -> Result:
    """Retrieve, then answer: the method's own answer step if it has one, else the
    shared one with the ``answer.*`` settings of ``sets`` (:mod:`lcr.answer`)."""
    query = resolve_query(method_name, question, sets, k=k, max_new_tokens=max_new_tokens)
    return ask_query(index, query, models, progress=progress, note=note)


def ask_query(
    index: Index,
    query: Query,
    models: Models,
    *,
    progress: Progress = NULL_PROGRESS,
    note: Callable[[str], None] | None = None,
    stream: AnswerStream | None = None,
) -> Result:
    """:func:`ask` for a resolved :class:`Query`; ``stream`` watches the shared step."""
    method = query.method
    step = method.answer_step(query.settings)
    needs = query.needs | method.answer_needs(query.settings)
    answer = require_answer(
        models,
        needs,
        query.answer,
        step.shared_settings,
        f"answering with {method.name}",
        require,
        note,
    )
    query = dataclasses.replace(query, answer=answer)
    selecting = query.answer.select != "off" and step.shared_settings
    own = query  # the method's own evidence, without the deeper pool (answer.reread)
    if selecting and query.k is None and query.answer.pool > 0:
        query = dataclasses.replace(query, k=query.answer.pool)  # a deeper pool to select from
    result = retrieve_query(index, query, models, progress=progress, note=note, keep_state=True)

    def unselected() -> list[EvidenceItem]:  # only asked for when the pool was deeper
        return retrieve_query(index, own, models).evidence.items

    return answer_evidence(
        index,
        result,
        step,
        query.settings,
        query.answer,
        models,
        unselected=None if own is query else unselected,
        stream=stream,
        note=note,
    )
