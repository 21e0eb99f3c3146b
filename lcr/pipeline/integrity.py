"""An index's content held to what it claims, as the methods read it: the recorded
settings typed, evidence served only where its spans are true, and everything
``lcr info --verify`` checks beyond the store's own checksums and structure."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lcr.config import Settings
from lcr.errors import IndexDamagedError, SettingError
from lcr.evidence import EvidenceItem
from lcr.methods import get_method, method_names
from lcr.methods.base import Method
from lcr.store import Index, MethodReader
from lcr.store.nodes import span_problem

AnyMethod = Method[Any, Any]


def stored_build_settings(index: Index, method: AnyMethod, reader: MethodReader) -> Settings:
    """The settings a build recorded, typed; a value of the wrong type is damage."""
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
    Returns one damage line per damaged method (``"source"`` for source.txt)."""
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
        if name in lines or name in index.damaged or name not in method_names():
            continue
        method = get_method(name)
        reader = index.reader(name)
        try:
            method.check_stored(reader, stored_build_settings(index, method, reader))
        except IndexDamagedError as exc:
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
