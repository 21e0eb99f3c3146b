"""Bytes to text: the encodings a text file may be in, and binary input refused.

One home for decoding, shared by plain text, Markdown and HTML (which first tries
the charset a page declares).
"""

from __future__ import annotations

import codecs
from collections.abc import Callable

from lcr.errors import InputError

__all__ = ["decode_bytes", "normalise_newlines", "refuse_unreadable_start"]

_SNIFF_BYTES = 8192
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

GZIP_MAGIC = b"\x1f\x8b"
# Well-known binary formats, named so the refusal can say what to do instead.
_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"%PDF-", "a PDF file (index it without --format text)"),
    (b"PK\x03\x04", "a zip archive (an EPUB or DOCX is read without --format text)"),
    (b"\x89PNG", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF8", "a GIF image"),
    (b"\x7fELF", "an executable (ELF)"),
    (GZIP_MAGIC, "gzip-compressed inside its compression; decompress it first"),
)

# Windows-1252 puts printable characters in 0x80-0x9F where latin-1 has C1 controls.
_CP1252_ONLY = bytes(range(0x80, 0xA0))


def normalise_newlines(text: str) -> str:
    """Turn ``\\r\\n`` and lone ``\\r`` into ``\\n`` so spans mean the same everywhere."""
    if "\r" not in text:
        return text
    return text.replace("\r\n", "\n").replace("\r", "\n")


def is_plain_text_start(head: bytes) -> bool:
    """Whether a stream that passed :func:`refuse_unreadable_start` is 8-bit text (no
    PDF, zip or UTF-16/32 byte-order mark), in which no NUL byte belongs."""
    if b"%PDF-" in head[:1024] or head.startswith((b"PK\x03\x04", GZIP_MAGIC)):
        return False
    return not any(head.startswith(bom) for bom, _ in _UNICODE_BOMS)


def refuse_unreadable_start(head: bytes, name: str) -> None:
    """Refuse a stream whose first bytes are neither a document format lcr reads
    (PDF, zip, gzip) nor text."""
    if b"%PDF-" in head[:1024] or head.startswith((b"PK\x03\x04", GZIP_MAGIC)):
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
