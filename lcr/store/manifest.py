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
import types
import typing
from dataclasses import dataclass, field
from functools import cache
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
    added: str = ""  # when it joined the index, UTC ("": with the index, at its creation)


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
    def from_json(cls, raw: Any, label: str) -> MethodEntry:
        """The entry ``label`` (``methods.bm25``); a :class:`ManifestFieldError` names the
        field that is missing or of the wrong kind."""
        if not isinstance(raw, dict):
            raise ManifestFieldError(f"{label} is {_kind_of(raw)}, not an object")
        if "dir" not in raw:
            raise ManifestFieldError(f"{label}.dir is missing")
        return cls(**_typed(cls, raw, label))

    def to_json(self) -> dict[str, Any]:
        return _plain(self)


class ManifestFieldError(ValueError):
    """A field of the manifest is missing or of the wrong kind; the message names it."""


@dataclass(frozen=True)
class BrokenEntry:
    """A method entry that does not read as one: that method is damaged, the others are
    not. Its raw JSON is written back as it was, until the method is built again."""

    raw: Any
    problem: str  # names the field: "methods.bm25.files is null, not an object"


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
    # entries that did not read (see BrokenEntry): method -> entry
    broken: dict[str, BrokenEntry] = field(default_factory=dict)
    # the last documents added or removed, and what each method paid for it
    # (lcr.pipeline.collection): {"at", "added", "removed", "methods": {name: costs}}
    last_change: dict[str, Any] = field(default_factory=dict)
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
        """Every field checked: a top-level field or a source of the wrong kind makes the
        whole manifest damaged; a method entry of the wrong kind, that method alone."""
        try:
            values = _typed(
                cls, {k: v for k, v in raw.items() if k not in ("sources", "methods")}, ""
            )
            docs = _sources(raw.get("sources", []), raw.get("source_chars"))
            methods = raw.get("methods", {})
            if not isinstance(methods, dict):
                raise ManifestFieldError(f"methods is {_kind_of(methods)}, not an object")
        except ManifestFieldError as exc:
            raise IndexDamagedError(f"{where} is damaged: {exc}") from None
        entries: dict[str, MethodEntry] = {}
        broken: dict[str, BrokenEntry] = {}
        for name, entry in methods.items():
            try:
                parsed = MethodEntry.from_json(entry, f"methods.{name}")
                if not _BUILD_FOLDER.fullmatch(parsed.dir) or parsed.dir.split(".")[0] != name:
                    raise ManifestFieldError(
                        f"methods.{name}.dir {json.dumps(parsed.dir)} is not a build folder "
                        f"of this index ({name}.<hex>)"
                    )
                entries[name] = parsed
            except ManifestFieldError as exc:
                broken[name] = BrokenEntry(entry, str(exc))
        return cls(sources=docs, methods=entries, broken=broken, **values)

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
            **({"last_change": self.last_change} if self.last_change else {}),
            "sources": [dataclasses.asdict(d) for d in self.sources],
            "methods": {
                **{k: b.raw for k, b in self.broken.items()},
                **{k: e.to_json() for k, e in self.methods.items()},
            },
        }

    def write(self, path: Path) -> None:
        """Replace ``path``/manifest.json atomically: the index's commit point."""
        atomic_write_json(path / "manifest.json", self.to_json())

    def with_method(self, name: str, entry: MethodEntry, lcr_version: str) -> Manifest:
        broken = {k: b for k, b in self.broken.items() if k != name}
        return dataclasses.replace(
            self, methods={**self.methods, name: entry}, broken=broken, lcr_version=lcr_version
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


def _typed(cls: type, raw: dict[str, Any], label: str) -> dict[str, Any]:
    """The known fields of ``cls`` from ``raw``, each checked against its annotation
    (inside containers too: ``files`` maps names to whole numbers); the rest under
    ``extra``. A wrong kind is damage (the file was edited or torn): a
    :class:`ManifestFieldError` naming the field (``methods.bm25.files``)."""
    hints = _hints(cls)
    values: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in raw.items():
        hint = hints.get(key)
        if hint is None or key in ("extra", "broken"):
            extra[key] = value
            continue
        _check(value, hint, f"{label}.{key}" if label else key)
        values[key] = value
    return {**values, "extra": extra}


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _check(value: Any, hint: Any, label: str) -> None:
    """Raise :class:`ManifestFieldError` unless ``value`` is of the annotation ``hint``."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return
        (hint,) = [a for a in args if a is not type(None)]
        origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return
    kind = origin or hint
    wanted = {str: "a string", int: "a whole number", float: "a number", dict: "an object",
              list: "a list"}.get(kind, kind.__name__)  # fmt: skip
    ok = isinstance(value, (int, float) if kind is float else kind)
    if isinstance(value, bool) and kind in (int, float):
        ok = False
    if not ok:
        raise ManifestFieldError(f"{label} is {_kind_of(value)}, not {wanted}")
    if kind is dict and args:
        for k, v in value.items():
            _check(v, args[1], f"{label}[{json.dumps(k, ensure_ascii=False)}]")
    elif kind is list and args:
        for i, v in enumerate(value):
            _check(v, args[0], f"{label}[{i}]")
    if kind is int and value < 0:
        raise ManifestFieldError(f"{label} is negative")


def _kind_of(value: Any) -> str:
    """How a JSON value reads in a message: ``null``, ``a string``, ``a list``, ..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return {str: "a string", int: "a whole number", float: "a number", dict: "an object",
            list: "a list"}.get(type(value), type(value).__name__)  # fmt: skip


def _sources(raw: Any, chars: Any) -> tuple[SourceDoc, ...]:
    """The source entries, each field checked, each inside the source text."""
    if not isinstance(raw, list):
        raise ManifestFieldError(f"sources is {_kind_of(raw)}, not a list")
    docs: list[SourceDoc] = []
    for i, d in enumerate(raw):
        label = f"sources[{i}]"
        if not isinstance(d, dict):
            raise ManifestFieldError(f"{label} is {_kind_of(d)}, not an object")
        for f in dataclasses.fields(SourceDoc):
            required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            if required and f.name not in d:  # later fields have defaults: older indexes
                raise ManifestFieldError(f"{label}.{f.name} is missing")
        values = _typed(SourceDoc, d, label)
        values.pop("extra")
        doc = SourceDoc(**values)
        if doc.start > doc.end or (isinstance(chars, int) and doc.end > chars):
            raise ManifestFieldError(
                f"{label} spans characters {doc.start}-{doc.end}, outside the source text"
            )
        docs.append(doc)
    return tuple(docs)


def _plain(obj: Any) -> dict[str, Any]:
    out = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if f.name != "extra"}
    return {**obj.extra, **out}
