"""What ``lcr index`` was given, as files: folders walked, and each file's name in
the index (its path relative to the common folder of the inputs, so ``a/LICENSE``
and ``b/LICENSE`` stay apart)."""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from lcr.errors import InputError

__all__ = ["InputFile", "document_names", "expand_inputs"]


@dataclass(frozen=True)
class InputFile:
    """One file to read: ``path`` as given or found (``-`` for stdin); ``root`` the
    folder its name is relative to (the folder given, or the file's own folder);
    ``found`` whether a folder walk found it (then a file lcr cannot read is skipped
    with a warning instead of stopping the run)."""

    path: str
    root: str
    found: bool = False


def expand_inputs(
    paths: Sequence[str | Path],
    *,
    globs: Sequence[str] = (),
    excludes: Sequence[str] = (),
    warn: Callable[[str], None] | None = None,
) -> list[InputFile]:
    """Files given, and the files under each folder given (sorted; hidden files and
    folders, and lcr's own index folders, skipped; ``globs`` keep only matching
    files, ``excludes`` drop matching files and folders; a pattern matches the path
    relative to the folder given or the file's name). A file given twice is read
    once, with a warning."""
    out: list[InputFile] = []
    for given in paths:
        p = str(given)
        if p == "-":
            out.append(InputFile("-", ""))
        elif os.path.isdir(p):
            found = _walk(p, globs, excludes)
            if not found:
                patterns = " (with the --glob/--exclude given)" if globs or excludes else ""
                raise InputError(f"{p} has no files to index{patterns}")
            out.extend(found)
        else:
            out.append(InputFile(p, os.path.dirname(os.path.abspath(p))))
    return _unique(out, warn)


def alone(f: InputFile) -> InputFile:
    """A file a folder walk found, indexed on its own (``lcr index DIR`` without ``-o``):
    named within its own folder, as if it had been given by name."""
    if f.path == "-":
        return f
    return InputFile(f.path, os.path.dirname(os.path.abspath(f.path)))


def _unique(files: list[InputFile], warn: Callable[[str], None] | None) -> list[InputFile]:
    seen: set[str] = set()
    out: list[InputFile] = []
    for f in files:
        key = "-" if f.path == "-" else os.path.realpath(f.path)
        if key in seen:
            if warn is not None:
                warn(f"{f.path} is given more than once; it is indexed once")
            continue
        seen.add(key)
        out.append(f)
    return out


def _matches(rel: str, patterns: Sequence[str]) -> bool:
    base = rel.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatchcase(rel, g) or fnmatch.fnmatchcase(base, g) for g in patterns)


def _is_index(folder: str) -> bool:
    return folder.endswith(".idx") or os.path.isfile(os.path.join(folder, "manifest.json"))


def _walk(top: str, globs: Sequence[str], excludes: Sequence[str]) -> list[InputFile]:
    root = os.path.abspath(top)
    found: list[InputFile] = []
    for here, dirs, files in os.walk(top, onerror=_raise):
        rel_here = os.path.relpath(here, top)
        rel_here = "" if rel_here == "." else rel_here + "/"
        dirs[:] = sorted(
            d
            for d in dirs
            if not d.startswith(".")
            and not _is_index(os.path.join(here, d))
            and not _matches(rel_here + d, excludes)
        )
        for f in sorted(files):
            rel = rel_here + f
            if f.startswith(".") or _matches(rel, excludes):
                continue
            if globs and not _matches(rel, globs):
                continue
            found.append(InputFile(os.path.join(here, f), root, found=True))
    return sorted(found, key=lambda f: os.path.relpath(f.path, top).split(os.sep))


def _raise(exc: OSError) -> None:
    raise InputError(f"cannot read {exc.filename}: {exc.strerror or exc}")


def document_names(files: Sequence[InputFile]) -> list[str]:
    """Each file's name relative to the deepest folder common to all inputs' roots."""
    roots = [f.root for f in files if f.path != "-"]
    common = os.path.commonpath(roots) if roots else ""
    names = []
    for f in files:
        if f.path == "-":
            names.append("stdin")
        else:
            names.append(os.path.relpath(os.path.abspath(f.path), common).replace(os.sep, "/"))
    return names
