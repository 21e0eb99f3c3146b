"""``lcr methods``, and the help text of the query options, written from what the methods
declare.

``--mode``, ``--trace`` and ``-k`` mean something per method; their help is
derived from the registry when it is shown (``--help``, the man page), so a new
method, a plugin's too, needs no edit here and ``lcr --help`` imports no method.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from lcr.cli.output import WIDTH
from lcr.cli.output import err as _err
from lcr.cli.output import say as _say

if TYPE_CHECKING:
    from lcr.config import Setting


class DerivedHelpOption(click.Option):
    """An option whose help is written from the methods' declarations when it is shown,
    so a new method (a plugin's too) needs no edit here and ``lcr --help`` imports none."""

    def __init__(self, *args: Any, derive_help: Callable[[], str], **kwargs: Any) -> None:
        self.derive_help = derive_help
        super().__init__(*args, **kwargs)

    @property
    def help(self) -> str:
        return self.derive_help()

    @help.setter
    def help(self, value: str | None) -> None:
        """click sets the help it was given (none): the derived text stands."""


def _declared_methods() -> list[tuple[str, Any]]:
    from lcr.methods import loadable_methods

    return list(loadable_methods(lambda line: None))  # `lcr methods` says why one is left out


def trace_help() -> str:
    names = [name for name, m in _declared_methods() if m.traces]
    return f"Also print the method's step-by-step trace ({', '.join(names) or 'none has one'})."


def mode_help() -> str:
    modes = []
    for name, m in _declared_methods():
        mode = m.query_settings.by_name().get("mode")
        if mode is not None and mode.choices:
            modes.append(f"{name}: {'|'.join(mode.choices)}")
    return f"Shortcut for --set METHOD.mode=MODE ({'; '.join(modes)})."


def k_help() -> str:
    from lcr.methods.base import TOP_K

    own = [
        f"{name}: {m.k_option.counts if m.k_option.applies else 'ignored'}"
        for name, m in _declared_methods()
        if dataclasses.replace(m.k_option, setting="")
        != dataclasses.replace(TOP_K, setting="")  # the setting: not said
    ]
    return (
        "How many nodes to retrieve (default: the method's own"
        + "".join(f"; {text}" for text in own)
        + ")."
    )


# ------------------------------------------------------- the methods command
@click.command("methods")
@click.option(
    "--settings", "show_settings", is_flag=True, help="Also list every setting with its default."
)
@click.option(
    "--json", "as_json", is_flag=True, help="One JSON object per method, settings included."
)
def methods_cmd(show_settings: bool, as_json: bool) -> None:
    """Every method: what it does, what it needs, its paper.

    With --settings, also the shared answer step's settings (--set answer.KEY=VALUE)
    and, per method, which of them its paper fixes or its own answer prompt ignores.
    """
    from lcr.answer.shared import ANSWER_SETTINGS
    from lcr.config import value_text
    from lcr.methods import loadable_methods

    rows: list[dict[str, Any]] = []
    for name, m in loadable_methods(lambda line: _err(f"warning: {line}")):
        answer_settings = {}
        for s in ANSWER_SETTINGS:
            entry = _setting_json(s)
            entry["measured"] = False
            if s.name in m.answer_measured:  # measured best: this method's default
                entry.update(
                    default=m.answer_measured[s.name],
                    measured=True,
                    origin="lcr, measured",
                    measured_in="docs/answer-step.md",
                )
            if s.name in m.answer_paper:  # the paper's value is this method's default
                entry.update(
                    default=m.answer_paper[s.name], paper=True, measured=False, origin="paper"
                )
            answer_settings[s.name] = entry
        rows.append(
            {
                "name": name,
                "summary": m.summary,
                "needs": m.needs_text(),
                "paper": m.paper,
                "manual": m.manual,
                "default": m.built_by_default,
                "build_settings": {s.name: _setting_json(s) for s in m.build_settings.declared()},
                "query_settings": {s.name: _setting_json(s) for s in m.query_settings.declared()},
                "answer_settings": answer_settings,
                "answer_note": m.answer_note,
            }
        )
    if as_json:
        for r in rows:
            click.echo(json.dumps(r, ensure_ascii=False))
        return
    for r in rows:
        star = " (built by default)" if r["default"] else ""
        _say(f"{r['name']}{star}")
        _field_text(r["summary"], "  ")
        _field_text(f"needs: {r['needs']}", "  ")
        if r["paper"]:
            _field_text(f"paper: {r['paper']}", "  ")
        if show_settings:
            for phase in ("build_settings", "query_settings"):
                label = "index" if phase == "build_settings" else "query"
                for key, s in r[phase].items():
                    mark = _origin_mark(s)
                    valid = f" [{s['valid']}]" if s["valid"] else ""
                    default = value_text(s["default"])
                    line = f"{r['name']}.{key}={default}{mark}  {s['help']}{valid}"
                    _field_text(line, f"    {label}  ")
            for origin, line in (
                ("paper", "keeps the paper's {} as its default"),
                ("measured", "reads with {} by default (measured best: docs/answer-step.md)"),
            ):
                own = [
                    f"answer.{k}={value_text(s['default'])}"
                    for k, s in r["answer_settings"].items()
                    if s[origin]
                ]
                if own:
                    _field_text(line.format(", ".join(own)), "    answer  ")
            if r["answer_note"]:
                _field_text(r["answer_note"], "    answer  ")
    if show_settings:
        _field_text(
            "answer (the shared answer step, for every method without its own answer prompt; "
            "--set answer.KEY=VALUE on ask and eval)",
            "",
        )
        for s in ANSWER_SETTINGS:
            valid = f" [{s.valid_text()}]" if s.valid_text() else ""
            line = f"answer.{s.name}={value_text(s.default)}  {s.help}{valid}"
            _field_text(line, "    answer  ")
        _field_text(
            "--max-new-tokens=256  the longest answer, in tokens (an option of its own)",
            "    answer  ",
        )


def _field_text(text: str, indent: str) -> None:
    """``text`` after ``indent``, wrapped to :data:`WIDTH` with the next lines under it
    (a long choice list breaks after its ``|``)."""
    import textwrap

    wrapper = textwrap.TextWrapper(
        WIDTH, initial_indent=indent, subsequent_indent=" " * (len(indent) + 2)
    )
    _say("\n".join(wrapper.wrap(text.replace("|", "| "))).replace("| ", "|"))


def _origin_mark(s: dict[str, Any]) -> str:
    """Where a default comes from: the paper's text, only the authors' released code, a
    library's own default, the nearest to the paper's value, a value no other beats (a
    seed), or lcr's measurement (nothing: lcr's choice, unmeasured)."""
    origin = s.get("origin", "paper" if s["paper"] else "lcr")
    if origin == "library":
        return f" (library: {s['library']})"
    if s.get("nearest"):
        return f" (nearest the paper's {s['nearest']})"
    return "" if origin == "lcr" else f" ({origin.removeprefix('lcr, ')})"


def _setting_json(s: Setting) -> dict[str, Any]:
    out: dict[str, Any] = {"default": s.default, "help": s.help, "paper": s.paper}
    out["reference_code"] = s.reference_code
    out["origin"] = s.origin
    if s.measured_in:
        out["measured_in"] = s.measured_in
    if s.library:
        out["library"] = s.library
    if s.nearest:
        out["nearest"] = s.nearest
    out["valid"] = s.valid_text()
    if s.low is not None:
        out["low"] = s.low
    if s.high is not None:
        out["high"] = s.high
    if s.choices is not None:
        out["choices"] = list(s.choices)
    return out
