"""Opening EPUB and DOCX containers without trusting them: a zip bomb (huge
declared sizes, absurd compression, or countless entries) is refused before
anything is decompressed. Python's zipfile stops each entry at its declared
size, so checking the declared sizes bounds what can be read."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

from lcr.errors import InputError

MAX_ENTRIES = 10_000
MAX_TOTAL_BYTES = 1 << 30  # 1 GiB decompressed, all entries together
MAX_ENTRY_BYTES = 256 << 20  # one entry
MAX_RATIO = 200  # decompressed / compressed, for entries over 1 MB


def open_zip(source: Path | bytes, name: str, kind: str) -> zipfile.ZipFile:
    """The container, checked against the limits above; one line for anything else."""
    try:
        zf = zipfile.ZipFile(source if isinstance(source, Path) else io.BytesIO(source))
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
        raise InputError(f"{name} is not a readable {kind} (damaged zip: {exc})") from None
    infos = zf.infolist()
    if len(infos) > MAX_ENTRIES:
        zf.close()
        raise InputError(f"{name} has {len(infos):,} zip entries (limit {MAX_ENTRIES:,}); refused")
    total = sum(i.file_size for i in infos)
    for info in infos:
        big = info.file_size > 1 << 20
        if info.file_size > MAX_ENTRY_BYTES or (
            big and info.file_size > MAX_RATIO * max(info.compress_size, 1)
        ):
            zf.close()
            raise InputError(
                f"{name}: zip entry {info.filename!r} decompresses to {info.file_size:,} bytes "
                f"from {info.compress_size:,} (a zip bomb?); refused"
            )
    if total > MAX_TOTAL_BYTES:
        zf.close()
        raise InputError(f"{name} decompresses to {total:,} bytes (limit {MAX_TOTAL_BYTES:,})")
    return zf


def read_entry(zf: zipfile.ZipFile, path: str, name: str) -> bytes:
    """One entry's bytes; a missing or damaged entry is one line."""
    try:
        with zf.open(path) as fh:
            return fh.read(MAX_ENTRY_BYTES + 1)
    except KeyError:
        raise InputError(f"{name} is damaged: it has no {path}") from None
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
        raise InputError(f"{name} is damaged: {path} cannot be read ({exc})") from None
