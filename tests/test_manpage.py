"""man/lcr.1 stays in step with the CLI: every command, option and method is documented.

The click command tree is the truth; a new option or subcommand without a line in
the man page fails here.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from lcr.cli import cli
from lcr.methods import method_names

ROOT = Path(__file__).resolve().parent.parent
MAN_PAGE = ROOT / "man" / "lcr.1"


def _man_text() -> str:
    """The page with roff's escaped hyphens (``\\-``) and inline font switches undone."""
    text = MAN_PAGE.read_text(encoding="utf-8")
    return re.sub(r"\\f[BIRP]", "", text.replace("\\-", "-"))


def _walk(
    command: click.Command, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    """Every command below ``command`` (hidden ones too), with its path of names."""
    yield path, command
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            yield from _walk(sub, (*path, name))


def _long_options(command: click.Command) -> list[str]:
    return sorted(
        {
            opt
            for param in command.params
            for opt in (*param.opts, *param.secondary_opts)
            if opt.startswith("--") and opt != "--help"
        }
    )


def _mentions(text: str, word: str) -> bool:
    """``word`` as a whole token, so ``--out`` is not satisfied by ``--output``."""
    return re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", text) is not None


def _section_name(path: tuple[str, ...]) -> str:
    # The hidden default ``eval run`` is documented as ``lcr eval [run] DATA.jsonl``.
    return "eval [run]" if path == ("eval", "run") else " ".join(path)


def _command_section(text: str, path: tuple[str, ...]) -> str | None:
    """The body of the ``.SS "lcr <path> ..."`` subsection documenting ``path``."""
    name = re.escape(_section_name(path))
    match = re.search(
        rf'^\.SS "lcr {name}(?: [^"\n]*)?"\n(.*?)(?=^\.S[SH] )', text, re.MULTILINE | re.DOTALL
    )
    return match.group(1) if match else None


def _section(text: str, title: str) -> str:
    match = re.search(rf'^\.SH "?{title}"?\n(.*?)(?=^\.SH )', text, re.MULTILINE | re.DOTALL)
    assert match, f"man/lcr.1 has no {title} section"
    return match.group(1)


COMMANDS = list(_walk(cli))
SUBCOMMANDS = [(p, c) for p, c in COMMANDS if p and p != ("eval",)]


def test_tree_is_walked() -> None:
    paths = {" ".join(p) for p, _ in COMMANDS}
    for expected in ("index", "ask", "retrieve", "info", "methods", "models", "models install"):
        assert expected in paths
    if "eval" in cli.commands:
        assert {"eval run", "eval prepare", "eval generate"} <= paths


@pytest.mark.parametrize("path", [p for p, _ in COMMANDS if p], ids=" ".join)
def test_every_command_documented(path: tuple[str, ...]) -> None:
    text = _man_text()
    assert _mentions(text, path[-1]), f"man/lcr.1 never names command {' '.join(path)!r}"
    if path != ("eval",):  # the eval group's section is its default command's
        assert _command_section(text, path) is not None, f"no .SS section for lcr {path}"


@pytest.mark.parametrize(
    "path_option",
    [(p, o) for p, c in COMMANDS for o in _long_options(c)],
    ids=lambda v: " ".join((*v[0], v[1])),
)
def test_every_long_option_documented(path_option: tuple[tuple[str, ...], str]) -> None:
    path, option = path_option
    text = _man_text()
    assert _mentions(text, option), f"man/lcr.1 never mentions {option} of lcr {' '.join(path)}"


def test_every_option_in_its_commands_section() -> None:
    """A shared option name must be documented under each command that takes it."""
    text = _man_text()
    options_section = _section(text, "OPTIONS")
    missing = [f"lcr {o}" for o in _long_options(cli) if not _mentions(options_section, o)]
    for path, command in SUBCOMMANDS:
        body = _command_section(text, path)
        assert body is not None, f"no .SS section for lcr {' '.join(path)}"
        if path == ("ask",):  # ask lists its one extra option and points at retrieve's
            body += _command_section(text, ("retrieve",)) or ""
        missing += [
            f"lcr {' '.join(path)} {o}" for o in _long_options(command) if not _mentions(body, o)
        ]
    assert not missing, f"options missing from their command's section: {missing}"


def test_every_method_documented() -> None:
    methods = _section(_man_text(), "METHODS")
    for name in method_names():
        assert re.search(rf"^\.B {re.escape(name)}$", methods, re.MULTILINE), (
            f"method {name!r} is registered but not described under METHODS in man/lcr.1"
        )


def test_environment_matches_code() -> None:
    """The LCR_* variables listed are exactly those the code reads."""
    env = _section(_man_text(), "ENVIRONMENT")
    documented = set(re.findall(r"^\.B (LCR_[A-Z_]+)$", env, re.MULTILINE))
    source = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "lcr").rglob("*.py"))
    assert documented == set(re.findall(r"\bLCR_[A-Z_]+", source))


def test_page_structure() -> None:
    text = MAN_PAGE.read_text(encoding="utf-8")
    assert re.search(r"^\.TH LCR 1 ", text, re.MULTILINE)
    for title in (
        "NAME",
        "SYNOPSIS",
        "DESCRIPTION",
        "OPTIONS",
        "COMMANDS",
        "ENVIRONMENT",
        "FILES",
        '"EXIT STATUS"',
        "EXAMPLES",
        '"SEE ALSO"',
    ):
        assert re.search(rf"^\.SH {title}$", text, re.MULTILINE), title
    exit_status = _section(text, "EXIT STATUS")
    for code in ("0", "1", "2"):
        assert re.search(rf"^\.B {code}$", exit_status, re.MULTILINE), code
    assert text.count("\n.EX\n") == text.count("\n.EE\n") > 0
    # A text line starting with ' or an unknown request would be eaten by roff.
    assert not re.search(r"^'", text, re.MULTILINE)
