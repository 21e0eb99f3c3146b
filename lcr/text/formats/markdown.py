"""Markdown: the text kept exactly as written (markup and all, so every span is
the file's own characters); ``#`` lines and underlined (setext) paragraphs outside
fenced code blocks become the headings, read as CommonMark reads them: a fence closes
only on as long a run of its own character, and a list item or a quote is no title."""

from __future__ import annotations

import re

from lcr.text.layout import DocumentLayout, Heading

_ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_BLOCK_START = re.compile(r"^ {0,3}(?:[-+*]|[0-9]{1,9}[.)]|>)(?:[ \t]|$)")  # list, quote


def markdown_layout(text: str) -> DocumentLayout:
    headings: list[Heading] = []
    fence: str | None = None  # the open fence's marker: closed by as many or more, alone
    offset = 0
    paragraph: tuple[int, list[str]] | None = None  # the open paragraph: start, lines
    in_block = False  # inside a list item's or a quote's paragraph
    for line in text.split("\n"):
        start, offset = offset, offset + len(line) + 1
        m = _FENCE.match(line)
        if fence is not None:
            if m is not None and m.group(1).startswith(fence) and not m.group(2).strip():
                fence = None
            continue
        if m is not None and not (m.group(1)[0] == "`" and "`" in m.group(2)):
            fence, paragraph, in_block = m.group(1), None, False
            continue
        atx = _ATX.match(line)
        if atx is not None and atx.group(2).strip():
            headings.append(Heading(start, len(atx.group(1)), atx.group(2).strip()))
            paragraph, in_block = None, False
            continue
        setext = _SETEXT.match(line)
        if setext is not None and paragraph is not None:
            level = 1 if setext.group(1)[0] == "=" else 2
            title = " ".join(" ".join(paragraph[1]).split())
            headings.append(Heading(paragraph[0], level, title))
            paragraph = None
            continue
        if not line.strip():
            paragraph, in_block = None, False
        elif _BLOCK_START.match(line) or in_block:  # a list item or a quote, and its lazy
            paragraph, in_block = None, True  # lines: never a title, "---" under it a rule
        elif paragraph is None:
            paragraph = (start, [line])
        else:
            paragraph[1].append(line)
    return DocumentLayout((), tuple(headings))
