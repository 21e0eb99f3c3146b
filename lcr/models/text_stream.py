"""A generation's text handed on as it grows, never ahead of the text it returns.

A backend decodes the whole text so far after each token; :class:`TextPieces` hands
``on_text`` only the part no later token can change: not the possible beginning of a
stop string (generation may still stop there and cut it), not a character whose last
bytes have not arrived (decoded as U+FFFD until they do). So the pieces joined are
exactly the reply the call returns, and what a terminal showed is what was answered.
"""

from __future__ import annotations

from collections.abc import Sequence

from lcr.models.base import OnText


def cut_at_stop(text: str, stop: Sequence[str]) -> str:
    """The text before the earliest stop string (generation halts just after it)."""
    cut = len(text)
    for s in stop:
        if s:
            pos = text.find(s)
            if pos != -1:
                cut = min(cut, pos)
    return text[:cut]


def _held_back(text: str, stop: Sequence[str]) -> int:
    """How many of ``text``'s last characters may still be the start of a stop string."""
    longest = 0
    for s in stop:
        for n in range(min(len(s) - 1, len(text)), longest, -1):
            if text.endswith(s[:n]):
                longest = n
                break
    return longest


class TextPieces:
    """Sends ``on_text`` each new stable piece of a growing generation (see the module)."""

    def __init__(self, on_text: OnText, stop: Sequence[str] = ()) -> None:
        self._on_text = on_text
        self._stop = [s for s in stop if s]
        self.sent = ""

    def update(self, text: str) -> None:
        """``text``: the whole reply decoded so far."""
        cut = cut_at_stop(text, self._stop)
        end = len(cut) if len(cut) < len(text) else len(text) - _held_back(text, self._stop)
        self._send(text[:end].rstrip("\ufffd"))

    def finish(self, text: str) -> None:
        """``text``: the reply the call returns; whatever of it was not sent yet goes now."""
        self._send(text)

    def _send(self, text: str) -> None:
        # a decoder that rewrote earlier characters is not followed: the caller compares
        # what it showed with the final reply
        if len(text) > len(self.sent) and text.startswith(self.sent):
            self._on_text(text[len(self.sent) :])
            self.sent = text
