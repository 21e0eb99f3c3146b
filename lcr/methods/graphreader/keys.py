"""Key-element normalisation and merging (the paper follows Lu et al. 2023).

Two steps, as in the paper's graph construction (section 3.2):

1. ``normalise_key``: lexical noise away: Unicode (NFKC) and case folding,
   possessives ("Jones'", "John's") and punctuation dropped, whitespace
   collapsed, and simple plural folding of the last word ("castles" ->
   "castle", "cities" -> "city"). Equal normal forms are one key.
2. ``merge_keys``: granularity: normal forms whose embeddings are at least
   ``threshold`` similar are merged into the more frequent one (leader
   clustering in order of frequency, so merges never chain through a third key).

The surface forms each merged key came from are kept for ``lcr info``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

_POSSESSIVE = re.compile(r"(?<=\w)(?:'s|’s|'|’)(?=\s|$)")
_NON_WORD = re.compile(r"[^\w\s]+")
# Words whose final "s" is not a plural (a short list; the fold is deliberately simple).
_NOT_PLURAL_ENDINGS = ("ss", "us", "is", "os", "as", "ous", "ics")


def _fold_plural(word: str) -> str:
    if len(word) <= 3 or not word.isalpha():
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "shes", "ches", "xes", "zes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(_NOT_PLURAL_ENDINGS):
        return word[:-1]
    return word


def normalise_key(surface: str) -> str:
    """The normal form of a key element; ``""`` when nothing word-like is left."""
    text = unicodedata.normalize("NFKC", surface).casefold()
    text = _POSSESSIVE.sub("", text)
    text = _NON_WORD.sub(" ", text)
    words = text.split()
    if not words:
        return ""
    words[-1] = _fold_plural(words[-1])
    return " ".join(words)


def folded_words(text: str) -> str:
    """``text`` as normalised words, each plural-folded, space-delimited at both ends."""
    words = _NON_WORD.sub(" ", _POSSESSIVE.sub("", unicodedata.normalize("NFKC", text).casefold()))
    return " " + " ".join(_fold_plural(w) for w in words.split()) + " "


def occurs_in(key: str, folded_text: str) -> bool:
    """Whether ``key`` occurs, as whole words, in a text prepared by :func:`folded_words`."""
    folded = folded_words(key)
    return folded.strip() != "" and folded in folded_text


@dataclass
class KeyMerge:
    """``leader[i]``: the index of the key that normal form ``i`` was merged into
    (itself when it leads)."""

    leader: list[int]

    @property
    def merged(self) -> int:
        return sum(1 for i, lead in enumerate(self.leader) if lead != i)


def merge_keys(
    embeddings: np.ndarray, counts: Sequence[int], threshold: float, block: int = 1024
) -> KeyMerge:
    """Leader clustering of L2-normalised key embeddings by cosine >= ``threshold``.

    Keys are visited by frequency (most frequent first, ties by index); a key
    joins the most similar leader seen before it, or leads. Similarities are
    computed in row blocks and only pairs above the threshold are kept, so the
    memory stays linear in the number of keys for any threshold near 1.
    """
    n = len(counts)
    if embeddings.shape[0] != n:
        raise ValueError("one embedding per key expected")
    order = sorted(range(n), key=lambda i: (-counts[i], i))
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    emb = np.asarray(embeddings, dtype=np.float32)
    close: list[list[tuple[float, int]]] = [[] for _ in range(n)]
    if threshold <= 1.0 and n > 1:
        for start in range(0, n, block):
            sims = emb[start : start + block] @ emb.T
            rows, cols = np.nonzero(sims >= threshold)
            for r, c in zip(rows.tolist(), cols.tolist(), strict=True):
                i = start + r
                if c != i and rank[c] < rank[i]:  # only keys visited before i can lead it
                    close[i].append((float(sims[r, c]), c))
    leader = list(range(n))
    is_leader = [False] * n
    for i in order:
        best = max(((sim, -int(rank[c]), c) for sim, c in close[i] if is_leader[c]), default=None)
        if best is None:
            is_leader[i] = True
        else:
            leader[i] = best[2]
    return KeyMerge(leader)
