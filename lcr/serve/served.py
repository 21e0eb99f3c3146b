"""What ``lcr serve`` serves: the indexes named on its command line and those found in
the folders named there, and nothing else on disk.

Every path a client sends is resolved here (symlinks followed, ``..`` undone) and
refused in one line unless it is a served index, or, for building, inside a served
folder. A folder is searched again on each call, so an index built there while the
server runs is served from then on.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from lcr.errors import InputError, UsageError

MANIFEST = "manifest.json"
SEARCH_DEPTH = 4  # folders below a served folder searched for indexes


class NotServedError(UsageError):
    """A path a client sent lies outside what this server serves."""


@dataclass(frozen=True)
class ServedIndex:
    name: str  # how clients name it: relative to its served folder, or as given
    path: Path  # resolved


@dataclass(frozen=True)
class Served:
    """The indexes and folders given to ``lcr serve``, resolved once at start."""

    indexes: tuple[Path, ...]
    folders: tuple[Path, ...]

    @classmethod
    def from_arguments(cls, paths: Sequence[str | Path]) -> Served:
        """Each path an index (a folder with a manifest) or a folder to search; anything
        else is refused before the server starts."""
        indexes: list[Path] = []
        folders: list[Path] = []
        for given in paths or [Path.cwd()]:
            path = Path(given)
            if not path.is_dir():
                raise InputError(f"{given} is not an index or a folder (lcr serve takes either)")
            resolved = path.resolve()
            if (resolved / MANIFEST).is_file():
                indexes.append(resolved)
            else:
                folders.append(resolved)
        return cls(tuple(dict.fromkeys(indexes)), tuple(dict.fromkeys(folders)))

    def listed(self) -> list[ServedIndex]:
        """Every served index now, each once, in a stable order. Each index and folder
        named at start is checked again here, on every call: one that has since become
        a symlink (or lies below one) is no longer served, as a link in a served folder
        never is, and an index whose manifest has gone is not listed."""
        seen: dict[Path, ServedIndex] = {}
        for path in self.indexes:
            if _still_itself(path) and (path / MANIFEST).is_file():
                seen.setdefault(path, ServedIndex(path.name, path))
        for folder in self.folders:
            if not _still_itself(folder):
                continue
            for path in _indexes_below(folder):
                seen.setdefault(path, ServedIndex(str(path.relative_to(folder)), path))
        return list(seen.values())

    def index(self, given: str) -> Path:
        """The served index a client named (by its listed name or a path), or a one-line
        refusal that says where to look."""
        listed = self.listed()
        for served in listed:
            if given == served.name:
                return served.path
        resolved = _resolved(given)
        for served in listed:
            if resolved == served.path:
                return served.path
        raise NotServedError(
            f"{given!r} is not an index this server serves (list_indexes names those it does)"
        )

    def named_indexes(self, given: Sequence[str]) -> list[Path]:
        """The served indexes a client named in a list, each once, in the order given;
        every name that is not served is refused, all of them in one line."""
        found: list[Path] = []
        refused: list[str] = []
        for name in given:
            try:
                found.append(self.index(name))
            except NotServedError:
                refused.append(name)
        if len(refused) == 1:
            self.index(refused[0])  # its own one line
        if refused:
            raise NotServedError(
                f"{', '.join(map(repr, refused))} are not indexes this server serves "
                "(list_indexes names those it does)"
            )
        return list(dict.fromkeys(found))

    def source(self, given: str) -> Path:
        """A document to index: a file or folder inside a served folder."""
        return self._inside_served(given, "only documents inside them can be indexed")

    def _inside_served(self, given: str, why: str) -> Path:
        resolved = _resolved(given)
        if not any(_inside(resolved, folder) for folder in self.folders):
            raise NotServedError(f"{given!r} is outside the folders this server serves; {why}")
        return resolved

    def new_index(self, given: str) -> Path:
        """Where a new index goes: a served index, or a new ``.idx`` folder inside a
        served folder."""
        try:
            return self.index(given)
        except NotServedError:
            pass
        resolved = self._inside_served(given, "a new index must go inside one of them")
        if resolved.exists():
            raise NotServedError(f"{given!r} exists and is not an lcr index")
        holder = self._index_holding(resolved)
        if holder is not None:
            raise NotServedError(
                f"{given!r} is inside the index {str(holder)!r}; a new index must go "
                "beside an index, not inside one (its next build would delete it)"
            )
        return resolved

    def _index_holding(self, path: Path) -> Path | None:
        """The index (served or not: any folder with a manifest) that ``path`` would lie
        inside, if any."""
        served = {s.path for s in self.listed()}
        for parent in path.parents:
            if parent in served or (parent / MANIFEST).is_file():
                return parent
        return None


def _resolved(given: str) -> Path:
    if not given or "\0" in given:
        raise NotServedError(f"{given!r} is not a path")
    return Path(os.path.abspath(Path(given).expanduser())).resolve()


def _still_itself(path: Path) -> bool:
    """Whether ``path`` (resolved at start) still resolves to itself: no part of it has
    become a symlink since, and it is still a folder."""
    try:
        return path.resolve(strict=True) == path and path.is_dir()
    except (OSError, RuntimeError):
        return False


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _indexes_below(folder: Path, depth: int = SEARCH_DEPTH) -> Iterator[Path]:
    """Indexes in ``folder`` and its sub-folders (not inside an index, not hidden: a
    staged build is ``.book.idx.new-*``), in name order."""
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        if entry.name.startswith(".") or not entry.is_dir(follow_symlinks=False):
            continue
        path = Path(entry.path)
        if (path / MANIFEST).is_file():
            yield path
        elif depth > 0:
            yield from _indexes_below(path, depth - 1)
