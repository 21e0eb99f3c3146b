"""The index directory: manifest, source text, one folder per built method.

Layout::

    book.idx/
      manifest.json            schema version, sources, per-method entries (the commit point)
      source.txt               normalised text of every document, joined by blank lines
      layout.json              each document's pages and headings (lcr.text.layout)
      <method>.<build>/        nodes.jsonl, *.zarr, *.json of one completed build
      cache/<method>.jsonl     LLM outputs already paid for (resumable builds)
      cache/<method>.config.json  which configuration its unconfigured keys belong to
    .book.idx.lock             beside the folder while a writer holds it (one at a time)

A method is built in ``.tmp-<method>-<build>/`` and renamed to
``<method>.<build>/``; only then does the atomically replaced manifest point at
it, and only after that is the previous build deleted. A ``--force`` over other
documents builds a whole new index beside the old one (``.book.idx.new-<id>/``)
and swaps the two folders in one step once every requested method is built.
Killed at any moment, the index opens as it was before or as it is after.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import secrets
import shutil
import stat
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lcr._version import __version__
from lcr.atomic import fsync_dir
from lcr.errors import (
    FileAccessError,
    IndexDamagedError,
    IndexNotFoundError,
    InputError,
    LcrError,
    LostRaceError,
    MethodNotBuiltError,
    SchemaMismatchError,
    SourceMismatchError,
)
from lcr.store import hints
from lcr.store.cache import LLMCache
from lcr.store.documents import DOC_SEPARATOR, join_documents
from lcr.store.manifest import Manifest, MethodEntry, SourceDoc
from lcr.store.method_writer import MethodWriter
from lcr.store.nodes import span_problem
from lcr.store.reader import BuildDamagedError, MethodReader
from lcr.store.writing import (
    MADE,
    Note,
    check_replaceable,
    index_home,
    is_cwd,
    mark_made,
    recover_swap,
    remove_made,
    swap_in,
    token,
    unmark,
    writer_lock,
)
from lcr.text.document import Document
from lcr.text.layout import (
    LAYOUT_FILE,
    DocumentLayout,
    LayoutError,
    read_layout,
    write_layout,
)


def _text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _dir_files(root: Path) -> dict[str, int]:
    return {
        str(p.relative_to(root)): p.stat().st_size for p in sorted(root.rglob("*")) if p.is_file()
    }


def _dir_digests(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): file_sha256(p) for p in sorted(root.rglob("*")) if p.is_file()
    }


@dataclass
class Index:
    path: Path
    manifest: Manifest
    _source: str | None = field(default=None, repr=False)
    _layouts: tuple[DocumentLayout, ...] | None = field(default=None, repr=False)
    _readers: dict[str, MethodReader] = field(default_factory=dict, repr=False)
    # methods whose files are missing or the wrong size: method -> the message
    damaged: dict[str, str] = field(default_factory=dict)
    created: bool = False  # made by this Index.create call (not found there)
    # a staged replacement (``create(force=True)``): the folder :meth:`commit` swaps it to
    target: Path | None = None
    cache_dir: Path | None = None  # where its LLM cache lives (the old index's, if staged)

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
        for attempt in range(3):
            index = cls(p, Manifest.read(p))
            last = attempt == 2
            try:
                index._check_files()
            except IndexDamagedError:
                if last or not index.changed_on_disk():
                    raise
                continue  # a writer committed between reading the manifest and the files
            if last or not index.damaged or not index.changed_on_disk():
                break
        return index

    def changed_on_disk(self) -> bool:
        """Whether another process committed to this index since its manifest was read:
        then files that no longer match it are that writer's, not damage."""
        try:
            return Manifest.read(self.final_path) != self.manifest
        except LcrError:
            return False

    def damage_error(self, message: str) -> LcrError:
        """``message`` as damage, or as a lost race when a writer changed the index since
        it was opened (a stale :class:`Index` is not a damaged one)."""
        if self.changed_on_disk():
            return LostRaceError(
                f"{self.path} was rebuilt by another lcr process while it was read; "
                "run the command again (or open the index again)"
            )
        return IndexDamagedError(message)

    def _check_files(self) -> None:
        """Sizes of every listed file (cheap: no reading). The source text is shared by
        every method, so its damage is fatal; a method's damage only marks that method
        (see :attr:`damaged`), and the others keep working."""
        src = self.path / "source.txt"
        try:
            info = src.lstat()
        except PermissionError:
            raise FileAccessError(f"permission denied: cannot read {src}") from None
        except OSError:
            raise self._source_damage("source.txt is missing") from None
        for shared in (src, self.path / LAYOUT_FILE):  # a link would read outside the index
            if shared.is_symlink():
                raise self._source_damage(f"{shared.name} is a symbolic link (lcr writes none)")
        if info.st_size != self.manifest.source_bytes:
            raise self._source_damage("source.txt has the wrong size")
        self.damaged = {}
        for name, broken in self.manifest.broken.items():
            self.damaged[name] = (
                f"{self.path} is damaged: manifest.json's {broken.problem}; "
                f"{self.rebuild_hint(name)}"
            )
        for name, entry in self.manifest.methods.items():
            problem = self._size_problem(entry)
            if problem is not None:
                self.damaged[name] = self.damage_message(name, problem)

    def _source_damage(self, problem: str) -> IndexDamagedError:
        return IndexDamagedError(f"{self.path} is damaged: {problem}; {self.repair_hint()}")

    def _size_problem(self, entry: MethodEntry) -> str | None:
        """The first listed file that is missing, of the wrong size, named outside the
        build's folder or a symbolic link (lcr writes none: a link reads elsewhere)."""
        mdir = self.path / entry.dir
        if mdir.is_symlink():
            return f"{entry.dir} is a symbolic link (lcr never writes one)"
        for rel, expected in entry.files.items():
            parts = Path(rel).parts
            if not parts or Path(rel).is_absolute() or ".." in parts:
                return f"{rel} is named outside its folder"
            try:
                info = (mdir / rel).lstat()
            except PermissionError:
                return f"{rel} cannot be read (permission denied)"
            except OSError:
                return f"{rel} is missing"
            if stat.S_ISLNK(info.st_mode):
                return f"{rel} is a symbolic link (lcr never writes one)"
            if info.st_size != expected:
                return f"{rel} has the wrong size"
        return None

    def damage_message(self, method: str, problem: str) -> str:
        return f"{self.path} is damaged: {method}/{problem}; {self.rebuild_hint(method)}"

    def rebuild_hint(self, method: str) -> str:
        return hints.rebuild_hint(self.manifest, self.final_path, method)

    def repair_hint(self) -> str:
        return hints.repair_hint(self.manifest, self.final_path)

    def index_command(self, methods: Sequence[str], args: Sequence[str] = ()) -> str:
        return hints.index_command(self.manifest, self.final_path, methods, args)

    def verify(self) -> dict[str, list[str]]:
        """Check every file against the checksums the builds recorded (reads everything).

        Returns the problems found per method (``"source"`` for source.txt); empty
        when the index is intact. Builds made before checksums were recorded are
        checked by size only.
        """
        problems: dict[str, list[str]] = {}
        src = self.path / "source.txt"
        if file_sha256(src) != self.manifest.source_sha256:
            problems["source"] = ["source.txt does not match its checksum"]
        else:
            problem = self._decoded_source(src.read_bytes())[1]
            if problem is not None:
                problems["source"] = [f"source.txt {problem}"]
        layout = self.path / LAYOUT_FILE
        expected_layout = self.manifest.layout_sha256
        if expected_layout is not None and (
            not layout.is_file() or file_sha256(layout) != expected_layout
        ):
            problems.setdefault("source", []).append(f"{LAYOUT_FILE} does not match its checksum")
        for name, entry in self.methods.items():
            found: list[str] = []
            size = self._size_problem(entry)
            if size is not None:
                found.append(size)
            mdir = self.path / entry.dir
            for rel, expected in entry.sha256.items():
                f = mdir / rel
                if size is None and f.is_file() and file_sha256(f) != expected:
                    found.append(f"{rel} does not match its checksum")
            if not found and "source" not in problems:
                found.extend(self._structure_problems(name, entry))
            if found:
                problems[name] = found
        return problems

    def _structure_problems(self, name: str, entry: MethodEntry) -> list[str]:
        """What checksums cannot see (files rewritten with their digests refreshed):
        every node record and its spans, every array's structure. A method's own checks
        (shapes against node counts, its JSON) are ``lcr.pipeline.integrity.verify_index``'s."""
        reader = MethodReader(self, name, entry)
        source, documents = self.source, len(self.documents)
        found: list[str] = []
        for rel in sorted(entry.files):
            stem, _, kind = rel.partition(".")
            try:
                if "/" not in rel and kind == "jsonl":
                    for i, node in enumerate(reader.nodes(stem), 1):
                        problem = span_problem(
                            node.level, node.text, node.spans, node.doc, source, documents
                        )
                        if problem is not None:
                            found.append(f"{rel} line {i} (node {node.id}) {problem}")
                            break
                elif "/" not in rel and kind == "offsets.npy":
                    reader.offsets(stem)
                elif "/" not in rel and kind == "npy":
                    reader.array(stem)
                elif rel.endswith("/shape.json"):
                    reader.csr(rel.split(".", 1)[0])
                elif "/" not in rel and kind == "json":
                    reader.json(stem)
                elif rel.endswith(".zarr/zarr.json") and rel.count("/") == 1:
                    reader.array(rel.split(".", 1)[0])
            except BuildDamagedError as exc:
                found.append(exc.problem)
        return found

    # ---------------------------------------------------------------- creating
    @classmethod
    def create(
        cls,
        path: str | Path,
        documents: Sequence[Document],
        *,
        force: bool = False,
        note: Note | None = None,
    ) -> Index:
        """Open the index of these documents at ``path``, creating it if needed.

        An existing index over the same documents is reused (methods are added to
        it); one over other documents (or a damaged one) is refused unless ``force``.
        With ``force`` the new index is *staged* beside the old one (:attr:`target`
        says where it goes) and :meth:`commit` swaps it in; until then the old
        index, its source and its LLM cache stay whole, and the staged build uses
        the old index's cache, so what it pays outlives a failure. A folder lcr did
        not make is never touched. The caller holds :func:`writer_lock` from here
        to :meth:`commit` (``lcr index`` does), so no other writer comes between.
        """
        if not documents:
            raise InputError("no documents to index")
        p = index_home(Path(path))  # a symlinked index: its folder is swapped, the link stays
        source, docs = join_documents(documents)
        with writer_lock(p, note):
            recover_swap(p)
            if not p.exists() or (p.is_dir() and not any(p.iterdir())):
                return cls._write_new(p, source, docs, documents)
            if not (p / "manifest.json").exists():
                raise InputError(f"{p} exists and is not an lcr index; refusing to overwrite it")
            try:
                existing: Index | None = cls.open(p)
            except (IndexDamagedError, SchemaMismatchError):
                if not force:
                    raise
                existing = None
            if existing is not None and existing.source_digests() == [d.sha256 for d in docs]:
                same_text = existing.manifest.source_sha256 in (None, _text_sha256(source))
                if same_text and not (force and existing.source_damaged()):
                    return existing
                if not same_text and not force:  # a forced format, a new extractor
                    raise SourceMismatchError(
                        f"{p} holds another extraction of these files; use --force "
                        "to extract them again"
                    )
            elif not force:
                names = ", ".join(d.name for d in docs)
                raise SourceMismatchError(
                    f"{p} indexes other documents than {names}; use --force to replace it"
                )
            check_replaceable(p)
            return cls._write_new(p, source, docs, documents, staged=True)

    @classmethod
    def stage(cls, path: str | Path, documents: Sequence[Document]) -> Index:
        """A new index of ``documents`` staged beside the one at ``path``, sharing its LLM
        cache, for :meth:`commit` to swap in (documents added or removed: lcr.pipeline.collection).
        The caller holds :func:`writer_lock` of ``path`` until the commit."""
        p = index_home(Path(path))
        check_replaceable(p)
        source, docs = join_documents(documents)
        return cls._write_new(p, source, docs, documents, staged=True)

    @classmethod
    def _write_new(
        cls,
        p: Path,
        source: str,
        docs: list[SourceDoc],
        inputs: Sequence[Document],
        *,
        staged: bool = False,
    ) -> Index:
        """Write a new index: renamed to ``p`` (a new or empty folder), filled in place
        when ``p`` is the current folder (renaming onto it is refused), or, when
        ``staged``, left beside ``p`` for :meth:`commit`."""
        here = p.exists() and is_cwd(p)
        base = Path(os.path.abspath(p))
        base.parent.mkdir(parents=True, exist_ok=True)
        tmp = p if here else base.parent / f".{base.name}.{'new' if staged else 'tmp'}-{token()}"
        if not here:
            tmp.mkdir()
            mark_made(tmp)
        try:
            data = source.encode("utf-8")
            (tmp / "source.txt").write_bytes(data)
            write_layout(tmp, [d.layout for d in inputs])
            manifest = Manifest(
                lcr_version=__version__,
                created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                source_bytes=len(data),
                source_chars=len(source),
                source_sha256=hashlib.sha256(data).hexdigest(),
                layout_sha256=file_sha256(tmp / LAYOUT_FILE),
                sources=tuple(docs),
                source_paths=[d.path for d in inputs],
            )
            manifest.write(tmp)
            fsync_dir(tmp)
            if staged:
                cache = p / "cache"
                return cls(tmp, manifest, source, created=True, target=p, cache_dir=cache)
            if not here:
                os.rename(tmp, p)  # onto nothing, or an empty folder
                unmark(p)
                fsync_dir(p.parent)
        except BaseException:
            if not here:
                remove_made(tmp)
            raise
        return cls(p, manifest, source, created=True)

    def commit(self) -> Index:
        """Swap a staged replacement (``create(force=True)``) in for the old index, with the
        LLM cache it shared: the index now in place, this handle unmoved (or this one)."""
        if self.target is not None:
            with writer_lock(self.target):
                swap_in(self.path, self.target, self.cache_dir)
            return dataclasses.replace(
                self, path=self.target, target=None, cache_dir=None, _readers={}
            )
        return self

    def abandon(self) -> None:
        """Drop a staged replacement that will not be committed: the old index stays."""
        if self.target is not None:
            remove_made(self.path)

    def discard_if_unused(self) -> bool:
        """Remove an index this run created when its first build failed, so no empty
        index is left behind; kept if any method was committed or any LLM output was
        paid for (the cache lets the next run resume). Returns whether it was removed.
        A staged replacement is simply dropped (its LLM outputs are in the old cache)."""
        if self.target is not None:
            self.abandon()
            return True
        if is_cwd(self.path):
            return False  # filled in place: the user's current folder stays
        try:
            with writer_lock(self.path):
                self._reload()
                cache = self.path / "cache"
                paid = cache.is_dir() and any(f.stat().st_size for f in cache.iterdir())
                if self.manifest.methods or paid:
                    return False
                gone = self.path.parent / f".{self.path.name}.failed-{token()}"
                (self.path / MADE).write_text(gone.name, encoding="utf-8")
                os.rename(self.path, gone)
        except OSError:
            return False
        shutil.rmtree(gone, ignore_errors=True)
        return True

    def source_damaged(self) -> bool:
        """Whether source.txt no longer matches its checksum (reads it whole)."""
        expected = self.manifest.source_sha256
        try:
            # every index lcr writes records it: none is damage too
            return expected is None or file_sha256(self.path / "source.txt") != expected
        except OSError:
            return True

    # ------------------------------------------------------------------ access
    @property
    def final_path(self) -> Path:
        """Where this index lives once committed (its lock is that folder's)."""
        return self.target or self.path

    @property
    def source(self) -> str:
        """The text every span points into, checked against its checksum (it is read
        whole anyway, and a changed source would make every span point at other text)."""
        if self._source is None:
            data = (self.path / "source.txt").read_bytes()
            expected = self.manifest.source_sha256
            if expected is not None and hashlib.sha256(data).hexdigest() != expected:
                raise self.damage_error(
                    f"{self.path} is damaged: source.txt does not match its checksum; "
                    f"{self.repair_hint()}"
                )
            text, problem = self._decoded_source(data)
            if problem is not None:
                raise self.damage_error(
                    f"{self.path} is damaged: source.txt {problem}; {self.repair_hint()}"
                )
            self._source = text
        return self._source

    def _decoded_source(self, data: bytes) -> tuple[str, str | None]:
        """source.txt's text, and what is wrong with it (None: nothing): UTF-8, of the
        length the manifest recorded (a span counts characters)."""
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            return "", f"is not UTF-8 (byte {exc.start})"
        chars = self.manifest.source_chars
        if chars and len(text) != chars:
            return text, f"holds {len(text)} characters, not the {chars} recorded"
        return text, None

    @property
    def documents(self) -> list[SourceDoc]:
        return list(self.manifest.sources)

    @property
    def layouts(self) -> tuple[DocumentLayout, ...]:
        """Each document's pages and headings (``layout.json``), in :attr:`documents`'
        order, read once; empty layouts for an index without the file (plain text, or
        built before it existed). A damaged file is the index's damage, in one line."""
        if self._layouts is None:
            try:
                layouts = read_layout(self.path, len(self.manifest.sources))
            except LayoutError as exc:
                raise IndexDamagedError(
                    f"{self.path} is damaged: {exc}; {self.repair_hint()}"
                ) from None
            self._layouts = tuple(layouts)
        return self._layouts

    def source_digests(self) -> list[str]:
        return [d.sha256 for d in self.manifest.sources]

    @property
    def methods(self) -> dict[str, MethodEntry]:
        return dict(self.manifest.methods)

    def reader(self, name: str) -> MethodReader:
        if name in self.damaged:
            raise self.damage_error(self.damaged[name])
        entry = self.manifest.methods.get(name)
        if entry is None:
            raise MethodNotBuiltError(
                f"{self.path} has no {name} index; build it with: {self.index_command([name])}"
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
        """The method's cache; keys from before configurations were recorded belong to
        the backend its existing build recorded."""
        entry = self.methods.get(method)
        backend = entry.stats.get("llm_backend") if entry is not None else None
        return LLMCache(
            (self.cache_dir or self.path / "cache") / f"{method}.jsonl",
            legacy_backend=str(backend) if backend else None,
        )

    def cache_refusals(self) -> dict[str, int]:
        """Per method, how many lines of its LLM cache fail their digest (written or
        edited outside lcr): never used, paid again by the next build."""
        folder = self.cache_dir or self.path / "cache"
        if not folder.is_dir() or folder.is_symlink():
            return {}
        found = {}
        for f in sorted(folder.glob("*.jsonl")):
            refused = LLMCache(f).refused
            if refused:
                found[f.stem] = refused
        return found

    def size_bytes(self, method: str | None = None) -> int:
        if method is None:
            return sum(f.stat().st_size for f in self.path.rglob("*") if f.is_file())
        return int(sum(self.manifest.methods[method].files.values()))

    # ---------------------------------------------------------------- building
    @contextlib.contextmanager
    def building(
        self,
        method: str,
        *,
        settings: dict[str, Any],
        models: dict[str, str],
        rebuild_args: Sequence[str] = (),
        note: Note | None = None,
    ) -> Iterator[MethodWriter]:
        """Build a method into a temporary folder and commit it atomically on success.

        An exception (or a kill) leaves the previous build of the method, if any,
        exactly as it was; the temporary folder is removed or swept next time.
        ``note`` hears that the build waits for another writer's lock; the
        recorded build time starts once the lock is held.
        """
        with writer_lock(self.final_path, note):
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
                entry = MethodEntry(
                    dir=final_name,
                    settings=dict(settings),
                    models=dict(models),
                    counts=writer.counts,
                    stats=writer.stats,
                    build_seconds=round(time.perf_counter() - started, 3),
                    built_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    lcr_version=__version__,
                    files=_dir_files(tmp),
                    sha256=_dir_digests(tmp),
                    rebuild_args=list(rebuild_args),
                )
                fsync_dir(tmp)
                os.rename(tmp, self.path / final_name)
                fsync_dir(self.path)
                self._commit_entry(method, entry)
                self.damaged.pop(method, None)
            finally:
                if tmp.exists():
                    shutil.rmtree(tmp, ignore_errors=True)
            self._sweep()

    def wait_for_writers(self, note: Note | None = None) -> None:
        """Wait until no other process writes this index, then read its manifest again
        (what the other process committed meanwhile counts)."""
        with writer_lock(self.final_path, note):
            self._reload()

    def _reload(self) -> None:
        self.manifest = Manifest.read(self.path)
        self._check_files()

    def _commit_entry(self, method: str, entry: MethodEntry) -> None:
        manifest = Manifest.read(self.path).with_method(method, entry, __version__)
        manifest.write(self.path)
        self.manifest = manifest

    def _sweep(self) -> None:
        """Delete temporary folders and builds the manifest no longer points at."""
        live = {e.dir for e in self.manifest.methods.values()}
        for child in self.path.iterdir():
            if not child.is_dir() or child.name == "cache":
                continue
            stale_tmp = child.name.startswith(".tmp-")
            orphan = "." in child.name and not child.name.startswith(".") and child.name not in live
            if stale_tmp or orphan:
                shutil.rmtree(child, ignore_errors=True)
