"""``lcr eval report`` and ``lcr eval --report``: the page built from real runs (HotpotQA
dev from ../shared/data, a generated Hash-Hop set), its numbers held against the table
``lcr eval`` prints, and the page opened in a real headless browser (Chromium)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from lxml import html as lxml_html

from lcr._version import source_commit
from lcr.cli.eval import eval_group
from lcr.cli.main import cli as main_cli
from lcr.eval.report import Difference, _holm, distinct_runs, frontier
from tests.browser import CHROMIUM, NO_CHROMIUM, open_pages
from tests.conftest import REPO, SHARED_DATA, needs_shared_data

HOTPOT = SHARED_DATA / "hotpotqa" / "dev.jsonl"
QUESTIONS = 12  # the first 12 dev questions: bridge and comparison both among them
# Screenshots of the pages the browser drew, kept for a person to look at.
ARTIFACTS = Path(os.environ.get("LCR_TEST_ARTIFACTS", REPO / "test-artifacts"))


def lcr(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m lcr ARGS`` as a user types it (the command is recorded as typed)."""
    env = {**os.environ, "COLUMNS": "400"}  # the printed table unwrapped, one cell a column
    return subprocess.run(
        [sys.executable, "-m", "lcr", *args], capture_output=True, text=True, env=env, timeout=600
    )


@pytest.fixture(scope="module")
def hotpot(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """bm25 and tfidf on 12 HotpotQA dev questions, retrieval only, with --report and
    --figures at the end of the run; its printed table."""
    if not HOTPOT.exists():
        pytest.skip(f"no HotpotQA dev set at {HOTPOT}")
    work = tmp_path_factory.mktemp("hotpot")
    args = [str(HOTPOT), "-m", "bm25", "-m", "tfidf", "--retrieval-only", "-k", "3"]
    args += ["--limit", str(QUESTIONS), "--out", str(work / "dev.results.jsonl")]
    args += ["--index-dir", str(work / "dev.indexes"), "--report", str(work / "dev.html")]
    args += ["--figures", str(work / "figures")]
    run = lcr("eval", *args)
    assert run.returncode == 0, run.stderr
    return {"work": work, "stdout": run.stdout, "args": args}


@pytest.fixture(scope="module")
def hashhop(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A generated Hash-Hop set (6 questions of 2,000 tokens), bm25 and tfidf, retrieval
    only, its report made afterwards by ``lcr eval report`` from the results file."""
    work = tmp_path_factory.mktemp("hashhop")
    data = work / "hh.jsonl"
    cli = CliRunner()
    gen = ["generate", "hashhop", "--length", "2000", "--count", "6", "--hops", "2"]
    res = cli.invoke(eval_group, [*gen, "-o", str(data), "-q"])
    assert res.exit_code == 0, res.output
    res = cli.invoke(eval_group, [str(data), "-m", "bm25", "-m", "tfidf", "--retrieval-only", "-q"])
    assert res.exit_code == 0, res.output
    res = cli.invoke(eval_group, ["report", str(work / "hh.results.jsonl"), "-q"])
    assert res.exit_code == 0, res.output
    return work / "hh.results.html"


def printed_tables(stdout: str) -> dict[str, dict[str, list[str]]]:
    """rich's printed tables, by title: first cell -> the other cells, each cell's
    wrapped lines joined by a space."""
    tables: dict[str, dict[str, list[str]]] = {}
    title, rows, current = "", {}, None
    for line in stdout.splitlines():
        stripped = line.strip()
        if stripped.startswith("│"):
            cells = [c.strip() for c in stripped.strip("│").split("│")]
            if cells[0]:
                current = cells[0]
                rows[current] = cells[1:]
            elif current is not None:
                joined = zip(rows[current], cells[1:], strict=True)
                rows[current] = [f"{a} {b}".strip() for a, b in joined]
        elif stripped.startswith("└"):
            tables[title] = rows
            rows, current = {}, None
        elif stripped and stripped[0] not in "┏┃┡┗━":
            title = stripped
    return tables


def page_rows(page: Any, selector: str) -> dict[str, list[str]]:
    table = page.xpath(selector)[0]
    out = {}
    for tr in table.xpath(".//tbody/tr"):
        cells = [" ".join(c.text_content().split()) for c in tr]
        out[cells[0]] = cells[1:]
    return out


@needs_shared_data
def test_page_numbers_equal_the_printed_table(hotpot: dict[str, Any]) -> None:
    printed = printed_tables(hotpot["stdout"])
    page = lxml_html.fromstring((hotpot["work"] / "dev.html").read_text("utf-8"))

    means = printed["lcr eval: mean [95% bootstrap interval]"]
    assert set(means) == {"bm25", "tfidf"}
    assert page_rows(page, "//*[@id='summary']//table") == means
    assert means["bm25"][0] == str(QUESTIONS)

    paired = printed["paired bootstrap: bm25 - tfidf"]
    shown = {}  # recall in the chart's table, evidence tokens in the one below
    for table in range(len(page.xpath("//*[@id='paired']//table"))):
        rows = page_rows(page, f"(//*[@id='paired']//table)[{table + 1}]")
        shown.update({row[0]: [row[1], row[2], row[3], row[5]] for row in rows.values()})
    assert set(shown) == {"recall", "ev. tokens"}
    for metric, cells in shown.items():
        assert cells == paired[metric]

    builds = printed["index builds: mean per index"]
    assert page_rows(page, "//*[@id='chart-build-cost']//table") == builds


@needs_shared_data
def test_page_names_the_command_commit_and_question_types(hotpot: dict[str, Any]) -> None:
    text = (hotpot["work"] / "dev.html").read_text("utf-8")
    page = lxml_html.fromstring(text)
    made = page_rows(page, "//*[@id='provenance']//table")
    command = " ".join(["lcr", "eval", *hotpot["args"]])
    assert list(made) == [command]
    commit = source_commit()
    assert made[command][0] == (commit or "unknown")
    types = page_rows(page, "//*[@id='types']//table")
    assert {t.split(" ")[0] for t in types} == {"bridge", "comparison"}
    counts = sum(int(t.split("n=")[1].rstrip(")")) for t in types)
    assert counts == QUESTIONS
    # the questions where recall differs, each method's evidence a click away
    rows = page.xpath("//*[@id='disagree']//tbody/tr")
    assert rows and all(len(r.xpath(".//details")) == 2 for r in rows)
    # many charts on one page: every id once, every reference inside an SVG resolved
    ids = re.findall(r'\bid="([^"]+)"', text)
    assert len(ids) == len(set(ids))
    refs = set(re.findall(r'href="#([^"]+)"', text)) | set(re.findall(r"url\(#([^)]+)\)", text))
    assert refs and refs <= set(ids)
    # and the figures for a paper: every chart as PNG and SVG
    figures = sorted(p.name for p in (hotpot["work"] / "figures").iterdir())
    charts = [c.get("id").removeprefix("chart-") for c in page.xpath("//*[@class='chart']")]
    assert figures == sorted(f"{c}.{s}" for c in charts for s in ("png", "svg"))
    png = (hotpot["work"] / "figures" / f"{charts[0]}.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 10_000


# Each chart: the points it says it drew, and those the browser drew with a size.
COUNT_POINTS = """JSON.stringify([...document.querySelectorAll('.chart')].map(c => {
  const name = c.id.slice('chart-'.length);
  const drawn = [...c.querySelectorAll('svg [id^="pt-' + name + '-"]')].filter(e => {
    const box = e.getBBox(); return box.width > 0 && box.height > 0; });
  return {name: name, points: +c.dataset.points, drawn: drawn.length,
          rows: c.querySelectorAll('.numbers tbody tr').length};
}))"""


@needs_shared_data
@pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)
def test_pages_open_offline_in_a_real_browser(
    hotpot: dict[str, Any], hashhop: Path, tmp_path: Path
) -> None:
    # the harness itself sees a request and a console error where a page makes them
    control = tmp_path / "control.html"
    control.write_text(
        "<html><body><img src='http://192.0.2.1/x.png'>"
        "<script>console.error('seen')</script></body></html>"
    )
    pages = [hotpot["work"] / "dev.html", hashhop, control]
    visits = open_pages(pages, COUNT_POINTS)
    assert "http://192.0.2.1/x.png" in visits[2].requests
    assert any(m["level"] == "error" and m["text"] == "seen" for m in visits[2].console)

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for page, visit, name in zip(pages, visits[:2], ("hotpotqa", "hashhop"), strict=False):
        (ARTIFACTS / f"eval-report-{name}.png").write_bytes(visit.screenshot)
        assert visit.requests == [page.resolve().as_uri()]  # the page itself, nothing else
        assert not visit.errors
        assert not [m for m in visit.console if m["level"] in ("error", "warning")]
        charts = {c["name"]: c for c in json.loads(visit.value)}
        assert charts, "no chart on the page"
        for chart in charts.values():
            assert chart["drawn"] == chart["points"] > 0, chart
        # two methods: a point each on every quality-cost chart, one pair of them
        for name_, chart in charts.items():
            if name_.startswith("quality-vs-"):
                assert chart["drawn"] == 2 == chart["rows"]
        assert charts["paired-differences"]["drawn"] == 1
        assert len(visit.screenshot) > 20_000
    hotpot_charts = {c["name"]: c for c in json.loads(visits[0].value)}
    assert hotpot_charts["by-question-type"]["drawn"] == 4  # bridge and comparison, 2 methods
    assert hotpot_charts["build-cost"]["drawn"] == 2
    # retrieval only: no LLM tokens or calls to chart, evidence tokens and seconds are
    assert {n for n in hotpot_charts if n.startswith("quality-vs-")} == {
        "quality-vs-evidence_tokens",
        "quality-vs-wall_s",
    }


def test_report_errors_are_one_line_and_write_nothing(hashhop: Path, tmp_path: Path) -> None:
    results = str(hashhop.with_name("hh.results.jsonl"))
    # run in this process (not from lcr's command line): no command is made up for it
    lines = Path(results).read_text("utf-8").splitlines()
    assert {json.loads(line)["made_by"]["command"] for line in lines} == {None}
    page = tmp_path / "r.html"
    cli = CliRunner()

    def report(*args: str) -> Any:
        return cli.invoke(main_cli, ["eval", "report", *args], prog_name="lcr")

    cases = [
        (["--price", "1"], "two numbers"),
        (["--price", "a,b"], "two numbers"),
        (["--cost", "usd"], "needs --price"),
        (["--quality", "f1"], "no 'f1' to chart"),  # retrieval only: nothing answered
    ]
    for extra, message in cases:
        res = report(results, "-o", str(page), *extra)
        assert res.exit_code == 2, (extra, res.output)
        assert message in res.output and "Traceback" not in res.output
        assert not page.exists()
    res = report(results, "-o", str(tmp_path / "nowhere" / "r.html"))
    assert res.exit_code == 2 and "no folder" in res.output
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    for missing in (str(tmp_path / "none.jsonl"), str(empty)):
        res = report(missing, "-o", str(page))
        assert res.exit_code == 1 and "Traceback" not in res.output
        assert res.output.startswith("lcr: ") and res.output.count("\n") == 1
        assert not page.exists()
    # dollars at a price: retrieval spends no LLM tokens, so every method costs $0
    note = "Hash-Hop <generated> & no licence"
    res = report(results, "-o", str(page), "--price", "0.15,0.6", "--cost", "usd", "--note", note)
    assert res.exit_code == 0, res.output
    tree = lxml_html.fromstring(page.read_text("utf-8"))
    assert tree.xpath("//p[@class='note']")[0].text_content() == note  # escaped, shown as is
    first = tree.xpath("//*[@class='chart']")[0]
    assert first.get("id") == "chart-quality-vs-usd"
    assert {r[0] for r in page_rows(tree, "//*[@id='chart-quality-vs-usd']//table").values()} == {
        "0.000 [0.000, 0.000]"
    }


def test_frontier_and_holm_by_hand() -> None:
    # cheapest first; c costs more than b and is no better: off the frontier
    points = {"a": (1.0, 0.2), "b": (2.0, 0.5), "c": (3.0, 0.4), "d": (4.0, 0.9)}
    assert frontier(points) == ["a", "b", "d"]
    tests = [
        Difference("x", "y", "f1", {"p_value": p}) for p in (0.01, 0.04, 0.03)
    ]  # Holm: sorted 0.01*3, 0.03*2, max(0.06, 0.04*1)
    assert [round(d.holm, 6) for d in _holm(tests)] == [0.03, 0.06, 0.06]


def test_one_method_with_two_settings_is_two_rows() -> None:
    """bm25 run at two -k into one results file: neither hides the other; a record
    written twice (a file given twice) counts once."""
    rec = {"id": "q1", "method": "bm25", "run": "aaaaaaaa11", "metrics": {"recall": 1.0}}
    other = {**rec, "run": "bbbbbbbb22", "metrics": {"recall": 0.0}}
    tfidf = {**rec, "method": "tfidf", "run": "cccccc"}
    rows = distinct_runs([rec, other, tfidf, dict(rec)])
    assert sorted(r["method"] for r in rows) == ["bm25 [aaaaaa]", "bm25 [bbbbbb]", "tfidf"]


@pytest.mark.slow
@needs_shared_data
def test_real_model_answers_report_f1_and_the_found_split(tmp_path: Path) -> None:
    """The answered path with the real small model: F1 against LLM tokens, the
    found / not-found split drawn from the answers."""
    out = tmp_path / "a.results.jsonl"
    args = [str(HOTPOT), "-m", "bm25", "-m", "tfidf", "-k", "2", "--limit", "2"]
    args += ["--llm", "smollm2-135m", "--device", "cpu", "--max-new-tokens", "8"]
    args += ["--out", str(out), "--index-dir", str(tmp_path / "idx")]
    args += ["--report", str(tmp_path / "a.html"), "-q"]
    run = lcr("eval", *args)
    assert run.returncode == 0, run.stderr
    tree = lxml_html.fromstring((tmp_path / "a.html").read_text("utf-8"))
    charts = {c.get("id"): int(c.get("data-points")) for c in tree.xpath("//*[@class='chart']")}
    assert charts["chart-quality-vs-prompt_tokens"] == 2
    assert charts["chart-quality-vs-llm_calls"] == 2
    assert "chart-answer-found-split" in charts
    records = [json.loads(line) for line in out.read_text().splitlines()]
    found = {r["metrics"]["answer_found"] for r in records}
    assert charts["chart-answer-found-split"] == 2 * len(found)  # each method, each half
    assert "F1" in tree.xpath("//*[@id='quality-cost']//figcaption")[0].text_content()
    printed = printed_tables(run.stdout)  # the answered tables too, cell for cell
    title = "found but not read: accuracy by whether a gold answer is in the evidence read"
    assert page_rows(tree, "//*[@id='chart-answer-found-split']//table") == printed[title]
    means = printed["lcr eval: mean [95% bootstrap interval]"]
    assert page_rows(tree, "//*[@id='summary']//table") == means
    assert all(r["answers"] and r["made_by"]["command"] for r in records)
