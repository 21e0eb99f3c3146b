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
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from lcr.atomic import atomic_write_json
from lcr.errors import IndexDamagedError
from lcr.models.base import cpu_configuration, llm_configuration


def cache_key(*parts: Any) -> str:
    """A content hash of everything that determines an LLM output."""
    blob = json.dumps(parts, ensure_ascii=False, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


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
        self.misses = 0
        self._legacy_backend = legacy_backend
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

    def llm_identity(self, llm: Any) -> Any:
        """What a key holds for ``llm``: its model id when its configuration is the one
        this file's unconfigured keys belong to, else the id and the configuration."""
        config = llm_configuration(llm)
        if self._unkeyed is _UNKNOWN:
            self._unkeyed = cpu_configuration(self._legacy_backend or config["backend"] or "")
        if config == self._unkeyed:
            return llm.model_id
        return [llm.model_id, config]

    def _load(self) -> None:
        with self.path.open(encoding="utf-8", errors="replace") as fh:
            for line in fh:
                try:
                    obj = json.loads(line)
                    self._entries[str(obj["key"])] = obj["value"]
                except (ValueError, KeyError, TypeError):
                    continue  # a torn final line from an interrupted write

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: str) -> bool:
        return key in self._entries

    def get(self, key: str) -> Any | None:
        if key in self._entries:
            self.hits += 1
            return self._entries[key]
        self.misses += 1
        return None

    def put(self, key: str, value: Any) -> None:
        if not self._marker_written and self._unkeyed is not _UNKNOWN:
            # written before the first output, so a build that stores nothing leaves no file
            self._make_folder()
            atomic_write_json(self.config_path, {UNKEYED: self._unkeyed})
            self._marker_written = True
        self._write({"key": key, "value": value})
        self._entries[key] = value

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
        self.misses = 0
        self._legacy_backend = None
        self._unkeyed = None
        self._marker_written = True

    def put(self, key: str, value: Any) -> None:
        self._entries[key] = value

    def _write(self, entry: dict[str, Any]) -> None:
        pass
