"""Reading one input document: bytes in, normalised text and layout out, or a clear refusal.

Every span an index stores points into the normalised text, so normalisation
(newlines, BOM) and extraction (PDF, HTML, EPUB, DOCX: ``lcr.text.formats``)
happen exactly once, here. The hash and size are of the raw bytes, so
``lcr index`` can tell whether a file changed since it was indexed. A regular
file is read where it lies (a PDF page by page); stdin and FIFOs are read in
pieces, the first checked before more is read, up to ``MAX_STREAM_BYTES``.
"""

from __future__ import annotations

import codecs
import dataclasses
import hashlib
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from lcr.errors import InputError
from lcr.text.layout import DocumentLayout

if TYPE_CHECKING:
    from lcr.text.formats import ExtractOptions

__all__ = ["Document", "decode_bytes", "load_document", "normalise_newlines"]

_SNIFF_BYTES = 8192
_PIECE_BYTES = 1 << 16
# stdin and FIFOs have no size to check first: past this, save the stream to a file
MAX_STREAM_BYTES = 256 << 20
# Share of C0 control bytes (other than tab, newlines, form feed, vertical tab
# and ESC) in the first 8 KB above which a file is taken to be binary.
_CONTROL_SHARE = 0.05
_CONTROL_BYTES = bytes(
    sorted(frozenset(range(0x20)) - {0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x1B} | {0x7F})
)

# Byte-order marks that make NUL bytes legitimate (checked longest first).
_UNICODE_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)

# Well-known binary formats, named so the refusal can say what to do instead.
_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"%PDF-", "a PDF file (index it without --format text)"),
    (b"PK\x03\x04", "a zip archive (an EPUB or DOCX is read without --format text)"),
    (b"\x89PNG", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF8", "a GIF image"),
    (b"\x7fELF", "an executable (ELF)"),
    (b"\x1f\x8b", "gzip-compressed; decompress it first"),
)

# Windows-1252 puts printable characters in 0x80-0x9F where latin-1 has C1 controls.
_CP1252_ONLY = bytes(range(0x80, 0xA0))


@dataclass(frozen=True)
class Document:
    """One input document: its normalised text, its layout (pages, headings), what
    extracted them, and a fingerprint of the raw file."""

    name: str
    text: str
    sha256: str
    size: int
    encoding: str
    format: str = "text"
    layout: DocumentLayout = field(default_factory=DocumentLayout)
    extractor: str = "lcr"
    extractor_version: str = ""
    options: dict[str, Any] = field(default_factory=dict)


def normalise_newlines(text: str) -> str:
    """Turn ``\\r\\n`` and lone ``\\r`` into ``\\n`` so spans mean the same everywhere."""
    if "\r" not in text:
        return text
    return text.replace("\r\n", "\n").replace("\r", "\n")


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
    got = extract(source, head, label, opts)
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
    try:
        while piece := stream.read(_PIECE_BYTES):
            if not pieces:
                refuse_unreadable_start(piece, label)
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


def refuse_unreadable_start(head: bytes, name: str) -> None:
    """Refuse a stream whose first bytes are neither a document format lcr reads
    (PDF, zip) nor text."""
    if b"%PDF-" in head[:1024] or head.startswith(b"PK\x03\x04"):
        return
    if any(head.startswith(bom) for bom, _ in _UNICODE_BOMS):
        return
    _refuse_binary(head, name)


def decode_bytes(
    raw: bytes, *, name: str = "input", warn: Callable[[str], None] | None = None
) -> tuple[str, str]:
    """Decode raw document bytes to normalised text; return ``(text, encoding)``.

    UTF-8 (with or without BOM) is taken silently; UTF-16/32 with a BOM, or a
    guessed legacy encoding, is taken with a warning. Binary, empty and blank
    inputs are refused.
    """
    if not raw:
        raise InputError(f"{name} is empty")
    text: str | None = None
    encoding = ""
    note = ""
    for bom, enc in _UNICODE_BOMS:
        if raw.startswith(bom):
            try:
                text, encoding = raw.decode(enc), enc
            except UnicodeDecodeError as exc:
                msg = f"{name} starts with a {enc} byte-order mark but is not valid {enc}"
                raise InputError(msg) from exc
            note = f"{name} is not UTF-8; read it as {enc}"
            break
    if text is None:
        _refuse_binary(raw, name)
        try:
            text, encoding = raw.decode("utf-8-sig"), "utf-8"
        except UnicodeDecodeError:
            text, bad = _mostly_utf8(raw)
            if text is not None:
                encoding = "utf-8"
                note = f"{name} is not valid UTF-8; {bad} undecodable byte(s) became U+FFFD"
            else:
                text, encoding = _guess_legacy(raw)
                note = f"{name} is not UTF-8; read it as {encoding}"
    if note and warn is not None:
        warn(note)
    if text.startswith("\ufeff"):
        text = text[1:]
    text = normalise_newlines(text)
    if not text.strip():
        raise InputError(f"{name} contains only whitespace")
    return text, encoding


def _refuse_binary(raw: bytes, name: str) -> None:
    """Refuse a file that is not text: a known magic number, NUL bytes or many controls."""
    for magic, what in _MAGIC:
        if raw.startswith(magic):
            raise InputError(f"{name} is {what}, not plain text")
    head = raw[:_SNIFF_BYTES]
    if b"\x00" in head:
        raise InputError(f"{name} looks binary (NUL bytes); give a plain text file")
    controls = len(head) - len(head.translate(None, delete=_CONTROL_BYTES))
    if controls > _CONTROL_SHARE * len(head):
        raise InputError(f"{name} looks binary (control characters); give a plain text file")


def _mostly_utf8(raw: bytes) -> tuple[str | None, int]:
    """UTF-8 with a few bad bytes (a damaged file) rather than a legacy encoding?

    When valid multi-byte characters outnumber the invalid bytes, decoding as
    UTF-8 with replacements keeps far more of the text right than cp1252 would.
    """
    text = raw.decode("utf-8", errors="replace")
    bad = text.count("\ufffd") - raw.count("\ufffd".encode())
    non_ascii = len(text) - len(text.encode("ascii", errors="ignore"))
    if non_ascii - bad > bad:
        return text, bad
    return None, bad


def _guess_legacy(raw: bytes) -> tuple[str, str]:
    """Pick an 8-bit or multi-byte encoding for bytes that are not UTF-8.

    Western text is by far the commonest case and charset-normalizer
    misnames short samples of it (cp1250, cp1257), so cp1252/latin-1 is tried
    first when its decoding looks like words with a few accented letters;
    otherwise charset-normalizer guesses; latin-1 is the last resort since
    it decodes anything.
    """
    try:
        western: str | None = raw.decode("cp1252")
    except UnicodeDecodeError:
        western = None
    if western is not None and _looks_western(western):
        has_cp1252_only = raw.translate(None, delete=_CP1252_ONLY) != raw
        return western, "cp1252" if has_cp1252_only else "latin-1"
    guessed = _charset_normalizer_guess(raw)
    if guessed is not None:
        return guessed
    if western is not None:
        return western, "cp1252"
    return raw.decode("latin-1"), "latin-1"


def _looks_western(text: str) -> bool:
    """True when few letters are non-ASCII, as in English, French, German or Spanish."""
    sample = text[:200_000]
    letters = sum(1 for ch in sample if ch.isalpha())
    if letters == 0:
        return True
    non_ascii = sum(1 for ch in sample if ch.isalpha() and ord(ch) > 0x7F)
    return non_ascii <= 0.3 * letters


def _charset_normalizer_guess(raw: bytes) -> tuple[str, str] | None:
    try:
        from charset_normalizer import from_bytes
    except ImportError:  # pragma: no cover - it ships with requests
        return None
    best = from_bytes(raw).best()
    if best is None or best.encoding is None:
        return None
    return str(best), best.encoding
