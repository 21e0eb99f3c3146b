"""Citing spans: the pure mapping (lcr.text.citation) and how plain output writes it.

The mapping is checked case by case (pages, headings, documents, empty layouts) and
against a brute-force reading of the same layout for random layouts and spans.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lcr.cli.output import WIDTH, cite_text, evidence_heading
from lcr.evidence import EvidenceItem
from lcr.text.citation import Citation, Citer, PageRange, section_paths
from lcr.text.layout import DocumentLayout, Heading, Page


@dataclass(frozen=True)
class Doc:
    name: str
    start: int
    end: int


def _docs(*lengths: int, names: tuple[str, ...] = ()) -> list[Doc]:
    """Documents of these lengths joined as source.txt joins them (a blank line apart)."""
    out, pos = [], 0
    for i, n in enumerate(lengths):
        out.append(Doc(names[i] if names else f"d{i}.txt", pos, pos + n))
        pos += n + 2
    return out


BOOK = DocumentLayout(
    pages=(Page(0, "i"), Page(100, "ii"), Page(200, "1"), Page(300, "2"), Page(400, "3")),
    headings=(
        Heading(0, 1, "Preface"),
        Heading(200, 1, "1 Introduction"),
        Heading(250, 3, "1.0.1 A skipped level"),
        Heading(320, 2, "1.1 Scope"),
        Heading(380, 1, "2 Methods"),
    ),
)


# ------------------------------------------------------------------ one document
def test_plain_text_gives_offsets_and_nothing_else() -> None:
    (c,) = Citer(_docs(500), [DocumentLayout()]).cite(20, 80)
    assert c == Citation(0, "d0.txt", 20, 80, None, ())
    assert c.to_json() == {
        "document": "d0.txt",
        "start": 20,
        "end": 80,
        "pages": None,
        "section": [],
    }


def test_a_span_within_one_page_cites_that_page_by_its_label() -> None:
    (c,) = Citer(_docs(500), [BOOK]).cite(210, 240)
    assert c.pages == PageRange(3, 3, "1", "1") and c.pages.text() == "p. 1"
    assert c.section == ("1 Introduction",)


def test_a_span_across_pages_cites_the_range() -> None:
    (c,) = Citer(_docs(500), [BOOK]).cite(150, 310)
    assert c.pages == PageRange(2, 4, "ii", "2") and c.pages.text() == "pp. ii-2"
    assert c.pages.to_json() == {"first": "ii", "last": "2", "first_number": 2, "last_number": 4}


def test_a_span_ending_where_a_page_starts_does_not_reach_it() -> None:
    (c,) = Citer(_docs(500), [BOOK]).cite(250, 300)
    assert c.pages == PageRange(3, 3, "1", "1")
    (c,) = Citer(_docs(500), [BOOK]).cite(300, 300)  # empty: the page it stands on
    assert c.pages == PageRange(4, 4, "2", "2")


def test_text_before_the_first_page_and_heading() -> None:
    layout = DocumentLayout(pages=(Page(50, "1"), Page(90, "2")), headings=(Heading(60, 1, "A"),))
    (c,) = Citer(_docs(200), [layout]).cite(10, 40)
    assert c.pages == PageRange(1, 1, "1", "1")  # the first page holds what precedes it
    assert c.section == ()  # no heading encloses text before the first one


def test_sections_by_level_with_a_skipped_level() -> None:
    citer = Citer(_docs(500), [BOOK])
    assert citer.cite(260, 270)[0].section == ("1 Introduction", "1.0.1 A skipped level")
    # the level-2 heading closes the level-3 one but not the level-1 one
    assert citer.cite(330, 340)[0].section == ("1 Introduction", "1.1 Scope")
    assert citer.cite(390, 480)[0].section == ("2 Methods",)
    assert citer.cite(5, 6)[0].section == ("Preface",)


def test_the_section_is_the_one_enclosing_the_start_not_headings_inside() -> None:
    (c,) = Citer(_docs(500), [BOOK]).cite(190, 330)  # runs over two headings
    assert c.section == ("Preface",)
    (c,) = Citer(_docs(500), [BOOK]).cite(200, 210)  # starts on the heading itself
    assert c.section == ("1 Introduction",)


def test_section_paths_nest_headings_that_share_an_offset() -> None:
    headings = [Heading(0, 1, "3 Basic"), Heading(0, 2, "3.1 Syntax"), Heading(9, 2, "3.2 Cmds")]
    assert section_paths(headings) == [
        ("3 Basic",),
        ("3 Basic", "3.1 Syntax"),
        ("3 Basic", "3.2 Cmds"),
    ]


def test_a_layout_out_of_order_is_searched_in_order() -> None:
    shuffled = DocumentLayout(
        pages=(Page(100, "2"), Page(0, "1")), headings=(Heading(80, 1, "B"), Heading(0, 1, "A"))
    )
    (c,) = Citer(_docs(200), [shuffled]).cite(120, 130)
    assert c.pages == PageRange(2, 2, "2", "2") and c.section == ("B",)


def test_a_page_without_a_label_is_cited_by_its_number() -> None:
    layout = DocumentLayout(pages=(Page(0, ""), Page(10, "")))
    (c,) = Citer(_docs(30), [layout]).cite(12, 20)
    assert c.pages is not None and c.pages.text() == "p. 2"


# ------------------------------------------------------------------ several documents
def test_offsets_are_within_each_document() -> None:
    docs = _docs(100, 50, 300, names=("a/LICENSE", "b/LICENSE", "c.pdf"))
    citer = Citer(docs, [DocumentLayout(), DocumentLayout(), BOOK])
    (c,) = citer.cite(docs[1].start + 5, docs[1].start + 20)
    assert (c.doc, c.document, c.start, c.end) == (1, "b/LICENSE", 5, 20)
    (c,) = citer.cite(docs[2].start + 210, docs[2].start + 220)
    assert (c.document, c.start, c.pages, c.section) == (
        "c.pdf",
        210,
        PageRange(3, 3, "1", "1"),
        ("1 Introduction",),
    )


def test_a_span_over_two_documents_is_cited_in_each() -> None:
    docs = _docs(100, 50)
    a, b = Citer(docs, [DocumentLayout(), DocumentLayout()]).cite(90, docs[1].start + 10)
    assert (a.doc, a.start, a.end) == (0, 90, 100)
    assert (b.doc, b.start, b.end) == (1, 0, 10)


def test_a_span_in_the_gap_between_documents_is_cited_at_the_end_of_the_one_before() -> None:
    docs = _docs(100, 50)
    citer = Citer(docs, [DocumentLayout(), DocumentLayout()])
    assert [(c.doc, c.start, c.end) for c in citer.cite(100, 102)] == [(0, 100, 100)]
    assert [(c.doc, c.start, c.end) for c in citer.cite(101, 101)] == [(0, 100, 100)]
    assert [(c.doc, c.start, c.end) for c in citer.cite(102, 102)] == [(1, 0, 0)]
    assert [(c.doc, c.start, c.end) for c in citer.cite(40, 40)] == [(0, 40, 40)]
    assert [(c.doc, c.start, c.end) for c in citer.cite(500, 600)] == [(1, 50, 50)]


def test_cite_spans_keeps_the_order_of_the_spans() -> None:
    docs = _docs(100, 50)
    citer = Citer(docs, [DocumentLayout(), DocumentLayout()])
    cited = citer.cite_spans([(docs[1].start, docs[1].start + 5), (0, 5)])
    assert [c.doc for c in cited] == [1, 0]


def test_no_documents_and_mismatched_layouts() -> None:
    assert Citer([], []).cite(0, 10) == []
    with pytest.raises(ValueError, match="2 documents but 1 layouts"):
        Citer(_docs(10, 10), [DocumentLayout()])


# ------------------------------------------------------------------ against brute force
@st.composite
def _layouts(draw: st.DrawFn, length: int) -> DocumentLayout:
    starts = sorted(draw(st.sets(st.integers(0, length - 1), max_size=8)))
    pages = tuple(Page(s, f"p{i}") for i, s in enumerate(starts))
    heads = draw(st.lists(st.tuples(st.integers(0, length - 1), st.integers(1, 4)), max_size=8))
    headings = tuple(
        Heading(s, lv, f"h{i}") for i, (s, lv) in enumerate(sorted(heads, key=lambda h: h[0]))
    )
    return DocumentLayout(pages, headings)


def _brute(layout: DocumentLayout, start: int, end: int) -> tuple[PageRange | None, tuple]:
    """The same answer read the slow way: scan every page and heading."""
    pages = None
    if layout.pages:
        on = [i for i, p in enumerate(layout.pages) if p.start <= start] or [0]
        last_char = max(start, end - 1)
        to = [i for i, p in enumerate(layout.pages) if p.start <= last_char] or [0]
        f, t = on[-1], max(to[-1], on[-1])
        pages = PageRange(f + 1, t + 1, layout.pages[f].label, layout.pages[t].label)
    path: list[Heading] = []
    for h in layout.headings:
        if h.start > start:
            break
        path = [p for p in path if p.level < h.level] + [h]
    return pages, tuple(h.title for h in path)


@settings(max_examples=150, deadline=None)
@given(data=st.data(), lengths=st.lists(st.integers(1, 60), min_size=1, max_size=4))
def test_binary_search_agrees_with_a_scan(data: st.DataObject, lengths: list[int]) -> None:
    docs = _docs(*lengths)
    layouts = [data.draw(_layouts(n)) for n in lengths]
    total = docs[-1].end
    start = data.draw(st.integers(0, total))
    end = data.draw(st.integers(start, total))
    cited = Citer(docs, layouts).cite(start, end)
    covered = [i for i, d in enumerate(docs) if d.start < end and d.end > start]
    if covered:
        assert [c.doc for c in cited] == covered
    else:
        assert len(cited) == 1 and cited[0].start == cited[0].end
    for c in cited:
        d = docs[c.doc]
        assert 0 <= c.start <= c.end <= d.end - d.start
        assert (c.pages, c.section) == _brute(layouts[c.doc], c.start, c.end)


# ------------------------------------------------------------------ written for people
def _c(doc: int, name: str, s: int, e: int, pages: tuple[int, int] | None = None,
       section: tuple[str, ...] = ()) -> Citation:  # fmt: skip
    pr = PageRange(pages[0], pages[1], str(pages[0]), str(pages[1])) if pages else None
    return Citation(doc, name, s, e, pr, section)


SHELL = ("3 Basic Shell Features", "3.2 Shell Commands")


def test_a_page_and_section_as_a_person_cites_them() -> None:
    assert cite_text([_c(0, "bashref.pdf", 10, 90, (42, 42), SHELL)]) == (
        "bashref.pdf p. 42, 3.2 Shell Commands"
    )
    assert cite_text([_c(0, "bashref.pdf", 10, 90, (41, 42), SHELL)]) == (
        "bashref.pdf pp. 41-42, 3.2 Shell Commands"
    )
    assert cite_text([_c(0, "bashref.pdf", 10, 90, (41, 41))]) == "bashref.pdf p. 41"


def test_plain_text_is_cited_by_offsets_within_the_file() -> None:
    assert cite_text([_c(3, "bzip2.txt", 255, 620)]) == "bzip2.txt chars 255-620"
    two = [_c(3, "bzip2.txt", 255, 620), _c(3, "bzip2.txt", 900, 1000)]
    assert cite_text(two) == "bzip2.txt chars 255-620, 900-1000"


def test_touching_pages_of_one_section_read_as_one_range() -> None:
    spans = [_c(0, "b.pdf", 0, 9, (41, 41), SHELL), _c(0, "b.pdf", 20, 29, (42, 43), SHELL)]
    assert cite_text(spans) == "b.pdf pp. 41-43, 3.2 Shell Commands"
    apart = [_c(0, "b.pdf", 0, 9, (41, 41), SHELL), _c(0, "b.pdf", 90, 99, (50, 50), SHELL)]
    assert cite_text(apart) == "b.pdf p. 41, 3.2 Shell Commands; p. 50, 3.2 Shell Commands"
    other = [_c(0, "b.pdf", 0, 9, (41, 41), SHELL), _c(0, "b.pdf", 20, 29, (42, 42), ("4",))]
    assert cite_text(other) == "b.pdf p. 41, 3.2 Shell Commands; p. 42, 4"


def test_several_documents_and_more_than_three_places() -> None:
    spans = [_c(0, "a/LICENSE", 0, 5), _c(1, "b/LICENSE", 7, 9)]
    assert cite_text(spans) == "a/LICENSE chars 0-5; b/LICENSE chars 7-9"
    many = [_c(0, "a.txt", 10 * i, 10 * i + 5) for i in range(5)]
    assert cite_text(many) == "a.txt chars 0-5, 10-15, 20-25 (+2 more)"
    pages = [_c(0, "a.pdf", i, i + 1, (2 * i, 2 * i)) for i in range(1, 6)]
    assert cite_text(pages) == "a.pdf p. 2; p. 4; p. 6 (+2 more)"
    assert cite_text([]) == ""


def test_the_evidence_heading_fits_eighty_columns() -> None:
    cited = [_c(0, "bashref.pdf", 0, 5, (42, 42), SHELL)]
    item = EvidenceItem("s1-0", 0, 1, 3.25, "t", [(0, 5)], citations=cited)
    assert evidence_heading(2, item) == [
        "[2] score 3.25  bashref.pdf p. 42, 3.2 Shell Commands  level 1"
    ]
    long_name = "some/deeply/nested/folder/of/manuals/" + "x" * 30 + ".pdf"
    cited = [_c(0, long_name, 0, 5, (41, 42), ("A long section title " * 3,))]
    item = dataclasses.replace(item, citations=cited)
    lines = evidence_heading(10, item)
    assert len(lines) > 1 and all(len(line) <= WIDTH for line in lines)
    assert lines[0].startswith("[10] score 3.25") and all(x.startswith("    ") for x in lines[1:])
    words = f"[10] score 3.25 {long_name} pp. 41-42, {'A long section title ' * 3} level 1"
    assert " ".join(lines).split() == words.split()  # wrapped, nothing lost


def test_a_control_character_in_a_name_stays_on_the_heading_line() -> None:
    """A document named with a newline (legal on Linux) would split "one line per piece
    of evidence" in two: the heading shows it escaped, as file names are elsewhere."""
    cited = [_c(0, "nl\nname.txt", 0, 18)]
    item = EvidenceItem("c0", 0, 0, 0.1151, "t", [(0, 18)], citations=cited)
    assert evidence_heading(1, item) == ["[1] score 0.1151  nl\\nname.txt chars 0-18"]
