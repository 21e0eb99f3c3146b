"""Collections that grow and shrink: ``lcr index NEW -o book.idx --add`` and
``lcr remove book.idx NAME``.

A change stages a whole new index beside the old one (as ``--force`` does), with
the documents kept as they were extracted and the new ones after them, rebuilds
every method there with the settings and models it was built with, checks every
span of the result, and swaps it in at the commit. The LLM methods rebuild
through the index's content-keyed LLM cache, which the staged index shares: an
unchanged chunk, a summary of an unchanged cluster, a scored pair of unchanged
passages cost nothing, and what a killed change paid is there for the next run.
What each method paid is recorded in the manifest (``last_change``) and printed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lcr import config
from lcr.config import Settings
from lcr.errors import IndexDamagedError, UsageError
from lcr.methods import get_method, method_names
from lcr.models.base import Role
from lcr.pipeline import BuildReport, build, expand_methods, load_documents
from lcr.pipeline.plans import BUILD, NO_SETS, AnyMethod, ParsedSets, plan_build
from lcr.progress import NULL_PROGRESS, Progress
from lcr.store import Document, Index
from lcr.store.collection import Plan, plan_add, plan_remove, record_change
from lcr.store.manifest import MethodEntry
from lcr.store.writing import index_home, recover_swap, writer_lock

if TYPE_CHECKING:
    from lcr.models.container import Models
    from lcr.text.formats import ExtractOptions
    from lcr.text.inputs import InputFile

Tell = Callable[[str], None]


def add_files(
    files: Sequence[InputFile],
    out: str | Path,
    methods: Sequence[str],
    models: Models,
    sets: ParsedSets = NO_SETS,
    *,
    progress: Progress = NULL_PROGRESS,
    warn: Tell | None = None,
    on_report: Callable[[BuildReport], None] | None = None,
    note: Tell | None = None,
    tell: Tell | None = None,
    extract: ExtractOptions | None = None,
    loaded: Sequence[Document] | None = None,
) -> Index:
    """Add the documents of ``files`` (expanded where the paths were given) to the index
    at ``out`` and rebuild its methods (and ``methods``, if not built yet) paying only
    for what changed; ``tell`` hears one line per method of what it paid. ``loaded``:
    ``files`` already read (by a cluster's workers), in their order."""
    extra = expand_methods(methods) if methods else []
    docs = list(loaded) if loaded is not None else load_documents(files, warn, extract)
    with writer_lock(Path(out), note):
        index = _open_for_change(out)
        plan = plan_add(index, docs)
        if plan.already and tell is not None:
            tell(f"{out}: already holds {', '.join(plan.already)} (same content)")
        if not plan.added and not [m for m in extra if m not in index.methods]:
            return index
        return _apply(index, plan, extra, models, sets, progress, warn, on_report, note, tell)


def remove_documents(
    out: str | Path,
    names: Sequence[str],
    models: Models,
    *,
    progress: Progress = NULL_PROGRESS,
    warn: Tell | None = None,
    on_report: Callable[[BuildReport], None] | None = None,
    note: Tell | None = None,
    tell: Tell | None = None,
) -> Index:
    """Remove the documents named ``names`` from the index at ``out``; its methods are
    rebuilt through the LLM cache and ``tell`` hears what each one paid."""
    with writer_lock(Path(out), note):
        index = _open_for_change(out)
        plan = plan_remove(index, names)
        return _apply(index, plan, [], models, NO_SETS, progress, warn, on_report, note, tell)


def _open_for_change(out: str | Path) -> Index:
    """The index to change (under its writer lock): what a killed change left beside
    it is undone first; anything but an lcr index is refused in one line (exit 2)."""
    p = index_home(Path(out))  # a symlinked index: its folder changes, the link stays
    recover_swap(p)
    if p.exists() and not p.is_dir():  # a document, say: no index can be made there
        raise UsageError(f"{p} is a file, not an lcr index; name the index (the .idx folder)")
    if not p.is_dir() or not (p / "manifest.json").exists():
        raise UsageError(f"{p} is not an lcr index; make one first with: lcr index FILE... -o {p}")
    return Index.open(p)


def _apply(
    old: Index,
    plan: Plan,
    extra: Sequence[str],
    models: Models,
    sets: ParsedSets,
    progress: Progress,
    warn: Tell | None,
    on_report: Callable[[BuildReport], None] | None,
    note: Tell | None,
    tell: Tell | None,
) -> Index:
    """Stage ``plan``'s documents beside ``old``, rebuild every method there, verify, and
    swap the result in; a failure or a kill leaves ``old`` as it was (with whatever
    LLM outputs were paid for in its cache)."""
    jobs = _jobs(old, extra, sets, warn)
    staged = Index.stage(old.path, plan.documents)
    held: list[BuildReport] = []
    try:
        for method, settings, recorded in jobs:
            built_with = _recorded_models(models, recorded, method.name)
            planned = plan_build(method, settings, built_with)
            build(staged, [planned], built_with, progress=progress, warn=warn,
                  on_report=held.append, note=note)  # fmt: skip
        _verify(staged, old.path)
        change = {
            "at": plan.at,
            "added": plan.added,
            "removed": plan.removed,
            "methods": {name: method_costs(entry) for name, entry in staged.methods.items()},
        }
        record_change(staged, change)
        staged = staged.commit()
    except BaseException:
        staged.abandon()
        raise
    for report in held:
        if on_report is not None:
            on_report(report)
    if tell is not None:
        for line in describe_change(change):
            tell(f"{staged.path}: {line}")
    return staged


def _jobs(
    old: Index, extra: Sequence[str], sets: ParsedSets, warn: Tell | None
) -> list[tuple[AnyMethod, Settings, dict[str, str]]]:
    """Each method to rebuild: the method, its typed settings (those it was built with,
    then the run's own ``--set``), and the models it recorded."""
    jobs: list[tuple[AnyMethod, Settings, dict[str, str]]] = []
    known = set(method_names())
    for name, entry in old.methods.items():
        if name not in known:
            if warn is not None:
                warn(f"{old.path} has a {name} build this lcr does not know; it is dropped")
            continue
        method = get_method(name)
        settings = _recorded_settings(method, entry).replace(**sets.values(method, BUILD))
        jobs.append((method, settings, dict(entry.models)))
    for name in [*old.manifest.broken, *extra]:  # unreadable entries: built as asked now
        if name in known and name not in {j[0].name for j in jobs}:
            method = get_method(name)
            settings = method.build_settings.build(sets.values(method, BUILD), label=name)
            jobs.append((method, settings, {}))
    return jobs


def _recorded_settings(method: AnyMethod, entry: MethodEntry) -> Settings:
    """The typed settings ``entry`` was built with (a recorded value of the wrong type,
    edited by hand: the defaults)."""
    try:
        return method.build_settings.from_stored(entry.settings)
    except config.SettingError:
        return method.build_settings()


def _recorded_models(models: Models, recorded: dict[str, str], method: str) -> Models:
    """The models to rebuild the method with: those it was built with, since another
    model would find nothing of its own in the cache and pay every call again (bound:
    the caller's models are not changed)."""
    want_of: dict[str, str] = {}
    for role, key in ((Role.LLM, "llm"), (Role.EMBEDDER, "embedder")):
        want = recorded.get(key)
        have = models.model_id(role)
        if not want or want == have:
            continue
        if models.loaded(role):
            raise UsageError(
                f"{method} was built with the {key} {want}, not {have}: give --{key} {want} "
                "(or rebuild the index with --force)"
            )
        want_of[key] = want
    embedder = want_of.get("embedder", models.spec.embedder)
    return models.bound(embedder, models.spec.scorer, llm=want_of.get("llm"))


def _verify(staged: Index, target: Path) -> None:
    """Every span of the rebuilt index checked before it replaces the old one."""
    from lcr.pipeline.integrity import verify_index

    problems = verify_index(Index.open(staged.path))
    if problems:
        raise IndexDamagedError(
            f"the rebuilt index failed its check ({next(iter(problems.values()))}); "
            f"{target} is unchanged"
        )


def method_costs(entry: MethodEntry) -> dict[str, Any]:
    """What one build paid: LLM calls made and read from the cache (pair scores for
    LightPAL), and its time."""
    stats = entry.stats
    usage = stats.get("llm_usage")
    out: dict[str, Any] = {"seconds": entry.build_seconds}
    if isinstance(usage, dict) or "llm_cached" in stats:
        calls = usage.get("calls", 0) if isinstance(usage, dict) else stats.get("llm_calls", 0)
        out["llm_calls"] = int(calls)
        out["llm_cached"] = int(stats.get("llm_cached", 0))
    for key in ("pairs_scored", "pairs_cached"):
        if key in stats:
            out[key] = int(stats[key])
    return out


def describe_change(change: dict[str, Any]) -> list[str]:
    """One line for the change, then one per method: what it paid."""
    what = [f"added {', '.join(change.get('added') or [])}"] if change.get("added") else []
    if change.get("removed"):
        what.append(f"removed {', '.join(change['removed'])}")
    lines = [f"{'; '.join(what) or 'rebuilt'} ({change.get('at', '')})"]
    methods = change.get("methods")
    for name, costs in (methods if isinstance(methods, dict) else {}).items():
        lines.append(f"{name} {cost_text(costs)}")
    return lines


def cost_text(costs: Any) -> str:
    """``paid 3 LLM calls, 12 cached, 4.1s``; ``no LLM, 0.2s``."""
    if not isinstance(costs, dict):
        return "?"
    parts = []
    if "pairs_scored" in costs:
        parts.append(f"paid {costs['pairs_scored']} pair scores, {costs.get('pairs_cached', 0)} "
                     "cached")  # fmt: skip
    elif "llm_calls" in costs:
        parts.append(f"paid {costs['llm_calls']} LLM calls, {costs.get('llm_cached', 0)} cached")
    else:
        parts.append("no LLM")
    parts.append(f"{float(costs.get('seconds', 0.0)):.1f}s")
    return ", ".join(parts)
