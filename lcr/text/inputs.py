"""What ``lcr index`` was given, as files: folders walked, and each file's name in
the index (its path relative to the common folder of the inputs, so ``a/LICENSE``
and ``b/LICENSE`` stay apart)."""

from __future__ import annotations

import fnmatch
import json
import os
import stat
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from lcr.errors import InputError, UsageError

__all__ = ["InputFile", "document_names", "expand_inputs", "path_not_text"]


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
    once, with a warning; one a folder walk finds under two names (a link to it), once
    and quietly."""
    out: list[InputFile] = []
    for given in paths:
        p = str(given)
        if p == "-":
            out.append(InputFile("-", ""))
        elif (why := path_not_text(p)) is not None:
            raise InputError(f"{why}; rename it to index it")
        elif os.path.isdir(p):
            if _is_lcr_index(p):
                raise UsageError(
                    f"{p} is an lcr index, not a folder of documents; give the files it was "
                    "built from (lcr info shows them)"
                )
            found = _walk(p, globs, excludes, warn)
            if not found:
                patterns = " (with the --glob/--exclude given)" if globs or excludes else ""
                raise InputError(f"{p} has no files to index{patterns}")
            out.extend(found)
        else:
            out.append(InputFile(p, os.path.dirname(os.path.abspath(p))))
    return _unique(out, warn)


def path_not_text(path: str | Path) -> str | None:
    """Why ``path`` cannot name a source or an index, or None: its bytes are not UTF-8
    (Python holds them as lone surrogates), and the index records names and paths in
    JSON, which cannot hold them."""
    try:
        os.path.abspath(path).encode("utf-8")
    except UnicodeEncodeError:
        shown = os.fsencode(path).decode("utf-8", "backslashreplace")
        return f"{shown}: the path is not UTF-8 text, which an index cannot record"
    return None


def alone(f: InputFile) -> InputFile:
    """A file a folder walk found, indexed on its own (``lcr index DIR`` without ``-o``):
    named within its own folder, as if it had been given by name."""
    if f.path == "-":
        return f
    return InputFile(f.path, os.path.dirname(os.path.abspath(f.path)))


def _unique(files: list[InputFile], warn: Callable[[str], None] | None) -> list[InputFile]:
    """Each file once. A file named twice is said in a warning; one that a folder walk
    reaches under two names (a link beside its target, as /usr/share/doc holds many)
    is indexed once, quietly, under the name it is not a link by where there is one."""
    first: dict[str, int] = {}
    out: list[InputFile | None] = []
    for f in files:
        key = "-" if f.path == "-" else os.path.realpath(f.path)
        if key not in first:
            first[key] = len(out)
            out.append(f)
            continue
        kept = out[first[key]]
        assert kept is not None
        if not (f.found and kept.found):
            if warn is not None:
                warn(f"{f.path} is given more than once; it is indexed once")
            continue
        if os.path.islink(kept.path) and not os.path.islink(f.path):
            out[first[key]] = None  # the file itself, not a link to it, names it
            first[key] = len(out)
            out.append(f)
    return [f for f in out if f is not None]


def _matches(rel: str, patterns: Sequence[str]) -> bool:
    base = rel.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatchcase(rel, g) or fnmatch.fnmatchcase(base, g) for g in patterns)


def _is_index(folder: str) -> bool:
    return folder.endswith(".idx") or os.path.isfile(os.path.join(folder, "manifest.json"))


def _is_lcr_index(folder: str) -> bool:
    """Whether ``folder`` holds an lcr index (its manifest says so)."""
    try:
        with open(os.path.join(folder, "manifest.json"), encoding="utf-8") as fh:
            raw = json.load(fh)
    except (OSError, ValueError):
        return False
    return isinstance(raw, dict) and raw.get("format") == "lcr-index"


NOT_DOCUMENTS = frozenset(
    {
        *("png", "jpg", "jpeg", "gif", "bmp", "ico", "icns", "svg", "svgz", "webp", "tif"),
        *("tiff", "xpm", "xbm", "pbm", "pgm", "ppm", "psd", "eps"),  # images
        *("css", "scss", "sass", "less", "js", "mjs", "map"),  # stylesheets, scripts
        *("woff", "woff2", "ttf", "otf", "eot"),  # fonts
        *("mp3", "mp4", "m4a", "wav", "ogg", "oga", "flac", "webm", "avi", "mov", "mkv"),
        *("zip", "gz", "tgz", "bz2", "xz", "7z", "rar", "tar", "jar", "whl"),  # archives
        *("so", "o", "a", "dll", "exe", "class", "pyc"),  # binaries
        *("mk", "cmake", "in", "am", "m4", "ac"),  # build files
    }
)
"""Extensions of files a folder of documents holds beside them: images, stylesheets,
scripts, fonts, media, archives, build files (a ``.gz`` is judged by the name inside:
``changelog.gz`` and ``manual.pdf.gz`` are documents, ``logo.png.gz`` is not). A
folder walk skips them with one summary line; ``--glob`` names them to index them anyway."""

BUILD_FILES = frozenset({"Makefile", "GNUmakefile", "makefile", "CMakeLists.txt", "configure"})


def _not_a_document(name: str) -> str | None:
    """The kind of non-document ``name`` is (its extension, or "build file"), or None."""
    if name in BUILD_FILES:
        return "build file"
    if name.lower().endswith(".gz") and len(name) > 3:  # a document compressed, or not one
        inner = name[:-3]
        return ".tar.gz" if inner.lower().endswith(".tar") else _not_a_document(inner)
    ext = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    return f".{ext}" if ext in NOT_DOCUMENTS else None


def _walk(
    top: str,
    globs: Sequence[str],
    excludes: Sequence[str],
    warn: Callable[[str], None] | None = None,
) -> list[InputFile]:
    """The documents under ``top``. Skipped with a warning: a subfolder lcr cannot
    read, a file link leading outside ``top``, anything not a plain file (a FIFO
    would block the read), and, in one summary line, files that are not documents."""
    root = os.path.abspath(top)
    inside = os.path.realpath(top)
    found: list[InputFile] = []
    skipped: Counter[str] = Counter()

    def say(message: str) -> None:
        if warn is not None:
            warn(message)

    def unreadable(exc: OSError) -> None:
        if os.path.abspath(str(exc.filename)) == root:
            _raise(exc)
        say(f"skipped {exc.filename}: cannot read it ({exc.strerror or exc})")

    for here, dirs, files in os.walk(top, onerror=unreadable):
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
            path = os.path.join(here, f)
            named = path_not_text(path)
            if named is not None:
                say(f"skipped {named}; rename it to index it")
                continue
            problem = _not_plain(path, inside)
            if problem is not None:
                say(f"skipped {path}: {problem}")
                continue
            kind = None if globs else _not_a_document(f)
            if kind is not None:
                skipped[kind] += 1
                continue
            found.append(InputFile(path, root, found=True))
    if skipped:
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(skipped.items(), key=lambda kv: -kv[1]))
        n = sum(skipped.values())
        say(
            f"skipped {n} file{'s' if n != 1 else ''} in {top} that are not documents ({kinds}); "
            "--glob names files to index anyway"
        )
    return sorted(found, key=lambda f: os.path.relpath(f.path, top).split(os.sep))


def _not_plain(path: str, inside: str) -> str | None:
    """Why a file a folder walk found is not read, or None: a link leading outside the
    folder given, or not a plain file once followed (a FIFO, a socket, a device)."""
    if os.path.islink(path):
        target = os.path.realpath(path)
        if os.path.commonpath([target, inside]) != inside:
            return f"a link to {target}, outside the folder given (name it to index it)"
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        return f"cannot read it ({exc.strerror or exc})"
    if not stat.S_ISREG(mode):
        return "not a plain file (a FIFO, socket or device)"
    return None


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
