"""Real documents written by real writers, for the format tests: a PDF by
reportlab (outline, page labels, two columns, an image-only page), a DOCX by
python-docx, an EPUB zipped here by hand the way the EPUB 3 spec lays it out,
and an HTML page with the boilerplate a web page carries."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

PDF_PAGES = {  # page label -> lines printed on that page
    "i": ["Preface", "The preface speaks of lighthouses and their keepers."],
    "ii": [],  # an image only
    "1": ["1 Introduction", "Spanners are kept in the red toolbox."],
    "2": ["Filler text sits at the top of page two.", "1.1 Background", "Tides rise twice a day."],
    "3": ["2 Results", "The keeper counted forty ships."],
}
LEFT = ["Left column line one.", "Left column line two.", "Left column line three."]
RIGHT = ["Right column line one.", "Right column line two.", "Right column line three."]


def _png() -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (64, 64), (40, 90, 160)).save(buf, format="PNG")
    return buf.getvalue()


def write_pdf(path: Path, *, password: str | None = None, scanned: bool = False) -> Path:
    """Five pages labelled i, ii, 1, 2, 3; an outline of three entries; page "1" set in
    two columns; page "ii" an image with no text (every page, when ``scanned``)."""
    from reportlab.lib.pdfencrypt import StandardEncryption
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfgen import canvas

    encrypt = StandardEncryption(password, canPrint=1) if password else None
    c = canvas.Canvas(str(path), pagesize=(612, 792), encrypt=encrypt, invariant=1)
    image = ImageReader(io.BytesIO(_png()))
    for number, (label, lines) in enumerate(PDF_PAGES.items()):
        if scanned or not lines:
            c.drawImage(image, 100, 300, width=400, height=400)
        else:
            y = 720
            for line in lines:
                c.drawString(72, y, line)
                if line[0].isdigit():
                    key = f"k{number}{y}"
                    c.bookmarkHorizontal(key, 0, y + 14)
                    number, _, words = line.partition(" ")
                    # Texinfo's outlines leave the section number out ("Background")
                    entry = words if number.count(".") else line
                    c.addOutlineEntry(entry, key, level=number.count("."))
                y -= 60
            if label == "1":  # two columns below, as a typesetter writes them: left first
                for i, line in enumerate(LEFT):
                    c.drawString(72, 500 - 20 * i, line)
                for i, line in enumerate(RIGHT):
                    c.drawString(330, 500 - 20 * i, line)
        c.showPage()
    c.addPageLabel(0, "ROMAN_LOWER", 1)
    c.addPageLabel(2, "ARABIC", 1)
    c.save()
    return path


def write_docx(path: Path) -> Path:
    import docx

    d = docx.Document()
    d.add_heading("Field Report", level=1)
    d.add_paragraph("The survey began at dawn on the northern cliffs.")
    d.add_heading("Birds Seen", level=2)
    table = d.add_table(rows=3, cols=2)
    for row, (bird, count) in zip(
        table.rows, [("Species", "Count"), ("Puffin", "12"), ("Gannet", "40")], strict=True
    ):
        row.cells[0].text, row.cells[1].text = bird, count
    d.add_paragraph("Numbers were lower than last year.")
    d.add_heading("Weather", level=2)
    d.add_paragraph("Fog lifted by noon.")
    d.save(str(path))
    return path


CHAPTERS = {
    "text/ch1.xhtml": (
        "<h1>Chapter One</h1><p>The lamp was lit at dusk.</p>"
        '<h2 id="s2">The Storm</h2><p>Waves broke over the rail.</p>'
    ),
    "text/ch2.xhtml": (
        '<h1>Chapter Two</h1><p>Morning came grey <span epub:type="pagebreak" id="p8" '
        'title="8"/>and calm &amp; still.</p>'
    ),
}
NAV = (
    '<nav epub:type="toc"><ol>'
    '<li><a href="ch1.xhtml">Chapter One</a>'
    '<ol><li><a href="ch1.xhtml#s2">The Storm</a></li></ol></li>'
    '<li><a href="ch2.xhtml">Chapter Two</a></li></ol></nav>'
    '<nav epub:type="page-list"><ol><li><a href="ch1.xhtml">7</a></li>'
    '<li><a href="ch2.xhtml#p8">8</a></li></ol></nav>'
)


def _xhtml(body: str) -> str:
    return (
        '<?xml version="1.0" encoding="utf-8"?>\n<!DOCTYPE html>\n'
        '<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops">'
        f"<head><title>t</title><style>p {{ color: red }}</style></head><body>{body}</body></html>"
    )


NCX = (
    '<?xml version="1.0" encoding="utf-8"?>'
    '<ncx xmlns="http://www.daisy.org/z3986/2005/ncx/" version="2005-1"><navMap>'
    '<navPoint id="p1"><navLabel><text>Chapter One</text></navLabel>'
    '<content src="text/ch1.xhtml"/>'
    '<navPoint id="p2"><navLabel><text>The Storm</text></navLabel>'
    '<content src="text/ch1.xhtml#s2"/></navPoint></navPoint>'
    '<navPoint id="p3"><navLabel><text>Chapter Two</text></navLabel>'
    '<content src="text/ch2.xhtml"/></navPoint></navMap></ncx>'
)


def write_epub(
    path: Path,
    *,
    toc: str = "nav",
    extra: dict[str, bytes] | None = None,
    nav: str = NAV,
    chapters: dict[str, str] | None = None,
) -> Path:
    """An EPUB of two chapters whose table of contents is an EPUB 3 navigation document
    (``toc="nav"``, not in the spine; ``nav`` its body), an EPUB 2 NCX (``"ncx"``), or
    missing (``""``); ``chapters`` replaces the chapters' bodies."""
    nav_item = (
        '<item id="nav" href="text/nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>'
        if toc == "nav"
        else '<item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/>'
        if toc == "ncx"
        else ""
    )
    spine = '<spine toc="ncx">' if toc == "ncx" else "<spine>"
    opf = (
        '<?xml version="1.0" encoding="utf-8"?>'
        '<package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id">'
        '<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>Log</dc:title>'
        '<dc:identifier id="id">x</dc:identifier><dc:language>en</dc:language></metadata>'
        f"<manifest>{nav_item}"
        '<item id="c1" href="text/ch1.xhtml" media-type="application/xhtml+xml"/>'
        '<item id="c2" href="text/ch2.xhtml" media-type="application/xhtml+xml"/></manifest>'
        f'{spine}<itemref idref="c1"/><itemref idref="c2"/></spine></package>'
    )
    container = (
        '<?xml version="1.0"?><container version="1.0" '
        'xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles>'
        '<rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
        "</rootfiles></container>"
    )
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("mimetype", "application/epub+zip", compress_type=zipfile.ZIP_STORED)
        zf.writestr("META-INF/container.xml", container)
        zf.writestr("OEBPS/content.opf", opf)
        if toc == "nav":
            zf.writestr("OEBPS/text/nav.xhtml", _xhtml(nav))
        elif toc == "ncx":
            zf.writestr("OEBPS/toc.ncx", NCX)
        for name, body in (chapters or CHAPTERS).items():
            zf.writestr(f"OEBPS/{name}", _xhtml(body), compress_type=zipfile.ZIP_DEFLATED)
        for name, data in (extra or {}).items():
            zf.writestr(name, data, compress_type=zipfile.ZIP_DEFLATED)
    return path


HTML_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Keeper's log</title>
<style>body { font: 12px serif }</style><script>var secret = "tracking code";</script>
</head><body>
<header><a href="/">Home</a> | <a href="/about">About the site</a></header>
<nav><ul><li>Menu entry</li></ul></nav>
<article><header><h1>The Keeper&rsquo;s Log</h1></header>
<p>Entry one: the   lamp
was <b>lit</b> at dusk.<!-- an editor's note --> Oil was low.</p>
<h2 id="tides">Tides &amp; Weather</h2>
<table><tr><th>Day</th><th>High tide</th></tr><tr><td>Monday</td><td>06:10</td></tr></table>
<pre>  line one
    indented line</pre>
<p hidden>invisible draft</p>
<noscript>enable scripts</noscript>
</article>
<footer>Copyright the site</footer>
<script>track();</script>
</body></html>
"""
