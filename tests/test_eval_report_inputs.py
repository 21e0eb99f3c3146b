"""``lcr eval report`` on results files it did not write itself (#72 rows 11 and 12,
#73): a line with a field of the wrong type, a missing field or a byte that is not
UTF-8 is skipped with one line naming it; method names are drawn as written (no
mathtext); the page names what made the results and leaves no cell blank."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from lxml import html as lxml_html

from lcr.cli.main import cli as main_cli
from lcr.eval.records import FIELDS, record_problem


def records(methods: tuple[str, ...] = ("bm25", "tfidf")) -> list[dict[str, Any]]:
    """Three questions per method, as ``lcr eval --retrieval-only`` writes them."""
    out = []
    for m, method in enumerate(methods):
        for q in range(3):
            out.append(
                {
                    "id": f"q{q}",
                    "method": method,
                    "run": f"run{m}",
                    "task": "qa",
                    "question": f"Question {q}?",
                    "answers": ["gold"],
                    "answer": None,
                    "evidence": [{"id": 1, "doc": 0, "text": "the gold text", "document": "d"}],
                    "metrics": {"recall": (q + m) % 2 * 1.0, "evidence_tokens": 10 + q + m},
                    "models": {},
                    "retrieval_only": True,
                    "settings": {"build": {}, "query": {}},
                    "made_by": {"command": None, "commit": None, "version": "1"},
                }
            )
    return out


def write(path: Path, lines: list[bytes]) -> Path:
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


def report(*args: str) -> Any:
    return CliRunner().invoke(main_cli, ["eval", "report", *args], prog_name="lcr")


# every field the report reads, given a value of the wrong type (or left out)
BAD: list[tuple[str, Any]] = [
    ("id", ["q0"]),
    ("id", None),
    ("run", {"a": 1}),
    ("method", 5),
    ("method", None),
    ("metrics", "high"),
    ("metrics", {"recall": "1.0"}),
    ("metrics", {"recall": [1]}),
    ("question", 3),
    ("answers", "gold"),
    ("answer", 7),
    ("evidence", "text"),
    ("evidence", [5]),
    ("evidence", [{"text": 5}]),
    ("models", ["llm"]),
    ("models", {"llm": 5}),
    ("made_by", "me"),
    ("settings", "none"),
    ("settings", {"build": "none"}),
    ("index", 3),
    ("retrieval_only", "yes"),
    ("type", 2),
    ("task", ["qa"]),
]


def test_every_field_the_report_reads_is_checked() -> None:
    assert {name for name, _ in BAD} == {name for name, *_ in FIELDS}
    good = records()[0]
    assert record_problem(good) is None
    for name, value in BAD:
        assert name in str(record_problem({**good, name: value})), (name, value)
    for name in ("id", "run", "method", "metrics"):
        rest = {k: v for k, v in good.items() if k != name}
        assert record_problem(rest) == f"no field {name!r}"


@pytest.mark.parametrize(("field", "value"), BAD, ids=[f"{f}={v!r}" for f, v in BAD])
def test_a_line_with_a_wrong_field_is_skipped_naming_it(
    tmp_path: Path, field: str, value: Any
) -> None:
    recs = records()
    lines = [json.dumps(r).encode() for r in recs]
    lines.insert(2, json.dumps({**recs[2], field: value}).encode())  # line 3
    results = write(tmp_path / "r.jsonl", lines)
    page = tmp_path / "r.html"
    res = report(str(results), "-o", str(page))
    assert res.exit_code == 0, res.output
    assert "internal error" not in res.output and "Traceback" not in res.output
    warned = [line for line in res.output.splitlines() if "skipped" in line]
    assert warned == [warned[0]] and f"{results} line 3: skipped" in warned[0], res.output
    assert repr(field) in warned[0]
    assert page.exists()


def test_missing_fields_bad_bytes_and_torn_lines_are_skipped(tmp_path: Path) -> None:
    recs = records()
    lines = [json.dumps(r).encode() for r in recs]
    no_method = {k: v for k, v in recs[0].items() if k != "method"}
    lines[1] = json.dumps(no_method).encode()  # line 2
    lines[3] = json.dumps(recs[3], ensure_ascii=False).encode().replace(b"Question", b"Qu\xffst")
    bad_at = lines[3].index(b"\xff") + 1
    lines.insert(5, b'{"id": "q9", "method": ')  # line 6: torn
    lines.insert(6, b"[1, 2]")  # line 7: JSON, not an object
    results = write(tmp_path / "r.jsonl", lines)
    res = report(str(results), "-o", str(tmp_path / "r.html"))
    assert res.exit_code == 0, res.output
    said = [line for line in res.output.splitlines() if "skipped" in line]
    assert said == [
        f"lcr: warning: {results} line 2: skipped: no field 'method'",
        f"lcr: warning: {results} line 4: skipped: byte {bad_at} is not UTF-8",
        f"lcr: warning: {results} line 6: skipped: not a JSON object",
        f"lcr: warning: {results} line 7: skipped: not a JSON object",
    ], res.output
    only_bad = write(tmp_path / "bad.jsonl", [b"\xff\xfe", b"{}"])
    res = report(str(only_bad), "-o", str(tmp_path / "bad.html"))
    assert res.exit_code == 1 and res.output.splitlines()[-1].startswith("lcr: ")
    assert "holds no `lcr eval` results" in res.output and "internal error" not in res.output


def test_method_names_are_drawn_as_written_not_as_mathtext(tmp_path: Path) -> None:
    names = ("$x^$", "a$b$c", r"\$tfidf")
    results = write(tmp_path / "r.jsonl", [json.dumps(r).encode() for r in records(names)])
    page = tmp_path / "r.html"
    res = report(str(results), "-o", str(page), "--figures", str(tmp_path / "fig"))
    assert res.exit_code == 0, res.output
    tree = lxml_html.fromstring(page.read_text("utf-8"))
    drawn = {" ".join(t.text_content().split()) for t in tree.xpath("//*[local-name()='text']")}
    for name in names:
        assert name in drawn, (name, sorted(drawn))
    assert len(list((tmp_path / "fig").glob("*.png"))) >= 2


def test_page_names_no_models_and_fills_the_frontier_column(tmp_path: Path) -> None:
    # full costs more than bm25 for the same recall: off the frontier
    runs = records(("bm25", "tfidf", "full"))
    results = write(tmp_path / "r.jsonl", [json.dumps(r).encode() for r in runs])
    page = tmp_path / "r.html"
    res = report(str(results), "-o", str(page))
    assert res.exit_code == 0, res.output
    tree = lxml_html.fromstring(page.read_text("utf-8"))
    text = " ".join(tree.text_content().split())
    assert "Models: -." not in text and "Models: none recorded" in text
    for table in tree.xpath("//*[@class='chart']//table"):
        heads = [" ".join(h.text_content().split()) for h in table.xpath(".//thead//th")]
        if "on the frontier" not in heads:
            continue
        col = heads.index("on the frontier")
        cells = [tr.xpath("./th|./td")[col].text_content() for tr in table.xpath(".//tbody/tr")]
        assert sorted(cells) == ["no", "yes", "yes"], cells
