"""The index directory: manifest, source text, one folder per built method.

Layout::

    book.idx/
      manifest.json            schema version, sources, per-method entries (the commit point)
      source.txt               normalised text of every document, joined by blank lines
      <method>.<build>/        nodes.jsonl, *.zarr, *.json of one completed build
      cache/<method>.jsonl     LLM outputs already paid for (resumable builds)
      .lock                    held by writers

A method is built in ``.tmp-<method>-<build>/`` and renamed to
``<method>.<build>/``; only then does the atomically replaced manifest point at
it, and only after that is the previous build deleted. Killed at any moment, the
index opens as it was before or as it is after.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import secrets
import shutil
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from lcr import __version__
from lcr.atomic import atomic_write_json, fsync_dir
from lcr.errors import (
    IndexDamagedError,
    IndexNotFoundError,
    InputError,
    MethodNotBuiltError,
    SchemaMismatchError,
    SourceMismatchError,
)
from lcr.store.arrays import read_array, read_csr, write_array, write_csr
from lcr.store.cache import LLMCache
from lcr.store.nodes import Node, read_nodes, write_nodes

FORMAT = "lcr-index"
SCHEMA_VERSION = 1
DOC_SEPARATOR = "\n\n"


@dataclass(frozen=True)
class SourceDoc:
    """One input document and where its text lies in source.txt."""

    name: str
    sha256: str
    size: int
    start: int
    end: int


@dataclass(frozen=True)
class DocumentInput:
    """What ``Index.create`` needs of a loaded document (see ``lcr.text.loading``)."""

    name: str
    text: str
    sha256: str
    size: int


def join_documents(docs: Sequence[DocumentInput]) -> tuple[str, list[SourceDoc]]:
    parts: list[str] = []
    records: list[SourceDoc] = []
    pos = 0
    for i, doc in enumerate(docs):
        if i:
            parts.append(DOC_SEPARATOR)
            pos += len(DOC_SEPARATOR)
        parts.append(doc.text)
        records.append(SourceDoc(doc.name, doc.sha256, doc.size, pos, pos + len(doc.text)))
        pos += len(doc.text)
    return "".join(parts), records


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with (path / ".lock").open("a") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _dir_files(root: Path) -> dict[str, int]:
    return {
        str(p.relative_to(root)): p.stat().st_size for p in sorted(root.rglob("*")) if p.is_file()
    }


class MethodWriter:
    """Where a method writes one build; everything lands in a temporary folder."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.counts: dict[str, int] = {}
        self.stats: dict[str, Any] = {}

    def write_nodes(self, nodes: Iterable[Node], name: str = "nodes") -> int:
        n = write_nodes(self.dir / f"{name}.jsonl", nodes)
        self.counts[name] = n
        return n

    def write_array(self, name: str, array: np.ndarray) -> None:
        write_array(self.dir / f"{name}.zarr", array)

    def write_csr(self, name: str, matrix: sp.spmatrix | sp.sparray) -> None:
        write_csr(self.dir / f"{name}.zarr", matrix)

    def write_json(self, name: str, obj: Any) -> None:
        (self.dir / f"{name}.json").write_text(
            json.dumps(obj, ensure_ascii=False, sort_keys=True), encoding="utf-8"
        )


class MethodReader:
    """Read access to one committed build of a method."""

    def __init__(self, index: Index, name: str, entry: dict[str, Any]) -> None:
        self.index = index
        self.name = name
        self.entry = entry
        self.dir = index.path / entry["dir"]
        self._nodes: dict[str, list[Node]] = {}
        self._loaded: dict[str, Any] = {}
        self.memo: dict[str, Any] = {}  # a method's derived query-time state (see ``memoised``)

    @property
    def settings(self) -> dict[str, Any]:
        return dict(self.entry.get("settings", {}))

    @property
    def stats(self) -> dict[str, Any]:
        return dict(self.entry.get("stats", {}))

    def nodes(self, name: str = "nodes") -> list[Node]:
        if name not in self._nodes:
            self._nodes[name] = read_nodes(self._file(f"{name}.jsonl"))
        return self._nodes[name]

    def array(self, name: str) -> np.ndarray:
        """Read once per reader: a batch of questions pays for the I/O once."""
        key = f"array:{name}"
        if key not in self._loaded:
            arr = read_array(self._file(f"{name}.zarr"))
            arr.flags.writeable = False  # shared between questions: never modified in place
            self._loaded[key] = arr
        return self._loaded[key]

    def csr(self, name: str) -> sp.csr_array:
        key = f"csr:{name}"
        if key not in self._loaded:
            m = read_csr(self._file(f"{name}.zarr"))
            for part in (m.data, m.indices, m.indptr):
                part.flags.writeable = False
            self._loaded[key] = m
        return self._loaded[key]

    def memoised(self, key: str, make: Callable[[], Any]) -> Any:
        """Query-time state a method derives from its arrays (a transition matrix, a
        rebuilt vectoriser), computed on the first question and reused after."""
        if key not in self.memo:
            self.memo[key] = make()
        return self.memo[key]

    def json(self, name: str) -> Any:
        try:
            return json.loads(self._file(f"{name}.json").read_text(encoding="utf-8"))
        except ValueError:
            raise IndexDamagedError(f"damaged file {self.dir / name}.json") from None

    def _file(self, rel: str) -> Path:
        path = self.dir / rel
        if not path.exists():
            raise IndexDamagedError(f"index is missing {path}; rebuild with --force")
        return path


@dataclass
class Index:
    path: Path
    manifest: dict[str, Any]
    _source: str | None = field(default=None, repr=False)
    _readers: dict[str, MethodReader] = field(default_factory=dict, repr=False)

    # ----------------------------------------------------------------- opening
    @classmethod
    def open(cls, path: str | Path) -> Index:
        """Open and check an index; every problem is a one-line error."""
        p = Path(path)
        if not p.exists():
            raise IndexNotFoundError(f"no index at {p} (build one with: lcr index FILE -o {p})")
        manifest_path = p / "manifest.json"
        if not p.is_dir() or not manifest_path.exists():
            raise IndexNotFoundError(f"{p} is not an lcr index (no manifest.json)")
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except (OSError, ValueError, UnicodeDecodeError):
            raise IndexDamagedError(f"{manifest_path} is damaged (not valid JSON)") from None
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            raise IndexNotFoundError(f"{p} is not an lcr index (foreign manifest.json)")
        version = manifest.get("schema_version")
        if version != SCHEMA_VERSION:
            raise SchemaMismatchError(
                f"{p} has index schema {version}, this lcr reads schema {SCHEMA_VERSION}; "
                f"rebuild it with: lcr index SOURCE -o {p} --force"
            )
        index = cls(p, manifest)
        index._check_files()
        return index

    def _check_files(self) -> None:
        src = self.path / "source.txt"
        try:
            size = src.stat().st_size
        except OSError:
            raise IndexDamagedError(f"{self.path} is damaged: source.txt is missing") from None
        if size != self.manifest.get("source_bytes"):
            raise IndexDamagedError(f"{self.path} is damaged: source.txt has the wrong size")
        for name, entry in self.manifest.get("methods", {}).items():
            mdir = self.path / entry.get("dir", "")
            for rel, expected in entry.get("files", {}).items():
                f = mdir / rel
                try:
                    actual = f.stat().st_size
                except OSError:
                    raise IndexDamagedError(
                        f"{self.path} is damaged: {name} is missing {rel}; "
                        f"rebuild with: lcr index SOURCE -o {self.path} --method {name} --force"
                    ) from None
                if actual != expected:
                    raise IndexDamagedError(
                        f"{self.path} is damaged: {name}/{rel} has the wrong size; "
                        f"rebuild with: lcr index SOURCE -o {self.path} --method {name} --force"
                    )

    # ---------------------------------------------------------------- creating
    @classmethod
    def create(
        cls, path: str | Path, documents: Sequence[DocumentInput], *, force: bool = False
    ) -> Index:
        """Open the index of these documents at ``path``, creating it if needed.

        An existing index over the same documents is reused (methods are added to
        it); one over other documents is refused unless ``force``, and then
        replaced whole. A path that exists but is not an index is never touched.
        """
        if not documents:
            raise InputError("no documents to index")
        p = Path(path)
        source, docs = join_documents(documents)
        if p.exists():
            if p.is_dir() and not any(p.iterdir()):
                p.rmdir()
            elif not (p / "manifest.json").exists():
                raise InputError(f"{p} exists and is not an lcr index; refusing to overwrite it")
            else:
                try:
                    existing = cls.open(p)
                except (IndexDamagedError, SchemaMismatchError):
                    if not force:
                        raise
                    existing = None
                if existing is not None and existing.source_digests() == [d.sha256 for d in docs]:
                    return existing
                if not force:
                    names = ", ".join(d.name for d in docs)
                    raise SourceMismatchError(
                        f"{p} indexes other documents than {names}; use --force to replace it"
                    )
        return cls._write_new(p, source, docs)

    @classmethod
    def _write_new(cls, p: Path, source: str, docs: list[SourceDoc]) -> Index:
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.parent / f".{p.name}.tmp-{secrets.token_hex(4)}"
        tmp.mkdir()
        try:
            data = source.encode("utf-8")
            (tmp / "source.txt").write_bytes(data)
            manifest = {
                "format": FORMAT,
                "schema_version": SCHEMA_VERSION,
                "lcr_version": __version__,
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "source_bytes": len(data),
                "source_chars": len(source),
                "source_sha256": hashlib.sha256(data).hexdigest(),
                "sources": [asdict(d) for d in docs],
                "methods": {},
            }
            atomic_write_json(tmp / "manifest.json", manifest)
            fsync_dir(tmp)
            old: Path | None = None
            if p.exists():  # replacing an index with --force
                old = p.parent / f".{p.name}.old-{secrets.token_hex(4)}"
                os.rename(p, old)
            os.rename(tmp, p)
            fsync_dir(p.parent)
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return cls(p, manifest, source)

    # ------------------------------------------------------------------ access
    @property
    def source(self) -> str:
        if self._source is None:
            with (self.path / "source.txt").open(encoding="utf-8", newline="") as fh:
                self._source = fh.read()
        return self._source

    @property
    def documents(self) -> list[SourceDoc]:
        return [SourceDoc(**d) for d in self.manifest.get("sources", [])]

    def source_digests(self) -> list[str]:
        return [d["sha256"] for d in self.manifest.get("sources", [])]

    @property
    def methods(self) -> dict[str, dict[str, Any]]:
        return dict(self.manifest.get("methods", {}))

    def has_method(self, name: str) -> bool:
        return name in self.manifest.get("methods", {})

    def reader(self, name: str) -> MethodReader:
        entry = self.manifest.get("methods", {}).get(name)
        if entry is None:
            src = " ".join("-" if d.name == "stdin" else d.name for d in self.documents)
            raise MethodNotBuiltError(
                f"{self.path} has no {name} index; build it with: "
                f"lcr index {src or 'SOURCE'} -o {self.path} --method {name}"
            )
        cached = self._readers.get(name)
        if cached is None or cached.entry is not entry:
            cached = MethodReader(self, name, entry)
            self._readers[name] = cached
        return cached

    def doc_at(self, offset: int) -> int:
        """Which document a character offset of source.txt belongs to."""
        for i, d in enumerate(self.documents):
            if offset < d.end + len(DOC_SEPARATOR):
                return i
        return max(len(self.documents) - 1, 0)

    def llm_cache(self, method: str) -> LLMCache:
        return LLMCache(self.path / "cache" / f"{method}.jsonl")

    def size_bytes(self, method: str | None = None) -> int:
        if method is None:
            return sum(f.stat().st_size for f in self.path.rglob("*") if f.is_file())
        entry = self.manifest["methods"][method]
        return int(sum(entry.get("files", {}).values()))

    # ---------------------------------------------------------------- building
    @contextlib.contextmanager
    def building(
        self,
        method: str,
        *,
        settings: dict[str, Any],
        models: dict[str, str],
    ) -> Iterator[MethodWriter]:
        """Build a method into a temporary folder and commit it atomically on success.

        An exception (or a kill) leaves the previous build of the method, if any,
        exactly as it was; the temporary folder is removed or swept next time.
        """
        with _locked(self.path):
            self._reload()
            self._sweep()
            build_id = secrets.token_hex(4)
            tmp = self.path / f".tmp-{method}-{build_id}"
            tmp.mkdir()
            writer = MethodWriter(tmp)
            started = time.perf_counter()
            try:
                yield writer
                final_name = f"{method}.{build_id}"
                entry = {
                    "dir": final_name,
                    "settings": settings,
                    "models": models,
                    "counts": writer.counts,
                    "stats": writer.stats,
                    "build_seconds": round(time.perf_counter() - started, 3),
                    "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "lcr_version": __version__,
                    "files": _dir_files(tmp),
                }
                fsync_dir(tmp)
                os.rename(tmp, self.path / final_name)
                fsync_dir(self.path)
                self._commit_entry(method, entry)
            finally:
                if tmp.exists():
                    shutil.rmtree(tmp, ignore_errors=True)
            self._sweep()

    def _reload(self) -> None:
        self.manifest = json.loads((self.path / "manifest.json").read_text(encoding="utf-8"))

    def _commit_entry(self, method: str, entry: dict[str, Any]) -> None:
        manifest = json.loads((self.path / "manifest.json").read_text(encoding="utf-8"))
        manifest.setdefault("methods", {})[method] = entry
        manifest["lcr_version"] = __version__
        atomic_write_json(self.path / "manifest.json", manifest)
        self.manifest = manifest

    def remove_method(self, method: str) -> None:
        with _locked(self.path):
            manifest = json.loads((self.path / "manifest.json").read_text(encoding="utf-8"))
            if manifest.get("methods", {}).pop(method, None) is not None:
                atomic_write_json(self.path / "manifest.json", manifest)
            self.manifest = manifest
            self._sweep()

    def _sweep(self) -> None:
        """Delete temporary folders and builds the manifest no longer points at."""
        live = {e["dir"] for e in self.manifest.get("methods", {}).values()}
        for child in self.path.iterdir():
            if not child.is_dir() or child.name == "cache":
                continue
            stale_tmp = child.name.startswith(".tmp-")
            orphan = "." in child.name and not child.name.startswith(".") and child.name not in live
            if stale_tmp or orphan:
                shutil.rmtree(child, ignore_errors=True)
