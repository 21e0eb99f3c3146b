"""The index's ``manifest.json`` as typed, versioned objects, read and written here only.

The manifest is the index's commit point: what it lists is the index. Reading
checks its format and schema version and every field's type, so a damaged or
foreign file is one clear error instead of a ``KeyError`` later; unknown keys
(written by a newer lcr of the same schema) are kept as they are.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lcr.atomic import atomic_write_json
from lcr.errors import FileAccessError, IndexDamagedError, IndexNotFoundError, SchemaMismatchError

FORMAT = "lcr-index"
# a build's folder, inside the index: ``<method>.<hex>``, never a path elsewhere
_BUILD_FOLDER = re.compile(r"[A-Za-z0-9_-]+\.[0-9a-f]+")
SCHEMA_VERSION = 1


@dataclass(frozen=True)
class SourceDoc:
    """One input document, where its text lies in source.txt, and what extracted it
    (an index built before formats were read has the defaults: plain text)."""

    name: str
    sha256: str
    size: int
    start: int
    end: int
    format: str = "text"
    pages: int = 0  # pages in layout.json (0: a format without pages)
    extractor: str = "lcr"
    extractor_version: str = ""
    # what else decides the text: lcr's extraction rules version, a forced format
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class MethodEntry:
    """One committed build of a method: its folder, what it was built with, what it made."""

    dir: str
    settings: dict[str, Any] = field(default_factory=dict)  # the values, as recorded
    models: dict[str, str] = field(default_factory=dict)  # role -> model id
    counts: dict[str, int] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)
    build_seconds: float = 0.0
    built_at: str = ""
    lcr_version: str = ""
    files: dict[str, int] = field(default_factory=dict)  # relative path -> size
    sha256: dict[str, str] = field(default_factory=dict)  # relative path -> digest
    # the `lcr index` options that rebuild it as it was (non-default --set, --llm, ...)
    rebuild_args: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)  # keys this lcr does not know

    @classmethod
    def from_json(cls, raw: Any, where: str) -> MethodEntry:
        if not isinstance(raw, dict) or not isinstance(raw.get("dir"), str):
            raise IndexDamagedError(f"{where} is damaged: a method entry has no folder")
        return cls(**_typed(cls, raw, where))

    def to_json(self) -> dict[str, Any]:
        return _plain(self)


@dataclass(frozen=True)
class Manifest:
    """The whole manifest: the sources, the source text's size and digest, the builds."""

    lcr_version: str
    source_bytes: int
    source_sha256: str | None
    sources: tuple[SourceDoc, ...]
    methods: dict[str, MethodEntry] = field(default_factory=dict)
    created: str = ""
    source_chars: int = 0
    layout_sha256: str | None = None  # layout.json's digest (None: built before it existed)
    # each source's absolute path when indexed ("-" for stdin, "" unknown): the repair
    # hints name it relative to the folder they are printed in
    source_paths: list[str] = field(default_factory=list)
    format: str = FORMAT
    schema_version: int = SCHEMA_VERSION
    extra: dict[str, Any] = field(default_factory=dict)  # keys this lcr does not know

    # ------------------------------------------------------------------ reading
    @classmethod
    def read(cls, path: Path) -> Manifest:
        """``path``/manifest.json, checked; every problem is a one-line error."""
        manifest_path = path / "manifest.json"
        try:
            raw = json.loads(manifest_path.read_text(encoding="utf-8"))
        except PermissionError:
            raise FileAccessError(f"permission denied: cannot read {manifest_path}") from None
        except (OSError, ValueError, UnicodeDecodeError):
            raise IndexDamagedError(f"{manifest_path} is damaged (not valid JSON)") from None
        if not isinstance(raw, dict) or raw.get("format") != FORMAT:
            raise IndexNotFoundError(f"{path} is not an lcr index (foreign manifest.json)")
        version = raw.get("schema_version")
        if type(version) is not int:  # "1" or 1.0 is not schema 1, and must not read as it
            raise SchemaMismatchError(
                f"{path} has an invalid schema_version {json.dumps(version)} (this lcr reads "
                f"schema {SCHEMA_VERSION}, a number); "
                f"rebuild it with: {rebuild_command(raw, path)}"
            )
        if version != SCHEMA_VERSION:
            raise SchemaMismatchError(
                f"{path} has index schema {version}, this lcr reads schema {SCHEMA_VERSION}; "
                f"rebuild it with: {rebuild_command(raw, path)}"
            )
        return cls.from_json(raw, str(manifest_path))

    @classmethod
    def from_json(cls, raw: dict[str, Any], where: str) -> Manifest:
        values = _typed(
            cls, {k: v for k, v in raw.items() if k not in ("sources", "methods")}, where
        )
        sources = raw.get("sources", [])
        methods = raw.get("methods", {})
        if not isinstance(sources, list) or not isinstance(methods, dict):
            raise IndexDamagedError(f"{where} is damaged: sources or methods malformed")
        try:
            docs = tuple(SourceDoc(**d) for d in sources)
        except TypeError:
            raise IndexDamagedError(f"{where} is damaged: a source entry is malformed") from None
        entries = {str(k): MethodEntry.from_json(v, where) for k, v in methods.items()}
        for name, entry in entries.items():
            if not _BUILD_FOLDER.fullmatch(entry.dir) or entry.dir.split(".")[0] != name:
                raise IndexDamagedError(
                    f"{where} is damaged: methods.{name}.dir {json.dumps(entry.dir)} is not a "
                    f"build folder of this index ({name}.<hex>); rebuild it with: "
                    f"{rebuild_command(raw, Path(where).parent)}"
                )
        return cls(sources=docs, methods=entries, **values)

    # ------------------------------------------------------------------ writing
    def to_json(self) -> dict[str, Any]:
        return {
            **self.extra,
            "format": self.format,
            "schema_version": self.schema_version,
            "lcr_version": self.lcr_version,
            "created": self.created,
            "source_bytes": self.source_bytes,
            "source_chars": self.source_chars,
            "source_sha256": self.source_sha256,
            **({"layout_sha256": self.layout_sha256} if self.layout_sha256 is not None else {}),
            "source_paths": list(self.source_paths),
            "sources": [dataclasses.asdict(d) for d in self.sources],
            "methods": {k: e.to_json() for k, e in self.methods.items()},
        }

    def write(self, path: Path) -> None:
        """Replace ``path``/manifest.json atomically: the index's commit point."""
        atomic_write_json(path / "manifest.json", self.to_json())

    def with_method(self, name: str, entry: MethodEntry, lcr_version: str) -> Manifest:
        return dataclasses.replace(
            self, methods={**self.methods, name: entry}, lcr_version=lcr_version
        )


def typed_path(path: str | Path) -> str:
    """``path`` as a user would type it here: relative below the current folder,
    absolute elsewhere (``../../x`` is correct but no one types it)."""
    relative = os.path.relpath(path)
    return os.path.abspath(path) if relative.startswith("..") else relative


def rebuild_command(raw: dict[str, Any], path: Path) -> str:
    """``lcr index ... --force`` over the sources an unreadable manifest still names
    (their recorded paths, else their names), to paste where it is printed."""
    recorded = raw.get("source_paths")
    paths = recorded if isinstance(recorded, list) else []
    words = [typed_path(p) if p != "-" else p for p in paths if isinstance(p, str) and p]
    if not words or len(words) != len(paths):
        sources = raw.get("sources")
        names = (
            [d.get("name") for d in sources if isinstance(d, dict)]
            if isinstance(sources, list)
            else []
        )
        words = [n for n in names if isinstance(n, str) and n] or ["SOURCE"]
    quoted = " ".join(w if w in ("-", "SOURCE") else shlex.quote(w) for w in words)
    return f"lcr index {quoted} -o {shlex.quote(typed_path(path))} --force"


def _typed(cls: type, raw: dict[str, Any], where: str) -> dict[str, Any]:
    """The known fields of ``cls`` from ``raw``, each of its declared kind; the rest
    under ``extra``. A wrong kind is damage (the file was edited or torn)."""
    known = {f.name: f for f in dataclasses.fields(cls) if f.name != "extra"}
    kinds: dict[type, type | tuple[type, ...]] = {
        str: str,
        int: int,
        float: (int, float),
        dict: dict,
        list: list,
    }
    values: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in raw.items():
        f = known.get(key)
        if f is None:
            extra[key] = value
            continue
        kind = _kind(str(f.type))
        if kind is not None and value is not None and not isinstance(value, kinds[kind]):
            raise IndexDamagedError(f"{where} is damaged: {key} is not a {kind.__name__}")
        values[key] = value
    return {**values, "extra": extra}


def _kind(annotation: str) -> type | None:
    for prefix, kind in (
        ("dict", dict),
        ("list", list),
        ("str", str),
        ("int", int),
        ("float", float),
    ):
        if annotation.startswith(prefix):
            return kind
    return None


def _plain(obj: Any) -> dict[str, Any]:
    out = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if f.name != "extra"}
    return {**obj.extra, **out}
