"""Documents in their own formats (#39): what a person sees on page N lands in page N,
headings sit where they are printed, no markup reaches the text, and a bad document
is one line. The files are written by real writers (tests/docfiles.py)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import pytest

from lcr.errors import InputError
from lcr.store import Index
from lcr.text import loading
from lcr.text.formats import ExtractOptions
from lcr.text.layout import DocumentLayout, read_layout
from lcr.text.loading import Document, load_document
from tests.docfiles import (
    HTML_PAGE,
    LEFT,
    PDF_PAGES,
    RIGHT,
    write_docx,
    write_epub,
    write_pdf,
)
from tests.test_cli import run

REPO = Path(__file__).resolve().parents[1]


def _load(path: Path | str, **opts: object) -> tuple[Document, list[str]]:
    notes: list[str] = []
    doc = load_document(path, options=ExtractOptions(warn=notes.append, **opts))  # type: ignore[arg-type]
    return doc, notes


def _refusal(path: Path | str, **opts: object) -> str:
    with pytest.raises(InputError) as info:
        _load(path, **opts)
    msg = str(info.value)
    assert "\n" not in msg and "Traceback" not in msg
    return msg


def _page_texts(doc: Document) -> dict[str, str]:
    pages = doc.layout.pages
    ends = [p.start for p in pages[1:]] + [len(doc.text)]
    return {p.label: doc.text[p.start : end] for p, end in zip(pages, ends, strict=True)}


def _check_headings(doc: Document) -> None:
    """Every heading starts where its title is printed (spans exact)."""
    for h in doc.layout.headings:
        assert doc.text[h.start :].startswith(h.title), (h, doc.text[h.start : h.start + 40])


# ------------------------------------------------------------------------ PDF
def test_pdf_pages_labels_outline_and_columns(tmp_path: Path) -> None:
    doc, notes = _load(write_pdf(tmp_path / "report.pdf"))
    assert doc.format == "pdf" and doc.extractor == "pypdfium2" and doc.extractor_version
    assert [p.label for p in doc.layout.pages] == list(PDF_PAGES)  # i, ii, 1, 2, 3
    pages = _page_texts(doc)
    for label, lines in PDF_PAGES.items():
        for line in lines:
            assert line in pages[label]
            others = [t for other, t in pages.items() if other != label]
            assert not any(line in t for t in others)
    assert pages["ii"].strip() == ""
    # two columns: the left column whole, then the right, never interleaved
    order = [pages["1"].index(line) for line in LEFT + RIGHT]
    assert order == sorted(order)
    assert [(h.level, h.title) for h in doc.layout.headings] == [
        (1, "1 Introduction"),
        (2, "1.1 Background"),  # the outline says "Background"; the page prints "1.1 "
        (1, "2 Results"),
    ]
    _check_headings(doc)
    background = doc.layout.headings[1]
    assert background.start > doc.layout.pages[3].start  # mid-page, not the page's top
    assert "Tides" not in doc.text[doc.layout.pages[3].start : background.start]
    assert len(notes) == 1 and "1 of 5 pages are images without a text layer (p. ii)" in notes[0]
    assert "<" not in doc.text and "\r" not in doc.text


def test_scanned_pdf_is_refused_with_ocr_named(tmp_path: Path) -> None:
    msg = _refusal(write_pdf(tmp_path / "scan.pdf", scanned=True))
    assert "no text layer" in msg and "ocrmypdf" in msg


def test_encrypted_pdf_needs_its_password(tmp_path: Path) -> None:
    pdf = write_pdf(tmp_path / "locked.pdf", password="s3cret")
    assert "encrypted PDF; give its password with --password" in _refusal(pdf)
    assert "does not open it" in _refusal(pdf, password="wrong")
    doc, _ = _load(pdf, password="s3cret")
    assert "forty ships" in _page_texts(doc)["3"]
    code, _, err = run(["index", str(pdf), "-q", "-m", "bm25"])
    assert code == 1 and err.count("\n") == 1 and "--password" in err
    assert not (tmp_path / "locked.idx").exists()
    code, _, err = run(["index", str(pdf), "-q", "-m", "bm25", "--password", "s3cret"])
    assert code == 0, err
    manifest = json.loads((tmp_path / "locked.idx" / "manifest.json").read_text())
    assert "s3cret" not in json.dumps(manifest)  # a password is never stored


@pytest.mark.parametrize(
    "content",
    [b"%PDF-1.7\n" + bytes(range(256)) * 20, b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog"],
)
def test_damaged_pdf_is_one_line(tmp_path: Path, content: bytes) -> None:
    bad = tmp_path / "bad.pdf"
    bad.write_bytes(content)
    assert "not a readable PDF" in _refusal(bad)


def test_truncated_pdf_is_read_or_refused_in_one_line(tmp_path: Path) -> None:
    whole = write_pdf(tmp_path / "whole.pdf").read_bytes()
    cut = tmp_path / "cut.pdf"
    cut.write_bytes(whole[: len(whole) // 2])
    code, _, err = run(["index", str(cut), "-q", "-m", "bm25"])
    assert (code == 0 and err.count("\n") <= 1) or (code == 1 and err.count("\n") == 1), err
    if code == 1:
        assert not (tmp_path / "cut.idx").exists()


def test_a_pdf_heading_starts_its_line_and_a_line_end_hyphen_is_printed(
    tmp_path: Path,
) -> None:
    """The bookmark's title is found where it leads a line, not inside a running header
    that mentions it first; PDFium's U+FFFE for a hyphen at a line's end becomes the
    hyphen and the break the page shows."""
    from reportlab.pdfgen import canvas

    path = tmp_path / "report.pdf"
    c = canvas.Canvas(str(path), invariant=1)
    c.drawString(72, 760, "Annual Report - Results")
    c.drawString(72, 700, "This paragraph says the Results are discussed later on.")
    c.drawString(72, 600, "Results")
    c.bookmarkHorizontal("r", 0, 614)
    c.addOutlineEntry("Results", "r", level=0)
    c.drawString(72, 580, "The real results section, a hyphen-")
    c.drawString(72, 564, "ated word.")
    c.showPage()
    c.save()
    doc, _ = _load(path)
    (results,) = doc.layout.headings
    assert doc.text[results.start :].startswith("Results\nThe real results")
    _check_headings(doc)
    assert "\ufffe" not in doc.text and "a hyphen-\nated word." in doc.text


def test_a_pdf_is_known_by_content_not_name(tmp_path: Path) -> None:
    named_txt = tmp_path / "paper.txt"
    named_txt.write_bytes(write_pdf(tmp_path / "x.pdf").read_bytes())
    assert _load(named_txt)[0].format == "pdf"
    fake = tmp_path / "fake.pdf"
    fake.write_text("just some text\n")
    assert "is not a PDF" in _refusal(fake)
    fake_book = tmp_path / "fake.epub"
    fake_book.write_text("just some text\n")
    assert "fake.epub is not an EPUB" in _refusal(fake_book)
    assert _load(fake, format="text")[0].text == "just some text\n"


# ----------------------------------------------------------------- DOCX, EPUB
def test_docx_paragraphs_table_and_heading_styles(tmp_path: Path) -> None:
    doc, _ = _load(write_docx(tmp_path / "field.docx"))
    assert doc.format == "docx" and doc.layout.pages == ()
    assert [(h.level, h.title) for h in doc.layout.headings] == [
        (1, "Field Report"),
        (2, "Birds Seen"),
        (2, "Weather"),
    ]
    _check_headings(doc)
    assert "Species\tCount\nPuffin\t12\nGannet\t40" in doc.text
    birds, weather = doc.layout.headings[1].start, doc.layout.headings[2].start
    assert "Puffin" in doc.text[birds:weather] and "Fog" in doc.text[weather:]


def test_docx_merged_and_nested_cells_are_written_once(tmp_path: Path) -> None:
    """A cell merged down is written on its first row only, as one merged across is;
    a table inside a cell is kept (``cell.text`` leaves it out)."""
    import docx

    d = docx.Document()
    tall = d.add_table(rows=2, cols=2)
    tall.cell(0, 0).merge(tall.cell(1, 0)).text = "Tall cell"
    tall.cell(0, 1).text, tall.cell(1, 1).text = "r0", "r1"
    d.add_paragraph("between")
    outer = d.add_table(rows=1, cols=2)
    outer.cell(0, 0).text = "outer"
    inner = outer.cell(0, 0).add_table(rows=1, cols=2)
    inner.cell(0, 0).text, inner.cell(0, 1).text = "in1", "in2"
    outer.cell(0, 1).text = "outer2"
    d.save(str(tmp_path / "cells.docx"))
    doc, _ = _load(tmp_path / "cells.docx")
    assert doc.text.count("Tall cell") == 1 and "Tall cell\tr0\nr1" in doc.text
    assert "outer in1 in2\touter2" in doc.text


@pytest.mark.parametrize("toc", ["nav", "ncx", ""])
def test_epub_spine_and_table_of_contents(tmp_path: Path, toc: str) -> None:
    """EPUB 3's nav, EPUB 2's NCX, or without either the chapters' own h1/h2."""
    doc, _ = _load(write_epub(tmp_path / "log.epub", toc=toc))
    assert doc.format == "epub"
    assert [(h.level, h.title) for h in doc.layout.headings] == [
        (1, "Chapter One"),
        (2, "The Storm"),
        (1, "Chapter Two"),
    ]
    _check_headings(doc)
    assert doc.text.index("lamp was lit") < doc.text.index("Morning came")  # spine order
    if toc == "nav":  # its page list: the print edition's pages 7 and 8
        pages = _page_texts(doc)
        assert list(pages) == ["7", "8"]
        assert pages["7"].endswith("Morning came grey ") and pages["8"] == "and calm & still."
    else:
        assert doc.layout.pages == ()
    assert "color: red" not in doc.text and "<" not in doc.text and "calm & still" in doc.text


def test_epub_zip_bombs_are_refused_before_decompressing(tmp_path: Path) -> None:
    bomb = write_epub(tmp_path / "bomb.epub", extra={"OEBPS/zeros.xhtml": bytes(30 << 20)})
    assert bomb.stat().st_size < 1 << 20
    assert "zip bomb" in _refusal(bomb)
    many = write_epub(tmp_path / "many.epub", extra={f"x/{i}": b"" for i in range(10_001)})
    assert "zip entries" in _refusal(many)


def test_docx_zip_bomb_is_refused(tmp_path: Path) -> None:
    good = write_docx(tmp_path / "good.docx")
    bomb = tmp_path / "bomb.docx"
    with zipfile.ZipFile(good) as src, zipfile.ZipFile(bomb, "w") as dst:
        for info in src.infolist():
            dst.writestr(info, src.read(info), compress_type=zipfile.ZIP_DEFLATED)
        dst.writestr("word/media/huge.bin", bytes(30 << 20), compress_type=zipfile.ZIP_DEFLATED)
    assert "zip bomb" in _refusal(bomb)
    damaged = tmp_path / "damaged.docx"
    damaged.write_bytes(good.read_bytes()[:600])
    assert "damaged" in _refusal(damaged)


def test_zip_that_is_not_a_document(tmp_path: Path) -> None:
    z = tmp_path / "data.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("a.txt", "hello")
    assert "not an EPUB or DOCX" in _refusal(z)


# -------------------------------------------------------------- HTML, Markdown
def test_html_keeps_what_a_reader_sees(tmp_path: Path) -> None:
    page = tmp_path / "log.html"
    page.write_text(HTML_PAGE)
    doc, _ = _load(page)
    assert doc.format == "html"
    for gone in ("secret", "track", "font:", "Menu entry", "About the site", "Copyright"):
        assert gone not in doc.text
    for gone in ("invisible draft", "enable scripts", "editor's note", "<", "&amp;"):
        assert gone not in doc.text
    assert "Entry one: the lamp was lit at dusk. Oil was low." in doc.text
    assert "Day\tHigh tide\nMonday\t06:10" in doc.text
    assert "  line one\n    indented line" in doc.text  # <pre> kept as it is
    assert [(h.level, h.title) for h in doc.layout.headings] == [
        (1, "The Keeper\u2019s Log"),  # an article's own header is content
        (2, "Tides & Weather"),
    ]
    _check_headings(doc)


@pytest.mark.parametrize("declared", ["windows-1252", "iso-8859-1"])
def test_html_in_its_declared_legacy_encoding(tmp_path: Path, declared: str) -> None:
    body = "Caf\u00e9 cr\u00e8me, na\u00efve Gr\u00fc\u00dfe"
    page = tmp_path / "old.htm"
    head = f'<html><head><meta http-equiv="Content-Type" content="text/html; charset={declared}">'
    page.write_bytes((head + f"</head><body><p>{body}</p></body></html>").encode("cp1252"))
    doc, notes = _load(page)
    assert doc.text == body and notes == []


def test_html_found_by_content_and_forced_to_text(tmp_path: Path) -> None:
    page = tmp_path / "saved.txt"
    page.write_text(HTML_PAGE)
    assert _load(page)[0].format == "html"
    raw, _ = _load(page, format="text")
    assert raw.format == "text" and "<script>" in raw.text


def test_markdown_text_kept_and_headings(tmp_path: Path) -> None:
    md = tmp_path / "notes.md"
    text = (
        "# Notes\n\nIntro.\n\n```sh\n# not a heading\n```\n\n## Setup ##\n\nSteps.\n\n"
        "Results\n-------\n\nDone.\n"
    )
    md.write_text(text)
    doc, _ = _load(md)
    assert doc.format == "markdown" and doc.text == text
    assert [(h.level, h.title) for h in doc.layout.headings] == [
        (1, "Notes"),
        (2, "Setup"),
        (2, "Results"),
    ]
    assert doc.text[doc.layout.headings[2].start :].startswith("Results\n---")


def test_markdown_fences_lists_and_long_titles_read_as_commonmark(tmp_path: Path) -> None:
    """A fence closes only on as long a run of its own character with nothing after it;
    "---" under a list item is a rule; an underlined paragraph of two lines is one
    title, from its first line."""
    text = (
        "````\n```\n# inside a four-backtick fence\n```\n````\n\n"
        "~~~\n```\n# inside tildes\n~~~~\n\n"
        "- list item\n---\n\n"
        "- item\nlazy line\n---\n\n"
        "para line one\npara line two\n---\n\nbody\n"
    )
    md = tmp_path / "fences.md"
    md.write_text(text)
    doc, _ = _load(md)
    assert [(h.level, h.title) for h in doc.layout.headings] == [(2, "para line one para line two")]
    assert doc.layout.headings[0].start == text.index("para line one")


# -------------------------------------------------------- stdin, FIFOs (#37/10)
def test_endless_binary_stdin_is_refused_at_once() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with open("/dev/zero", "rb") as zero:
        done = subprocess.run(
            [sys.executable, "-m", "lcr", "index", "-", "-q", "-m", "bm25"],
            stdin=zero,
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
            cwd=REPO / "tests",
        )
    assert done.returncode == 1 and done.stderr.count("\n") == 1
    assert "looks binary" in done.stderr and not (REPO / "tests" / "stdin.idx").exists()


def test_stdin_over_the_limit_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loading, "MAX_STREAM_BYTES", 1 << 20)
    with pytest.raises(InputError, match="larger than 1 MiB; save it to a file"):
        load_document("-", stdin=io.BytesIO(b"words and more words\n" * 100_000))


def test_fifo_is_read_in_pieces_and_checked_first(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    stop = threading.Event()

    def endless_zeros() -> None:
        try:
            with open(fifo, "wb") as fh:
                while not stop.is_set():
                    fh.write(bytes(1 << 16))
        except BrokenPipeError:
            pass

    writer = threading.Thread(target=endless_zeros, daemon=True)
    writer.start()
    try:
        with pytest.raises(InputError, match="looks binary"):
            load_document(fifo)
    finally:
        stop.set()
        writer.join(timeout=10)
    assert not writer.is_alive()


# --------------------------------------------------------- folders, index, info
def _tree(root: Path) -> Path:
    docs = root / "docs"
    for sub, text in (("a", "Apache licence text.\n"), ("b", "MIT licence text.\n")):
        (docs / sub).mkdir(parents=True)
        (docs / sub / "LICENSE").write_text(text)
    write_pdf(docs / "report.pdf")
    (docs / "notes.md").write_text("# Notes\n\nThe red toolbox.\n")
    (docs / ".hidden.txt").write_text("hidden\n")
    (docs / ".git").mkdir()
    (docs / ".git" / "config").write_text("[core]\n")
    (docs / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(100))
    return docs


def test_folder_index_names_layout_and_info(tmp_path: Path) -> None:
    docs = _tree(tmp_path)
    out = tmp_path / "all.idx"
    code, _, err = run(["index", str(docs), "-o", str(out), "-q", "-m", "bm25"])
    assert code == 0, err
    # found in a folder: skipped, said in one summary line (#54)
    assert "skipped 1 file in" in err and "not documents (1 .png)" in err
    index = Index.open(out)
    names = [d.name for d in index.documents]
    assert names == ["a/LICENSE", "b/LICENSE", "notes.md", "report.pdf"]
    formats = {d.name: (d.format, d.pages, d.extractor) for d in index.documents}
    assert formats["report.pdf"] == ("pdf", 5, "pypdfium2")
    assert formats["notes.md"] == ("markdown", 0, "lcr")
    layout_file = out / "layout.json"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["layout_sha256"] == hashlib.sha256(layout_file.read_bytes()).hexdigest()
    layouts = read_layout(out, len(names))
    pdf_doc = index.documents[3]
    pdf_text = index.source[pdf_doc.start : pdf_doc.end]
    third = layouts[3].pages[4]
    assert third.label == "3" and pdf_text[third.start :].startswith("2 Results")
    assert layouts[0] == DocumentLayout()
    code, out_text, _ = run(["info", str(out)])
    assert code == 0
    words = " ".join(out_text.split())  # each source's line wraps at 80 columns
    assert "report.pdf pdf, 5 pages" in words and "by pypdfium2" in words
    assert "notes.md  markdown" in out_text
    # a second run skips the index it made (an .idx folder) and hidden files
    code, _, err = run(["index", str(docs), "-o", str(tmp_path / "again.idx"), "-q", "-m", "bm25"])
    assert code == 0 and ".idx" not in err
    code, _, err = run(["info", str(out), "--verify"])
    assert code == 0, err
    layout_file.write_text(layout_file.read_text().replace('"2 Results"', '"2 Resultz"'))
    code, _, err = run(["info", str(out), "--verify"])
    assert code == 1 and "layout.json does not match its checksum" in err


def test_folder_glob_exclude_and_one_index_per_file(tmp_path: Path) -> None:
    docs = _tree(tmp_path)
    out = tmp_path / "pdfs.idx"
    code, _, err = run(["index", str(docs), "-o", str(out), "--glob", "*.pdf", "-q", "-m", "bm25"])
    assert code == 0, err
    assert [d.name for d in Index.open(out).documents] == ["report.pdf"]
    code, _, err = run(
        ["index", str(docs), "-o", str(tmp_path / "nob.idx"), "--exclude", "b", "-q", "-m", "bm25"]
    )
    assert code == 0, err
    names = [d.name for d in Index.open(tmp_path / "nob.idx").documents]
    assert names == ["a/LICENSE", "notes.md", "report.pdf"]
    code, _, err = run(["index", str(docs), "--glob", "*.md", "-q", "-m", "bm25"])
    assert code == 0, err
    assert (docs / "notes.idx" / "manifest.json").exists()
    assert not (docs / "report.idx").exists()
    code, _, err = run(["index", str(docs), "--glob", "*.nothing", "-q"])
    assert code == 1 and "has no files to index" in err
    code, _, err = run(["index", str(docs / "notes.md"), "--glob", "*.md", "-q"])
    assert code == 2 and "no folder was given" in err


def test_same_names_in_two_folders_stay_apart(tmp_path: Path) -> None:
    docs = _tree(tmp_path)
    out = tmp_path / "lic.idx"
    args = [str(docs / "a" / "LICENSE"), str(docs / "b" / "LICENSE"), "-o", str(out)]
    code, _, err = run(["index", *args, "-q", "-m", "bm25"])
    assert code == 0, err
    assert [d.name for d in Index.open(out).documents] == ["a/LICENSE", "b/LICENSE"]


def test_another_extraction_of_the_same_file_needs_force(tmp_path: Path) -> None:
    page = tmp_path / "log.html"
    page.write_text(HTML_PAGE)
    out = tmp_path / "log.idx"
    assert run(["index", str(page), "-o", str(out), "-q", "-m", "bm25"])[0] == 0
    code, _, err = run(["index", str(page), "-o", str(out), "--format", "text", "-q"])
    assert code == 1 and "another extraction" in err and "--force" in err
    code, _, err = run(["index", str(page), "-o", str(out), "--format", "text", "--force", "-q"])
    assert code == 0, err
    source = Index.open(out).documents[0]
    assert source.format == "text" and source.options.get("forced") is True
    assert "<script>" in Index.open(out).source


def test_an_index_from_before_formats_still_reads(tmp_path: Path) -> None:
    story = tmp_path / "s.txt"
    story.write_text("The key was under the mat.\n")
    out = tmp_path / "s.idx"
    assert run(["index", str(story), "-q", "-m", "bm25"])[0] == 0
    manifest = json.loads((out / "manifest.json").read_text())
    for field in ("format", "pages", "extractor", "extractor_version", "options"):
        del manifest["sources"][0][field]
    del manifest["layout_sha256"]
    (out / "manifest.json").write_text(json.dumps(manifest))
    (out / "layout.json").unlink()
    index = Index.open(out)
    assert index.documents[0].format == "text" and index.verify() == {}
    assert read_layout(out, 1) == [DocumentLayout()]
    assert run(["index", str(story), "-q", "-m", "bm25"])[0] == 0  # still up to date


def test_python_api_reads_a_folder_and_forces_a_format(tmp_path: Path) -> None:
    import lcr

    docs = _tree(tmp_path)
    index = lcr.index(docs, tmp_path / "api.idx", methods=["bm25"], glob=["*.md", "*.pdf"])
    assert [d.name for d in index.documents] == ["notes.md", "report.pdf"]
    raw = lcr.index(docs / "notes.md", tmp_path / "raw.idx", methods=["bm25"], as_format="text")
    assert raw.documents[0].format == "text"
    with pytest.raises(lcr.errors.UsageError, match="as_format must be one of"):
        lcr.index(docs / "notes.md", tmp_path / "x.idx", as_format="rtf")
    with pytest.raises(lcr.errors.UsageError, match="give out="):
        lcr.index(docs)


class _CountingProgress:
    """A progress sink that keeps what it was told (the CLI draws the same calls)."""

    def __init__(self) -> None:
        self.tasks: list[tuple[str, float | None]] = []
        self.advanced = 0.0

    def task(self, description: str, total: float | None = None) -> _CountingProgress:
        self.tasks.append((description, total))
        return self

    def advance(self, n: float = 1) -> None:
        self.advanced += n

    def update(self, *, total: float | None = None, description: str | None = None) -> None:
        pass

    def log(self, message: str) -> None:
        pass


def test_pdf_progress_counts_pages(tmp_path: Path) -> None:
    progress = _CountingProgress()
    _load(write_pdf(tmp_path / "r.pdf"), progress=progress)
    assert progress.tasks == [("reading r.pdf", 5)] and progress.advanced == 5


def test_text_then_endless_nul_bytes_on_stdin_is_refused_at_once() -> None:
    """A stream that starts as text and turns to NUL bytes is binary: refused at the
    first such piece, not read on to the size limit (found by bench/fault_matrix.py)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    feed = "import sys; sys.stdout.write('Once upon a time.\\n' * 100); sys.stdout.flush()\n"
    feed += "z = bytes(65536)\nwhile True: sys.stdout.buffer.write(z)\n"
    writer = subprocess.Popen([sys.executable, "-c", feed], stdout=subprocess.PIPE)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "lcr", "index", "-", "-o", "in.idx", "-q", "-m", "bm25"],
            stdin=writer.stdout,
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
            cwd=REPO / "tests",
        )
    finally:
        writer.kill()
        writer.wait()
    assert done.returncode == 1 and "looks binary" in done.stderr, done.stderr
    assert not (REPO / "tests" / "in.idx").exists()
