"""An index's content held to what it claims, as the methods read it: the recorded
settings typed, evidence served only where its spans are true, and everything
``lcr info --verify`` checks beyond the store's own checksums and structure."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from lcr.config import Settings, SettingValue, value_text
from lcr.errors import IndexDamagedError, SchemaMismatchError, SettingError
from lcr.evidence import EvidenceItem
from lcr.methods import get_method, method_names
from lcr.methods.base import Method
from lcr.store import Index, MethodReader
from lcr.store.nodes import span_problem

AnyMethod = Method[Any, Any]


# lcr 0.2.0 retired the values older builds were read with. A build made before one of
# these settings existed recorded no value for it and was built the old way, which its
# default no longer is; a build recorded under a setting's old name is read under no name.
# Such a build opens only where reading it as written (missing keys at their default)
# tells the truth; otherwise it is refused, naming ``--force``.
RETIRED_IN = "0.2.0"
BUILT_UNRECORDED_BEFORE_0_2: Mapping[str, Mapping[str, SettingValue]] = {
    "bm25": {"chunking": "windows", "stemmer": "none"},
    "tfidf": {"chunking": "windows"},
    "dense": {"chunking": "windows"},
    "lightpal": {"context_score": "mean"},
    "pecan": {"embed_long": "truncated"},  # its graph ("points") is still the default
    "raptor": {"embed_long": "truncated"},
}
OLD_NAMES_BEFORE_0_2: Mapping[str, Mapping[str, str]] = {
    "lightpal": {"passage_chars": "chunk_chars"},
    "pecan": {"max_new_tokens": "points_max_new_tokens"},
    "graphreader": {"extraction_max_tokens": "extraction_max_new_tokens"},
    "raptor": {"summary_max_tokens": "summary_max_new_tokens"},
    "mixpr": {"max_words": "chunk_words"},
}


def retired_reading(method: AnyMethod, stored: Mapping[str, Any]) -> tuple[str, str] | None:
    """How an older lcr built ``method`` that this one cannot read back truthfully
    (``("bm25.stemmer=none", "")``: a value no setting gives now, unrecorded or of a
    setting fixed since (``Settings.fixed``); or an old name and its new one's ``--set``
    spelling), or None: the recorded settings read as written."""
    fixed = method.build_settings.fixed
    now = {k: s.default for k, s in method.build_settings.by_name().items()}
    now.update({k: f.value for k, f in fixed.items()})
    for key, was in BUILT_UNRECORDED_BEFORE_0_2.get(method.name, {}).items():
        if key in now and key not in stored and was != now[key]:
            return f"{method.name}.{key}={value_text(was)}", ""
    for key, f in fixed.items():
        if key in stored and stored[key] != f.value:
            return f"{method.name}.{key}={value_text(stored[key])}", ""
    declared = method.build_settings.by_name()
    for old, new in OLD_NAMES_BEFORE_0_2.get(method.name, {}).items():
        moved = old in stored and new in declared and new not in stored
        if moved and stored[old] != declared[new].default:
            given = f"{method.name}.{old}={value_text(stored[old])}"
            return given, f"{method.name}.{new}={value_text(stored[old])}"
    return None


def refuse_retired(index: Index, method: AnyMethod, stored: Mapping[str, Any]) -> None:
    """One line naming ``--force`` for a build :func:`retired_reading` cannot read."""
    found = retired_reading(method, stored)
    if found is None:
        return
    what, renamed = found
    entry = index.manifest.methods.get(method.name)
    made_by = (
        f"lcr {entry.lcr_version}" if entry is not None and entry.lcr_version else "an older lcr"
    )
    hint = index.rebuild_hint(method.name)
    if renamed:
        hint = hint.replace(what, renamed)
    else:  # a value no setting gives now: the rebuild leaves it out
        hint = hint.replace(f" --set {shlex.quote(what)}", "")
    raise SchemaMismatchError(
        f"{index.path}: its {method.name} build was made by {made_by} with {what}, "
        f"which lcr no longer reads since {RETIRED_IN}; {hint}"
    )


def stored_build_settings(index: Index, method: AnyMethod, reader: MethodReader) -> Settings:
    """The settings a build recorded, typed; a value of the wrong type is damage, a build
    an older lcr made in a way no setting reproduces now is refused (:func:`refuse_retired`)."""
    refuse_retired(index, method, reader.settings)
    try:
        return method.build_settings.from_stored(reader.settings)
    except SettingError as exc:
        raise IndexDamagedError(
            f"{index.path} is damaged: manifest.json records the {method.name} setting "
            f"{exc}; {index.rebuild_hint(method.name)}"
        ) from None


def check_evidence(index: Index, method: str, items: Sequence[EvidenceItem]) -> None:
    """Refuse to serve evidence whose spans are not in source.txt, or a leaf whose text
    is not the source at its span: an index edited (checksums refreshed) must not put
    words in the source's mouth. A few comparisons per item."""
    source, documents = index.source, len(index.documents)
    for item in items:
        problem = span_problem(item.level, item.text, item.spans, item.doc, source, documents)
        if problem is None and not item.spans:
            problem = "has no spans"
        if problem is not None:
            raise IndexDamagedError(
                index.damage_message(method, f"nodes.jsonl: evidence {item.id} {problem}")
            )


def verify_index(index: Index) -> dict[str, str]:
    """Everything ``lcr info --verify`` checks: every file against its checksum and its
    structure (:meth:`Index.verify`), then each method's own reading of its build
    (recorded settings, shapes against node counts, its JSON) as retrieval reads it.
    Returns one damage line per damaged method (``"source"`` for source.txt), and one
    per method it could not verify (no method of its name is installed: a plugin's)."""
    lines: dict[str, str] = {}
    for name, found in index.verify().items():
        if name == "source":
            lines[name] = f"{index.path} is damaged: {found[0]}; {index.repair_hint()}"
        else:
            lines[name] = index.damage_message(name, "; ".join(found))
    if "source" in lines:
        return lines
    for name, refused in index.cache_refusals().items():
        lines[f"cache/{name}"] = (
            f"{index.path / 'cache' / name}.jsonl holds {refused} LLM output(s) lcr did not "
            f"write (their digest does not match): they are never used, and the next build "
            f"of {name} pays those calls again and drops them"
        )
    for name in index.methods:
        if name in lines or name in index.damaged:
            continue
        if name not in method_names():  # its plugin is not installed: its check is its own
            lines[name] = (
                f"{index.path}: could not verify {name}: no method of that name is installed "
                "(install the package that provides it, then run this again)"
            )
            continue
        method = get_method(name)
        reader = index.reader(name)
        try:
            method.check_stored(reader, stored_build_settings(index, method, reader))
        except (IndexDamagedError, SchemaMismatchError) as exc:  # damaged, or too old
            lines[name] = str(exc)
    return lines


def index_problems(index: Index, verify: bool) -> dict[str, str]:
    """What is wrong with ``index``, one line per damaged method: the damage found on
    opening, and with ``verify`` everything :func:`verify_index` finds."""
    problems = dict(index.damaged)
    if verify:
        for name, line in verify_index(index).items():
            problems.setdefault(name, line)
    return problems


def info_json(index: Index, *, verify: bool = False) -> dict[str, Any]:
    """What ``lcr info --json`` prints (and ``lcr serve``'s ``info`` tool returns): the
    manifest with its path, sizes and damage (``verified`` with ``verify``)."""
    problems = index_problems(index, verify)
    out: dict[str, Any] = index.manifest.to_json()
    out["path"] = str(index.path)
    out["size_bytes"] = index.size_bytes()
    for name, entry in out.get("methods", {}).items():
        if name in index.methods:  # not an entry that did not read (it is damaged)
            entry["size_bytes"] = index.size_bytes(name)
    out["damaged"] = problems
    if verify:
        out["verified"] = not problems
    return out
