"""Generate the man page, man/lcr.1, from the CLI itself.

    python -m lcr.cli.manpage -o man/lcr.1       # write it
    python -m lcr.cli.manpage --check man/lcr.1  # exit 1 if it differs from what the CLI says

Sources, so the page cannot drift from the program:

- commands, arguments and options: click's command tree (:data:`lcr.cli.main.cli`), the
  same help text ``lcr COMMAND --help`` prints;
- methods and their settings: the JSON lines of ``lcr methods --settings --json``
  (the JSON, not the Python declarations behind it, so the page follows the
  command's documented output whatever the declarations look like);
- environment variables: the ``envvar`` of every option, plus :data:`OTHER_ENV` for
  the variables the code reads directly (a test checks that together they are
  exactly the ``LCR_*`` names in the source).

The prose here (description, files, exit status, examples) is short on purpose:
the manual is docs/ in the source repository, and the page points there.
tests/test_manpage.py regenerates the page and fails on any difference.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from lcr._version import __version__
from lcr.config import value_text

DESCRIPTION = """\
lcr answers questions about long documents (books, papers, meeting transcripts,
folders of articles) without feeding the whole text to a language model. It
builds an on-disk index per document once, then answers many questions from it
with one of five published retrieval methods (MixPR, RAPTOR, GraphReader,
LightPAL, PECAN) or a plain baseline (BM25, TF-IDF, dense, hybrid, full text).
Every piece of evidence carries the character spans of the source it rests on.

Output is plain text for people and, with --json, one JSON object per line for
scripts. The full manual (how each method works, its settings, where it departs
from its paper, measured results) is the docs/ folder of the source repository."""

# Variables the code reads without a click option; the options' own come from click.
OTHER_ENV: dict[str, str] = {
    "LCR_API_KEY": "The key sent as a bearer token to the server of --base-url, if it "
    "needs one (never taken on the command line, so it stays out of shell history).",
    "LCR_ATTENTION_CAPTURE": "When PECAN's build reads attention on the transformers "
    "backend: during (default; each point token's row as the token is decoded) or after "
    "(generate writes the reply, with LCR_STATIC_CACHE's plan, then one pass reads the "
    "rows; the same index, a different cost).",
    "LCR_CACHE_DIR": "The model cache (default ~/.cache/lcr): joined GGUF files and "
    "dequantised copies of the presets.",
    "LCR_DEBUG": "When 1, like --debug: show tracebacks for errors.",
    "LCR_LLAMACPP_AMX": "When 1, accept a llama-cpp-python build with AMX kernels (by "
    "default such a build is refused with the command that rebuilds it without them: "
    "they crash on the CPUs lcr is developed on).",
    "LCR_STATIC_CACHE": "How the transformers backend decodes: auto (default; on CUDA a "
    "static KV cache with torch.compile'd steps once the process has generated 2,000 "
    "one-stream tokens, since the compile costs about 42 s; batches and a CPU keep the "
    "dynamic cache), on (the static cache from the first call, on any device), off "
    "(neither).",
    "LCR_THREADS": "CPU threads of the llama.cpp and transformers backends, fixed "
    "(default: the cores other processes leave idle, measured when the model loads and "
    "about once a second after).",
}

FILES: list[tuple[str, str]] = [
    ("NAME.idx/", "An index: manifest.json (sources, methods built, settings, models, "
     "sizes and sha256 of every file), source.txt (the text every span points into), one "
     "folder per method build, and cache/ (LLM outputs already paid for, so an "
     "interrupted build resumes)."),
    ("$LCR_CACHE_DIR/", "Joined and checked GGUF files of the model presets, and the "
     "dequantised copies the transformers backend loads."),
    ("DATA.results.jsonl", "Per-question results of lcr eval, appended to; a rerun skips "
     "what is done."),
    ("DATA.indexes/", "The indexes lcr eval builds and reuses."),
]  # fmt: skip

# --debug adds the traceback and keeps these codes
EXIT_STATUS: list[tuple[str, str]] = [
    ("0", "Success (also when the reader of standard output goes away early, as head(1) "
     "does, and for a build whose report could not be printed: it is committed, and a "
     "warning says so)."),
    ("1", "An error the user can act on, in one line on standard error: a missing, binary "
     "or empty input, a missing or damaged index, a method not built, a model that cannot "
     "load, a failed LLM call, permission denied, a full disk, out of memory, standard "
     "output closed or full (a read command's output could not be printed), an eval "
     "document outside the data file's folder; or an internal error (run with --debug "
     "for the traceback)."),
    ("2", "Bad usage: an unknown command, option or method, a bad option value (such as "
     "-k 0, an empty path or an empty question), a --set outside the range lcr methods "
     "--settings shows, two FILEs that would share one default index."),
    ("130", "Interrupted; a build in progress keeps what it had, and the same command "
     "resumes it."),
]  # fmt: skip

EXAMPLES: list[tuple[str, list[str]]] = [
    ("Index a book with the default methods (bm25, mixpr), then add RAPTOR:",
     ["lcr index book.txt", "lcr index book.txt --method raptor"]),
    ("Ask with MixPR; evidence only, as JSON:",
     ['lcr ask book.idx "Who hid the key?" --method mixpr',
      'lcr retrieve book.idx "Who hid the key?" -m bm25 -k 5 --json']),
    ("Many questions, the models loaded once:",
     ["lcr ask book.idx - --json < questions.txt > answers.jsonl"]),
    ("Change a setting at build and at query time:",
     ["lcr index book.txt -m mixpr --set mixpr.threshold=0.3 --force",
      'lcr ask book.idx "Summarise it." -m raptor --set raptor.max_tokens=3000']),
    ("Serve the indexes in a folder to an agent over MCP (stdio; or HTTP on loopback):",
     ["lcr serve ~/papers/", "lcr serve ~/papers/ --http 127.0.0.1:8765"]),
    ("Evaluate two methods on a generated task:",
     ["lcr eval generate hashhop --hops 4 --length 32k -o hh4.jsonl",
      "lcr eval hh4.jsonl --method bm25 --method mixpr --retrieval-only"]),
]  # fmt: skip

REGENERATE = "python -m lcr.cli.manpage -o man/lcr.1"


# ------------------------------------------------------------------ roff
def esc(text: str) -> str:
    """Text safe in a roff line: backslashes and hyphens escaped."""
    return text.replace("\\", "\\e").replace("-", "\\-")


def _line(text: str) -> str:
    """A text line roff will not take for a request (a leading ``.`` or ``'``)."""
    return "\\&" + text if text[:1] in (".", "'") else text


def _prose(text: str) -> list[str]:
    """Help text to roff: paragraphs joined, click's ``\\b`` blocks kept as they are,
    `code` in bold."""
    out: list[str] = []
    for para in re.split(r"\n\s*\n", text.strip()):
        lines = para.splitlines()
        if lines and lines[0].strip() == "\b":
            out += [".PP", ".nf"]
            out += [_line(esc(line.rstrip())) for line in lines[1:]]
            out.append(".fi")
            continue
        words = esc(" ".join(line.strip() for line in lines))
        words = re.sub(r"`([^`]+)`", r"\\fB\1\\fR", words)
        out += [".PP", _line(words)]
    return out[1:] if out[:1] == [".PP"] else out


def _tp(tag: str, body: list[str]) -> list[str]:
    return [".TP", _line(tag), *body]


def _valid(setting: dict[str, Any]) -> str:
    """`` [one of: a, b, c]`` (a list troff can break across lines), the range, or nothing
    (a boolean, free text)."""
    if setting.get("choices"):
        return f" [one of: {', '.join(setting['choices'])}]"
    return f" [{setting['valid']}]" if setting.get("valid") else ""


# ------------------------------------------------------------------ sources
def methods_json() -> list[dict[str, Any]]:
    """The rows of ``lcr methods --settings --json``."""
    from click.testing import CliRunner

    from lcr.cli.main import cli

    res = CliRunner().invoke(cli, ["methods", "--settings", "--json"])
    if res.exit_code != 0:
        raise RuntimeError(f"lcr methods --settings --json failed: {res.output}")
    return [json.loads(line) for line in res.output.splitlines() if line.strip()]


def walk(
    command: click.Command, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    """Every command below ``command`` (hidden ones too), with its path of names."""
    yield path, command
    if isinstance(command, click.Group):
        for name in sorted(command.commands) if path else list(command.commands):
            yield from walk(command.commands[name], (*path, name))


def command_name(path: tuple[str, ...]) -> str:
    """``eval run`` is the default of ``eval``: ``lcr eval [run] DATA.jsonl``."""
    return "eval [run]" if path == ("eval", "run") else " ".join(path)


def _context(path: tuple[str, ...], command: click.Command) -> click.Context:
    return click.Context(command, info_name="lcr " + command_name(path))


def usage(path: tuple[str, ...], command: click.Command) -> str:
    pieces = command.collect_usage_pieces(_context(path, command))
    return " ".join(["lcr", command_name(path), *pieces])


def documented_commands() -> list[tuple[tuple[str, ...], click.Command]]:
    """The commands with a section: every leaf, and groups that do something alone."""
    from lcr.cli.main import cli

    out = []
    for path, command in walk(cli):
        if not path or path == ("eval",):  # lcr itself: OPTIONS; eval: its run command
            continue
        out.append((path, command))
    return out


def options(path: tuple[str, ...], command: click.Command) -> list[tuple[str, str]]:
    """(``-m, --method TEXT``, help with default and env) for each visible option."""
    ctx = _context(path, command)
    rows = []
    for param in command.get_params(ctx):
        if not isinstance(param, click.Option) or "--help" in param.opts:
            continue
        record = param.get_help_record(ctx)
        if record is not None:
            rows.append(record)
    return rows


def _help(text: str) -> str:
    """One option's help as a roff line, `code` in bold."""
    return _line(re.sub(r"`([^`]+)`", r"\\fB\1\\fR", esc(text)))


def option_env() -> dict[str, list[str]]:
    """Each ``envvar`` of an option: the options (and commands) it is the default of."""
    from lcr.cli.main import cli

    found: dict[str, set[str]] = {}
    for _path, command in walk(cli):
        for param in command.params:
            env = getattr(param, "envvar", None)
            if isinstance(env, str):
                opt = max(param.opts, key=len)
                found.setdefault(env, set()).add(opt)
    return {k: sorted(v) for k, v in sorted(found.items())}


# ------------------------------------------------------------------ the page
def render() -> str:
    """The page, of lcr's own methods alone: a plugin installed beside lcr is not part of
    lcr's manual (its help, -k's included, would otherwise name it)."""
    from lcr.methods import only_builtin

    with only_builtin():
        rows = methods_json()
        out = _head() + _commands() + _methods(rows) + _settings(rows) + _answer_settings(rows)
        return "\n".join(out + _tail()) + "\n"


def _head() -> list[str]:
    from lcr.cli.main import cli

    out: list[str] = [
        '.\\" Generated by lcr/cli/manpage.py from the CLI; do not edit.',
        f'.\\" Regenerate: {REGENERATE}',
        f'.TH LCR 1 "" "lcr {__version__}" "User Commands"',
        ".nh",
        ".ad l",
        ".SH NAME",
        "lcr \\- answer questions about long documents from an on\\-disk index",
        ".SH SYNOPSIS",
    ]
    out.append(".PP")
    for p, c in documented_commands():  # filled, a long choice list broken after a |
        out += [_line(esc(usage(p, c)).replace("|", "|\\:")), ".br"]
    out += [".SH DESCRIPTION", *_prose(DESCRIPTION)]

    out.append(".SH OPTIONS")
    out.append("Options of lcr itself, before the command:")
    for opts, help_ in options((), cli):
        out += _tp(f"\\fB{esc(opts)}\\fR", [_help(help_)])
    out += _tp("\\fB\\-h, \\-\\-help\\fR", ["Show the help of lcr or of a command and exit."])
    return out


def _commands() -> list[str]:
    out = [".SH COMMANDS"]
    for path, command in documented_commands():
        out.append(f'.SS "{esc(usage(path, command))}"')
        out += _prose(command.help or command.short_help or "")
        if command.epilog:
            out += [".PP", *_prose(command.epilog)]
        if isinstance(command, click.Group):
            subs = ", ".join(f"lcr {command_name(path)} {n}" for n in sorted(command.commands))
            out += [".PP", _line(esc(f"Subcommands: {subs}."))]
        for opts, help_ in options(path, command):
            out += _tp(f"\\fB{esc(opts)}\\fR", [_help(help_)])
    return out


def _methods(rows: list[dict[str, Any]]) -> list[str]:
    out = [".SH METHODS"]
    out.append(
        esc(
            "Each method is built into the index by lcr index --method NAME and used by "
            "lcr ask/retrieve/eval --method NAME. Its manual page in the source repository:"
        )
    )
    for r in rows:
        body = [esc(r["summary"]) + "."]
        body.append(esc(f"Needs: {r['needs']}."))
        if r.get("paper"):
            body.append(esc(f"Paper: {r['paper']}."))
        if r.get("default"):
            body.append("Built by a plain \\fBlcr index\\fR.")
        if r.get("manual"):
            body.append(f"See \\fI{esc(r['manual'])}\\fR.")
        out += _tp(f"\\fB{esc(r['name'])}\\fR", [_line(b) for b in body])
    return out


def _settings(rows: list[dict[str, Any]]) -> list[str]:
    out = [".SH SETTINGS"]
    out += _prose(
        "--set METHOD.KEY=VALUE changes one setting: build settings on lcr index (a "
        "changed build setting is a new build), query settings on ask, retrieve and "
        "eval. Values outside the range shown are refused before any work (exit 2). "
        "(paper) marks a value the paper's text gives; (reference code) one taken from "
        "the authors' released code where the paper gives none; (library: NAME) that "
        "library's own documented default, kept; (nearest the paper's: VALUE) the "
        "nearest lcr offers to the paper's VALUE; (arbitrary) a value no other beats, "
        "such as a seed; (lcr, measured) lcr's own "
        "value, chosen on a measurement its method page gives; no mark, lcr's choice."
    )
    for r in rows:
        out.append(f'.SS "{esc(r["name"])}"')
        if not (r["build_settings"] or r["query_settings"]):
            out.append(esc(f"{r['name']} has no settings of its own."))
        for phase, label in (("build_settings", "index"), ("query_settings", "query")):
            for key, s in r[phase].items():
                tag = f"\\fB{esc(r['name'])}.{esc(key)}\\fR={esc(value_text(s['default']))}"
                origin = "" if s.get("origin", "lcr") == "lcr" else f", {s['origin']}"
                if s.get("library"):
                    origin = f", library: {s['library']}"
                if s.get("nearest"):
                    origin = f", nearest the paper's: {s['nearest']}"
                text = f"({label}{origin}) {s['help']}"
                out += _tp(tag, [_line(esc(text + _valid(s)))])
        kept = [
            f"answer.{k}={value_text(s['default'])}"
            for k, s in r["answer_settings"].items()
            if s["paper"]
        ]
        if kept:
            out += [".PP", _line(esc(f"Keeps the paper's {', '.join(kept)} as its default."))]
        if r.get("answer_note"):
            out += [".PP", _line(esc(f"Answer step: {r['answer_note']}."))]
    return out


def _answer_settings(rows: list[dict[str, Any]]) -> list[str]:
    out = ['.SS "answer"']
    out += _prose(
        "The shared answer step, used by every method without its own answer prompt: "
        "--set answer.KEY=VALUE on ask and eval (see docs/answer-step.md)."
    )
    answer = rows[0]["answer_settings"] if rows else {}
    for key, s in answer.items():
        default = s["default"]
        for r in rows:  # the step's own default, not one a paper fixed
            if not r["answer_settings"][key]["paper"]:
                default = r["answer_settings"][key]["default"]
                break
        tag = f"\\fBanswer.{esc(key)}\\fR={esc(value_text(default))}"
        out += _tp(tag, [_line(esc(s["help"] + _valid(s)))])
    return out


def _tail() -> list[str]:
    out = [".SH ENVIRONMENT"]
    env = option_env()
    for name in sorted({*env, *OTHER_ENV}):
        text = f"Default for {', '.join(env[name])}." if name in env else OTHER_ENV[name]
        out += _tp(f"\\fB{name}\\fR", [_line(esc(text))])

    out.append(".SH FILES")
    for name, text in FILES:
        out += _tp(f"\\fI{esc(name)}\\fR", [_line(esc(text))])

    out.append('.SH "EXIT STATUS"')
    for code, text in EXIT_STATUS:
        out += _tp(f"\\fB{code}\\fR", [_line(esc(text))])
    out += _prose(
        "--debug prints the traceback before the line, and keeps the exit code. Every "
        "message is one line: a control character or a line break in a file name is "
        "shown escaped."
    )

    out.append(".SH EXAMPLES")
    for what, commands in EXAMPLES:
        out += [".PP", _line(esc(what)), ".PP", ".nf", ".RS 2"]
        out += [_line(esc(c)) for c in commands]
        out += [".RE", ".fi"]

    out.append('.SH "SEE ALSO"')
    out += _prose(
        "In the source repository: README.md (set-up and a five-minute tour), "
        "docs/methods/ (one page per method), docs/answer-step.md, docs/evaluation.md, "
        "docs/backends.md, docs/speed.md, docs/serve.md (lcr serve: the tools, the agent "
        "configuration to paste, what is reachable)."
    )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lcr.cli.manpage", description=__doc__)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("-o", "--output", type=Path, help="write the page here (default stdout)")
    group.add_argument("--check", type=Path, help="exit 1 if this page is not the generated one")
    args = parser.parse_args(argv)
    page = render()
    if args.check is not None:
        current = args.check.read_text(encoding="utf-8") if args.check.exists() else ""
        if current != page:
            print(f"{args.check} is out of date with the CLI; regenerate it: {REGENERATE}")
            return 1
        return 0
    if args.output is None:
        sys.stdout.write(page)
    else:
        args.output.write_text(page, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
