"""bench/synth_text.py: the generated prose MixPR's scale benchmark runs on."""

from __future__ import annotations

import sys
from collections import Counter

import pytest

from tests.conftest import FIXTURES, REPO

sys.path.insert(0, str(REPO / "bench"))
from synth_text import SYLLABLES, WORD, Profile, coin, fit, generate


@pytest.fixture(scope="module")
def profile() -> Profile:
    return fit((FIXTURES / "cinderella.txt").read_text(encoding="utf-8"), vocabulary=3_000)


def documents(text: str) -> list[list[str]]:
    return [WORD.findall(d.lower()) for d in text.split("\n\n")]


def test_same_seed_same_text_and_a_longer_text_extends_it(profile: Profile) -> None:
    a = generate(profile, 12_000, seed=3, doc_words=800)
    assert a == generate(profile, 12_000, seed=3, doc_words=800)
    assert a != generate(profile, 12_000, seed=4, doc_words=800)
    # only the last document, cut to size, differs in a longer text
    shorter = a.split("\n\n")
    longer = generate(profile, 30_000, seed=3, doc_words=800).split("\n\n")
    assert len(shorter) > 5
    assert shorter[:-1] == longer[: len(shorter) - 1]


def test_each_document_brings_words_of_its_own(profile: Profile) -> None:
    known = set(profile.words)
    docs = documents(generate(profile, 20_000, seed=5, doc_words=800, own_share=0.5))
    assert len(docs) > 10
    own = [Counter(w for w in d if w not in known) for d in docs]
    # every document (but the last, cut to size) uses new words, and repeats them
    assert all(len(o) >= 5 for o in own[:-1])
    assert sum(sum(o.values()) for o in own) > 2 * sum(len(o) for o in own)
    # and no two documents share one
    seen: set[str] = set()
    for o in own:
        assert not seen & o.keys()
        seen |= o.keys()
    # without own words, every word comes from the fitted vocabulary
    plain = documents(generate(profile, 20_000, seed=5, doc_words=800, own_share=0.0))
    assert {w for d in plain for w in d} <= known


def syllables(word: str) -> int:
    return sum(ch not in "aeiou" for ch in word)


def test_coined_words_are_distinct() -> None:
    block = len(SYLLABLES) ** 3  # the three-syllable words, then four
    serials = [*range(20_000), *range(block - 2_000, block + 2_000)]
    words = [coin(s) for s in serials]
    assert len(set(words)) == len(words)
    assert syllables(coin(block - 1)) == 3
    assert syllables(coin(block)) == 4
