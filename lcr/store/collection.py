"""An index's documents as a list that grows and shrinks: what is kept of each stored
document (its text as extracted, its layout, its record), and the new list after an
addition or a removal. Pure bookkeeping; the rebuild is ``lcr.pipeline.collection``'s.

A document added comes after every document already there, so the offsets of
those stay what they were; a document removed shifts the ones after it, whose
spans are then made again by the rebuild and verified before the commit.
"""

from __future__ import annotations

import dataclasses
import shlex
import time
from collections.abc import Sequence
from typing import Any

from lcr.errors import UsageError
from lcr.store.index import Index
from lcr.store.manifest import Manifest
from lcr.text.document import Document


def now_utc() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def stored_documents(index: Index) -> list[Document]:
    """Every document of ``index`` as it was extracted (never read again from its file,
    which may have changed or gone), with the time it joined the index."""
    source = index.source
    layouts = index.layouts
    docs = index.documents
    paths = index.manifest.source_paths
    paths = paths if len(paths) == len(docs) else [""] * len(docs)
    return [
        Document(
            d.name,
            source[d.start : d.end],
            d.sha256,
            d.size,
            format=d.format,
            layout=layouts[i],
            extractor=d.extractor,
            extractor_version=d.extractor_version,
            options=dict(d.options),
            path=paths[i],
            added=d.added or index.manifest.created,
        )
        for i, d in enumerate(docs)
    ]


@dataclasses.dataclass(frozen=True)
class Plan:
    """The documents after a change, and what the change is, in names."""

    documents: list[Document]
    added: list[str]
    removed: list[str]
    already: list[str]  # given to add, but already there with the same content
    at: str = dataclasses.field(default_factory=now_utc)  # when the change was asked for


def plan_add(index: Index, new: Sequence[Document]) -> Plan:
    """``new`` after the index's documents. A name already there with the same content
    is nothing to add; with other content it is refused (exit 2): a document is
    replaced by removing it first, so no one replaces one by mistake."""
    kept = stored_documents(index)
    by_name = {d.name: d for d in kept}
    when = now_utc()
    added: list[Document] = []
    already: list[str] = []
    for doc in new:
        there = by_name.get(doc.name)
        if there is None:
            added.append(dataclasses.replace(doc, added=when))
        elif there.sha256 == doc.sha256:
            already.append(doc.name)
        else:
            raise UsageError(
                f"{index.path} already holds a document named {doc.name} (with other "
                f"content); to replace it, remove it first: lcr remove "
                f"{shlex.quote(str(index.path))} {shlex.quote(doc.name)}"
            )
    return Plan([*kept, *added], [d.name for d in added], [], already, when)


def plan_remove(index: Index, names: Sequence[str]) -> Plan:
    """The index's documents without ``names``. An unknown name, or removing every
    document (an index of nothing), is refused (exit 2) before any work."""
    kept = stored_documents(index)
    known = {d.name for d in kept}
    for name in names:
        if name not in known:
            raise UsageError(
                f"{index.path} has no document named {name!r} "
                f"(lcr info {shlex.quote(str(index.path))} lists them)"
            )
    gone = set(names)
    left = [d for d in kept if d.name not in gone]
    if not left:
        raise UsageError(
            f"removing {', '.join(names)} would leave {index.path} with no document; "
            "delete the index folder instead"
        )
    return Plan(left, [], [d.name for d in kept if d.name in gone], [])


def record_change(index: Index, change: dict[str, Any]) -> None:
    """Write ``change`` (what was added or removed, what each method paid) into the
    staged index's manifest, before its commit."""
    manifest = dataclasses.replace(Manifest.read(index.path), last_change=change)
    manifest.write(index.path)
    index.manifest = manifest
