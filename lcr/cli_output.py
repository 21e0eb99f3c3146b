"""Text for people: control sequences kept off the terminal, file names shown as they
are on disk, sizes in units. Shared by every command module."""

from __future__ import annotations

import re

import click

from lcr.progress import print_above_bars

# terminal control sequences (CSI, OSC, other escapes) and every other C0/C1 control
# character but tab and newline: text shown to people never drives their terminal
_CONTROL = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves, erasing
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC: window title, hyperlinks
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"  # DCS, SOS, PM, APC strings
    r"|\x1b[ -/]*[0-~]?"  # two- and three-byte escapes (reset, charsets), a lone ESC
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f]"
)


def printable(text: str) -> str:
    """``text`` without terminal control sequences, for output read by people (not JSON)."""
    return _CONTROL.sub("", text)


_CONTROL_CHAR = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def visible(text: str) -> str:
    """``text`` with control characters shown as ``\\xNN``: for file names and messages,
    where dropping them would print a name other than the one on disk."""
    return _CONTROL_CHAR.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def say(text: str = "") -> None:
    """One line of plain output, cleaned and flushed at once (click.echo flushes)."""
    echo(printable(text))


def err(message: str) -> None:
    echo(visible(f"lcr: {message}"), err=True)


def echo(text: str, *, err: bool = False) -> None:
    """``click.echo`` that never lands inside progress bars: the one way commands write."""
    if not print_above_bars(text):
        click.echo(text, err=err)


def human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"
