"""Evidence cited end to end: real indexes over several files in subfolders, and a
layout.json (written by lcr.text.layout.write_layout, as extraction writes it) that
gives a document pages and headings. Checked through the CLI (plain and --json), the
Python API, ``lcr eval`` records, and for the methods whose items rest on others
(RAPTOR summaries, PECAN points, GraphReader facts)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import lcr
from lcr import api, pipeline
from lcr.cli.eval import eval_group
from lcr.cli.main import main
from lcr.errors import IndexDamagedError
from lcr.eval import runner
from lcr.evidence import merge_spans
from lcr.methods.base import item_from_node
from lcr.models.container import Models
from lcr.store import Index
from lcr.text.citation import Citer
from lcr.text.layout import DocumentLayout, Heading, Page, write_layout
from tests.conftest import FIXTURES
from tests.fakes import ForbiddenLLM, ScriptedLLM


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(args)
    out = capsys.readouterr()
    code = exc.value.code
    return (code if isinstance(code, int) else 1), out.out, out.err


# ------------------------------------------------------------------ plain files in folders
@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three real texts as a/LICENSE, b/LICENSE and c/notes.txt, indexed together."""
    root = tmp_path_factory.mktemp("folders")
    texts = {
        "a/LICENSE": (FIXTURES / "cinderella.txt").read_text(encoding="utf-8")[:3000],
        "b/LICENSE": (FIXTURES / "babi-qa2.txt").read_text(encoding="utf-8")[:3000],
        "c/notes.txt": (FIXTURES / "cinderella.txt").read_text(encoding="utf-8")[3000:6000],
    }
    for rel, text in texts.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    with pytest.raises(SystemExit) as exc:
        main(["index", *(str(root / rel) for rel in texts), "-o", str(root / "all.idx"), "-q"])
    assert exc.value.code == 0
    return root / "all.idx"


def _check_citations(index: Index, ev: dict[str, Any]) -> None:
    """Each citation names the span's document (as the manifest does) and gives the
    span's offsets within that document's own text."""
    docs = index.documents
    assert ev["document"] == docs[ev["doc"]].name
    assert len(ev["citations"]) == len(ev["spans"])  # no span crosses documents
    for (s, e), c in zip(ev["spans"], ev["citations"], strict=True):
        (d,) = [d for d in docs if d.start <= s and e <= d.end]
        assert c["document"] == d.name
        own = index.source[d.start : d.end]
        assert own[c["start"] : c["end"]] == index.source[s:e]
        assert 0 <= c["start"] < c["end"] <= len(own)
        assert c["pages"] is None and c["section"] == []  # plain text: no layout


def test_json_evidence_names_its_file_and_cites_offsets_within_it(
    folders: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    index = Index.open(folders)
    code, out, err = run(
        ["retrieve", str(folders), "Where is the football?", "--json", "-k", "4"], capsys
    )
    assert code == 0, err
    evidence = json.loads(out)["evidence"]
    assert evidence and {ev["doc"] for ev in evidence} == {1}  # bAbI's lines, b/LICENSE
    for ev in evidence:
        assert set(ev) >= {"id", "doc", "level", "score", "text", "spans", "rank"}  # kept
        _check_citations(index, ev)
        # within the 3,000-character file, not at its place in the joined text
        assert ev["citations"][0]["start"] == ev["spans"][0][0] - index.documents[1].start


def test_plain_output_cites_the_file_and_offsets_within_it(
    folders: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    index = Index.open(folders)
    q = ["retrieve", str(folders), "Where is the football?", "-k", "3"]
    code, out, _ = run([*q, "--json"], capsys)
    evidence = json.loads(out)["evidence"]
    code, out, _ = run(q, capsys)
    assert code == 0
    heads = [line for line in out.splitlines() if line.startswith("[")]
    assert len(heads) == len(evidence)
    for line, ev in zip(heads, evidence, strict=True):
        (c,) = ev["citations"]
        where = f"{index.documents[ev['doc']].name} chars {c['start']}-{c['end']}"
        assert line == f"[{ev['rank']}] score {ev['score']:.4g}  {where}"
        assert c["end"] <= index.documents[ev["doc"]].size  # never past the file's end
    assert all(len(line) <= 80 for line in out.splitlines())


def test_the_api_gives_the_same_citations(
    folders: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = lcr.retrieve(folders, "the grave of her mother", k=5)
    code, out, _ = run(
        ["retrieve", str(folders), "the grave of her mother", "-k", "5", "--json"], capsys
    )
    assert (
        code == 0 and [it.to_json() for it in result.evidence.items] == json.loads(out)["evidence"]
    )
    index = Index.open(folders)
    names = [d.name for d in index.documents]
    assert {it.doc for it in result.evidence.items} == {0, 2}  # a/LICENSE and c/notes.txt
    for it in result.evidence.items:
        assert it.document == names[it.doc]
        assert [(c.document, c.pages, c.section) for c in it.citations] == [
            (names[it.doc], None, ())
        ] * len(it.spans)


def test_ask_cites_the_passages_the_answer_read(
    folders: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The answer step makes new items (touching chunks merged into passages, the best
    sentences kept): those are cited, not the chunks they came from."""
    models = Models.with_objects(llm=ScriptedLLM(words=4))
    index = Index.open(folders)
    merged = lcr.ask(folders, "Where is the football?", k=6, models=models, settings={
        "answer.passages": "merged", "answer.select": "off"})  # fmt: skip
    assert merged.read is not None and any("merged" in it.extra for it in merged.read)
    assert not any("merged" in it.extra for it in merged.evidence.items)  # the chunks found
    selected = lcr.ask(folders, "Where is the football?", k=6, models=models, settings={
        "answer.select": "bm25", "answer.budget": 40})  # fmt: skip
    assert selected.read is not None
    assert any("selected_from" in it.extra for it in selected.read)
    for result in (merged, selected):
        for item in result.to_json()["evidence"]:
            _check_citations(index, item)


# ------------------------------------------------------------------ pages and sections
PAGES = 12
LABELS = ["i", "ii", *(str(n) for n in range(1, PAGES - 1))]
# (page position, level, title): a level-3 heading right under a level-1 one
HEADINGS = [(2, 1, "1 Start"), (4, 2, "1.1 Detail"), (7, 1, "2 Next"), (9, 3, "2.0.1 Deep")]
WORDS = ["aspen", "brook", "cedar", "dune", "ember", "fjord", "grove", "heath", "inlet", "jade",
         "kelp", "lagoon"]  # fmt: skip


def _page_text(n: int) -> str:
    w = WORDS[n]
    return (
        f"This page talks about the {w} at length. The {w} is described here with care. "
        f"Nothing else on the page is about the {w} or its neighbours."
    )


def _expected_path(page: int) -> list[str]:
    path: list[tuple[int, str]] = []
    for at, level, title in HEADINGS:
        if at <= page:
            path = [p for p in path if p[0] < level] + [(level, title)]
    return [title for _, title in path]


def _book(root: Path, joined: str, methods: list[str]) -> tuple[Path, list[int]]:
    """A plain file then a 12-page book (pages i, ii, 1-10; headings by page), its pages
    ``joined`` by the given text, indexed with ``methods``; the book's layout is written
    into the index as extraction would. Returns the index and each page's start."""
    shutil.copy(FIXTURES / "babi-qa2.txt", root / "first.txt")
    texts = [_page_text(n) for n in range(PAGES)]
    starts = [sum(len(t) + len(joined) for t in texts[:n]) for n in range(PAGES)]
    (root / "book.txt").write_text(joined.join(texts), encoding="utf-8")
    idx = root / "both.idx"
    args = ["index", str(root / "first.txt"), str(root / "book.txt"), "-o", str(idx), "-q"]
    with pytest.raises(SystemExit) as exc:
        main([*args, *methods])
    assert exc.value.code == 0
    layout = DocumentLayout(
        pages=tuple(Page(s, label) for s, label in zip(starts, LABELS, strict=True)),
        headings=tuple(Heading(starts[p], lv, title) for p, lv, title in HEADINGS),
    )
    write_layout(idx, [DocumentLayout(), layout])
    return idx, starts


@pytest.fixture(scope="module")
def book(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[int]]:
    """The book a paragraph a page, indexed with bm25's small chunks."""
    root = tmp_path_factory.mktemp("book")
    return _book(root, "\n\n", ["-m", "bm25", "--set", "bm25.chunk_tokens=12"])


def _page_of(starts: list[int], offset: int) -> int:
    return max(n for n, s in enumerate(starts) if s <= offset)


@pytest.mark.parametrize("page", [0, 3, 5, 10])
def test_page_n_text_is_cited_as_page_n(
    page: int, book: tuple[Path, list[int]], capsys: pytest.CaptureFixture[str]
) -> None:
    idx, _ = book
    word = WORDS[page]
    q = ["retrieve", str(idx), f"the {word}", "-k", "1"]
    code, out, err = run([*q, "--json"], capsys)
    assert code == 0, err
    (ev,) = json.loads(out)["evidence"]
    assert word in ev["text"] and ev["document"] == "book.txt"
    (c,) = ev["citations"]
    label = LABELS[page]
    assert c["pages"] == {"first": label, "last": label, "first_number": page + 1,
                          "last_number": page + 1}  # fmt: skip
    assert c["section"] == _expected_path(page)
    code, out, _ = run(q, capsys)
    (head,) = [line for line in out.splitlines() if line.startswith("[1]")]
    section = f", {_expected_path(page)[-1]}" if _expected_path(page) else ""
    assert head == f"[1] score {ev['score']:.4g}  book.txt p. {label}{section}"


def test_chunks_over_several_pages_cite_the_range(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The book as one paragraph (its layout written after the build, as a PDF's pages
    break inside paragraphs): tfidf's 128-token chunks hold about three pages each, and
    each cites exactly the pages its text lies on, counted from the pages' own offsets."""
    idx, starts = _book(tmp_path, " ", ["-m", "tfidf"])
    index = Index.open(idx)
    base = index.documents[1].start
    code, out, _ = run(["retrieve", str(idx), "cedar dune ember fjord", "-m", "tfidf", "--json",
                        "-k", "5"], capsys)  # fmt: skip
    assert code == 0
    ranges = []
    for ev in json.loads(out)["evidence"]:
        for (s, e), c in zip(ev["spans"], ev["citations"], strict=True):
            first, last = _page_of(starts, s - base), _page_of(starts, e - 1 - base)
            assert (c["pages"]["first_number"], c["pages"]["last_number"]) == (first + 1, last + 1)
            assert c["section"] == _expected_path(first)
            ranges.append((first, last))
    assert any(first < last for first, last in ranges)
    code, out, _ = run(["retrieve", str(idx), "cedar dune ember fjord", "-m", "tfidf"], capsys)
    assert re.search(r"book\.txt pp\. \w+-\w+", out)


def test_a_damaged_layout_is_one_line(
    book: tuple[Path, list[int]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    idx = tmp_path / "copy.idx"
    shutil.copytree(book[0], idx)
    (idx / "layout.json").write_text('{"version": 1, "documents": [{}]}', encoding="utf-8")
    code, out, err = run(["retrieve", str(idx), "the jade"], capsys)
    assert code == 1 and out == ""
    (line,) = err.strip().splitlines()
    assert line.startswith(
        f"lcr: {idx} is damaged: layout.json does not list one layout per source; "
        "rebuild it with: lcr index "
    )
    assert line.endswith(" --force"), line
    # found before anything is paid for: MixPR's router (mode=auto) never asks the LLM
    forbidden = Models.with_objects(llm=ForbiddenLLM())
    api.plan_and_build(Index.open(idx), ["mixpr"], forbidden)
    with pytest.raises(IndexDamagedError, match=r"layout\.json"):
        lcr.retrieve(idx, "the jade", method="mixpr", mode="auto", models=forbidden)


def test_an_index_without_layout_json_cites_without_pages(
    book: tuple[Path, list[int]], tmp_path: Path
) -> None:
    idx = tmp_path / "old.idx"
    shutil.copytree(book[0], idx)
    (idx / "layout.json").unlink()
    index = Index.open(idx)
    assert index.layouts == (DocumentLayout(), DocumentLayout())
    (item,) = lcr.retrieve(index, "the jade", k=1).evidence.items
    assert item.citations[0].pages is None and item.citations[0].section == ()


# ------------------------------------------------------------------ eval records
def test_eval_records_carry_the_citations(tmp_path: Path) -> None:
    data = tmp_path / "niah.jsonl"
    made = CliRunner().invoke(
        eval_group,
        ["generate", "niah-multikey", "--length", "2000", "--count", "1", "-o", str(data)],
    )
    assert made.exit_code == 0, made.output
    opts = runner.RunOptions(methods=["gold", "bm25"], k=2, out=tmp_path / "r.jsonl")
    outcome = runner.run(data, Models.with_objects(llm=ScriptedLLM(words=40)), opts)
    assert {r["method"] for r in outcome.records} == {"gold", "bm25"}
    (idx,) = (tmp_path / "niah.indexes").glob("*.idx")
    index = Index.open(idx)
    for rec in outcome.records:
        assert rec["evidence"]
        for ev in rec["evidence"]:
            _check_citations(index, ev)


# ------------------------------------------------------------------ items resting on others
def _pages_of(citer: Citer, spans: list[tuple[int, int]]) -> set[int]:
    out: set[int] = set()
    for c in citer.cite_spans(spans):
        assert c.pages is not None
        out.update(range(c.pages.first, c.pages.last + 1))
    return out


def test_raptor_summaries_cite_the_pages_of_their_leaves(tmp_path: Path) -> None:
    from tests.test_raptor import ScriptedLLM as SummaryLLM
    from tests.test_raptor import _models

    text = "\n\n".join(_page_text(n % PAGES) + f" Part {n}." for n in range(60))
    (tmp_path / "long.txt").write_text(text, encoding="utf-8")
    starts = [m.start() for m in re.finditer(r"This page", text)]
    index, _ = api.plan_and_index(
        [tmp_path / "long.txt"], tmp_path / "long.idx", ["raptor"], _models(SummaryLLM()),
        ["raptor.chunk_tokens=40"],
    )  # fmt: skip
    layout = DocumentLayout(pages=tuple(Page(s, f"{n + 1}") for n, s in enumerate(starts)))
    write_layout(index.path, [layout])
    index = Index.open(index.path)
    nodes = {n.id: n for n in index.reader("raptor").nodes()}
    result = lcr.retrieve(index, "the cedar and the grove", method="raptor", k=40,
                          models=_models(SummaryLLM()))  # fmt: skip
    retrieved = [it for it in result.evidence.items if it.level > 0]
    assert retrieved
    # every summary of the tree, retrieved or not, cites as an evidence item would
    everyone = [item_from_node(n, 0.0) for n in nodes.values() if n.level > 0]
    everyone = pipeline.cite(index, everyone)
    citer = Citer(index.documents, index.layouts)
    widths = []
    for item in retrieved + everyone:
        leaves = _leaves(nodes, item.id)
        leaf_spans = [sp for leaf in leaves for sp in leaf.spans]
        assert item.spans == merge_spans(leaf_spans, index.source)
        cited = {p for c in item.citations if c.pages for p in range(c.pages.first,
                                                                     c.pages.last + 1)}  # fmt: skip
        assert cited == _pages_of(citer, leaf_spans)
        widths.append(len(cited))
    assert max(widths) > 1  # summaries over leaves of several pages cite them all


def _leaves(nodes: dict[str, Any], node_id: str) -> list[Any]:
    node = nodes[node_id]
    if not node.children:
        return [node]
    return [leaf for child in node.children for leaf in _leaves(nodes, child)]


def test_pecan_points_rest_on_the_spans_of_their_leaves(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.test_pecan import _halve, _levels

    leaves = [" ".join(f"w{i}x{j}" for j in range(9)) for i in range(16)]
    graph = _levels(monkeypatch, leaves, _halve, s=40)
    by_id = {n.id: n for n in graph.nodes}
    points = [n for n in graph.nodes if n.level > 0]
    assert points
    for node in points:
        leaf_spans = [sp for leaf in _leaves(by_id, node.id) for sp in leaf.spans]
        assert node.spans == merge_spans(leaf_spans) and node.spans


def test_graphreader_facts_rest_on_their_chunks_spans(tmp_path: Path) -> None:
    from tests.test_raptor import HashEmbedder

    index = Index.create(tmp_path / "g.idx", [_doc(tmp_path)])
    models = Models.with_objects(llm=ScriptedLLM(words=60), embedder=HashEmbedder())
    api.plan_and_build(index, ["graphreader"], models, ["graphreader.chunk_tokens=200"])
    reader = index.reader("graphreader")
    chunks = reader.nodes()
    facts = reader.nodes("facts")
    assert facts
    for fact in facts:
        chunk = chunks[fact.meta["chunk"]]
        assert fact.spans == chunk.spans and fact.doc == chunk.doc


def _doc(tmp: Path) -> Any:
    import hashlib

    from lcr.store import Document

    raw = (FIXTURES / "cinderella.txt").read_bytes()
    return Document("cinderella.txt", raw.decode(), hashlib.sha256(raw).hexdigest(), len(raw))
