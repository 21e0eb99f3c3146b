"""LLM outputs already paid for, kept in the index so an interrupted build resumes.

An append-only JSON-lines file per method, ``<index>/cache/<method>.jsonl``: each
line is ``{"key": ..., "value": ...}``, flushed and fsynced as soon as a call
completes. A line cut short by a crash is ignored on the next read.

Keys hold the LLM's configuration (backend, device, dtype, quantisation) as well
as its model id (:meth:`LLMCache.llm_identity`), so a build resumed with another
configuration never mixes two configurations' outputs. Keys written before
configurations were recorded hold the model id alone; the first write after
this change records, in ``<method>.config.json`` beside the file, which
configuration those belong to (the backend the index's build recorded, on the
CPU, as every earlier lcr ran), and a run with that configuration keeps reading
and writing them, so nothing is paid twice.

The cache is trusted only for what lcr wrote: each line carries ``mac``, a keyed
digest (HMAC-SHA256) of its key and value under the index's own secret,
``cache/secret`` (random, made with the first output, never in a cache file). A
line edited outside lcr, or one without a digest (a cache from before digests),
is refused: its call is paid again and ``lcr info --verify`` reports it. The
secret travels with the index, so this guards the cache against edits to its
files, not against whoever hands you a whole index (docs/architecture.md).
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import json
import os
import secrets
from pathlib import Path
from typing import Any

from lcr.atomic import atomic_write_json, atomic_write_text
from lcr.errors import IndexDamagedError
from lcr.evidence import Configuration, cpu_configuration


def cache_key(*parts: Any) -> str:
    """A content hash of everything that determines an LLM output."""
    blob = json.dumps(parts, ensure_ascii=False, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


SECRET = "secret"
"""The index's cache key file, beside the JSON lines in ``cache/``."""


def entry_digest(secret: bytes, key: str, value: Any) -> str:
    """The keyed digest a cache line carries: only a holder of the index's secret
    (lcr, writing it) can make one that matches."""
    blob = key + "\n" + json.dumps(value, ensure_ascii=False, sort_keys=True)
    return hmac.new(secret, blob.encode("utf-8"), hashlib.sha256).hexdigest()


def read_secret(folder: Path) -> bytes | None:
    """The cache secret in ``folder``, or None when there is none (or it is not a
    plain file: a link would read outside the index)."""
    try:
        fd = os.open(folder / SECRET, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        data = fh.read(256).strip()
    return data or None


UNKEYED = "unkeyed_configuration"
"""The sidecar's field naming the configuration whose keys hold the model id alone
(None: no such keys)."""
_UNKNOWN = object()


class LLMCache:
    def __init__(self, path: Path, legacy_backend: str | None = None) -> None:
        """``legacy_backend``: the backend the index's existing build recorded, which
        made the keys of a cache from before configurations were recorded."""
        self.path = path
        self._entries: dict[str, Any] = {}
        self.hits = 0
        self.refused = 0  # lines whose digest does not match: edited outside lcr
        self._dropped_refused = False
        self._legacy_backend = legacy_backend
        self._secret = read_secret(path.parent)
        if path.exists() and not path.is_symlink():  # a link would read outside the index
            self._load()
        self._unkeyed: Any = _UNKNOWN if self._entries else None
        self._marker_written = False
        try:
            self._unkeyed = json.loads(self.config_path.read_text(encoding="utf-8"))[UNKEYED]
            self._marker_written = True
        except (OSError, ValueError, KeyError, TypeError):
            pass  # none yet: a new cache, or one from before configurations were recorded

    @property
    def config_path(self) -> Path:
        """The sidecar ``<method>.config.json`` (the JSON lines stay one output each)."""
        return self.path.with_name(f"{self.path.stem}.config.json")

    def llm_identity(self, model_id: str, config: Configuration) -> Any:
        """What a key holds for the LLM ``model_id`` running as ``config``
        (``lcr.models.base.llm_configuration``): its model id when its configuration is
        the one this file's unconfigured keys belong to, else the id and the configuration."""
        if self._unkeyed is _UNKNOWN:
            self._unkeyed = cpu_configuration(self._legacy_backend or config["backend"] or "")
        if config == self._unkeyed:
            return model_id
        return [model_id, config]

    def _load(self) -> None:
        with self.path.open(encoding="utf-8", errors="replace") as fh:
            for line in fh:
                try:
                    obj = json.loads(line)
                    key, value, mac = str(obj["key"]), obj["value"], str(obj.get("mac", ""))
                except (ValueError, KeyError, TypeError, AttributeError):
                    continue  # a torn final line from an interrupted write
                if self._secret is None or not hmac.compare_digest(
                    mac, entry_digest(self._secret, key, value)
                ):
                    self.refused += 1  # not written by lcr for this index: paid again
                    continue
                self._entries[key] = value

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: str) -> bool:
        return key in self._entries

    def get(self, key: str) -> Any | None:
        if key in self._entries:
            self.hits += 1
            return self._entries[key]
        return None

    def put(self, key: str, value: Any) -> None:
        if not self._marker_written and self._unkeyed is not _UNKNOWN:
            # written before the first output, so a build that stores nothing leaves no file
            self._make_folder()
            atomic_write_json(self.config_path, {UNKEYED: self._unkeyed})
            self._marker_written = True
        secret = self._secret or self._make_secret()
        if self.refused and not self._dropped_refused:
            self._rewrite_trusted(secret)
        self._write({"key": key, "value": value, "mac": entry_digest(secret, key, value)})
        self._entries[key] = value

    def _rewrite_trusted(self, secret: bytes) -> None:
        """Drop the refused lines with the first new output: the file keeps only what
        lcr wrote (signed again with ``secret``), so ``--verify`` passes once repaid."""
        lines = (
            json.dumps(
                {"key": k, "value": v, "mac": entry_digest(secret, k, v)}, ensure_ascii=False
            )
            + "\n"
            for k, v in self._entries.items()
        )
        atomic_write_text(self.path, "".join(lines))
        self._dropped_refused = True

    def _make_secret(self) -> bytes:
        """The index's cache secret, made with its first output (mode 0600)."""
        self._make_folder()
        secret = secrets.token_hex(32).encode("ascii")
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(self.path.parent / SECRET, flags, 0o600)
        except FileExistsError:  # an unreadable or linked one: refuse rather than guess
            raise IndexDamagedError(
                f"{self.path.parent / SECRET} cannot be read; remove it (the cache's outputs "
                "are paid again) and run the command again"
            ) from None
        with os.fdopen(fd, "wb") as fh:
            fh.write(secret)
            fh.flush()
            os.fsync(fh.fileno())
        self._secret = secret
        return secret

    def _make_folder(self) -> None:
        """The cache folder, refused when it is a symlink: writes stay inside the index."""
        folder = self.path.parent
        if folder.is_symlink():
            raise IndexDamagedError(
                f"{folder} is a symbolic link; lcr writes nothing through links inside an "
                "index: remove it and run the command again"
            )
        folder.mkdir(parents=True, exist_ok=True)

    def _write(self, entry: dict[str, Any]) -> None:
        self._make_folder()
        line = json.dumps(entry, ensure_ascii=False) + "\n"
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(self.path, flags, 0o666)
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise
            raise IndexDamagedError(
                f"{self.path} is a symbolic link; lcr writes nothing through links inside an "
                "index: remove it and run the command again"
            ) from None
        with os.fdopen(fd, "a", encoding="utf-8") as fh:
            # A previous crash may have left a torn line without a newline.
            if fh.tell() > 0 and not self._ends_with_newline():
                fh.write("\n")
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())

    def _ends_with_newline(self) -> bool:
        with self.path.open("rb") as fh:
            fh.seek(-1, os.SEEK_END)
            return fh.read(1) == b"\n"


class MemoryCache(LLMCache):
    """A cache that forgets: for retrieval-time calls and tests."""

    def __init__(self) -> None:
        self.path = Path(os.devnull)
        self._entries = {}
        self.hits = 0
        self.refused = 0
        self._dropped_refused = True
        self._legacy_backend = None
        self._secret = None
        self._unkeyed = None
        self._marker_written = True

    def put(self, key: str, value: Any) -> None:
        self._entries[key] = value

    def _write(self, entry: dict[str, Any]) -> None:
        pass
