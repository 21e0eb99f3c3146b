"""The index's writers: one at a time, and never touching what lcr did not make.

The lock is a file *beside* the index folder (``.book.idx.lock``), because a
``--force`` swaps the folder itself; the checks here decide what ``--force`` may
replace, and the sweep undoes what a writer killed mid-swap left beside it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import glob
import json
import os
import re
import secrets
import shutil
import stat
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from lcr.atomic import exchange_paths, fsync_dir
from lcr.errors import InputError

Note = Callable[[str], None]


class _Held(threading.local):
    """Writer locks this thread holds: lock file -> depth (a run holds its index's lock
    from create to commit, and the builds inside take it again). Per thread: two
    threads of one process writing one index take the lock in turn, as two processes
    do (each opens the file itself, and ``flock`` keeps open files apart)."""

    def __init__(self) -> None:
        self.depth: dict[str, int] = {}


_HELD = _Held()
# every lock file some thread of this process holds, for drop_held_lock_files
_HELD_BY_PROCESS: set[str] = set()
_HELD_BY_PROCESS_GUARD = threading.Lock()


def index_home(path: Path) -> Path:
    """Where the index at ``path`` really lives: the folder a symbolic link names (so a
    swap replaces the folder and the link stays a link), else ``path`` made absolute."""
    if os.path.islink(path):
        return Path(os.path.realpath(path))
    return Path(os.path.abspath(path))


def writer_lock_path(path: Path) -> Path:
    """``.<name>.lock`` beside the index folder, not inside it: a ``--force`` swaps the
    folder itself, and a lock inside would lock the folder swapped out while the next
    writer locks the one swapped in; a lock beside stays one file for every writer
    (beside the folder a symlink names: the link and its folder share one lock)."""
    absolute = index_home(path)
    return absolute.parent / f".{absolute.name}.lock"


MADE = ".lcr-made"
"""The file in each folder lcr makes beside an index (staged, temporary, swapped out),
holding the folder's own name: recovery removes only a folder whose marker names it,
never a user's folder that merely looks like one."""


def mark_made(folder: Path) -> None:
    """Record that lcr made ``folder`` under its present name."""
    (folder / MADE).write_text(folder.name, encoding="utf-8")


def unmark(folder: Path) -> None:
    """Drop the marker of a folder that became a live index."""
    with contextlib.suppress(OSError):
        (folder / MADE).unlink()


def made_here(folder: Path) -> bool:
    """Whether lcr made ``folder`` under this name (its marker names it)."""
    if folder.is_symlink() or not folder.is_dir():
        return False
    try:
        return (folder / MADE).read_text(encoding="utf-8") == folder.name
    except (OSError, UnicodeDecodeError):
        return False


def _open_lock(path: Path) -> int:
    """The lock's file descriptor: the sibling lock file, never through a symlink; the
    index folder itself where the parent folder cannot be written (then nobody can swap
    the folder either, so locking it is enough)."""
    lock = writer_lock_path(path)
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, flags, 0o666)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO):
            raise InputError(
                f"{lock} (lcr's writer lock for {path}) is not a plain file; remove it"
            ) from None
        if exc.errno not in (errno.EACCES, errno.EPERM, errno.EROFS) or not path.is_dir():
            raise
        return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise InputError(f"{lock} (lcr's writer lock for {path}) is not a plain file; remove it")
    return fd


@contextlib.contextmanager
def writer_lock(path: Path, note: Note | None = None) -> Iterator[None]:
    """Hold the writer lock of the index at ``path`` (re-entrant within a process);
    say so through ``note`` when another process holds it.

    The lock file is removed on release, so none is left beside the index; a writer
    that waited on a removed file sees that it is gone once it holds it, and takes
    the lock again on the file now there (the classic lock-file protocol)."""
    key = str(writer_lock_path(path))
    held = _HELD.depth
    if key in held:
        held[key] += 1
        try:
            yield
        finally:
            held[key] -= 1
        return
    noted = False
    while True:
        fd = _open_lock(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if note is not None and not noted:
                note(f"waiting for another lcr process writing {path} to finish")
                noted = True
            fcntl.flock(fd, fcntl.LOCK_EX)
        if _still_the_lock(fd, key):
            break
        os.close(fd)  # removed by the writer before: take the one there now
    held[key] = 1
    with _HELD_BY_PROCESS_GUARD:
        _HELD_BY_PROCESS.add(key)
    try:
        yield
    finally:
        del held[key]
        with _HELD_BY_PROCESS_GUARD:
            _HELD_BY_PROCESS.discard(key)
        if stat.S_ISREG(os.fstat(fd).st_mode):
            with contextlib.suppress(OSError):
                os.unlink(key)
        os.close(fd)  # releases the lock


def drop_held_lock_files() -> None:
    """Remove the lock files this process holds, for a process about to end at once
    (``os._exit``) with a writer mid-build: the locks go with the process, and without
    this their files would stay beside the indexes. A writer waiting on one sees it
    removed and locks the next (as after any release). Any thread may call it: the
    locks are held per thread, so the process keeps its own list of them."""
    with _HELD_BY_PROCESS_GUARD:
        held = sorted(_HELD_BY_PROCESS)
    for key in held:
        with contextlib.suppress(OSError):
            os.unlink(key)


def _still_the_lock(fd: int, key: str) -> bool:
    """Whether the locked file is still the one at the lock's path (the folder itself
    when the parent was read-only: always)."""
    held = os.fstat(fd)
    if not stat.S_ISREG(held.st_mode):
        return True
    try:
        now = os.stat(key, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino)


def token() -> str:
    return secrets.token_hex(4)


def is_cwd(path: Path) -> bool:
    try:
        return os.path.samefile(path, ".")
    except OSError:
        return False


def _holds_cwd(path: Path) -> bool:
    """Whether ``path`` is the current folder or one of its parents (swapping it away
    would leave the shell in a deleted folder)."""
    try:
        return Path.cwd().resolve().is_relative_to(path.resolve())
    except OSError:
        return False


# what lcr makes inside an index folder; a folder of nothing else is lcr's to replace
_LCR_ENTRY = re.compile(
    r"manifest\.json|source\.txt|layout\.json|cache|\.lock|\.lcr-made|\.tmp-.*|\..*\.tmp"
    r"|[A-Za-z0-9_-]+\.[0-9a-f]+"
)


def check_replaceable(path: Path) -> None:
    """Refuse to replace ``path`` unless lcr made it: a manifest of lcr's, or nothing
    but the entries lcr makes (a damaged index whose manifest is torn). ``--force``
    must never delete a user's files. The current folder is never swapped away."""
    if _holds_cwd(path):
        raise InputError(
            f"{path} is or holds the current folder: --force cannot replace it; run from outside it"
        )
    try:
        raw = json.loads((path / "manifest.json").read_text(encoding="utf-8"))
        if isinstance(raw, dict) and raw.get("format") == "lcr-index":
            return
    except (OSError, ValueError):
        pass
    foreign = sorted(e.name for e in path.iterdir() if not _LCR_ENTRY.fullmatch(e.name))
    if foreign:
        raise InputError(
            f"{path} is not an lcr index (it holds {foreign[0]!r}); --force replaces only "
            "lcr indexes: choose another -o"
        )


def recover_swap(path: Path) -> None:
    """Undo what a writer killed mid-way left beside ``path`` (called under its lock):
    an old index moved aside by a two-rename swap goes back if nothing took its place;
    staged and temporary folders are removed. Only folders lcr marked as its own are
    touched (:func:`made_here`): a user's ``.book.idx.new-notes/`` stays."""
    base = index_home(path)
    if not base.parent.is_dir():
        return
    for kind in ("old", "new", "tmp", "failed"):
        for left in sorted(base.parent.glob(f".{glob.escape(base.name)}.{kind}-*")):
            if not made_here(left):
                continue
            if kind == "old" and not os.path.lexists(base):
                os.rename(left, base)
                unmark(base)
            else:
                remove_made(left)


def remove_made(path: Path) -> None:
    """Remove a folder lcr made, or the symlink in its place (never what it points at)."""
    if path.is_symlink():
        with contextlib.suppress(OSError):
            path.unlink()
    elif path.exists():
        shutil.rmtree(path, ignore_errors=True)


def swap_in(staged: Path, target: Path, cache: Path | None) -> None:
    """Put the index built at ``staged`` in ``target``'s place in one step, after copying
    in the LLM cache it read and appended to (``cache``, the old index's: outputs are
    keyed by content, so they stay valid); then remove the old index."""
    _copy_cache(cache, staged / "cache")
    fsync_dir(staged)
    target = index_home(target)
    if not target.exists():
        os.rename(staged, target)
        unmark(target)
        fsync_dir(target.parent)
        return
    # the old index, once exchanged, lies at the staged name: marked so, a kill before
    # its removal leaves it for recover_swap to clear, not a stray folder
    (target / MADE).write_text(staged.name, encoding="utf-8")
    if exchange_paths(staged, target):
        remove_made(staged)  # the old index, swapped out
    else:  # no atomic exchange here: two renames, undone by recover_swap if killed
        old = target.parent / f".{target.name}.old-{token()}"
        (target / MADE).write_text(old.name, encoding="utf-8")
        os.rename(target, old)
        os.rename(staged, target)
        remove_made(old)
    unmark(target)
    fsync_dir(target.parent)


def _copy_cache(old: Path | None, new: Path) -> None:
    if old is None or not old.is_dir() or old.is_symlink():
        return
    new.mkdir(exist_ok=True)
    for f in old.iterdir():
        if f.is_file() and not f.is_symlink():
            shutil.copyfile(f, new / f.name)
    fsync_dir(new)
