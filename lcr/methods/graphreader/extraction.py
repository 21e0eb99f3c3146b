"""Reading the extraction reply (Figure 6): atomic facts, each with its key elements.

Small models write the format loosely, so a line is accepted in the forms seen
in real replies (``tests/data/graphreader/``): a serial number or bullet, the
fact, then key elements after ``|`` (or the paper's literal ``[[[[...]]]]``
brackets). Anything else that looks like content is counted as malformed and
never stored as a fact. A chunk whose reply gives no fact at all can fall back
to its own sentences (``sentence_facts``), keyed by their names and numbers;
the build counts those chunks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from lcr.methods.graphreader.keys import folded_words, occurs_in
from lcr.text.chunking import split_sentences

MAX_KEY_WORDS = 6  # a "key element" longer than this is a phrase, not a key
MAX_KEY_CHARS = 60
_SERIAL = re.compile(r"^\s*(?:[-*•]+\s*|\(?\d{1,4}\s*[.):,]\s*|#{1,6}\s*)+")
_BRACKETED = re.compile(r"\[{2,}(.*?)\]{2,}")
_FRAMING = re.compile(
    r"^\s*(?:#+|user:?|assistant:?|example:?|requirements?:?|atomic facts?:?|key elements?:?"
    r"|here (?:are|is)\b.*|sure\b.*|note:.*)\s*$",
    re.IGNORECASE,
)
_KEY_STRIP = " \t\"'`“”‘’[](){}<>*_.,;:"
# The example line of the prompt: a reply that repeats it is not a fact of the chunk.
_EXAMPLE_FACT = "one day, a father and his little son were going home."


@dataclass(frozen=True)
class ExtractedFact:
    """One atomic fact and the key elements the model gave for it (surface forms)."""

    text: str
    keys: tuple[str, ...]


@dataclass
class Extraction:
    facts: list[ExtractedFact] = field(default_factory=list)
    malformed: int = 0  # content lines that did not parse into a fact with keys
    echoed: int = 0  # lines repeating the prompt's example


def _clean_key(raw: str) -> str:
    key = " ".join(raw.strip(_KEY_STRIP).split())
    return key.strip(_KEY_STRIP)


def _split_keys(parts: list[str]) -> list[str]:
    """Keys after the fact; one part holding commas is a comma-separated list."""
    if len(parts) == 1 and "," in parts[0]:
        parts = parts[0].split(",")
    keys: list[str] = []
    for part in parts:
        key = _clean_key(part)
        if not key or len(key) > MAX_KEY_CHARS or len(key.split()) > MAX_KEY_WORDS:
            continue
        if not any(ch.isalnum() for ch in key):
            continue
        if key.lower() not in {k.lower() for k in keys}:
            keys.append(key)
    return keys


def parse_line(line: str) -> ExtractedFact | None:
    """One reply line as a fact with at least one key element, or None."""
    bracketed = _BRACKETED.findall(line)
    if len(bracketed) >= 2:
        if len(bracketed) >= 3 and bracketed[0].strip().rstrip(".").isdigit():
            bracketed = bracketed[1:]
        fact_text, key_parts = bracketed[0], "|".join(bracketed[1:]).split("|")
    else:
        body = _SERIAL.sub("", line.replace("[[", "").replace("]]", ""), count=1)
        if "|" not in body:
            return None
        fact_text, *key_parts = body.split("|")
    fact = " ".join(fact_text.strip(" \t,;|").split())
    if len(fact.split()) < 2 or not any(ch.isalpha() for ch in fact):
        return None
    keys = _split_keys(key_parts)
    if not keys:
        return None
    return ExtractedFact(fact, tuple(keys))


def parse_extraction(reply: str) -> Extraction:
    """Every parseable fact of a reply, in order; duplicates kept once."""
    out = Extraction()
    seen: set[str] = set()
    for raw in reply.splitlines():
        line = raw.strip()
        if not line or _FRAMING.match(line) or not any(ch.isalnum() for ch in line):
            continue
        fact = parse_line(line)
        if fact is None:
            out.malformed += 1
            continue
        if fact.text.lower() == _EXAMPLE_FACT or fact.text.lower().startswith(_EXAMPLE_FACT[:30]):
            out.echoed += 1
            continue
        if fact.text.lower() in seen:
            continue
        seen.add(fact.text.lower())
        out.facts.append(fact)
    return out


def grounded(facts: list[ExtractedFact], chunk_text: str) -> tuple[list[ExtractedFact], int]:
    """Facts with only the key elements that occur in their chunk or their own text (a key
    the model copied from the prompt's example, say, is dropped); facts left with no key
    are dropped. Returns the facts and how many keys were dropped."""
    chunk = folded_words(chunk_text)
    out: list[ExtractedFact] = []
    dropped = 0
    for fact in facts:
        own = folded_words(fact.text)
        keys = tuple(k for k in fact.keys if occurs_in(k, chunk) or occurs_in(k, own))
        dropped += len(fact.keys) - len(keys)
        if keys:
            out.append(ExtractedFact(fact.text, keys))
    return out, dropped


# Names (capitalised words, possibly joined by "of"/"de"/...) and numbers.
_NAME = re.compile(
    r"\b(?:[A-Z][\w'’-]*(?:\s+(?:of|de|la|von|van)\s+[A-Z][\w'’-]*|\s+[A-Z][\w'’-]*)*|\d[\d,.]*\d|\d)"
)
_NOT_NAMES = frozenset(
    [
        "a",
        "an",
        "and",
        "as",
        "at",
        "but",
        "by",
        "for",
        "from",
        "he",
        "her",
        "his",
        "i",
        "if",
        "in",
        "it",
        "its",
        "my",
        "no",
        "not",
        "now",
        "of",
        "on",
        "or",
        "our",
        "she",
        "so",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "to",
        "was",
        "we",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "with",
        "you",
        "your",
        "yes",
    ]
)


def sentence_facts(chunk_text: str) -> list[ExtractedFact]:
    """The fallback for a chunk the model gave no fact for: its sentences, keyed by the
    names and numbers in them (a sentence with none is left out)."""
    facts: list[ExtractedFact] = []
    for sent in split_sentences(chunk_text):
        text = " ".join(sent.text.split())
        keys: list[str] = []
        for m in _NAME.finditer(text):
            key = _clean_key(m.group(0))
            words = key.split()
            while words and words[0].lower() in _NOT_NAMES:
                words = words[1:]
            key = " ".join(words)
            if key and key.lower() not in {k.lower() for k in keys}:
                keys.append(key)
        if keys and len(text.split()) >= 2:
            facts.append(ExtractedFact(text, tuple(keys[: MAX_KEY_WORDS * 2])))
    return facts
