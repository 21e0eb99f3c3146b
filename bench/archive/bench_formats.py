"""Document formats on real manuals: extraction speed, peak memory and index size per
format, and the two PDF readers compared (run by hand; no asserts on time).

    apt-get install bash-doc debmake-doc live-manual-epub      # the manuals (Debian)
    .venv/bin/python bench/archive/bench_formats.py index              # lcr index -m bm25 per file
    .venv/bin/python bench/archive/bench_formats.py pdf                # pypdfium2 against pypdf
    .venv/bin/python bench/archive/bench_formats.py big --pages 5000   # a PDF of thousands of pages

``pdf`` scores text quality and reading order against another edition of the same
manual made from the same source (bashref.html for bashref.pdf, Texinfo; the .txt.gz for
debmake-doc, DocBook): recall is the share of that edition's words the PDF text has
(as a multiset); order is the share of 200 runs of six consecutive words of it found,
in that order, in the PDF text.
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DOCS = {
    "pdf": [
        "/usr/share/doc/bash/bashref.pdf",
        "/usr/share/doc/bash/bash.pdf",
        "/usr/share/doc/debmake-doc/debmake-doc.en.pdf",
    ],
    "html": ["/usr/share/doc/bash/bashref.html", "/usr/share/doc/bash/bash.html"],
    "epub": [
        "/usr/share/doc/debmake-doc/debmake-doc.en.epub",
        "/usr/share/doc/live-manual/epub/live-manual.en.epub",
    ],
}
REPO = Path(__file__).resolve().parents[2]
_WORD = re.compile(r"\w+")


def _run_measured(args: list[str]) -> tuple[float, int, str]:
    """Wall seconds, peak RSS (KiB) and stderr of ``args`` under /usr/bin/time."""
    t0 = time.perf_counter()
    done = subprocess.run(
        ["/usr/bin/time", "-f", "%M", *args], capture_output=True, text=True, check=False
    )
    seconds = time.perf_counter() - t0
    lines = done.stderr.strip().splitlines()
    if done.returncode != 0:
        raise SystemExit(f"failed: {' '.join(args)}\n{done.stderr}")
    return seconds, int(lines[-1]), "\n".join(lines[:-1])


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def bench_index() -> None:
    """Each manual through `lcr index -m bm25` (extraction + bm25) and extraction alone."""
    from lcr.text.loading import load_document

    columns = "file format pages chars extract_s pages/s MB/s_in index_s peak_RSS index_size"
    print("| " + " | ".join(c.replace("_", " ") for c in columns.split()) + " |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for fmt, files in DOCS.items():
        for f in files:
            path = Path(f)
            if not path.exists():
                print(f"| {path.name} | {fmt} | missing (apt-get install its package) |")
                continue
            t0 = time.perf_counter()
            doc = load_document(path)
            extract = time.perf_counter() - t0
            pages = len(doc.layout.pages)
            with tempfile.TemporaryDirectory() as tmp:
                out = Path(tmp) / "x.idx"
                lcr = [sys.executable, "-m", "lcr", "index", str(path), "-o", str(out)]
                secs, rss, _ = _run_measured([*lcr, "-m", "bm25", "-q"])
                size = _size(out)
            rate = f"{pages / extract:,.0f}" if pages else "-"
            mbs = path.stat().st_size / 1e6 / extract
            print(
                f"| {path.name} | {fmt} | {pages or '-'} | {len(doc.text):,} | {extract:.2f} | "
                f"{rate} | {mbs:.1f} | {secs:.1f} | {rss / 1024:.0f} MiB | {size / 1e6:.1f} MB |"
            )


def _pdfium_pages(path: Path) -> list[str]:
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(str(path))
    out = []
    for i in range(len(pdf)):
        page = pdf[i]
        tp = page.get_textpage()
        out.append(tp.get_text_range())
        tp.close()
        page.close()
    pdf.close()
    return out


def _pypdf_pages(path: Path) -> list[str]:
    import pypdf

    return [p.extract_text() for p in pypdf.PdfReader(str(path)).pages]


def _reference_words(path: Path) -> list[str]:
    """The words of the manual's HTML (or gzipped plain-text) edition."""
    import gzip

    from lcr.text.loading import load_document

    if path.suffix == ".gz":
        return _WORD.findall(gzip.decompress(path.read_bytes()).decode("utf-8").lower())
    return _WORD.findall(load_document(path).text.lower())


def bench_pdf() -> None:
    """pypdfium2 and pypdf on the same PDFs: speed, and quality against another edition."""
    pairs: list[tuple[str, str | None]] = [
        ("/usr/share/doc/bash/bashref.pdf", "/usr/share/doc/bash/bashref.html"),
        ("/usr/share/doc/bash/bash.pdf", "/usr/share/doc/bash/bash.html"),
        (
            "/usr/share/doc/debmake-doc/debmake-doc.en.pdf",
            "/usr/share/doc/debmake-doc/debmake-doc.en.txt.gz",
        ),
    ]
    print("| PDF | reader | pages | pages/s | chars | word recall vs HTML | 6-word runs in order |")
    print("|---|---|---|---|---|---|---|")
    for pdf_name, html_name in pairs:
        pdf_path = Path(pdf_name)
        if not pdf_path.exists():
            continue
        reference = _reference_words(Path(html_name)) if html_name else None
        rng = random.Random(0)
        runs = []
        if reference:
            starts = [rng.randrange(len(reference) - 6) for _ in range(200)]
            runs = [" ".join(reference[s : s + 6]) for s in starts]
        for reader, fn in (("pypdfium2", _pdfium_pages), ("pypdf", _pypdf_pages)):
            t0 = time.perf_counter()
            pages = fn(pdf_path)
            secs = time.perf_counter() - t0
            text = "\n".join(pages)
            recall = order = "-"
            if reference:
                words = _WORD.findall(text.lower())
                have = collections.Counter(words)
                want = collections.Counter(reference)
                recall = f"{sum((have & want).values()) / sum(want.values()):.3f}"
                joined = " ".join(words)
                order = f"{sum(r in joined for r in runs) / len(runs):.3f}"
            print(
                f"| {pdf_path.name} | {reader} | {len(pages)} | {len(pages) / secs:,.0f} | "
                f"{len(text):,} | {recall} | {order} |"
            )


def bench_big(pages: int) -> None:
    """A PDF of ``pages`` pages (reportlab): progress lines, speed, peak memory."""
    from reportlab.pdfgen import canvas

    with tempfile.TemporaryDirectory() as tmp:
        pdf = Path(tmp) / "big.pdf"
        c = canvas.Canvas(str(pdf))
        for n in range(pages):
            for line in range(40):
                c.drawString(
                    72, 760 - 18 * line, f"Page {n + 1} line {line}: the keeper logs ships."
                )
            c.showPage()
        c.save()
        out = Path(tmp) / "big.idx"
        secs, rss, err = _run_measured(
            [sys.executable, "-m", "lcr", "index", str(pdf), "-o", str(out), "-m", "bm25"]
        )
        progress = [line for line in err.splitlines() if "reading big.pdf" in line]
        manifest = json.loads((out / "manifest.json").read_text())
        print(
            f"{pages} pages, {pdf.stat().st_size / 1e6:.1f} MB PDF, "
            f"{manifest['source_chars']:,} chars: lcr index -m bm25 {secs:.1f} s "
            f"({pages / secs:,.0f} pages/s end to end), peak RSS {rss / 1024:.0f} MiB, "
            f"index {_size(out) / 1e6:.1f} MB, {len(progress)} progress lines for the pages"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["index", "pdf", "big"])
    ap.add_argument("--pages", type=int, default=5000)
    args = ap.parse_args()
    sys.path.insert(0, str(REPO))
    if args.what == "index":
        bench_index()
    elif args.what == "pdf":
        bench_pdf()
    else:
        bench_big(args.pages)


if __name__ == "__main__":
    main()
