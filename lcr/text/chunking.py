"""Chunkers shared by every method, each chunk carrying its exact span in the source.

All spans are character offsets into the text given (plus ``offset``, so a
caller can cut one document inside a larger concatenated source), and
``chunk.text == source[chunk.start:chunk.end]`` always holds. Chunks never
start or end with whitespace, never overlap, come in document order, and only
whitespace lies between them, so no visible character is ever lost.

The sentence splitter is a regular expression plus a few abbreviation rules
(no NLTK data to download). It is built to run over millions of tokens: the
scan is one ``re.finditer`` and Python only looks at candidate boundaries.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import accumulate, pairwise

from lcr.errors import SettingError
from lcr.text.tokens import TokenCounter, count_tokens

__all__ = [
    "Chunk",
    "paragraph_windows",
    "section_chunks",
    "sentence_word_chunks",
    "split_paragraphs",
    "split_sentences",
    "token_windows",
]

Span = tuple[int, int]


@dataclass(frozen=True, slots=True)
class Chunk:
    """A piece of text and the ``[start, end)`` character span it was cut from."""

    start: int
    end: int
    text: str


# --- sentence boundaries ---------------------------------------------------

_CLOSERS = "\"'”’)\\]»"
_OPENERS = "\"'“‘(\\[«"
# Capitals (Latin, Greek, Cyrillic), digits, kana and CJK ideographs may start a sentence.
_STARTERS = "A-Z0-9À-ÖØ-ÞΑ-ΩА-ЯЁ\u3040-\u30ff\u4e00-\u9fff"

_BOUNDARY = re.compile(
    # the leading lookahead lets the scan skip to candidate characters (2-3x faster)
    "(?=[.!?…。！？\n])(?:"
    # a run of terminators, then closing quotes/brackets, then whitespace and a
    # sentence-like start (optionally after opening quotes)
    rf"(?P<term>[.!?…]+)[{_CLOSERS}]*(?=\s+[{_OPENERS}]*[{_STARTERS}])"
    # CJK full stops need no space after them
    r"|[。！？]+[」』）]*"
    # a blank line (possibly holding spaces or tabs) is a paragraph break
    r"|\n[^\S\n]*\n"
    ")"
)
_BLANK_LINE = re.compile(r"\n[^\S\n]*\n")
_OPENER_CHARS = _OPENERS.replace("\\", "")
_NEXT_WORD = re.compile(rf"\s+[{_OPENERS}]*(\w+)")
_WORD = re.compile(r"\S+")
_DOTTED = re.compile(r"(?:[^\W\d_]\.)+[^\W\d_]")


def _wordset(words: str) -> frozenset[str]:
    return frozenset(words.split())


# Abbreviations after which a period never ends a sentence: titles before a
# name, and Latin connectives before an example.
_NEVER_END = _wordset(
    "mr mrs ms messrs mme mlle dr prof rev hon gen col capt cpt lt sgt maj adm cmdr "
    "gov sen rep pres supt insp fr e.g i.e cf vs viz approx ca"
)
# Abbreviations before a number ("No. 5", "Fig. 3", "pp. 10").
_BEFORE_NUMBER = _wordset("no nos fig figs vol vols pp p ch chap sec sect art eq ref op para")
# Abbreviations that may also end a sentence ("... and so on, etc. The next").
# They end one only when the next word is a common sentence opener.
_AMBIGUOUS = _wordset(
    "etc st mt sr jr inc ltd co corp bros al dept univ ave blvd rd a.m p.m u.s u.k u.n"
)
_OPENER_WORDS = _wordset(
    "The A An I It He She They We You This That These Those There Then But And So Or "
    "In On At If When While What Who Whom Whose Which Why Where How As His Her Their "
    "Our My Its Your One After Before Now Yet Still However Also For To With Not No "
    "Yes Some All Many Most Each Every Both Such Here Thus Although Though Because "
    "Since Until During From By Of Let Meanwhile Finally First Later"
)


def _sentence_cuts(text: str) -> list[int]:
    """Positions (in whitespace or right after a terminator) where sentences end."""
    cuts: list[int] = []
    append = cuts.append
    for m in _BOUNDARY.finditer(text):
        term = m.group("term")
        if term == "." and not _period_ends_sentence(text, m.start(), m.end()):
            # The match consumed no whitespace, so a blank line right after an
            # abbreviation is still found by the scan.
            continue
        append(m.end())
    return cuts


def _period_ends_sentence(text: str, dot: int, after: int) -> bool:
    """Decide a lone ``.`` followed by a capitalised word: abbreviation or end?"""
    if dot == 0 or text[dot - 1].isspace():
        return True  # "So . OK ." (tokenised transcripts): a detached period
    head = text[max(0, dot - 24) : dot]
    parts = head.rsplit(None, 1)
    token = parts[-1].lstrip(_OPENER_CHARS) if parts else ""
    if not token:
        return True
    low = token.lower()
    if low in _NEVER_END:
        return False
    if len(token) == 1 and token.isupper():
        return False  # an initial: "J. R. R. Tolkien"
    nxt = _NEXT_WORD.match(text, after)
    word = nxt.group(1) if nxt else ""
    if low in _BEFORE_NUMBER:
        return not word[:1].isdigit()
    if low in _AMBIGUOUS or ("." in token and _DOTTED.fullmatch(token)):
        return word in _OPENER_WORDS
    return True


def _strip_spans(text: str, bounds: Iterable[int], end: int) -> list[Span]:
    """Cut ``text`` at ``bounds`` and drop the whitespace at each piece's ends."""
    spans: list[Span] = []
    append = spans.append
    prev = 0
    for cut in (*bounds, end):
        if cut <= prev:
            continue
        piece = text[prev:cut]
        stripped = piece.lstrip()
        if stripped:
            a = prev + len(piece) - len(stripped)
            append((a, a + len(stripped.rstrip())))
        prev = cut
    return spans


def _sentence_spans(text: str) -> list[Span]:
    return _strip_spans(text, _sentence_cuts(text), len(text))


def _paragraph_spans(text: str) -> list[Span]:
    return _strip_spans(text, (m.start() for m in _BLANK_LINE.finditer(text)), len(text))


def _to_chunks(text: str, spans: Iterable[Span], offset: int) -> list[Chunk]:
    return [Chunk(a + offset, b + offset, text[a:b]) for a, b in spans]


def split_sentences(text: str, offset: int = 0) -> list[Chunk]:
    """Split text into sentences (and at blank lines), with exact spans.

    A sentence ends at ``.``, ``!``, ``?`` or an ellipsis (plus closing quotes
    or brackets) followed by whitespace and a capital, digit or opening quote,
    unless the period belongs to a title (Mr., Dr.), an initial (J. R. R.) or
    a Latin abbreviation (e.g., i.e., vs.); "etc.", "St." and dotted acronyms
    (U.S.) end a sentence only before a common sentence opener ("The", "He").
    Decimals (3.14) never match since no whitespace follows their point.
    """
    return _to_chunks(text, _sentence_spans(text), offset)


def split_paragraphs(text: str, offset: int = 0) -> list[Chunk]:
    """Split text at blank lines; each paragraph without its surrounding whitespace."""
    return _to_chunks(text, _paragraph_spans(text), offset)


# --- splitting over-long units at word boundaries --------------------------


def _word_spans(text: str, start: int, end: int) -> list[Span]:
    return [m.span() for m in _WORD.finditer(text, start, end)]


def _equal_word_pieces(words: list[Span], max_words: int) -> list[Span]:
    """The fewest pieces of at most ``max_words`` words, sizes differing by at most one."""
    n = len(words)
    k = -(-n // max_words)
    base, extra = divmod(n, k)
    pieces: list[Span] = []
    i = 0
    for p in range(k):
        size = base + (1 if p < extra else 0)
        pieces.append((words[i][0], words[i + size - 1][1]))
        i += size
    return pieces


def _split_word(text: str, start: int, end: int, limit: int, count: TokenCounter) -> list[Span]:
    """Cut one word longer than ``limit`` tokens into character pieces that fit."""
    pieces: list[Span] = []
    a = start
    while a < end:
        if count(text[a:end]) <= limit:
            pieces.append((a, end))
            break
        lo, hi = a + 1, end  # find the longest prefix that fits (at least one char)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if count(text[a:mid]) <= limit:
                lo = mid
            else:
                hi = mid - 1
        pieces.append((a, lo))
        a = lo
    return pieces


def _balanced_pieces(
    text: str, start: int, end: int, limit: int, count: TokenCounter
) -> list[Span]:
    """Split ``text[start:end]`` at word boundaries into near-equal pieces of <= limit tokens.

    Cuts go where the running token total crosses multiples of total/k, k being
    the fewest pieces the total allows; a piece that still overflows (uneven
    words) is split greedily. A single word over the limit is cut by characters.
    """
    units: list[Span] = []
    weights: list[int] = []
    for a, b in _word_spans(text, start, end):
        w = count(text[a:b])
        if w > limit:
            for pa, pb in _split_word(text, a, b, limit, count):
                units.append((pa, pb))
                weights.append(count(text[pa:pb]))
        else:
            units.append((a, b))
            weights.append(w)
    if not units:
        return []
    total = sum(weights)
    k = max(1, -(-total // limit))
    cum = list(accumulate(weights))
    bounds = [0]
    for i in range(1, k):
        target = total * i / k
        j = bisect_left(cum, target)
        # cut after word j when that lands closer to the target than before it
        cut = j + 1 if j == 0 or cum[j] - target <= target - cum[j - 1] else j
        if bounds[-1] < cut < len(units):
            bounds.append(cut)
    bounds.append(len(units))
    pieces: list[Span] = []
    for lo, hi in pairwise(bounds):
        # uneven words can push a group over the limit: pack it greedily then
        pieces.extend(_pack(text, units[lo:hi], weights[lo:hi], limit, count))
    return pieces


def _pack(
    text: str, units: list[Span], weights: list[int], limit: int, count: TokenCounter
) -> list[Span]:
    """Greedily pack consecutive units into windows whose token total stays <= limit.

    Sums of unit counts are exact for the additive default counter; any other
    counter (a model tokenizer) has each window re-counted as a whole and the
    last units moved on while it overflows.
    """
    exact = count is count_tokens
    windows: list[Span] = []
    n = len(units)
    i = 0
    while i < n:
        j = i
        total = 0
        while j < n and (j == i or total + weights[j] <= limit):
            total += weights[j]
            j += 1
        if not exact:
            while j - i > 1 and count(text[units[i][0] : units[j - 1][1]]) > limit:
                j -= 1
        windows.append((units[i][0], units[j - 1][1]))
        i = j
    return windows


def _check_limit(name: str, value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise SettingError(f"{name} must be a whole number of at least 1, got {value!r}")


def _token_units(
    text: str, spans: list[Span], limit: int, count: TokenCounter
) -> tuple[list[Span], list[int]]:
    """Sentence spans with counts. A sentence over the limit is split at its
    newlines first (a list, a table or unpunctuated text is one "sentence" that
    is really many lines), and a line still over the limit into near-equal
    pieces. Packing then fills windows with whole lines, instead of leaving
    scraps of a word or two where uneven pieces overflowed."""
    units: list[Span] = []
    weights: list[int] = []
    for a, b in spans:
        w = count(text[a:b])
        if w <= limit:
            units.append((a, b))
            weights.append(w)
            continue
        for la, lb in _line_spans(text, a, b):
            lw = count(text[la:lb])
            if lw <= limit:
                units.append((la, lb))
                weights.append(lw)
                continue
            for pa, pb in _balanced_pieces(text, la, lb, limit, count):
                units.append((pa, pb))
                weights.append(count(text[pa:pb]))
    return units, weights


def _line_spans(text: str, start: int, end: int) -> list[Span]:
    """The non-blank lines of ``text[start:end]``, without surrounding whitespace."""
    spans: list[Span] = []
    line_start = start
    while line_start < end:
        nl = text.find("\n", line_start, end)
        line_end = end if nl < 0 else nl
        words = _word_spans(text, line_start, line_end)
        if words:
            spans.append((words[0][0], words[-1][1]))
        line_start = line_end + 1
    return spans


def _token_window_spans(text: str, max_tokens: int, count: TokenCounter) -> list[Span]:
    units, weights = _token_units(text, _sentence_spans(text), max_tokens, count)
    return _pack(text, units, weights, max_tokens, count)


def token_windows(
    text: str, max_tokens: int, count: TokenCounter = count_tokens, offset: int = 0
) -> list[Chunk]:
    """Consecutive sentences packed into windows of at most ``max_tokens`` tokens.

    RAPTOR's rule: a sentence that would overflow the window starts the next
    one, so no sentence is cut, unless one sentence alone is over the limit;
    that one is split at its newlines, and a line still over the limit at word
    boundaries into roughly equal pieces.
    """
    _check_limit("max_tokens", max_tokens)
    return _to_chunks(text, _token_window_spans(text, max_tokens, count), offset)


def paragraph_windows(
    text: str, max_tokens: int, count: TokenCounter = count_tokens, offset: int = 0
) -> list[Chunk]:
    """Whole paragraphs packed into windows of at most ``max_tokens`` tokens.

    GraphReader's rule (chunks of at most 2k tokens, paragraphs kept whole);
    a paragraph over the limit is cut into token windows of its sentences.
    """
    _check_limit("max_tokens", max_tokens)
    units: list[Span] = []
    weights: list[int] = []
    for a, b in _paragraph_spans(text):
        w = count(text[a:b])
        if w <= max_tokens:
            units.append((a, b))
            weights.append(w)
            continue
        para = text[a:b]
        for pa, pb in _token_window_spans(para, max_tokens, count):
            units.append((a + pa, a + pb))
            weights.append(count(para[pa:pb]))
    return _to_chunks(text, _pack(text, units, weights, max_tokens, count), offset)


def sentence_word_chunks(text: str, max_words: int = 32, offset: int = 0) -> list[Chunk]:
    """MixPR's chunks (appendix A.2): sentences of at most ``max_words`` words.

    A longer sentence is split at its newlines, and a line still over the
    limit into the fewest near-equal pieces along word boundaries. Words are
    whitespace-separated tokens. Runs at several MB per second.
    """
    _check_limit("max_words", max_words)
    # A sentence of n characters holds at most (n + 1) // 2 words, so most
    # short sentences need no counting at all.
    short = 2 * max_words - 1
    spans: list[Span] = []
    append = spans.append
    for a, b in _sentence_spans(text):
        if b - a <= short or len(text[a:b].split()) <= max_words:
            append((a, b))
            continue
        for la, lb in _line_spans(text, a, b):
            words = _word_spans(text, la, lb)
            if len(words) > max_words:
                spans.extend(_equal_word_pieces(words, max_words))
            else:
                append((la, lb))
    return _to_chunks(text, spans, offset)


# --- chunks that follow the document's own units ----------------------------

_TITLE_LINE_WORDS = 12
_SENTENCE_END = ".!?;:,"


def _looks_like_title(line: str) -> bool:
    """A short single line with no sentence punctuation at its end ("3.2 Shell
    Commands", "Chapter IV", "Robert Hossein"): a heading or title line in plain text."""
    if "\n" in line or len(line.split()) > _TITLE_LINE_WORDS:
        return False
    bare = line.rstrip(_CLOSERS.replace("\\", ""))
    return bool(bare) and bare[-1] not in _SENTENCE_END and not bare[0].islower()


def _snapped(text: str, positions: Iterable[int]) -> set[int]:
    """Each position moved past whitespace to where the text it marks begins."""
    out: set[int] = set()
    for p in positions:
        if 0 < p < len(text):
            m = _WORD.search(text, p)
            if m is not None:
                out.add(m.start())
    return out


def _split_at(spans: list[Span], text: str, breaks: Sequence[int]) -> list[Span]:
    """Cut spans at each break position inside them (a page or a section that starts
    inside a paragraph), dropping the whitespace at the new ends."""
    if not breaks:
        return spans
    cuts = sorted(set(breaks))
    out: list[Span] = []
    for a, b in spans:
        lo, hi = bisect_left(cuts, a + 1), bisect_left(cuts, b)
        inner = cuts[lo:hi]
        if not inner:
            out.append((a, b))
            continue
        pieces = _strip_spans(text[a:b], [c - a for c in inner], b - a)
        out.extend((a + x, a + y) for x, y in pieces)
    return out


def section_chunks(
    text: str,
    max_tokens: int,
    *,
    breaks: Sequence[int] = (),
    headings: Sequence[int] = (),
    count: TokenCounter = count_tokens,
    offset: int = 0,
) -> list[Chunk]:
    """One chunk per paragraph, its heading or title line kept with it.

    Paragraphs are the text between blank lines, cut again at ``breaks`` (where a
    page or a section starts, positions in ``text``), so no chunk spans two pages or
    two sections. A paragraph that starts at one of ``headings`` (layout.json's) or
    looks like a title line (one short line without a sentence's end) is joined to
    the paragraph after it, unless a break falls between them. A unit over
    ``max_tokens`` is cut into token windows of whole sentences (:func:`token_windows`'
    rule), its heading in the first. Short paragraphs are not packed together: a
    chunk is one paragraph, as the document has it.
    """
    _check_limit("max_tokens", max_tokens)
    hard = _snapped(text, breaks)
    heads = _snapped(text, headings)
    units = _split_at(_paragraph_spans(text), text, sorted(hard))
    groups: list[Span] = []
    pending: Span | None = None  # a run of heading lines waiting for their paragraph
    for a, b in units:
        if pending is not None and a in hard:
            groups.append(pending)  # a break between the heading and what follows
            pending = None
        start = pending[0] if pending is not None else a
        if a in heads or _looks_like_title(text[a:b]):
            pending = (start, b)
            continue
        groups.append((start, b))
        pending = None
    if pending is not None:
        groups.append(pending)
    spans: list[Span] = []
    for a, b in groups:
        unit = text[a:b]
        # lcr's own count gives at most one token to each character that is not a space:
        # a short paragraph (most of a story's) needs no count
        fits = count is count_tokens and len(unit) - unit.count(" ") <= max_tokens
        if fits or count(unit) <= max_tokens:
            spans.append((a, b))
        else:
            windows = _token_window_spans(text[a:b], max_tokens, count)
            spans.extend((a + x, a + y) for x, y in windows)
    return _to_chunks(text, spans, offset)
