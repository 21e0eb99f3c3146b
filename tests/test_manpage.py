"""man/lcr.1 is generated from the CLI (lcr/cli/manpage.py) and committed; it must not drift.

The click command tree and ``lcr methods --settings --json`` are the truth: a new
option, command, method or setting changes the generated page, and the committed
page then fails here until it is regenerated with ``python -m lcr.cli.manpage -o man/lcr.1``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from lcr.cli import manpage
from lcr.cli.main import cli
from lcr.config import value_text
from lcr.methods import method_names

# lcr's own methods, whatever plugins are installed beside lcr
pytestmark = pytest.mark.usefixtures("builtin_methods")

ROOT = Path(__file__).resolve().parent.parent
MAN_PAGE = ROOT / "man" / "lcr.1"


@pytest.fixture(scope="module")
def page() -> str:
    return manpage.render()


def _plain(text: str) -> str:
    """The page with roff's escapes (``\\-``, ``\\e``, font switches) undone."""
    return re.sub(r"\\f[BIRP]", "", text.replace("\\-", "-").replace("\\e", "\\"))


def _section(text: str, title: str) -> str:
    match = re.search(rf'^\.SH "?{title}"?\n(.*?)(?=^\.SH |\Z)', text, re.MULTILINE | re.DOTALL)
    assert match, f"no {title} section"
    return match.group(1)


def test_committed_page_is_the_generated_one(page: str) -> None:
    committed = MAN_PAGE.read_text(encoding="utf-8")
    assert committed == page, (
        "man/lcr.1 is out of date with the CLI; regenerate it with: "
        "python -m lcr.cli.manpage -o man/lcr.1"
    )


def test_check_mode_reports_drift(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stale = tmp_path / "lcr.1"
    stale.write_text(MAN_PAGE.read_text(encoding="utf-8").replace("lcr index", "lcr indx", 1))
    assert manpage.main(["--check", str(stale)]) == 1
    assert "python -m lcr.cli.manpage -o man/lcr.1" in capsys.readouterr().out
    fresh = tmp_path / "fresh.1"
    assert manpage.main(["-o", str(fresh)]) == 0
    assert manpage.main(["--check", str(fresh)]) == 0


def test_every_command_has_a_section_with_its_options(page: str) -> None:
    text = _plain(page)
    commands = manpage.documented_commands()
    names = {" ".join(p) for p, _ in commands}
    assert {"index", "ask", "retrieve", "info", "methods", "models install"} <= names
    assert {"eval run", "eval prepare", "eval generate"} <= names
    for path, command in commands:
        head = f'.SS "{manpage.usage(path, command)}"'
        assert head in text, head
        body = text.split(head, 1)[1].split("\n.SS ", 1)[0]
        for param in command.params:
            for opt in param.opts:
                if opt.startswith("-") and opt != "--help" and not getattr(param, "hidden", False):
                    assert re.search(rf"(?<![\w-]){re.escape(opt)}(?![\w-])", body), (
                        f"lcr {' '.join(path)}: {opt} missing from its section"
                    )


def test_methods_each_have_a_tagged_paragraph_pointing_to_docs(page: str) -> None:
    methods = _section(page, "METHODS")
    for name in method_names():
        # a .TP before every tag: without it roff runs the name into the text before
        assert re.search(rf"^\.TP\n\\fB{re.escape(name)}\\fR\n", methods, re.MULTILINE), name
    for doc in set(re.findall(r"docs/[\w/.-]+\.md", _plain(page))):
        assert (ROOT / doc).is_file(), f"man/lcr.1 points to {doc}, which does not exist"


def test_settings_follow_the_json_of_lcr_methods(page: str) -> None:
    """Every setting of ``lcr methods --settings --json`` is on the page with its default."""
    res = CliRunner().invoke(cli, ["methods", "--settings", "--json"])
    assert res.exit_code == 0
    rows = [json.loads(line) for line in res.output.splitlines()]
    settings = _plain(_section(page, "SETTINGS"))
    for row in rows:
        for phase in ("build_settings", "query_settings"):
            for key, s in row[phase].items():
                default = value_text(s["default"])  # as --set spells it: true, not True
                assert f"{row['name']}.{key}={default}\n" in settings, (row["name"], key)
    assert "answer.not_found=abstain\n" in settings


def test_environment_is_exactly_what_the_code_reads(page: str) -> None:
    env = _section(page, "ENVIRONMENT")
    documented = set(re.findall(r"^\\fB(LCR_[A-Z_]+)\\fR$", env, re.MULTILINE))
    source = "\n".join(
        p.read_text(encoding="utf-8")
        for p in (ROOT / "lcr").rglob("*.py")
        if p.name != "manpage.py"
    )
    assert documented == set(re.findall(r"\bLCR_[A-Z_]+", source))


def test_page_structure(page: str) -> None:
    assert re.search(r'^\.TH LCR 1 "" "lcr \d', page, re.MULTILINE)
    for title in ("NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "COMMANDS", "METHODS",
                  "SETTINGS", "ENVIRONMENT", "FILES", '"EXIT STATUS"', "EXAMPLES",
                  '"SEE ALSO"'):  # fmt: skip
        assert re.search(rf"^\.SH {title}$", page, re.MULTILINE), title
    exit_status = _section(page, "EXIT STATUS")
    for code in ("0", "1", "2", "130"):
        assert re.search(rf"^\\fB{code}\\fR$", exit_status, re.MULTILINE), code
    # a text line starting with ' or . would be read by roff as a request
    requests = r"\.(?:\\\"|(?:TH|SH|SS|TP|PP|nf|fi|RS|RE|nh|ad|br)\b)"
    for line in page.splitlines():
        assert not line.startswith("'"), line
        assert not line.startswith(".") or re.match(requests, line), line


def test_the_page_reads_cleanly_in_80_columns() -> None:
    """Issue #41: troff could not break two long choice lists ("can't break line"), lines
    ran past 80 columns, booleans showed Python's True/False and an empty [], and the
    "full" method's settings section was empty."""
    import shutil
    import subprocess

    text = MAN_PAGE.read_text(encoding="utf-8")
    settings = _plain(_section(text, "SETTINGS"))
    assert not re.search(r"=(True|False)$", settings, re.MULTILINE)
    assert "[]" not in settings
    assert re.search(r'^\.SS "full"\nfull has no settings of its own\.$', text, re.MULTILINE)
    if shutil.which("groff") is None:
        pytest.skip("groff is not installed here (apt-get install groff-base)")
    done = subprocess.run(
        ["groff", "-man", "-Tutf8", "-ww", "-rLL=80n", str(MAN_PAGE)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stderr == ""
    shown = re.sub(r".\x08", "", done.stdout)  # overstrike bold and underline
    wide = [line for line in shown.splitlines() if len(line) > 80]
    assert not wide, wide
