"""Every results table in the docs names the commit and the command that made it, and
that command still runs as written, so a stale table can be found (issue 42).

The stamp is the first line after the table (a blank line between):

    Made at commit `abc1234` with `lcr eval data.jsonl -m bm25 --retrieval-only`.

The code span after "with" is the command; more follow " then " (run one after the
other); a note in brackets may follow. The commit is the one whose code made the
figures; a table whose commit git cannot tell says ``commit unknown (why)`` instead.
``grep -rn "^Made at commit"`` lists them all.

A table kept as history whose command has since changed says so: ``Made at commit
`abc1234` with `CMD`, which no longer runs (why).``; then CMD must indeed fail the
check, so the wording cannot outlive the reason. A table measured by hand says
``with no recorded command (how it was measured)``. A table that only gathers
figures of other tables (README's method table) says instead ``Summarises the
stamped tables of [page](link), ...``: each page linked must hold stamped tables.

A results table is one where some column other than the first holds a measured figure
(a decimal, a time, a rate, a size, a percentage) in at least half its rows. A stamp's
command is checked the way it would run: ``lcr ...`` (or ``python -m lcr``) is parsed by
click with every option, value and ``--set`` key (tests/test_docs.py's check); a script
(``bench/x.py``, ``bench/eval_results/run.sh``) must exist, and each option it is given
must be one its argparse parser declares.
"""

from __future__ import annotations

import ast
import re
import shlex
import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import click
import pytest

from tests.test_docs import check

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted(
    [
        ROOT / "README.md",
        *(ROOT / "docs").glob("*.md"),
        *(ROOT / "docs" / "methods").glob("*.md"),
        ROOT / "bench" / "README.md",
        *(ROOT / "bench" / "results").glob("*.md"),
        ROOT / "bench" / "archive" / "README.md",
    ]
)
SEPARATOR_ROW = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")
STAMP = re.compile(r"^Made at commit (`(?P<commit>[0-9a-f]{7,40})`|unknown \((?P<why>[^)]+)\))")
SUMMARY = "Summarises the stamped tables of "
MEASURED = re.compile(
    r"(?<![\w.])\d[\d,]*(\.\d+)?\s?(s|ms|min|h|%|x|KiB|MiB|GiB|KB|MB|GB|[a-z]+/s)(?!\w)"
    r"|(?<![\w.])(?<![A-Za-z] )\d*\.\d+(?![\w.])"
    r"|±"
)
ENV_WORD = re.compile(r"^[A-Z_][A-Z0-9_]*=")
PYTHONS = re.compile(r"^(\S*/)?python3?$")
WRAPPERS = {"nice": 2, "timeout": 1, "flock": 1}  # the words each takes before the command
STALE = ", which no longer runs"
UNRECORDED = "with no recorded command ("


@dataclass(frozen=True)
class Table:
    page: str
    line: int  # 1-based, the header row
    header: str
    rows: list[list[str]]
    stamp: str | None  # the stamp line, if the table has one


def _cells(row: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", row.strip().strip("|"))]


def tables_of(text: str, page: str) -> list[Table]:
    """The Markdown tables of a page outside code fences, each with its stamp line."""
    lines = text.splitlines()
    out: list[Table] = []
    fence: str | None = None
    i = 0
    while i < len(lines):
        stripped = lines[i].strip()
        marker = re.match(r"^(```+|~~~+)", stripped)
        if marker and (fence is None or stripped.startswith(fence)):
            fence = None if fence else marker.group(1)
        elif (
            fence is None
            and "|" in stripped
            and i + 1 < len(lines)
            and SEPARATOR_ROW.match(lines[i + 1])
        ):
            end = i + 2
            while end < len(lines) and lines[end].strip().startswith("|"):
                end += 1
            after = next((x.strip() for x in lines[end:] if x.strip()), "")
            rows = [_cells(x) for x in lines[i + 2 : end]]
            stamp = after if after.startswith(("Made at commit", SUMMARY)) else None
            out.append(Table(page, i + 1, stripped, rows, stamp))
            i = end
            continue
        i += 1
    return out


def is_results(table: Table) -> bool:
    """Some column but the first holds a measured figure in at least half its rows."""
    width = max((len(r) for r in table.rows), default=0)
    for col in range(1, width):
        cells = [r[col] for r in table.rows if col < len(r)]
        if cells and 2 * sum(bool(MEASURED.search(c)) for c in cells) >= len(cells):
            return True
    return False


def stamp_commands(stamp: str) -> list[str]:
    """The commands a stamp names: the code span after " with " and each after " then "
    (code spans in a note after them are not commands)."""
    return re.findall(r"(?: with | then )`([^`]+)`", stamp)


@cache
def _script_options(path: Path) -> frozenset[str]:
    """The option strings a script's argparse parser declares (read from its source)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    options = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "add_argument"
        ):
            for arg in node.args:
                if isinstance(arg, ast.Constant) and str(arg.value).startswith("-"):
                    options.add(str(arg.value))
    return frozenset(options | {"-h", "--help"})


def _check_script(path: Path, args: list[str]) -> None:
    if not path.is_file():
        raise click.UsageError(f"no script {path.relative_to(ROOT)}")
    if path.suffix != ".py":
        return  # a shell script: its arguments are positional
    known = _script_options(path)
    if "--" in args:  # what follows a bare -- is passed on, not the script's own
        args = args[: args.index("--")]
    for word in args:
        if word.startswith("-") and not re.match(r"^-\d", word):
            option = word.split("=", 1)[0]
            if option not in known:
                raise click.UsageError(f"{path.relative_to(ROOT)} has no option {option}")


def check_command(command: str) -> None:
    """Raise click's UsageError if ``command`` names a command, script or option that
    does not exist (``lcr ...``, ``python -m lcr ...``, ``python SCRIPT ...``, ``SCRIPT ...``)."""
    words = shlex.split(command)
    while words:  # what runs the command: VAR=value, env, nice, timeout, flock, time
        head = words[0]
        if ENV_WORD.match(head) or head == "env":
            words = words[1:]
        elif head in WRAPPERS:
            words = words[1 + WRAPPERS[head] :]
        elif head in ("time", "/usr/bin/time"):
            words = words[1:]
            while words and words[0] in ("-v", "-p", "-f", "--format"):  # -f takes a format
                words = words[2:] if words[0] in ("-f", "--format") else words[1:]
        else:
            break
    if not words:
        raise click.UsageError(f"no command in {command!r}")
    program, args = words[0], words[1:]
    if program == "lcr" or program.endswith("/lcr"):
        check(args, complete=True)
    elif PYTHONS.match(program) and args[:2] == ["-m", "lcr"]:
        check(args[2:], complete=True)
    elif PYTHONS.match(program) and args:
        _check_script(ROOT / args[0], args[1:])
    elif "/" in program:
        _check_script(ROOT / program, args)
    else:
        raise click.UsageError(f"{program!r} is neither lcr, python nor a script of the project")


def all_tables() -> list[Table]:
    return [t for p in PAGES for t in tables_of(p.read_text(encoding="utf-8"), _rel(p))]


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


TABLES = all_tables()
STAMPED = [t for t in TABLES if t.stamp]


# ------------------------------------------------------------------ the checker itself
SAMPLE = """Intro.

| method | recall | s/question |
|---|---:|---:|
| bm25 | 0.50 | 0.012 |

Made at commit `fb0e7cf` with `lcr eval a.jsonl -m bm25 --retrieval-only` then {script} (`x`).

| setting | default | what it does |
|---|---|---|
| `k` | 10 | how many |

```
| not | a table |
|---|---|
```
""".format(script="`bench/eval_results/run.sh /tmp/x`")


def test_the_checker_finds_tables_stamps_and_commands() -> None:
    results, reference = tables_of(SAMPLE, "sample.md")
    assert (results.line, reference.line) == (3, 9) and len(tables_of(SAMPLE, "s")) == 2
    assert is_results(results) and not is_results(reference)
    assert results.stamp and STAMP.match(results.stamp) and reference.stamp is None
    assert stamp_commands(results.stamp) == [
        "lcr eval a.jsonl -m bm25 --retrieval-only",
        "bench/eval_results/run.sh /tmp/x",
    ]
    for command in stamp_commands(results.stamp):
        check_command(command)


@pytest.mark.parametrize(
    "command",
    [
        "lcr eval a.jsonl -m bm25 --retrieval-onyl",  # a misspelt option
        "lcr eval a.jsonl -m bm25 --set bm25.no_such=1",  # no such setting
        "lcr evaluate a.jsonl",  # no such command
        "bench/eval_results/gone.sh /tmp/x",  # no such script
        "python bench/archive/bench_raptor.py --no-such-option 3",  # not an option of its parser
        "make results",  # not a command of the project
        "flock /tmp/x.lock env A=1 python bench/archive/bench_raptor.py --bogus",  # behind wrappers
    ],
)
def test_a_stale_command_is_caught(command: str) -> None:
    with pytest.raises(click.UsageError):
        check_command(command)


# ------------------------------------------------------------------ the docs
def test_tables_are_found() -> None:
    pages = {t.page for t in TABLES if is_results(t)}
    logs = {"bench/results/bench-log.md", "bench/results/eval_results.md"}
    assert {"docs/evaluation.md", *logs} <= pages
    assert sum(is_results(t) for t in TABLES) > 40


def test_every_results_table_is_stamped() -> None:
    missing = [
        f"{t.page}:{t.line} {t.header[:60]}" for t in TABLES if is_results(t) and not t.stamp
    ]
    assert not missing, "results tables without a 'Made at commit' line:\n" + "\n".join(missing)


@pytest.mark.parametrize("table", STAMPED, ids=[f"{t.page}:{t.line}" for t in STAMPED])
def test_stamp_names_a_commit_and_a_command_that_still_runs(table: Table) -> None:
    assert table.stamp is not None
    if table.stamp.startswith(SUMMARY):
        links = re.findall(r"\]\(([^)#]+)", table.stamp)
        assert links, f"{table.page}:{table.line}: the summary links no page"
        for link in links:
            page = (ROOT / table.page).parent / link
            stamped = [t for t in tables_of(page.read_text(encoding="utf-8"), link) if t.stamp]
            assert stamped, f"{table.page}:{table.line}: {link} has no stamped table"
        return
    stamp = STAMP.match(table.stamp)
    assert stamp, f"{table.page}:{table.line}: not a stamp: {table.stamp}"
    commit = stamp.group("commit")
    if commit and (ROOT / ".git").exists():
        known = subprocess.run(
            ["git", "-C", str(ROOT), "cat-file", "-e", f"{commit}^{{commit}}"], check=False
        )
        assert known.returncode == 0, f"{table.page}:{table.line}: no commit {commit}"
    commands = stamp_commands(table.stamp)
    if UNRECORDED in table.stamp:
        return  # said plainly: the figures were taken by hand or by a script since gone
    assert commands, f"{table.page}:{table.line}: the stamp names no command"
    for command in commands:
        if STALE in table.stamp:  # history: the command must indeed no longer run
            with pytest.raises(click.UsageError):
                check_command(command)
            continue
        try:
            check_command(command)
        except click.UsageError as exc:
            pytest.fail(f"{table.page}:{table.line}: `{command}`: {exc.format_message()}")
