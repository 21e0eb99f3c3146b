"""The runner behind ``lcr eval``: every method on every question, resumable.

Questions over the same documents share one index (cached beside the data or in
``--index-dir``); each method is built into it once (``pipeline.build`` keeps an
identical build). Each finished (question, method) is appended to the results
file at once, keyed by a digest of everything that changes the outcome (method,
resolved build and query settings, models, ``-k``, answer or retrieval-only,
the answer step's settings),
so a rerun skips what is done and an interrupted run loses one question at most.
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import json
import os
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, TextIO

from lcr import pipeline
from lcr.answer.shared import (
    ORIGINAL,
    AnswerSettings,
)
from lcr.answer.step import SHARED_ANSWER
from lcr.config import NoSettings, Settings
from lcr.errors import InputError, LcrError, SettingError, UsageError
from lcr.eval import dataset, metrics
from lcr.eval.dataset import Question
from lcr.evidence import Evidence, EvidenceItem
from lcr.methods import get_method
from lcr.methods.base import Method
from lcr.models.container import Models
from lcr.pipeline import Result
from lcr.pipeline.answering import answer_evidence
from lcr.pipeline.fresh import forget_prompts
from lcr.pipeline.plans import (
    BUILD,
    QUERY,
    BuildPlan,
    ParsedSets,
    QueryPlan,
    fixed_query,
    parse_sets,
    plan_together,
)
from lcr.progress import NULL_PROGRESS, Progress, Task
from lcr.store import Document, Index
from lcr.store.manifest import Manifest
from lcr.text.tokens import count_tokens


@dataclass
class RunOptions:
    methods: list[str]
    k: int | None = None
    limit: int | None = None
    retrieval_only: bool = False
    sets: list[str] = field(default_factory=list)
    max_new_tokens: int = 256
    index_dir: Path | None = None
    out: Path | None = None
    # where the data file's document paths may point (default: the data file's folder)
    documents_root: Path | None = None
    # hears one-line notes for the user (e.g. retrieval is loading the LLM)
    note: Callable[[str], None] | None = None
    # the command line that asked for the run, kept in each record (``made_by``)
    command: str | None = None


GOLD = "gold"
"""``-m gold``: the answer step reads only each question's gold evidence, the ceiling
every retriever's evidence is measured against (datasets that carry ``evidence``)."""


@dataclass
class MethodPlan:
    """One method as this run uses it, and the digest that identifies its results;
    ``method`` is None for the gold-evidence reading (:data:`GOLD`)."""

    method: Method[Any, Any] | None
    build: Settings
    query: Settings
    models: dict[str, str]
    key: str
    answer: AnswerSettings = ORIGINAL
    # how each question is retrieved and answered (None for the gold reading)
    plan: QueryPlan | None = None

    @property
    def name(self) -> str:
        return self.method.name if self.method is not None else GOLD


def default_out(data: Path) -> Path:
    """``set.jsonl`` -> ``set.results.jsonl`` beside it."""
    return data.with_name(data.stem + ".results.jsonl")


def default_index_dir(data: Path) -> Path:
    """``set.jsonl`` -> ``set.indexes/`` beside it."""
    return data.with_name(data.stem + ".indexes")


def indexes_beside(results: Path) -> Path:
    """The index folder that goes with a results file: ``set.results.jsonl`` (or
    ``set.jsonl``) -> ``set.indexes/`` beside it, as ``lcr eval report`` looks for it."""
    name = results.name
    for suffix in (".results.jsonl", ".jsonl"):
        if name.endswith(suffix) and len(name) > len(suffix):
            return results.with_name(name.removesuffix(suffix) + ".indexes")
    return results.with_name(name + ".indexes")


def _writable(folder: Path) -> bool:
    return os.access(folder, os.W_OK)


def choose_index_dir(data: Path, out: Path, writable: Callable[[Path], bool] | None = None) -> Path:
    """Where ``lcr eval`` caches its indexes when ``--index-dir`` is not given: beside
    the data (so every run over it shares them), unless that folder cannot be written
    (a data set on a read-only share, a system folder) and holds none yet; then beside
    the results file, which the run must write anyway."""
    beside_data = default_index_dir(data)
    if beside_data.is_dir() or (writable or _writable)(data.parent):
        return beside_data
    return indexes_beside(out)


def _digest(obj: Any) -> str:
    raw = json.dumps(obj, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()[:16]


def plan_methods(
    names: Sequence[str], models: Models, opts: RunOptions, sets: ParsedSets | None = None
) -> list[MethodPlan]:
    """Resolve methods and settings up front, so every bad name or --set fails first.

    One eval command builds and queries, so each method takes the ``--set`` values of
    both its phases (and ``answer.*``); a key of neither kind fails, listing the valid
    ones. ``sets``: ``opts.sets`` already parsed."""
    if not names:
        raise UsageError("give at least one --method (or --method all)")
    parsed = sets if sets is not None else parse_sets(opts.sets)
    if opts.k is not None and opts.k < 1:
        raise UsageError("-k must be at least 1")
    if opts.max_new_tokens < 1 and not opts.retrieval_only:
        raise UsageError("--max-new-tokens must be at least 1")
    plans = []
    if GOLD in names:
        plans.append(gold_plan(models, opts, parsed))
        names = [n for n in names if n != GOLD]
        if not names:
            return plans
    for name in pipeline.expand_methods(names):
        method = get_method(name)
        build = method.build_settings.build(parsed.values(method, BUILD, strict=False), label=name)
        query = method.query_settings.build(parsed.values(method, QUERY, strict=False), label=name)
        rec: dict[str, str] = {}
        needs = method.build_needs(build) | method.retrieve_needs(query)
        if needs.embedder:
            rec["embedder"] = models.embedder_id()
        if needs.uses_llm or not opts.retrieval_only:
            rec["llm"] = models.llm_id()
        answer = pipeline.answer_settings(method, parsed, opts.max_new_tokens)
        what = {
            "method": name,
            "build": stable_keys(build),
            "query": stable_keys(query),
            "models": rec,
            "k": opts.k,
            "retrieval_only": opts.retrieval_only,
            "max_new_tokens": None if opts.retrieval_only else opts.max_new_tokens,
        }
        if not opts.retrieval_only:
            what["answer"] = answer.choices()
        # retrieval alone leaves room for lcr's default reply (pipeline.retrieve's)
        reply = answer.replace(max_new_tokens=256) if opts.retrieval_only else answer
        asked = fixed_query(method, query, reply, opts.k, parsed)
        plans.append(MethodPlan(method, build, query, rec, _digest(what), answer, asked))
    return plans


def gold_plan(models: Models, opts: RunOptions, sets: ParsedSets) -> MethodPlan:
    """The gold-evidence reading as a plan: nothing to build, the shared answer step."""
    if opts.retrieval_only:
        raise UsageError(
            "-m gold reads the gold evidence: it needs the answer step, not --retrieval-only"
        )
    # the ceiling reads every gold sentence: nothing to select from
    answer = pipeline.answer_settings(None, sets, opts.max_new_tokens).replace(select="off")
    rec = {"llm": models.llm_id()}
    what = {
        "method": GOLD,
        "models": rec,
        "max_new_tokens": opts.max_new_tokens,
        "answer": answer.choices(),
    }
    return MethodPlan(None, NoSettings(), NoSettings(), rec, _digest(what), answer)


def stable_keys(settings: Settings) -> dict[str, Any]:
    """Settings as a run key sees them: every setting under its name."""
    return settings.to_json()


def read_results(path: Path) -> list[dict[str, Any]]:
    """Records already in ``path``; a torn last line (killed mid-write) is ignored."""
    if not path.exists():
        return []
    out = []
    with path.open("rb") as fh:
        for line in fh:
            if not line.strip():
                continue
            try:
                rec = json.loads(line.decode("utf-8"))
            except ValueError:  # not JSON, or not UTF-8 (UnicodeDecodeError is one)
                continue
            if isinstance(rec, dict) and "id" in rec and "run" in rec:
                out.append(rec)
    return out


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")[:40] or "docs"


def index_path(q: Question, index_dir: Path) -> Path:
    """Where the shared index of ``q``'s documents lives."""
    return index_dir / f"{_slug(q.documents[0].id)}-{q.corpus_key()}.idx"


def open_index(q: Question, index_dir: Path) -> Index:
    """The shared index of ``q``'s documents, created on first use."""
    docs = [Document(d.id, d.text, d.sha256, len(d.text.encode("utf-8"))) for d in q.documents]
    return Index.create(index_path(q, index_dir), docs)


def build_costs(
    questions: Sequence[Question], plans: Sequence[MethodPlan], index_dir: Path
) -> list[dict[str, Any]]:
    """What building each method into each of the run's indexes cost, from the manifests.

    One record per (index, method) whose build matches the run's settings. The
    LLM counters are those of the build that was committed: a build resumed from
    the index's cache counts only the calls it still had to make.
    """
    out: list[dict[str, Any]] = []
    for group in _groups(questions):
        path = index_path(group[0], index_dir)
        try:
            built = Manifest.read(path).methods
        except (LcrError, OSError):
            continue
        for plan in plans:
            entry = built.get(plan.name)
            if entry is None or plan.method is None:
                continue
            try:
                stored = plan.method.build_settings.from_stored(entry.settings)
            except SettingError:  # an edited manifest: not the build this run made
                continue
            if stored.to_json() != plan.build.to_json():
                continue
            out.append(_build_record(plan.name, path, entry))
    return out


def _build_record(method: str, path: Path, entry: Any) -> dict[str, Any]:
    """One build's cost, from its manifest entry: seconds, and the LLM's calls and tokens."""
    rec: dict[str, Any] = {"method": method, "index": path.name, "build_s": entry.build_seconds}
    usage = entry.stats.get("llm_usage")
    if isinstance(usage, dict):
        rec["llm_calls"] = usage.get("calls", 0)
        rec["prompt_tokens"] = usage.get("prompt_tokens", 0)
        rec["completion_tokens"] = usage.get("completion_tokens", 0)
    return rec


def recorded_build_costs(
    records: Sequence[dict[str, Any]], index_dir: Path
) -> list[dict[str, Any]]:
    """:func:`build_costs` for results read back from a file: each build in ``index_dir``
    made with a method and build settings the records name; only the indexes the records
    name (``index``), where they do (records from before they did: every index there)."""
    settings = {
        (str(r["method"]), json.dumps(r.get("settings", {}).get("build"), sort_keys=True))
        for r in records
    }
    named = {str(r["index"]) for r in records if r.get("index")}
    out: list[dict[str, Any]] = []
    for path in sorted(index_dir.glob("*.idx")):
        if named and path.name not in named:
            continue
        try:
            built = Manifest.read(path).methods
        except (LcrError, OSError):
            continue
        for name, entry in built.items():
            try:
                stored = get_method(name).build_settings.from_stored(entry.settings)
            except (LcrError, KeyError):  # an unknown method, an edited manifest
                continue
            if (name, json.dumps(stored.to_json(), sort_keys=True)) in settings:
                out.append(_build_record(name, path, entry))
    return out


def source_spans(q: Question, index: Index) -> tuple[list[tuple[int, int] | None], list[int]]:
    """Gold spans in source.txt offsets, and gold documents (by index) for doc-level gold."""
    starts = {d.id: i for i, d in enumerate(q.documents)}
    sdocs = index.documents
    spans: list[tuple[int, int] | None] = []
    gold_docs: list[int] = []
    located = dataset.gold_spans(q)
    for ev, span in zip(q.evidence, located, strict=True):
        if ev.whole_document:
            assert ev.doc is not None
            gold_docs.append(starts[ev.doc])
            continue
        if span is None:
            spans.append(None)
            continue
        doc_id, s, e = span
        base = sdocs[starts[doc_id]].start
        spans.append((base + s, base + e))
    return spans, gold_docs


def score(
    q: Question,
    result: Result,
    gold: list[tuple[int, int] | None],
    gold_docs: list[int],
    llm_params: float | None,
    wall: float,
) -> dict[str, float]:
    items = result.basis()  # what the answer step read (retrieval-only: what was retrieved)
    out: dict[str, float] = {}
    out.update(metrics.evidence_recall(gold, [sp for it in items for sp in it.spans]))
    dr = metrics.doc_recall(gold_docs, [it.doc for it in items])
    if dr is not None:
        out["doc_recall"] = dr
    out["evidence_tokens"] = float(sum(count_tokens(it.text) for it in items))
    if q.answers:
        joined = "\n".join(it.text for it in items)
        out["answer_in_evidence"] = metrics.string_match_all(joined, q.answers) or 0.0
        found = metrics.answer_found(joined, q.answers)
        if found is not None:  # the evidence the answer step read (retrieval-only: retrieved)
            out["answer_found"] = found
    out.update(metrics.answer_scores(result.answer, q.answers))
    u = result.usage
    out["prompt_tokens"] = float(u.prompt_tokens)
    out["completion_tokens"] = float(u.completion_tokens)
    out["llm_calls"] = float(u.calls)
    out["wall_s"] = wall
    out["flops"] = metrics.query_flops(llm_params, u.prompt_tokens, u.completion_tokens)
    return out


def _record(
    q: Question, plan: MethodPlan, opts: RunOptions, result: Result, scores: dict[str, float]
) -> dict[str, Any]:
    return {
        "id": q.id,
        "method": plan.name,
        "run": plan.key,
        "task": q.task,
        **({"type": kind} if (kind := question_kind(q)) else {}),
        "question": q.question,
        "answers": list(q.answers),
        "answer": result.answer,
        "evidence": [
            {
                "id": it.id,
                "doc": it.doc,
                "score": round(float(it.score), 6),
                "spans": [[int(s), int(e)] for s, e in it.spans],
                "text": it.text,  # what the answer step read: the metrics can be redone
                "document": it.document,
                "citations": [c.to_json() for c in it.citations],
            }
            for it in result.basis()
        ],
        "metrics": {k: round(v, 6) if isinstance(v, float) else v for k, v in scores.items()},
        "usage": result.usage.to_json(),
        "timings": {k: round(v, 4) for k, v in result.timings.items()},
        "models": result.models,
        "k": opts.k,
        "retrieval_only": opts.retrieval_only,
        "settings": {"build": plan.build.to_json(), "query": plan.query.to_json()},
        "answer_settings": result.answer_settings,
        **({"retrieval": kept} if (kept := _kept_info(plan, result)) else {}),
        **result.support,
        "made_by": made_by(opts.command),
    }


def _kept_info(plan: MethodPlan, result: Result) -> dict[str, Any]:
    """The counts the method keeps from its retrieval's ``info`` (PECAN: nodes read)."""
    return plan.method.record_fields(result.evidence.info) if plan.method is not None else {}


def made_by(command: str | None) -> dict[str, str | None]:
    """What made a record: the command, lcr's version and the commit it ran from."""
    from lcr._version import __version__

    return {"command": command, "version": __version__, "commit": _source_commit()}


@cache
def _source_commit() -> str | None:
    """Asked of git once per process: a run writes many records."""
    from lcr._version import source_commit

    return source_commit()


def question_kind(q: Question) -> str:
    """The data set's question type: its ``type`` (HotpotQA), else ``meta.type`` (QMSum's
    general / specific), else none."""
    kind = q.kind or q.meta.get("type")
    return kind if isinstance(kind, str) else ""


def backfill_answer_found(rec: dict[str, Any], q: Question) -> None:
    """Give a record from before ``answer_found`` existed that metric, from the evidence
    text it stored; a record without the text (older still) is left without it."""
    scores = rec.setdefault("metrics", {})
    evidence = rec.get("evidence")
    if "answer_found" in scores or not q.answers or not isinstance(evidence, list):
        return
    texts = [it.get("text") for it in evidence if isinstance(it, dict)]
    if not all(isinstance(t, str) for t in texts):
        return
    found = metrics.answer_found("\n".join(str(t) for t in texts), q.answers)
    if found is not None:
        scores["answer_found"] = found


def _groups(questions: Sequence[Question]) -> Iterator[list[Question]]:
    by_key: dict[str, list[Question]] = {}
    for q in questions:
        by_key.setdefault(q.corpus_key(), []).append(q)
    yield from by_key.values()


@dataclass
class RunOutcome:
    questions: list[Question]
    plans: list[MethodPlan]
    records: list[dict[str, Any]]  # this run's records (new and resumed), question order
    builds: list[dict[str, Any]]  # build cost per (index, method), see build_costs
    new: int
    skipped: int
    out: Path


@dataclass
class EvalWork:
    """What a run has left, in the order a serial run does it: each group of questions
    sharing an index with the plans it still needs (``groups``), the (question id, run
    key) pairs not done (``todo``), every build planned and the models bound for them."""

    groups: list[tuple[list[Question], list[MethodPlan]]]
    todo: set[tuple[str, str]]
    builds: dict[str, BuildPlan]
    models: Models
    index_dir: Path
    opts: RunOptions
    progress: Progress = NULL_PROGRESS
    bar: Task = field(default_factory=lambda: NULL_PROGRESS.task("eval"))  # one per record


Execute = Callable[[EvalWork, Callable[[dict[str, Any]], None]], None]
"""Runs an :class:`EvalWork` and hands each record to the writer in the serial order
(:func:`execute_here` on this machine; ``lcr.cluster`` on a Ray cluster)."""


def plan_run_builds(
    plans: Sequence[MethodPlan], names: Sequence[str], models: Models
) -> tuple[dict[str, BuildPlan], Models]:
    """The builds of the plans ``names`` lists (checked together, once) and the models
    bound for them, as a run with those builds to make uses them."""
    building = [p for p in plans if p.method is not None and p.name in names]
    planned = plan_together([(p.method, p.build) for p in building if p.method], models)
    if planned:
        models = dataclasses.replace(models, binding=planned[0].binding)
    return {p.name: b for p, b in zip(building, planned, strict=True)}, models


def build_group(group: Sequence[Question], plans: Sequence[MethodPlan], work: EvalWork) -> Index:
    """The shared index of ``group``, created on first use, with ``plans``' builds."""
    index = open_index(group[0], work.index_dir)
    built = [work.builds[p.name] for p in plans if p.method is not None]
    pipeline.build(index, built, work.models, progress=work.progress)
    return index


def answer_group(
    index: Index, questions: Sequence[Question], plans: Sequence[MethodPlan], work: EvalWork
) -> Iterator[dict[str, Any]]:
    """Each of ``questions`` x ``plans`` not done yet, run and recorded, in that order."""
    for q in questions:
        gold, gold_docs = source_spans(q, index)
        for plan in plans:
            if (q.id, plan.key) not in work.todo:
                continue
            rec = run_one(q, plan, index, work.models, work.opts, gold, gold_docs)
            rec["index"] = index.path.name  # its build cost, for a report
            yield rec


def execute_here(work: EvalWork, write: Callable[[dict[str, Any]], None]) -> None:
    """The run on this machine: each group's index built, then its questions."""
    for group, plans in work.groups:
        index = build_group(group, plans, work)
        for rec in answer_group(index, group, plans, work):
            write(rec)


def run(
    data: str | Path,
    models: Models,
    opts: RunOptions,
    *,
    progress: Progress = NULL_PROGRESS,
    execute: Execute = execute_here,
) -> RunOutcome:
    """Evaluate ``opts.methods`` on the questions of ``data``; see the module doc.
    ``execute`` does the work left (on this machine unless told otherwise)."""
    data_path = Path(data)
    if opts.limit is not None and opts.limit < 1:
        raise UsageError("--limit must be at least 1")
    if opts.documents_root is not None and not opts.documents_root.is_dir():
        raise UsageError(f"--documents-root {opts.documents_root} is not a folder")
    plans = plan_methods(opts.methods, models, opts)
    questions = dataset.load(data_path, opts.limit, opts.documents_root)
    out = opts.out or default_out(data_path)
    if out.exists() and out.is_dir():
        raise InputError(f"--out {out} is a folder")
    if out.exists() and not out.is_file():  # /dev/full, /dev/zero: read whole, then appended to
        raise InputError(f"--out {out} is not a regular file; give a results file's name")
    index_dir = opts.index_dir or choose_index_dir(data_path, out)
    done: dict[tuple[str, str], dict[str, Any]] = {
        (r["id"], r["run"]): r for r in read_results(out)
    }
    pending = [(q, p) for q in questions for p in plans if (q.id, p.key) not in done]
    skipped = len(questions) * len(plans) - len(pending)
    new = 0
    # every build's needs checked once, before the first index is opened, and the
    # models bound once for all of them
    wanted = {p.name for _, p in pending}
    builds, models = plan_run_builds(plans, [p.name for p in plans if p.name in wanted], models)
    if pending:
        out.parent.mkdir(parents=True, exist_ok=True)
        task = progress.task("eval", total=len(pending))
        todo = {(q.id, p.key) for q, p in pending}
        groups = [
            (group, [p for p in plans if any((q.id, p.key) in todo for q in group)])
            for group in _groups(questions)
        ]
        groups = [g for g in groups if g[1]]
        work = EvalWork(groups, todo, builds, models, index_dir, opts, progress, task)
        with _results_file(out) as fh:

            def write(rec: dict[str, Any]) -> None:
                nonlocal new
                fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
                fh.flush()
                done[(rec["id"], rec["run"])] = rec
                new += 1
                task.advance()

            execute(work, write)
    records = [done[(q.id, p.key)] for q in questions for p in plans if (q.id, p.key) in done]
    by_id = {q.id: q for q in questions}
    for rec in records:
        backfill_answer_found(rec, by_id[rec["id"]])
    costs = build_costs(questions, plans, index_dir)
    return RunOutcome(questions, plans, records, costs, new, skipped, out)


def _results_file(out: Path) -> TextIO:
    """``out`` opened for appending; a file that cannot be (``/proc/version``) is one line,
    before any question is run."""
    try:
        return out.open("a", encoding="utf-8")
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ESPIPE):
            raise
        raise InputError(f"--out {out} cannot be appended to ({os.strerror(exc.errno)})") from None


def gold_result(
    q: Question,
    plan: MethodPlan,
    index: Index,
    models: Models,
    gold: list[tuple[int, int] | None],
    gold_docs: list[int],
) -> tuple[Result, float]:
    """The shared answer step over the question's gold evidence alone (spans located in
    the source; a document given as gold is read whole), answered as ``lcr ask``
    answers; and its wall time (the LLM's loading left out)."""
    source = index.source
    docs = index.documents
    items = [
        EvidenceItem(f"gold{i}", index.doc_at(s), 0, 1.0, source[s:e], [(s, e)])
        for i, (s, e) in enumerate(sp for sp in gold if sp is not None)
    ]
    items += [
        EvidenceItem(f"gold-doc{d}", d, 0, 1.0, source[docs[d].start : docs[d].end],
                     [(docs[d].start, docs[d].end)])
        for d in gold_docs
    ]  # fmt: skip
    if not items:
        raise InputError(f"-m gold needs gold evidence; question {q.id} has none")
    given = Result(question=q.question, method=GOLD, evidence=Evidence(GOLD, items))
    result = answer_evidence(index, given, SHARED_ANSWER, NoSettings(), plan.answer, models)
    del result.models["llm_run"]  # gold records name the model as they always have
    return result, result.timings["answer_s"]


def _warm(plan: MethodPlan, query: QueryPlan, models: Models, opts: RunOptions) -> None:
    """Load the models a query needs before the clock starts (wall time is per query)."""
    if "embedder" in plan.models:
        _ = models.embedder
    if not opts.retrieval_only or query.needs.uses_llm:
        message = pipeline.retrieval_llm_note(query, models)
        if opts.retrieval_only and message is not None and opts.note is not None:
            opts.note(message)
        _ = models.llm


def run_one(
    q: Question,
    plan: MethodPlan,
    index: Index,
    models: Models,
    opts: RunOptions,
    gold: list[tuple[int, int] | None],
    gold_docs: list[int],
) -> dict[str, Any]:
    forget_prompts(models)  # the record is this question's alone (lcr.pipeline.fresh)
    if plan.method is None or plan.plan is None:
        result, wall = gold_result(q, plan, index, models, gold, gold_docs)
        scores = score(q, result, gold, gold_docs, _llm_params(result, models), wall)
        return _record(q, plan, opts, result, scores)
    _warm(plan, plan.plan, models, opts)
    started = time.perf_counter()
    question = pipeline.checked_question(q.question)
    if opts.retrieval_only:
        result = pipeline.retrieve_query(index, plan.plan, question, models)
    else:
        result = pipeline.ask_query(index, plan.plan, question, models)
    wall = time.perf_counter() - started - result.timings.get("llm_load_s", 0.0)
    scores = score(q, result, gold, gold_docs, _llm_params(result, models), wall)
    return _record(q, plan, opts, result, scores)


def _llm_params(result: Result, models: Models) -> float | None:
    """The LLM's parameter count for the FLOPs estimate, when ``result`` called it (the
    gold passages' answer too: it is the same model on the same prompt)."""
    if not result.usage.calls:
        return None
    llm = models.llm if models.llm_loaded else None
    return metrics.llm_parameters(models.llm_id(), llm)
