"""Read access to one committed build of a method: its nodes, arrays and JSON, each
checked as it loads (checksums where the file is read whole, structure always), so
no content of a build crashes lcr or is served as what it is not. Every problem is a
:class:`BuildDamagedError` naming the file, with the index's rebuild hint.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Protocol, overload

import numpy as np
import scipy.sparse as sp

from lcr.errors import IndexDamagedError, LcrError
from lcr.store.arrays import (
    DamagedArrayError,
    Parts,
    read_array,
    read_csr,
    read_mapped_array,
)
from lcr.store.manifest import MethodEntry
from lcr.store.nodes import Node, NodeRecordError, parse_node, parse_nodes


class BuildsOwner(Protocol):
    """What a reader needs of its index (:class:`lcr.store.Index`): where it is, and
    how its damage is told (the index's rebuild hint)."""

    path: Path

    def damage_message(self, method: str, problem: str) -> str: ...

    def rebuild_hint(self, method: str) -> str: ...

    def damage_error(self, message: str) -> LcrError: ...


class BuildDamagedError(IndexDamagedError):
    """Damage in one method's build; ``problem`` names the file and what is wrong with it
    (``nodes.jsonl line 3 ...``), the message adds the index and the rebuild hint."""

    def __init__(self, message: str, problem: str) -> None:
        super().__init__(message)
        self.problem = problem


class MethodReader:
    """Read access to one committed build of a method."""

    def __init__(self, index: BuildsOwner, name: str, entry: MethodEntry) -> None:
        self.index = index
        self.name = name
        self.entry = entry
        self.dir = index.path / entry.dir
        self._nodes: dict[str, list[Node]] = {}
        self._loaded: dict[str, Any] = {}
        self.memo: dict[str, Any] = {}  # a method's derived query-time state (see ``memoised``)

    @property
    def settings(self) -> dict[str, Any]:
        """The build's settings as recorded (a method reads them typed: ``ctx.built``)."""
        return dict(self.entry.settings)

    @property
    def stats(self) -> dict[str, Any]:
        return dict(self.entry.stats)

    def nodes(self, name: str = "nodes") -> list[Node]:
        """The node records, checked against the build's checksum (read whole anyway)."""
        if name not in self._nodes:
            rel = f"{name}.jsonl"
            data = self._checked_bytes(rel)
            try:
                self._nodes[name] = parse_nodes(data, self.dir / rel)
            except NodeRecordError as exc:
                raise self.damage(str(exc)) from None
        return self._nodes[name]

    def node_count(self, name: str = "nodes") -> int:
        """How many node records the build wrote (from the manifest: nothing is read)."""
        count = self.entry.counts.get(name)
        return int(count) if isinstance(count, int) else len(self.nodes(name))

    def nodes_at(self, positions: Iterable[int], name: str = "nodes") -> list[Node]:
        """The records at ``positions`` (0-based), reading only their lines when the build
        stored their offsets; otherwise (builds before offsets) from :meth:`nodes`.

        The lines read alone are not checked against the file's checksum (that would
        read the whole file, which is what this avoids); their sizes were checked when
        the index opened, and a damaged record is still a clear error."""
        wanted = [int(p) for p in positions]
        if name in self._nodes or not (self.dir / f"{name}.offsets.npy").exists():
            nodes = self.nodes(name)
            return [nodes[p] for p in wanted]
        offsets = self.offsets(name)
        n = len(offsets) - 1
        path = self._file(f"{name}.jsonl")
        out: list[Node] = []
        with path.open("rb") as fh:
            for p in wanted:
                if not 0 <= p < n:
                    raise self.damage(f"{name}.jsonl has {n} records, not a record {p + 1}")
                start, end = int(offsets[p]), int(offsets[p + 1])
                fh.seek(start)
                line = fh.read(end - start)
                if not line.endswith(b"\n"):
                    raise self.damage(f"{name}.jsonl line {p + 1} is cut short")
                try:
                    out.append(parse_node(line, f"{name}.jsonl line {p + 1}"))
                except NodeRecordError as exc:
                    raise self.damage(str(exc)) from None
        return out

    def offsets(self, name: str = "nodes") -> np.ndarray:
        """Where each record of ``name.jsonl`` starts, checked once per reader: whole
        numbers climbing from 0 to the file's size, one more than its records."""
        checked: np.ndarray = self.memoised(f"offsets:{name}", lambda: self._offsets(name))
        return checked

    def _offsets(self, name: str) -> np.ndarray:
        offsets = self.array(f"{name}.offsets")
        size = self._file(f"{name}.jsonl").stat().st_size
        ok = (
            offsets.ndim == 1 and offsets.dtype.kind in "iu" and len(offsets) >= 1
            and int(offsets[0]) == 0 and int(offsets[-1]) == size
            and not bool((np.diff(offsets) <= 0).any())
        )  # fmt: skip
        count = self.entry.counts.get(name)
        if not ok or (count is not None and count != len(offsets) - 1):
            raise self.damage(f"{name}.offsets.npy does not match {name}.jsonl")
        return offsets

    def damage(self, problem: str) -> LcrError:
        """The one-line error for damage in this build (``problem`` names the file), or
        a lost race when a writer replaced the index since it was opened."""
        message = self.index.damage_message(self.name, problem)
        error = self.index.damage_error(message)
        return (
            BuildDamagedError(message, problem) if isinstance(error, IndexDamagedError) else error
        )

    def _checked_bytes(self, rel: str) -> bytes:
        data = self._file(rel).read_bytes()
        expected = self.entry.sha256.get(rel)
        if expected is not None and hashlib.sha256(data).hexdigest() != expected:
            raise self.damage(f"{rel} does not match its checksum")
        return data

    def array(self, name: str) -> np.ndarray:
        """Read once per reader: a batch of questions pays for the I/O once."""
        key = f"array:{name}"
        if key not in self._loaded:
            try:
                if (self.dir / f"{name}.npy").exists():
                    arr = read_mapped_array(self._file(f"{name}.npy"))  # read-only already
                else:  # zarr: every build before the mapped layout, and methods that keep it
                    arr = read_array(self._file(f"{name}.zarr"))
            except DamagedArrayError as exc:
                raise self._array_damage(exc) from None
            arr.flags.writeable = False  # shared between questions: never modified in place
            self._loaded[key] = arr
        return self._loaded[key]

    @overload
    def csr(self, name: str) -> sp.csr_array: ...
    @overload
    def csr(self, name: str, *, loose: int) -> Parts: ...
    def csr(self, name: str, *, loose: int | None = None) -> sp.csr_array | Parts:
        """The sparse matrix ``name`` as :meth:`MethodWriter.write_csr` wrote it; ``loose``:
        bm25's loose arrays, given their documents (:func:`~lcr.store.arrays.read_csr`)."""
        key = f"csr:{name}"
        if key not in self._loaded:
            try:
                if loose is not None:
                    for part in ("data", "indices", "indptr"):
                        self._file(f"{name}_{part}.zarr")
                    parts = read_csr(self.dir / name, loose=loose)
                else:
                    mapped = (self.dir / f"{name}.csr").is_dir()
                    m = read_csr(
                        self._file(f"{name}.csr" if mapped else f"{name}.zarr"), mapped=mapped
                    )
                    parts = (m.data, m.indices, m.indptr)
            except DamagedArrayError as exc:
                raise self._array_damage(exc) from None
            for array in parts:
                array.flags.writeable = False
            self._loaded[key] = parts if loose is not None else m
        return self._loaded[key]

    def memoised(self, key: str, make: Callable[[], Any]) -> Any:
        """Query-time state a method derives from its arrays (a transition matrix, a
        rebuilt vectoriser), computed on the first question and reused after."""
        if key not in self.memo:
            self.memo[key] = make()
        return self.memo[key]

    def json(self, name: str) -> Any:
        try:
            return json.loads(self._checked_bytes(f"{name}.json").decode("utf-8"))
        except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
            raise self.damage(f"{name}.json is not valid JSON") from None

    def _array_damage(self, exc: DamagedArrayError) -> LcrError:
        try:
            rel = str(exc.path.relative_to(self.dir))
        except ValueError:
            rel = exc.path.name
        return self.damage(f"{rel} {exc.problem}")

    def _file(self, rel: str) -> Path:
        """The build's file ``rel``: there, and not a link out of the index."""
        path = self.dir / rel
        if path.is_symlink():
            raise self.damage(f"{rel} is a symbolic link (lcr never writes one)")
        if not path.exists():
            raise self.index.damage_error(
                f"{self.index.path} is missing {self.name}/{rel}; "
                f"{self.index.rebuild_hint(self.name)}"
            )
        return path
