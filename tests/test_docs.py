"""README.md and docs/ stay true: every relative link and anchor resolves, and every
``lcr ...`` command line they show is one the CLI accepts.

Commands are taken from fenced code blocks (``sh``/``console`` blocks and unlabelled
ones) and from inline code spans starting with ``lcr ``; each is parsed by click
exactly as ``lcr`` would parse it (commands, options, option values, arguments), and
each ``--set METHOD.KEY=VALUE`` must name a setting that ``lcr methods --settings
--json`` lists. Inline spans may leave arguments out (``lcr ask`` in prose); fenced
commands must be complete. Synopses with ``[optional]`` parts are not commands.
"""

from __future__ import annotations

import json
import re
import shlex
from functools import cache
from itertools import pairwise
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from lcr.cli.main import cli

# lcr's own methods, whatever plugins are installed beside lcr
pytestmark = pytest.mark.usefixtures("builtin_methods")

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
# bench/'s pages (its index, the archive's, the measurement logs): links only, as their
# commands are the stamps' (tests/test_results_tables.py checks those)
BENCH_PAGES = sorted((ROOT / "bench").rglob("*.md"))
FENCE = re.compile(r"^(```+|~~~+)(.*)$")
SHELL_BLOCKS = {"", "sh", "bash", "shell", "console"}  # "": prompts only
SEPARATORS = {"|", "||", "&&", ";", "&", "(", ")"}
REDIRECTS = re.compile(r"^\d?[<>]|^<|^>")


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _split(text: str) -> tuple[list[str], list[tuple[str, str]]]:
    """A page's prose lines (fenced code blanked out) and its fenced blocks (info, body)."""
    prose: list[str] = []
    blocks: list[tuple[str, str]] = []
    fence: str | None = None
    info = ""
    body: list[str] = []
    for line in text.splitlines():
        m = FENCE.match(line.strip())
        if fence is None and m:
            fence, info, body = m.group(1), m.group(2).strip(), []
            prose.append("")
        elif fence is not None and line.strip().startswith(fence):
            blocks.append((info, "\n".join(body)))
            fence = None
            prose.append("")
        elif fence is not None:
            body.append(line)
            prose.append("")
        else:
            prose.append(line)
    return prose, blocks


# ------------------------------------------------------------------ links
def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`|\*|_(?=\W)|(?<=\W)_", "", heading.strip().lower())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


@cache
def _anchors(path: Path) -> frozenset[str]:
    prose, _ = _split(path.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    out = set()
    for line in prose:
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = _slug(m.group(1))
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return frozenset(out)


def _links(path: Path) -> list[str]:
    prose, _ = _split(path.read_text(encoding="utf-8"))
    text = re.sub(r"`[^`\n]*`", "", "\n".join(prose))  # no links inside code spans
    return re.findall(r"\]\(([^)\s]+)\)", text)


def test_slugs_follow_github() -> None:
    assert _slug("PECAN (`bench_pecan.py`)") == "pecan-bench_pecanpy"
    assert _slug("BABILong with the default 1.5B model") == "babilong-with-the-default-15b-model"
    assert _slug("Backends in brief") == "backends-in-brief"


@pytest.mark.parametrize("page", PAGES + BENCH_PAGES, ids=_rel)
def test_relative_links_and_anchors_resolve(page: Path) -> None:
    broken = []
    for target in _links(page):
        if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        dest = (page.parent / file_part).resolve() if file_part else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor:
            if dest.suffix != ".md":
                broken.append(f"{target}: an anchor into a file that is not Markdown")
            elif anchor not in _anchors(dest):
                broken.append(f"{target}: {_rel(dest)} has no heading #{anchor}")
    assert not broken, f"{_rel(page)}: " + "; ".join(broken)


def test_the_manual_has_its_pages() -> None:
    for name in ("mixpr", "raptor", "graphreader", "lightpal", "pecan", "baselines"):
        assert (ROOT / "docs" / "methods" / f"{name}.md").is_file(), name
    for name in ("answer-step", "evaluation", "backends", "speed"):
        assert (ROOT / "docs" / f"{name}.md").is_file(), name


def test_readme_stays_short() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= 300, f"README.md has {lines} lines; the manual is docs/"


# ------------------------------------------------------------------ commands
def _lcr_segments(words: list[str]) -> list[tuple[list[str], bool]]:
    """The ``lcr`` invocations in a shell command's words, each cut at the first shell
    operator, redirection or comment; and whether it is complete (under ``xargs`` the
    arguments come from its input)."""
    out: list[tuple[list[str], bool]] = []
    before: list[str] = []  # the words of this pipeline stage before lcr
    current: list[str] | None = None
    for w in words:
        if w in SEPARATORS or w.startswith("#") or REDIRECTS.match(w):
            if current is not None:
                out.append((current, "xargs" not in before))
            current, before = None, []
            if w.startswith("#"):
                break
            continue
        if current is None and (w == "lcr" or w.endswith("/lcr")):
            current = []
        elif current is not None:
            current.append(w)
        else:
            before.append(w)
    if current is not None:
        out.append((current, "xargs" not in before))
    return out


def _shell_lines(body: str, prompts_only: bool) -> list[str]:
    """Logical lines of a shell block, continuations joined. In a block with no
    language (a terminal session, a file tree) only ``$ `` prompt lines are commands."""
    joined = re.sub(r"\\\n\s*", " ", body)
    lines = []
    for line in joined.splitlines():
        line = line.strip()
        if line.startswith("$ "):
            lines.append(line[2:])
        elif not prompts_only and not line.startswith("lcr: "):  # lcr: ... is output
            lines.append(line)
    return lines


def documented_commands() -> list[tuple[str, str, list[str], bool]]:
    """(page, the line as written, the lcr arguments, complete?) for every command shown."""
    found = []
    for page in PAGES:
        prose, blocks = _split(page.read_text(encoding="utf-8"))
        for info, body in blocks:
            lang = info.split()[0] if info else ""
            if lang not in SHELL_BLOCKS:
                continue
            for line in _shell_lines(body, prompts_only=not lang):
                if "lcr" not in line:
                    continue
                try:
                    words = shlex.split(line, comments=False, posix=True)
                except ValueError:
                    continue
                # shlex keeps operators glued to words ("done;", "a.idx|"): split them off
                words = [p for w in words for p in re.split(r"(\|\||&&|[|;&])", w) if p]
                for args, complete in _lcr_segments(words):
                    found.append((_rel(page), line, args, complete))
        for span in re.findall(r"`(lcr [^`]+)`", "\n".join(prose)):
            if "[" in span or "..." in span or "…" in span:
                continue  # a synopsis, not a command
            found.append((_rel(page), span, shlex.split(span)[1:], False))
    return found


@cache
def _settings() -> frozenset[str]:
    res = CliRunner().invoke(cli, ["methods", "--settings", "--json"])
    assert res.exit_code == 0, res.output
    names = set()
    for row in map(json.loads, res.output.splitlines()):
        for phase in ("build_settings", "query_settings"):
            names |= {f"{row['name']}.{key}" for key in row[phase]}
        names |= {f"answer.{key}" for key in row["answer_settings"]}
    return frozenset(names)


def check(args: list[str], complete: bool) -> None:
    """Parse ``lcr ARGS`` as the CLI would; raise click's UsageError if it would refuse."""
    command: click.Command = cli
    path = ["lcr"]
    rest = list(args)
    while isinstance(command, click.Group) and rest and not rest[0].startswith("-"):
        name = rest[0]
        if name in command.commands:
            command = command.commands[name]
            path.append(rest.pop(0))
        elif hasattr(command, "default_command"):  # lcr eval DATA.jsonl: eval run
            command = command.commands[command.default_command]  # type: ignore[attr-defined]
        else:
            raise click.UsageError(f"no such command {name!r} under {' '.join(path)}")
    if isinstance(command, click.Group) and rest and hasattr(command, "default_command"):
        command = command.commands[command.default_command]  # type: ignore[attr-defined]
    if not rest and not complete:
        return  # a command named in prose
    try:
        command.make_context(" ".join(path), list(rest))  # click consumes its list
    except click.MissingParameter:
        if complete:
            raise
    sets = [v for k, v in pairwise(rest) if k == "--set"]
    sets += [w.split("=", 1)[1] for w in rest if w.startswith("--set=")]
    for s in sets:
        key = s.split("=", 1)[0]
        if key not in _settings():
            raise click.UsageError(f"--set {s}: no setting {key!r} (lcr methods --settings)")


COMMANDS = documented_commands()


def test_commands_are_found() -> None:
    pages = {page for page, *_ in COMMANDS}
    assert {"README.md", "docs/evaluation.md", "docs/methods/mixpr.md"} <= pages
    assert len(COMMANDS) > 40


@pytest.mark.parametrize(
    ("page", "line", "args", "complete"), COMMANDS, ids=[f"{p}: {line}" for p, line, *_ in COMMANDS]
)
def test_documented_command_is_accepted(
    page: str, line: str, args: list[str], complete: bool
) -> None:
    try:
        check(args, complete)
    except click.UsageError as exc:
        pytest.fail(f"{page}: `{line}` is refused by the CLI: {exc.format_message()}")


@pytest.mark.parametrize(
    "args",
    [
        ["eval", "run", "q.jsonl", "--query-set", "lightpal.alpha=0.8"],  # README's old slip
        ["ask", "b.idx", "q", "--method"],
        ["index", "a.txt", "--device", "tpu"],
        ["index", "a.txt", "--set", "mixpr.no_such_key=1"],
        ["indx", "a.txt"],
    ],
)
def test_a_wrong_command_is_caught(args: list[str]) -> None:
    with pytest.raises(click.UsageError):
        check(args, complete=True)


# ------------------------------------------------------- where defaults come from
@cache
def _method_rows() -> tuple[dict[str, object], ...]:
    res = CliRunner().invoke(cli, ["methods", "--settings", "--json"])
    assert res.exit_code == 0, res.output
    return tuple(map(json.loads, res.output.splitlines()))


def _section(path: Path, title: str) -> str:
    """The text under heading ``title`` of ``path``, up to the next heading."""
    prose, _ = _split(path.read_text(encoding="utf-8"))
    out: list[str] = []
    inside = False
    for line in prose:
        m = re.match(r"^#{1,6}\s+(.*?)\s*$", line)
        if m:
            inside = m.group(1) == title
            continue
        if inside:
            out.append(line)
    return "\n".join(out)


def test_each_default_says_where_it_comes_from() -> None:
    """A measured default points at a heading that exists; a default that is neither
    the paper's, the reference code's, a library's nor measured is named, with why,
    under its method page's "How the defaults were chosen" (issue 56)."""
    unexplained, broken = [], []
    for row in _method_rows():
        page = ROOT / str(row["manual"])
        why = _section(page, "How the defaults were chosen") if page.exists() else ""
        for phase in ("build_settings", "query_settings", "answer_settings"):
            for key, s in row[phase].items():  # type: ignore[attr-defined]
                where = s.get("measured_in", "")
                if where:
                    file_part, _, anchor = where.partition("#")
                    dest = ROOT / file_part
                    if not dest.exists() or (anchor and anchor not in _anchors(dest)):
                        broken.append(f"{row['name']}.{key}: {where}")
                named = f"`{key}`" in why or f"`{row['name']}.{key}`" in why
                if s["origin"] == "lcr" and phase != "answer_settings" and not named:
                    unexplained.append(f"{row['name']}.{key} ({page.name})")
                if s["origin"] == "library" and not s.get("library"):
                    broken.append(f"{row['name']}.{key}: origin library names none")
                if s["origin"] == "nearest the paper's" and not s.get("nearest"):
                    broken.append(f"{row['name']}.{key}: nearest to no value of the paper's")
    assert not broken, broken
    assert not unexplained, unexplained


def test_lcrs_own_methods_pass_the_origin_check_plugins_get() -> None:
    """lcr.testing's check of where defaults come from (run by check_method on any
    method) holds for lcr's own, as the test above does."""
    from lcr.methods import BUILT_IN, get_method
    from lcr.testing import unexplained_defaults

    for name in BUILT_IN:
        assert unexplained_defaults(get_method(name)) == [], name
