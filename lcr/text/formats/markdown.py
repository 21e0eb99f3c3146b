"""Markdown: the text kept exactly as written (markup and all, so every span is
the file's own characters); ``#`` lines and underlined (setext) titles outside
fenced code blocks become the headings."""

from __future__ import annotations

import re

from lcr.text.layout import DocumentLayout, Heading

_ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def markdown_layout(text: str) -> DocumentLayout:
    headings: list[Heading] = []
    fence: str | None = None
    offset = 0
    previous: tuple[int, str] | None = None  # the last plain line: its start and text
    for line in text.split("\n"):
        start, offset = offset, offset + len(line) + 1
        m = _FENCE.match(line)
        if m is not None:
            marker = m.group(1)[0] * 3
            fence = None if fence is not None and marker == fence else fence or marker
            previous = None
            continue
        if fence is not None:
            continue
        atx = _ATX.match(line)
        if atx is not None and atx.group(2).strip():
            headings.append(Heading(start, len(atx.group(1)), atx.group(2).strip()))
            previous = None
            continue
        setext = _SETEXT.match(line)
        if setext is not None and previous is not None:
            level = 1 if setext.group(1)[0] == "=" else 2
            headings.append(Heading(previous[0], level, previous[1].strip()))
            previous = None
            continue
        previous = (start, line) if line.strip() else None
    return DocumentLayout((), tuple(headings))
