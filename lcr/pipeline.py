"""The library API behind the CLI and the evaluator: index, retrieve, ask.

Everything a command does that is not parsing arguments or printing lives here,
so ``lcr eval`` and scripts run exactly the code the CLI runs.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lcr import config
from lcr.answer import ANSWER_TARGET, AnswerSettings, resolve_answer_settings, shared_answer
from lcr.errors import UsageError
from lcr.evidence import Evidence, Usage
from lcr.methods import get_method, method_names
from lcr.methods.base import BuildContext, Method, QueryContext
from lcr.models.base import Capability
from lcr.models.container import Models
from lcr.progress import NULL_PROGRESS, Progress
from lcr.store import DocumentInput, Index


def load_documents(
    paths: Sequence[str | Path], warn: Callable[[str], None] | None = None
) -> list[DocumentInput]:
    from lcr.text.loading import load_document

    docs = []
    for p in paths:
        d = load_document(p, warn=warn)
        docs.append(DocumentInput(d.name, d.text, d.sha256, d.size))
    return docs


def default_index_path(source: str | Path) -> Path:
    """``book.txt`` -> ``book.idx`` beside it; stdin -> ``stdin.idx`` here."""
    if str(source) == "-":
        return Path("stdin.idx")
    p = Path(source)
    return p.with_name(p.stem + ".idx") if p.suffix else p.with_name(p.name + ".idx")


def check_sets(sets: Sequence[str]) -> None:
    """Every ``--set`` names a known method (or ``answer``) and setting with a valid value."""
    resolve_answer_settings(sets)  # answer.KEY=VALUE: the shared answer step's settings
    declared = {}
    for name in method_names():
        m = get_method(name)
        declared[name] = (*m.build_settings, *m.query_settings)
    method_sets = [s for s in sets if config.split_assignment(s)[0] != ANSWER_TARGET]
    config.check_methods_named(method_sets, method_names(), declared)


def answer_settings(
    method: Method, sets: Sequence[str], max_new_tokens: int = 256
) -> AnswerSettings:
    """The :class:`~lcr.answer.AnswerSettings` ``method`` answers with: lcr's defaults,
    the values its paper fixes (``Method.answer_paper``), then ``--set answer.*``."""
    return resolve_answer_settings(sets, max_new_tokens, method.answer_paper)


def build_settings(method: Method, sets: Sequence[str]) -> dict[str, Any]:
    return config.resolve(
        method.name, method.build_settings, sets, phase="build", other_phase=method.query_settings
    )


def query_settings(method: Method, sets: Sequence[str]) -> dict[str, Any]:
    return config.resolve(
        method.name, method.query_settings, sets, phase="query", other_phase=method.build_settings
    )


@dataclass
class BuildReport:
    method: str
    built: bool  # False when an identical build was already there
    seconds: float
    counts: dict[str, int] = field(default_factory=dict)


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


def build_models_record(method: Method, models: Models) -> dict[str, str]:
    rec: dict[str, str] = {}
    if method.build_uses_llm:
        rec["llm"] = models.llm_id()
    if method.build_uses_embedder:
        rec["embedder"] = models.embedder_id()
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
    # every method's settings are checked before any work starts
    plans = [(m, build_settings(m, sets)) for m in (get_method(n) for n in methods)]
    for method, settings in plans:  # and what each needs of the LLM backend
        models.require(method.llm_needs("build", settings), f"building {method.name}")
    reports = []
    for method, settings in plans:
        record = build_models_record(method, models)
        index.wait_for_writers(note)  # another process may be building this very method
        existing = index.methods.get(method.name)
        if (
            not force
            and existing is not None
            and method.name not in index.damaged
            and existing.get("settings") == settings
            and existing.get("models") == record
        ):
            reports.append(BuildReport(method.name, False, 0.0, existing.get("counts", {})))
            report_to(reports[-1])
            continue
        with index.building(method.name, settings=settings, models=record, note=note) as out:
            before = _llm_usage(models)
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
            if method.build_uses_llm:
                # what this build paid; summaries reused from the index's cache cost nothing
                out.stats["llm_usage"] = _llm_usage(models).minus(before).to_json()
                if models.llm_loaded:
                    out.stats["llm_backend"] = str(getattr(models.llm, "backend", "unknown"))
        entry = index.methods[method.name]
        # the build's own time, from the manifest: a wait for another writer is not in it
        reports.append(BuildReport(method.name, True, entry["build_seconds"], entry["counts"]))
        report_to(reports[-1])
    return reports


def _llm_usage(models: Models) -> Usage:
    """A copy of the LLM's counters; zero while no LLM is loaded (a new one starts at zero)."""
    if not models.llm_loaded:
        return Usage()
    return models.llm.usage.copy()


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
) -> tuple[Index, list[BuildReport]]:
    """Create (or reuse) the index of ``paths`` at ``out`` and build ``methods`` into it.

    A file named twice is indexed once, with a warning. An index this call created
    is removed again if its first build fails before anything was committed or paid.
    """
    names = expand_methods(methods)
    check_sets(sets)
    for n in names:  # fail on a bad --set or a backend that cannot build it, before reading files
        method = get_method(n)
        models.require(method.llm_needs("build", build_settings(method, sets)), f"building {n}")
    docs = load_documents(unique_paths(paths, warn), warn=warn)
    index = Index.create(out, docs, force=force)
    try:
        reports = build(
            index,
            names,
            models,
            sets,
            force=force,
            progress=progress,
            warn=warn,
            on_report=on_report,
            note=note,
        )
    except BaseException:
        if index.created:
            index.discard_if_unused()
        raise
    return index, reports


def unique_paths(
    paths: Sequence[str | Path], warn: Callable[[str], None] | None = None
) -> list[str | Path]:
    """``paths`` with repeats of the same file dropped (a warning names each repeat)."""
    seen: set[str] = set()
    out: list[str | Path] = []
    for p in paths:
        key = "-" if str(p) == "-" else os.path.realpath(p)
        if key in seen:
            if warn is not None:
                warn(f"{p} is given more than once; it is indexed once")
            continue
        seen.add(key)
        out.append(p)
    return out


@dataclass
class Result:
    """One question's outcome: what ``--json`` prints, one object per line."""

    question: str
    method: str
    evidence: Evidence
    answer: str | None = None
    usage: Usage = field(default_factory=Usage)
    timings: dict[str, float] = field(default_factory=dict)
    models: dict[str, str] = field(default_factory=dict)
    dropped: int = 0
    # what the answer step was set to (AnswerSettings.to_json() and "step": "shared" or
    # the method whose own prompt answered); None when nothing was answered
    answer_settings: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        out = {
            "question": self.question,
            "answer": self.answer,
            "method": self.method,
            "evidence": [it.to_json() for it in self.evidence.items],
            "info": self.evidence.info,
            "usage": self.usage.to_json(),
            "timings": {k: round(v, 4) for k, v in self.timings.items()},
            "models": self.models,
        }
        if self.answer_settings is not None:
            out["answer_settings"] = self.answer_settings
        return out


def _check_question(question: str) -> str:
    q = question.strip()
    if not q:
        raise UsageError("the question is empty")
    return q


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


def retrieval_llm_note(method: Method, settings: dict[str, Any], models: Models) -> str | None:
    """What to tell the user when a retrieval is about to load the LLM; None if it is not.

    Retrieval alone usually needs no LLM, so loading one (gigabytes, seconds to
    minutes) must not happen silently. Said once: after the load there is nothing to say.
    """
    if not method.retrieval_uses_llm(settings) or models.llm_loaded:
        return None
    reason = f" ({method.retrieval_llm_reason})" if method.retrieval_llm_reason else ""
    return f"{method.name} retrieval loads the LLM {models.spec.llm}{reason}"


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
    return _retrieve(index, method_name, question, models, sets, k=k, progress=progress, note=note)


def _retrieve(
    index: Index,
    method_name: str,
    question: str,
    models: Models,
    sets: Sequence[str] = (),
    *,
    k: int | None = None,
    progress: Progress = NULL_PROGRESS,
    note: Callable[[str], None] | None = None,
    answer_tokens: int | None = None,
) -> Result:
    """Retrieval; with ``answer_tokens``, also the answer of a method that writes its own."""
    question = _check_question(question)
    method = get_method(method_name)
    settings = query_settings(method, sets)
    if k is not None and k < 1:
        raise UsageError("-k must be at least 1")
    reader = index.reader(method.name)
    models.require(method.llm_needs("query", settings), f"{method.name} retrieval")
    _align_models(
        reader.entry.get("models", {}), models, note, method.retrieval_uses_embedder(settings)
    )
    message = retrieval_llm_note(method, settings, models)
    if note is not None and message is not None:
        note(message)
    started = time.perf_counter()
    ctx = QueryContext(index.source, index.documents, reader, models, settings, progress)
    answer: str | None = None
    if answer_tokens is not None:
        evidence, answer = method.retrieve_and_answer(ctx, question, k, answer_tokens)
    else:
        evidence = method.retrieve(ctx, question, k)
    elapsed = time.perf_counter() - started
    evidence.items = evidence.in_rank_order()  # one order for every method and output
    used_models = dict(reader.entry.get("models", {}))
    if method.retrieval_uses_llm(settings) and models.llm_loaded:
        used_models["llm"] = models.llm_id()
        used_models["backend"] = str(getattr(models.llm, "backend", "unknown"))
    return Result(
        question=question,
        method=method.name,
        evidence=evidence,
        answer=answer,
        usage=evidence.usage,
        timings={"retrieve_s" if answer is None else "retrieve_and_answer_s": elapsed},
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
    method = get_method(method_name)
    settings = query_settings(method, sets)
    chosen = answer_settings(method, sets, max_new_tokens)
    models.require(
        method.llm_needs("query", settings) | {Capability.GENERATE},
        f"answering with {method.name}",
    )
    if method.answers_in_retrieval:  # the answer comes from the search's own context
        result = _retrieve(
            index,
            method_name,
            question,
            models,
            sets,
            k=k,
            progress=progress,
            note=note,
            answer_tokens=max_new_tokens,
        )
        result.answer_settings = {**chosen.to_json(), "step": method.name}
        return result
    result = retrieve(index, method_name, question, models, sets, k=k, progress=progress, note=note)
    started = time.perf_counter()
    llm = models.llm
    loaded = time.perf_counter()
    out = method.answer(
        result.question,
        result.evidence,
        llm,
        settings=settings,
        documents=index.documents,
        max_new_tokens=max_new_tokens,
    )
    step = method.name
    if out is None:
        step = "shared"
        out = shared_answer(
            result.question,
            result.evidence.items,
            llm,
            chosen,
            source=index.source,
            names=[d.name for d in index.documents],
        )
    result.timings["answer_s"] = time.perf_counter() - loaded
    if loaded - started > 0.05:
        result.timings["llm_load_s"] = loaded - started
    result.answer = out.text
    result.answer_settings = {**chosen.to_json(), "step": step}
    result.evidence = Evidence(
        method=result.evidence.method,
        items=out.used,
        info={**result.evidence.info, **({"dropped": out.dropped} if out.dropped else {})},
        usage=result.evidence.usage,
    )
    result.evidence.items = result.evidence.in_rank_order()  # read as set, shown by rank
    result.usage = result.usage.merged(out.usage)
    result.models["llm"] = llm.model_id
    result.models["backend"] = str(getattr(llm, "backend", "unknown"))
    return result
