"""Node records: one JSON object per line in ``<method>/nodes.jsonl``.

A node at level 0 is a leaf: a piece of the source, its text exactly
``source[start:end]`` of its one span. Nodes above are derived (a summary, a
fact, a key) and point at their leaves' spans. Every record is read strictly
(each field of its kind) and :func:`span_problem` is the one rule a node's spans
are held to, when evidence is served and by ``lcr info --verify``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lcr.errors import IndexDamagedError


@dataclass
class Node:
    """A unit a method retrieves: a chunk, a summary, a fact, a graph node.

    ``spans`` are ``(start, end)`` offsets into source.txt; a summary's spans are
    the union of its leaves' spans. ``doc`` is the index of the source document.
    """

    id: str
    level: int
    text: str
    spans: list[tuple[int, int]]
    doc: int
    children: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "level": self.level,
            "doc": self.doc,
            "spans": [[int(s), int(e)] for s, e in self.spans],
            "text": self.text,
        }
        if self.children:
            out["children"] = list(self.children)
        if self.meta:
            out["meta"] = self.meta
        return out

    @classmethod
    def leaf(cls, number: int, text: str, start: int, end: int, doc: int, tokens: int) -> Node:
        """Level-0 node ``c<number>``: ``source[start:end]`` of document ``doc``, its token
        count in ``meta`` (the chunkers of RAPTOR, PECAN and GraphReader, build and estimate)."""
        return cls(f"c{number}", 0, text, [(start, end)], doc, meta={"tokens": tokens})

    @classmethod
    def from_json(cls, obj: Any) -> Node:
        """A record as written by :meth:`to_json`; anything else is a ``ValueError``
        naming the field (a number where text belongs is not converted)."""
        if not isinstance(obj, dict):
            raise ValueError("not a JSON object")
        spans = _field(obj, "spans", list)
        if not all(isinstance(sp, list) and len(sp) == 2 for sp in spans):
            raise ValueError("spans is not a list of [start, end] pairs")
        children = obj.get("children", [])
        meta = obj.get("meta", {})
        if not isinstance(children, list) or not all(isinstance(c, str) for c in children):
            raise ValueError("children is not a list of ids")
        if not isinstance(meta, dict):
            raise ValueError("meta is not an object")
        return cls(
            id=_field(obj, "id", str),
            level=_whole(obj.get("level"), "level"),
            text=_field(obj, "text", str),
            spans=[(_whole(s, "a span"), _whole(e, "a span")) for s, e in spans],
            doc=_whole(obj.get("doc"), "doc"),
            children=list(children),
            meta=dict(meta),
        )


def _field(obj: dict[str, Any], key: str, kind: type) -> Any:
    value = obj.get(key)
    if not isinstance(value, kind):
        raise ValueError(f"{key} is missing or not a {kind.__name__}")
    return value


def _whole(value: Any, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{what} is not a whole number")
    return value


def span_problem(
    level: int, text: str, spans: list[tuple[int, int]], doc: int, source: str, documents: int
) -> str | None:
    """What is wrong with a node's spans, or None: every span a non-empty range inside
    source.txt, the document one of the index's; a leaf's (level 0) text exactly its
    one span of the source, so evidence is the words it claims to rest on. A derived
    node may have no span (GraphReader's keys); evidence served never does."""
    if not 0 <= doc < documents:
        return f"names document {doc} of {documents}"
    if not spans and level == 0:
        return "is a leaf without a span"
    for start, end in spans:
        if not 0 <= start < end <= len(source):
            return f"has the span [{start}, {end}) outside source.txt (0-{len(source)})"
    if level == 0:
        if len(spans) != 1:
            return "is a leaf with more than one span"
        start, end = spans[0]
        if source[start:end] != text:
            return f"has text that is not source.txt[{start}:{end}]"
    return None


def write_nodes(path: Path, nodes: Iterable[Node], offsets: list[int] | None = None) -> int:
    """One JSON line per node; ``offsets`` (when given) receives each line's byte
    offset, then the file's length, so a reader can seek to any node."""
    count = 0
    pos = 0
    with path.open("wb") as fh:
        for node in nodes:
            line = (json.dumps(node.to_json(), ensure_ascii=False) + "\n").encode("utf-8")
            if offsets is not None:
                offsets.append(pos)
            fh.write(line)
            pos += len(line)
            count += 1
    if offsets is not None:
        offsets.append(pos)
    return count


class NodeRecordError(IndexDamagedError):
    """A node record that does not read; the message says which line and why."""


def parse_node(line: bytes, where: str) -> Node:
    """One node record; a damaged one is a :class:`NodeRecordError` naming ``where``."""
    try:
        return Node.from_json(json.loads(line.decode("utf-8")))
    except (ValueError, RecursionError) as exc:
        raise NodeRecordError(f"{where}: {_why(exc)}") from None


def parse_nodes(data: bytes, path: Path) -> list[Node]:
    """Nodes from the bytes of ``path`` (already read, e.g. to check their checksum);
    a file cut short (no final newline) is damage, not one node fewer."""
    if data and not data.endswith(b"\n"):
        raise NodeRecordError(f"{path.name} is cut short (no newline at its end)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise NodeRecordError(f"{path.name} is not UTF-8") from None
    return list(_parse_lines(text.split("\n"), path))


def _parse_lines(lines: Iterable[str], path: Path) -> Iterator[Node]:
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            yield Node.from_json(json.loads(line))
        except (ValueError, RecursionError) as exc:
            raise NodeRecordError(f"{path.name} line {lineno}: {_why(exc)}") from None


def _why(exc: Exception) -> str:
    if isinstance(exc, json.JSONDecodeError | UnicodeDecodeError | RecursionError):
        return "not a JSON record"
    return str(exc)
