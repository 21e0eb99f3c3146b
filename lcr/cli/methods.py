"""Help text of the query options, written from what the methods declare.

``--mode``, ``--trace`` and ``-k`` mean something per method; their help is
derived from the registry when it is shown (``--help``, the man page), so a new
method, a plugin's too, needs no edit here and ``lcr --help`` imports no method.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import click


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
