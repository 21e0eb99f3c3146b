"""Distinct generated prose with real prose's statistics, for MixPR's scale benchmark.

The shared data holds about 1.5M tokens of distinct real text; beyond that the
bench needs text that costs the graph kernels what real text costs, without
repeating (a repeated text gives every chunk copies of itself as neighbours).

Fitted to the shared data (the bench's real 1M-token text):
- the vocabulary: the real words with their counts, ranked, extended to
  ``vocabulary`` words by a Zipf tail fitted to ranks 100..10,000 (the added
  words are made-up syllable strings, distinct from the real ones);
- sentence lengths: drawn from the real sentences' word counts, the sentences
  as lcr's own splitter cuts them (so "Mr." or "3.5" ends none: a plain regex
  made twice the real share of two- and three-word sentences, whose common
  words tie them to every other such sentence);
- topicality: real text reuses a document's own words (names, subjects),
  which is what puts its sentences over the 0.27 threshold together. Each
  generated document has ``topic_words`` topic words and a share
  ``topic_share`` of its content words (those past the 200 most common) comes
  from them (Zipf within the topic); the common words keep their real share.
- growth (Heaps' law): a real corpus keeps bringing new words (names, subjects
  that only one document uses), so its vocabulary grows with its length and a
  chunk's neighbours grow slower than the corpus. A share ``own_share`` of each
  document's topic words are therefore new words of its own (made up by
  :func:`coin`, used by no other document); the rest are drawn from the shared
  vocabulary past the 200 most common words, by frequency. Own words link
  chunks only within their document, and weigh more as the corpus grows (their
  idf rises), while shared words link across documents at a rate that grows
  with the corpus: the vocabulary grows about as n^0.59 (56k words at 1M
  tokens, 215k at 10M) and graph entries a chunk from 14.4 at 1M to about 58
  at 10M (the first version, without own words and with regex sentences, went
  from 13.3 to 105).

``topic_share`` and ``own_share`` are fitted by hand to two numbers: the real
1M-token text's 14.4 graph entries a chunk (measured) and 56 a chunk for 10M
tokens of distinct real prose (issue #29's figure, not measured here); check
with ``bench/bench_mixpr.py edges`` (bench/README.md, "Corpus scale").

Deterministic for a seed; a longer text starts with the shorter one's documents.
Nothing here is stored in git: it is made on the fly.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

import numpy as np

from lcr.text.chunking import split_sentences

WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
SYLLABLES = [c + v for c in "bcdfghjklmnprstvwz" for v in ("a", "e", "i", "o", "u", "ai", "ou")]


@dataclass
class Profile:
    """What the generator copies from real text."""

    words: list[str]  # ranked, most frequent first
    probs: np.ndarray  # unigram probabilities, same order
    sentence_lengths: np.ndarray  # words per sentence, as observed


def fit(text: str, vocabulary: int = 100_000, seed: int = 0) -> Profile:
    """The real text's ranked vocabulary with a fitted Zipf tail, and its sentence lengths."""
    counts = Counter(WORD.findall(text.lower()))
    ranked = [w for w, _ in counts.most_common()]
    freq = np.array([counts[w] for w in ranked], dtype=np.float64)
    # Zipf exponent from ranks 100..10,000 (log-log least squares)
    lo, hi = 100, min(10_000, len(freq))
    r = np.arange(lo, hi) + 1.0
    slope, intercept = np.polyfit(np.log(r), np.log(freq[lo:hi]), 1)
    # keep real words while their counts are informative (>= 3), then the fitted tail
    keep = int(np.searchsorted(-freq, -3, side="right"))
    words = ranked[:keep]
    tail_ranks = np.arange(keep, vocabulary) + 1.0
    tail = np.exp(intercept + slope * np.log(tail_ranks))
    rng = np.random.default_rng(seed)
    seen = set(words)
    while len(words) < vocabulary:
        w = "".join(rng.choice(SYLLABLES, size=int(rng.integers(2, 5))))
        if w not in seen:
            seen.add(w)
            words.append(w)
    probs = np.concatenate([freq[:keep], tail])
    # words per sentence as lcr's own splitter cuts the real text (so titles like
    # "Mr." and decimals do not count as sentence ends, as they do not in the index)
    lengths = np.array([len(s.text.split()) for s in split_sentences(text)], dtype=np.int64)
    return Profile(words, probs / probs.sum(), lengths)


_SPACE = len(SYLLABLES)
_SCRAMBLE = 2_147_483_647  # a prime, so coprime with every power of len(SYLLABLES)


def coin(serial: int) -> str:
    """The made-up word numbered ``serial``: at least three syllables, a different word
    for every serial (a syllable is a consonant and its vowels, so a word splits into
    syllables one way only), scrambled so that neighbouring serials look unrelated."""
    size, block = 3, _SPACE**3
    while serial >= block:
        serial -= block
        size += 1
        block *= _SPACE
    code = serial * _SCRAMBLE % block
    out: list[str] = []
    for _ in range(size):
        code, digit = divmod(code, _SPACE)
        out.append(SYLLABLES[digit])
    return "".join(out)


def generate(
    profile: Profile,
    tokens: int,
    *,
    seed: int = 1,
    doc_words: int = 5_000,
    topic_words: int = 300,
    topic_share: float = 0.55,
    own_share: float = 0.35,
) -> str:
    """About ``tokens`` words of distinct generated prose: documents of sentences."""
    rng = np.random.default_rng(seed)
    words = np.array(profile.words, dtype=object)
    vocab = len(words)
    taken = set(profile.words)
    serial = 0
    cum = np.cumsum(profile.probs)
    cum[-1] = 1.0
    # topic words come from past the 200 most common words, by their frequency
    tail_cum = np.cumsum(profile.probs[200:])
    tail_cum /= tail_cum[-1]
    zipf_topic = 1.0 / np.arange(1, topic_words + 1)
    zipf_topic = np.cumsum(zipf_topic / zipf_topic.sum())
    docs: list[str] = []
    made = 0
    while made < tokens:
        size = int(min(tokens - made, max(200, rng.normal(doc_words, doc_words / 3))))
        ids = np.searchsorted(cum, rng.random(size), side="right")
        topic = 200 + np.searchsorted(tail_cum, rng.random(topic_words), side="right")
        # the document's own words: new to the corpus, given ids past the vocabulary
        own = np.flatnonzero(rng.random(topic_words) < own_share)
        topic[own] = vocab + np.arange(len(own))
        coined: list[str] = []
        while len(coined) < len(own):
            w = coin(serial)
            serial += 1
            if w not in taken:
                coined.append(w)
        # only content words are swapped for the topic's: common words keep their share
        from_topic = (ids >= 200) & (rng.random(size) < topic_share)
        picks = np.searchsorted(zipf_topic, rng.random(int(from_topic.sum())), side="right")
        ids[from_topic] = topic[np.minimum(picks, topic_words - 1)]
        toks = words[np.minimum(ids, vocab - 1)]
        mine = ids >= vocab
        if coined:
            toks[mine] = np.array(coined, dtype=object)[ids[mine] - vocab]
        lengths = rng.choice(profile.sentence_lengths, size=size // 8 + 2)
        sentences: list[str] = []
        pos = 0
        for n in lengths:
            if pos >= size:
                break
            part = toks[pos : pos + max(int(n), 1)]
            pos += len(part)
            s = " ".join(part)
            sentences.append(s[:1].upper() + s[1:] + ".")
        # paragraphs of 1..8 sentences
        paras: list[str] = []
        i = 0
        while i < len(sentences):
            k = int(rng.integers(1, 9))
            paras.append(" ".join(sentences[i : i + k]))
            i += k
        docs.append("\n".join(paras))
        made += pos
    return "\n\n".join(docs)
