"""Reading one input document: bytes in, normalised text and layout out, or a clear refusal.

Every span an index stores points into the normalised text, so normalisation
(newlines, BOM) and extraction (PDF, HTML, EPUB, DOCX: ``lcr.text.formats``)
happen exactly once, here. The hash and size are of the raw bytes, so
``lcr index`` can tell whether a file changed since it was indexed. A regular
file is read where it lies (a PDF page by page); stdin and FIFOs are read in
pieces, the first checked before more is read, up to ``MAX_STREAM_BYTES``. A
gzip-compressed document (``changelog.gz``, ``manual.pdf.gz``) is decompressed in
memory, up to ``MAX_GUNZIP_BYTES``, and read as the document it holds.
"""

from __future__ import annotations

import dataclasses
import hashlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from lcr.errors import InputError
from lcr.text.decoding import (
    GZIP_MAGIC,
    decode_bytes,
    is_plain_text_start,
    normalise_newlines,
    refuse_unreadable_start,
)
from lcr.text.document import Document

if TYPE_CHECKING:
    from lcr.text.formats import ExtractOptions

__all__ = ["Document", "decode_bytes", "load_document", "normalise_newlines"]

_SNIFF_BYTES = 8192
_PIECE_BYTES = 1 << 16
# stdin and FIFOs have no size to check first: past this, save the stream to a file
MAX_STREAM_BYTES = 256 << 20
# a gzip-compressed document, decompressed: past this it is refused (a decompression bomb)
MAX_GUNZIP_BYTES = 256 << 20


def load_document(
    path: str | Path,
    *,
    stdin: BinaryIO | None = None,
    warn: Callable[[str], None] | None = None,
    options: ExtractOptions | None = None,
    name: str | None = None,
) -> Document:
    """Read a document (or stdin for ``"-"``) into a :class:`Document`.

    Raises :class:`~lcr.errors.InputError` with a one-line message when the
    input is missing, a directory, unreadable, binary, empty, blank, or a
    document its format's reader refuses (encrypted, scanned, damaged, a zip
    bomb). ``warn`` receives one-line notes (a guessed encoding, pages without
    text). ``name`` is what the index calls it (default: the file's name).
    """
    from lcr.text.formats import ExtractOptions, extract

    opts = options if options is not None else ExtractOptions(warn=warn)
    if opts.warn is None and warn is not None:
        opts = dataclasses.replace(opts, warn=warn)
    if str(path) == "-":
        label = name or "stdin"
        stream = stdin if stdin is not None else sys.stdin.buffer
        raw = _read_stream(stream, "stdin", label)
        source: Path | bytes = raw
        digest, size, head = hashlib.sha256(raw).hexdigest(), len(raw), raw[:_SNIFF_BYTES]
    else:
        p = Path(path)
        label = name or p.name or str(p)
        source, digest, size, head = _open_file(p, label)
    if not size:
        raise InputError(f"{label} is empty")
    compressed = head.startswith(GZIP_MAGIC)
    if compressed:  # foo.txt.gz, foo.pdf.gz: the document inside, its format by its content
        source = gunzip(source, label)
        head = source[:_SNIFF_BYTES]
        if not source:
            raise InputError(f"{label} is empty once decompressed")
    got = extract(source, head, label, opts)
    if compressed:
        got = dataclasses.replace(got, options={**got.options, "compressed": "gzip"})
    return Document(
        name=label,
        text=got.text,
        sha256=digest,
        size=size,
        encoding=got.encoding,
        format=got.format,
        layout=got.layout,
        extractor=got.extractor,
        extractor_version=got.extractor_version,
        options=got.options,
    )


def gunzip(source: Path | bytes, label: str) -> bytes:
    """A gzip file's content, read in pieces and refused past ``MAX_GUNZIP_BYTES`` (a
    decompression bomb: a few KB that grow to gigabytes) or when it holds a tar archive."""
    import gzip
    import io
    import zlib

    pieces: list[bytes] = []
    total = 0
    try:
        with gzip.open(source if isinstance(source, Path) else io.BytesIO(source)) as fh:
            while piece := fh.read(1 << 20):
                total += len(piece)
                if total > MAX_GUNZIP_BYTES:
                    raise InputError(
                        f"{label} decompresses to more than {MAX_GUNZIP_BYTES >> 20} MiB "
                        "(lcr's limit); decompress it yourself and index the result"
                    )
                pieces.append(piece)
    except InputError:
        raise
    except (OSError, EOFError, zlib.error) as exc:
        raise InputError(f"{label} is a damaged gzip file ({exc})") from None
    data = b"".join(pieces)
    if data[257:262] == b"ustar":
        raise InputError(f"{label} is a compressed tar archive; extract its files first")
    return data


def _open_file(p: Path, label: str) -> tuple[Path | bytes, str, int, bytes]:
    """A regular file stays on disk (hashed in pieces); a FIFO is read as a stream."""
    try:
        if not p.exists():
            raise InputError(f"no such file: {p}")
        if p.is_dir():
            raise InputError(f"{p} is a directory; give a file (or a folder with -o)")
        if p.is_fifo():
            with p.open("rb") as fh:
                raw = _read_stream(fh, str(p), label)
            return raw, hashlib.sha256(raw).hexdigest(), len(raw), raw[:_SNIFF_BYTES]
        if not p.is_file():
            raise InputError(f"{p} is not a regular file (a device or socket?)")
        digest = hashlib.sha256()
        size = 0
        head = b""
        with p.open("rb") as fh:
            while piece := fh.read(1 << 20):
                if not head:
                    head = piece[:_SNIFF_BYTES]
                digest.update(piece)
                size += len(piece)
        return p, digest.hexdigest(), size, head
    except InputError:
        raise
    except PermissionError as exc:
        raise InputError(f"cannot read {p}: permission denied") from exc
    except OSError as exc:
        raise InputError(f"cannot read {p}: {exc.strerror or exc}") from exc


def _read_stream(stream: BinaryIO, what: str, label: str) -> bytes:
    """A stream in pieces: the first checked (a binary stream is refused before the
    rest is read), the whole bounded by ``MAX_STREAM_BYTES``."""
    pieces: list[bytes] = []
    total = 0
    plain = False  # began as plain 8-bit text: a NUL byte later means binary
    try:
        while piece := stream.read(_PIECE_BYTES):
            if not pieces:
                refuse_unreadable_start(piece, label)
                plain = is_plain_text_start(piece)
            elif plain and b"\0" in piece:
                raise InputError(
                    f"{label} looks binary (NUL bytes after its first {total:,} bytes); "
                    "give a plain text file"
                )
            pieces.append(piece)
            total += len(piece)
            if total > MAX_STREAM_BYTES:
                raise InputError(
                    f"{what} is larger than {MAX_STREAM_BYTES >> 20} MiB; "
                    "save it to a file and index the file"
                )
    except OSError as exc:
        raise InputError(f"cannot read {what}: {exc.strerror or exc}") from exc
    return b"".join(pieces)
