"""Text folded for comparing words, not for showing them (issue 72).

Two spellings of one word should compare equal when a reader would take them for one:
compatibility forms (the "ﬁ" ligature, fullwidth letters) as their plain letters
(NFKC), accents folded (NFD, combining marks dropped: "Gödel" is "Godel", "Dvořák"
"Dvorak", "Ngũgĩ" "Ngugi"), letters that carry their mark in themselves folded to their
base (dotless "ı", "ł", "ø", "đ"; "ß" as "ss", "æ" as "ae"), characters a reader never
sees (zero-width space and joiners, the soft hyphen, the byte-order mark) dropped, and
the non-breaking hyphen as a hyphen. A word a line or page end split with a hyphen
("drift-" then "wood" on the next line) is the joined word (:func:`join_line_breaks`).

Pure: strings in, strings out.
"""

from __future__ import annotations

import functools
import re
import unicodedata

INVISIBLE = "\u00ad\u180e\u200b\u200c\u200d\u200e\u200f\u2060\u2061\u2062\u2063\u2064\ufeff"
"""Characters a reader never sees: the soft hyphen, zero-width space, joiners and
marks, word joiner, invisible operators, the byte-order mark."""

_LETTERS = {
    "\u0131": "i",  # dotless i
    "\u0130": "I",  # I with a dot (NFD would also give I)
    "\u0142": "l",
    "\u0141": "L",
    "\u00f8": "o",
    "\u00d8": "O",
    "\u0111": "d",
    "\u0110": "D",
    "\u00f0": "d",
    "\u00d0": "D",
    "\u00fe": "th",
    "\u00de": "Th",
    "\u00e6": "ae",
    "\u00c6": "Ae",
    "\u0153": "oe",
    "\u0152": "Oe",
    "\u00df": "ss",
    "\u1e9e": "SS",
    "\u0127": "h",
    "\u0126": "H",
    "\u0167": "t",
    "\u0166": "T",
    "\u2011": "-",  # the non-breaking hyphen
}
_TABLE = str.maketrans({**_LETTERS, **{c: None for c in INVISIBLE}})
_COMBINING = re.compile(r"[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]")


def fold(text: str) -> str:
    """``text`` with compatibility forms, accents, letters with marks of their own and
    invisible characters folded as the module says (case kept; not one-to-one: a
    character may fold to none or to several)."""
    if text.isascii():
        return text
    return _NOT_ASCII.sub(lambda run: _fold_run(run.group()), text)


_NOT_ASCII = re.compile(r"[^\x00-\x7f]+")


def _fold_run(text: str) -> str:
    """A run of characters outside ASCII folded (ASCII letters fold to themselves, and
    a combining mark after one is dropped alone just as after its composed form)."""
    text = unicodedata.normalize("NFKC", text.translate(_TABLE)).translate(_TABLE)
    return _COMBINING.sub("", unicodedata.normalize("NFD", text))


@functools.lru_cache(maxsize=4096)
def fold_char(ch: str) -> str:
    """One character folded (:func:`fold`): "" for an invisible one, several for a
    ligature ("ﬁ" is "fi")."""
    if ch.isascii() or unicodedata.category(ch)[0] not in "LMNC":
        return ch  # punctuation and symbols are the caller's to compare
    return fold(ch)


_BREAK = re.compile(r"-[ \t]*\n[ \t\n\f]*")


def line_break_hyphens(text: str) -> list[tuple[int, int]]:
    """The spans of the hyphens that end a line or page inside a word, each with the
    line break after it: a letter before the hyphen and a letter after the break."""
    out: list[tuple[int, int]] = []
    if "-\n" not in text and "- " not in text and "-\t" not in text:
        return out
    for m in _BREAK.finditer(text):
        start, end = m.span()
        if start > 0 and end < len(text) and _letter(text[start - 1]) and _letter(text[end]):
            out.append((start, end))
    return out


def _letter(ch: str) -> bool:
    return ch.isalpha()


def join_line_breaks(text: str) -> str:
    """``text`` with every word a line or page end split by a hyphen joined
    ("drift-\\nwood" and "drift-\\n\\nwood" read "driftwood")."""
    spans = line_break_hyphens(text)
    if not spans:
        return text
    parts: list[str] = []
    at = 0
    for start, end in spans:
        parts.append(text[at:start])
        at = end
    parts.append(text[at:])
    return "".join(parts)
