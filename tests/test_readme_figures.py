"""The figures README.md summarises equal the stamped tables and write-ups they come from
(issue 71): each figure of the methods table (and of the answer step's line in "The
manual") is read from the README and from its source, and the two must agree, so a
table that is measured again cannot leave the README's summary behind.

A table figure names its source page, a table (by a header cell), rows (by the start of
their first cell) and a column; a figure the source states in prose names the sentence
it is read from. Nothing here runs a measurement: it compares text with text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.test_results_tables import Table, tables_of

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")  # unsigned: "0.5-4.8" is a range


def _numbers(text: str) -> list[float]:
    return [float(n.replace(",", "")) for n in NUMBER.findall(text)]


def _first(cell: str) -> float:
    """A cell's figure: its first number (a mean before its interval)."""
    found = _numbers(cell.replace("**", ""))
    assert found, f"no figure in {cell!r}"
    return found[0]


def methods_table() -> dict[str, list[str]]:
    """README's "Which method for what" table: each row's cells by its method column."""
    tables = [t for t in tables_of(README.read_text(encoding="utf-8"), "README.md")]
    (table,) = [t for t in tables if t.header.startswith("| method | good at |")]
    assert table.stamp and table.stamp.startswith("Summarises the stamped tables of ")
    return {re.search(r"`(\w+)`", row[0]).group(1): row for row in table.rows}  # type: ignore[union-attr]


def _table(page: str, header_cell: str, after: str = "") -> Table:
    """The stamped table of ``page`` whose header holds ``header_cell`` (the first one
    after the heading ``after`` when given)."""
    text = (ROOT / page).read_text(encoding="utf-8")
    if after:
        heading = re.search(rf"^#+ {re.escape(after)}\s*$", text, re.M)
        assert heading, f"{page}: no heading {after!r}"
        text = "\n" * text[: heading.start()].count("\n") + text[heading.start() :]
    found = [t for t in tables_of(text, page) if header_cell in t.header and t.stamp]
    assert found, f"{page}: no stamped table with {header_cell!r} (after {after!r})"
    return found[0]


def _column(table: Table, name: str) -> int:
    headers = [c.strip() for c in table.header.strip().strip("|").split("|")]
    return headers.index(name)


def cell(page: str, header_cell: str, row: str, column: str, after: str = "") -> float:
    table = _table(page, header_cell, after)
    col = _column(table, column)
    rows = [r for r in table.rows if r[0].replace("**", "").startswith(row)]
    assert rows, f"{page}: no row {row!r} in the table of {header_cell!r}"
    return _first(rows[0][col])


def _prose(page: str, pattern: str) -> str:
    text = re.sub(r"\s+", " ", (ROOT / page).read_text(encoding="utf-8"))
    m = re.search(pattern, text)
    assert m, f"{page}: no sentence matching {pattern!r}"
    return m.group(1)


@dataclass(frozen=True)
class Figure:
    method: str  # the README row
    readme: str  # a regex over that row's cells; its groups hold the README's figure(s)
    source: tuple[float, ...]  # what the source says, in the README's units
    column: int = 0  # only this cell of the row (0: the whole row)


EVAL = "docs/evaluation.md"
SQ = "s/question"
BUILD = "index build, s/story"
SPEED = "bench/results/speed-log.md"
LIGHTPAL = "bench/results/lightpal-log.md"
PECAN = "bench/results/pecan-log.md"
GRAPHREADER = "bench/results/graphreader-log.md"
BENCH = "bench/results/bench-log.md"


def _recall(methods: tuple[str, ...]) -> tuple[float, float]:
    """The lowest and highest recall of ``methods`` over the generated tasks."""
    table = _table(EVAL, "| task | bm25 |")
    values = [_first(r[_column(table, m)]) for r in table.rows for m in methods]
    return min(values), max(values)


def _lightpal_gain() -> tuple[float, float]:
    """LightPAL's recall over its initial retriever at K = 10 and 20, in points."""
    header = "| retriever | R@5 |"
    table = _table(LIGHTPAL, header, after="ODSum Story retrieval")
    rows = {r[0]: r for r in table.rows}
    gains = []
    for base in ("bm25", "dense"):
        on = rows[f"lightpal on {base}, `d_init` (default)"]
        for k in ("R@10", "R@20"):
            col = _column(table, k)
            gains.append(100 * (_first(on[col]) - _first(rows[base][col])))
    return round(min(gains), 1), round(max(gains), 1)


def _lightpal_k100_loss() -> tuple[float, float]:
    """What the paper's k' = 100 with smollm2 loses against bm25 or dense alone, in points
    (rounded to whole points, as README gives them)."""
    header = "| retriever | R@5 |"
    table = _table(LIGHTPAL, header, after="k' = 100 candidates, the paper's setting, with smollm2")
    rows = {r[0]: r for r in table.rows}
    losses = []
    for base in ("bm25", "dense"):
        on = rows[f"lightpal on {base}, `d_init`, k' = 100"]
        for k in ("R@5", "R@10", "R@20"):
            col = _column(table, k)
            losses.append(100 * (_first(rows[base][col]) - _first(on[col])))
    return float(round(min(losses))), float(round(max(losses)))


LATER = "local question in process, later (median of 11, max)"
INDEX = "mixpr index"
AGENT_S = r"completion tokens, (\d+) s\. The agent"
LIGHTPAL_PAGE = "docs/methods/lightpal.md"


def scale(row: str, column: str) -> float:
    """MixPR's speed at 1M-10M tokens on the idle machine (issue 29's last table)."""
    return cell(BENCH, "| mixpr/bm25 | PageRank |", row, column)


def said(page: str, pattern: str) -> float:
    """The number a sentence of ``page`` states (``pattern``'s group 1)."""
    return float(_prose(page, pattern).replace(",", ""))


def said_range(page: str, pattern: str) -> tuple[float, ...]:
    return tuple(_numbers(_prose(page, pattern)))


def sq(page: str, row: str, column: str) -> float:
    """A cell of the SQuALITY answers table of ``page``."""
    return cell(
        page, "| method | token F1 |", row, column, after="SQuALITY" if page == PECAN else ""
    )


def figures() -> list[Figure]:
    builds = [sq(EVAL, m, BUILD) for m in ("tfidf", "dense", "hybrid")]
    return [
        # stamped tables
        Figure("bm25", r"4 ms \+ the answer \((\d+) s a SQuALITY", (sq(EVAL, "bm25", SQ),)),
        Figure("tfidf", r"([\d.]+-[\d.]+) s per SQuALITY story", (min(builds), max(builds))),
        Figure("full", r"one long prompt: (\d+) s", (sq(EVAL, "full text", SQ),)),
        Figure("mixpr", r"recall ([\d.]+-[\d.]+) where", _recall(("mixpr",))),
        Figure("mixpr", r"bm25 and tfidf get ([\d.]+-[\d.]+)", _recall(("bm25", "tfidf"))),
        Figure("mixpr", r"^([\d.]+) s per 1M tokens", (round(scale("1M real", INDEX), 1),), 2),
        Figure("mixpr", r"(\d+) s per 10M", (float(round(scale("10M synth", INDEX))),)),
        Figure("mixpr", r"(\d+) ms a question on 1M", (round(1000 * scale("1M real", LATER)),)),
        Figure("mixpr", r"([\d.]+) s on 10M", (round(scale("10M synth", LATER), 2),)),
        Figure("raptor", r"\((\d+) s a question on transformers", (sq(EVAL, "raptor", SQ),)),
        Figure("lightpal", r"\+([\d.]+) to \+([\d.]+) recall points", _lightpal_gain()),
        Figure("lightpal", r"(\d+)-(\d+) points less than", _lightpal_k100_loss()),
        Figure("pecan", r"about (\d+) LLM calls", (float(round(sq(PECAN, "pecan", "LLM calls"))),)),
        Figure("pecan", r"(\d+) s a SQuALITY question", (sq(PECAN, "pecan", SQ),)),
        # sentences of the logs and pages
        Figure(
            "bm25", r"^(\d+) s per 1M tokens", (said(SPEED, r"bm25` on 1M tokens: (\d+) s"),), 2
        ),
        Figure("raptor", r"(\d+) s per 6.5k-token", (said(SPEED, r"built in (\d+) s with llama"),)),
        Figure("raptor", r"(\d+-\d+) min on", said_range(EVAL, r"(\d+-\d+) minutes of summaries")),
        Figure(
            "graphreader", r"~(\d+) min per 10k", (said(GRAPHREADER, r"tokens, (\d+) minutes"),)
        ),
        Figure("graphreader", r"(\d+) LLM calls", (said(GRAPHREADER, r"Query: (\d+) LLM calls"),)),
        Figure("graphreader", r"(\d+) min a BABILong", (round(said(GRAPHREADER, AGENT_S) / 60),)),
        Figure(
            "lightpal", r"(\d+) min for 222", (int(said(LIGHTPAL, r"in ([\d.]+) min \(0\.81")),)
        ),
        Figure(
            "lightpal",
            r"(\d+) min at the paper's",
            (round(said(LIGHTPAL, r"resumed run in ([\d.]+) min")),),
        ),
        Figure(
            "lightpal", r"estimated (\d+) h", (said(LIGHTPAL, r"sections is (\d+) h with qwen"),)
        ),
        Figure(
            "lightpal", r"([\d.]+) ms for the walk", (said(LIGHTPAL_PAGE, r"takes ([\d.]+) ms \("),)
        ),
        Figure(
            "pecan", r"([\d,]+-[\d,]+) s per story", said_range(PECAN, r"Build cost: ([\d,-]+) s")
        ),
    ]


def test_each_figure_of_the_methods_table_equals_its_source() -> None:
    rows = methods_table()
    wrong = []
    for f in figures():
        text = rows[f.method][f.column] if f.column else " | ".join(rows[f.method][1:])
        m = re.search(f.readme, text)
        assert m, f"README's {f.method} row: no figure matching {f.readme!r}"
        readme = tuple(v for g in m.groups() for v in _numbers(g))
        if readme != f.source:
            wrong.append(f"{f.method}: README {m.group(0)!r} {readme}, its source {f.source}")
    assert not wrong, "\n".join(wrong)


def test_the_summary_names_every_source() -> None:
    stamp = _table_stamp()
    for page in (EVAL, SPEED, LIGHTPAL, PECAN, GRAPHREADER, BENCH):
        assert f"]({page})" in stamp, f"README's summary line does not name {page}"


def _table_stamp() -> str:
    tables = tables_of(README.read_text(encoding="utf-8"), "README.md")
    (table,) = [t for t in tables if t.header.startswith("| method | good at |")]
    assert table.stamp
    return table.stamp


def _linked_section(link: str) -> str:
    """The text under the heading a README link points at, down to the next heading of
    the same or a higher level."""
    page, _, anchor = link.partition("#")
    from tests.test_docs import _slug

    lines = (ROOT / page).read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"^(#+)\s+(.*?)\s*$", line)
        if m and _slug(m.group(2)) == anchor:
            level = len(m.group(1))
            end = next(
                (j for j in range(i + 1, len(lines)) if re.match(rf"^#{{1,{level}}}\s", lines[j])),
                len(lines),
            )
            return "\n".join(lines[i:end])
    raise AssertionError(f"{page} has no heading #{anchor}")


@pytest.mark.parametrize(
    ("figure", "link_text", "in_source"),
    [
        ('(94%) "not found" on held-out unanswerable HotpotQA', "figures", r"0\.937\b|\b94%"),
        ("(92%) from 22 manuals", "figures", r"= 0\.92\b|\b92%"),
        ("F1 (0.368) against", "figures", r"\b0\.368\b"),
        ("against (0.491) held out", "figures", r"\b0\.491\b"),
    ],
)
def test_the_answer_steps_figures_are_in_the_sections_linked(
    figure: str, link_text: str, in_source: str
) -> None:
    """README's answer-step line: each figure sits in the section its next link opens."""
    text = re.sub(r"\s+", " ", README.read_text(encoding="utf-8"))
    m = re.search(re.escape(figure).replace(r"\(", "(").replace(r"\)", ")"), text)
    assert m, f"README no longer says {figure!r}"
    link = re.search(rf"\[{link_text}\]\(([^)]+)\)", text[m.end() :])
    assert link, f"no [{link_text}](...) after {figure!r} in README"
    section = _linked_section(link.group(1))
    assert re.search(in_source, section), f"{m.group(0)!r}: not in {link.group(1)}"
