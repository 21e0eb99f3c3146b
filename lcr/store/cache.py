"""LLM outputs already paid for, kept in the index so an interrupted build resumes.

An append-only JSON-lines file per method, ``<index>/cache/<method>.jsonl``: each
line is ``{"key": ..., "value": ...}``, flushed and fsynced as soon as a call
completes. A line cut short by a crash is ignored on the next read.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any


def cache_key(*parts: Any) -> str:
    """A content hash of everything that determines an LLM output."""
    blob = json.dumps(parts, ensure_ascii=False, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class LLMCache:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: dict[str, Any] = {}
        self.hits = 0
        self.misses = 0
        if path.exists():
            self._load()

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
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps({"key": key, "value": value}, ensure_ascii=False) + "\n"
        with self.path.open("a", encoding="utf-8") as fh:
            # A previous crash may have left a torn line without a newline.
            if fh.tell() > 0 and not self._ends_with_newline():
                fh.write("\n")
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())
        self._entries[key] = value

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

    def put(self, key: str, value: Any) -> None:
        self._entries[key] = value
