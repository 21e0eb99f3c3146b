"""Node records: one JSON object per line in ``<method>/nodes.jsonl``."""

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
    def from_json(cls, obj: dict[str, Any]) -> Node:
        return cls(
            id=str(obj["id"]),
            level=int(obj["level"]),
            text=str(obj["text"]),
            spans=[(int(s), int(e)) for s, e in obj["spans"]],
            doc=int(obj["doc"]),
            children=[str(c) for c in obj.get("children", [])],
            meta=dict(obj.get("meta", {})),
        )


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


def parse_node(line: bytes, where: str) -> Node:
    """One node record; a damaged one is an :class:`IndexDamagedError` naming ``where``."""
    try:
        return Node.from_json(json.loads(line.decode("utf-8", errors="replace")))
    except (ValueError, KeyError, TypeError) as exc:
        raise IndexDamagedError(
            f"damaged node record at {where} ({exc.__class__.__name__})"
        ) from None


def iter_nodes(path: Path) -> Iterator[Node]:
    with path.open(encoding="utf-8", errors="replace") as fh:
        yield from _parse_lines(fh, path)


def parse_nodes(data: bytes, path: Path) -> list[Node]:
    """Nodes from the bytes of ``path`` (already read, e.g. to check their checksum)."""
    return list(_parse_lines(data.decode("utf-8", errors="replace").split("\n"), path))


def _parse_lines(lines: Iterable[str], path: Path) -> Iterator[Node]:
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            yield Node.from_json(json.loads(line))
        except (ValueError, KeyError, TypeError) as exc:
            raise IndexDamagedError(
                f"damaged node record at {path}:{lineno} ({exc.__class__.__name__})"
            ) from None
