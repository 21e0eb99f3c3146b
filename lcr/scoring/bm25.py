"""BM25 as lcr uses it: one tokenisation for every BM25 index (the bm25 baseline,
LightPAL's initial retrieval) and one stored layout, so a question is tokenised
and scored exactly as the chunks were indexed.

The index is stored through the store's one sparse-matrix writer and reader
(:func:`lcr.store.arrays.write_csr`'s loose layout: ``bm25_data``, ``bm25_indices``,
``bm25_indptr``, bm25s's precomputed score matrix in CSC form, as it is) and a JSON
vocabulary, not with ``bm25s.BM25.save``, which writes ``.npy`` files into a
directory of its own beside the store's zarr arrays. Restoring sets the
attributes bm25s's own ``load`` sets (``scores``, ``vocab_dict``,
``unique_token_ids_set``, ``nonoccurrence_array``); bm25s is pinned below its
next breaking release in pyproject.toml, and tests/test_bm25_layout.py fails if
that layout changes.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from itertools import chain
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from lcr.store import MethodReader, MethodWriter


def bm25s_module() -> Any:
    """bm25s, with its logger (set to DEBUG by the library) kept to warnings."""
    import logging

    import bm25s

    logging.getLogger("bm25s").setLevel(logging.WARNING)
    return bm25s


def _stemmer(stemmer: str) -> Any:
    if stemmer == "none":
        return None
    import Stemmer

    return Stemmer.Stemmer(stemmer)


def bm25_tokenize(texts: list[str], stopwords: str, stemmer: str) -> list[list[str]]:
    """Tokens of each text: stop words dropped (``"none"`` keeps them) and Snowball stems
    (``"none"`` for no stemming)."""
    out = bm25s_module().tokenize(
        texts,
        stopwords=None if stopwords == "none" else stopwords,
        stemmer=_stemmer(stemmer),
        return_ids=False,
        show_progress=False,
    )
    return [list(t) for t in out]


# bm25s.tokenize's split (its default token_pattern): words of two or more characters
_SPLIT = re.compile(r"(?u)\b\w\w+\b").findall


def bm25_token_ids(
    texts: list[str], stopwords: str, stemmer: str
) -> tuple[list[list[int]], dict[str, int]]:
    """:func:`bm25_tokenize`'s tokens as ids, their vocabulary numbered in order of first
    occurrence: the ids :meth:`BM25Index.fit` gives those tokens, for a build's chunks.

    bm25s's ``tokenize`` done in fewer passes (tests/test_bm25_layout.py pins the two
    equal): lower-cased, split by its pattern, its stop words dropped, each distinct
    word stemmed once. Its own loop adds words to a dictionary one by one, rebuilds the
    stop-word set for every text and numbers the stems of a set, which :meth:`fit` must
    then number again; here a stem's id is the first word's that stems to it, and the
    words come in order of first occurrence, so the ids come out in fit's order.
    """
    infer = bm25s_module().tokenization._infer_stopwords
    stop = frozenset(infer(None if stopwords == "none" else stopwords) or ())
    docs = [[w for w in _SPLIT(text.lower()) if w not in stop] for text in texts]
    words = list(dict.fromkeys(chain.from_iterable(docs)))
    stemmed = words if stemmer == "none" else _stemmer(stemmer).stemWords(words)
    vocab: dict[str, int] = {}
    word_id = {
        w: vocab.setdefault(stem, len(vocab)) for w, stem in zip(words, stemmed, strict=True)
    }
    return [[word_id[w] for w in doc] for doc in docs], vocab


class BM25Index:
    """A bm25s index (Lucene BM25) over tokenised texts, saved into and loaded from a store."""

    def __init__(self, retriever: Any) -> None:
        self.retriever = retriever

    @classmethod
    def fit(cls, tokens: list[list[str]], *, k1: float = 1.5, b: float = 0.75) -> BM25Index:
        """The index of ``tokens``, its vocabulary ids in order of first occurrence:
        bm25s numbers a set of the tokens, whose order follows the process's hash seed,
        so two builds of one text would store different files."""
        vocab = {t: i for i, t in enumerate(dict.fromkeys(t for doc in tokens for t in doc))}
        ids = [[vocab[t] for t in doc] for doc in tokens]
        return cls.fit_ids(ids, vocab, k1=k1, b=b)

    @classmethod
    def fit_ids(
        cls, ids: list[list[int]], vocab: dict[str, int], *, k1: float = 1.5, b: float = 0.75
    ) -> BM25Index:
        """The index of texts given as token ids of ``vocab`` (:func:`bm25_token_ids`)."""
        retriever = bm25s_module().BM25(k1=k1, b=b)
        if not vocab:
            # nothing to index (a one-letter or stop-word-only text): bm25s cannot
            # (it fails on the empty vocabulary), and every score is 0 anyway
            retriever.scores = {
                "data": np.zeros(0, np.float32),
                "indices": np.zeros(0, np.int32),
                "indptr": np.zeros(1, np.int64),
                "num_docs": len(ids),
            }
            retriever.vocab_dict = {}
            return cls(retriever)
        retriever.index((ids, vocab), show_progress=False)
        return cls(retriever)

    @property
    def vocabulary_size(self) -> int:
        return len(self.retriever.vocab_dict)

    def save(self, out: MethodWriter, prefix: str = "bm25") -> None:
        scores = self.retriever.scores
        parts = (
            np.asarray(scores["data"]),
            np.asarray(scores["indices"]),
            np.asarray(scores["indptr"]),
        )
        out.write_csr(prefix, parts, loose=True)  # bm25s's CSC matrix, its arrays as they are
        out.write_json(
            f"{prefix}_vocabulary",
            {"vocab": self.retriever.vocab_dict, "num_docs": int(scores["num_docs"])},
        )

    @classmethod
    def load(
        cls, stored: MethodReader, prefix: str = "bm25", *, documents: int | None = None
    ) -> BM25Index:
        """The index as :meth:`save` stored it; scores need nothing else (k1 and b were
        applied when the score matrix was computed). Checked as it loads: the score
        matrix's structure, its vocabulary's ids, and its ``documents`` texts (when
        given), so no stored content reaches bm25s's compiled scoring out of bounds."""
        meta = stored.json(f"{prefix}_vocabulary")
        where = f"{prefix}_vocabulary.json"
        vocab = meta.get("vocab") if isinstance(meta, dict) else None
        num_docs = meta.get("num_docs") if isinstance(meta, dict) else None
        if not isinstance(vocab, dict) or type(num_docs) is not int or num_docs < 0:
            raise stored.damage(f"{where} has no vocab object and num_docs count")
        if documents is not None and num_docs != documents:
            raise stored.damage(f"{where} counts {num_docs} texts, not the {documents} chunks")
        # checked as it reads: one pointer per term, indices are texts (bm25s's CSC)
        data, indices, indptr = stored.csr(prefix, loose=num_docs)
        terms = max(len(indptr) - 1, 0)
        ids = list(vocab.values())
        # bm25s numbers its empty token one past the score columns, and never scores it
        columns = [i for t, i in vocab.items() if t != "" or i != terms]
        if not all(type(i) is int and 0 <= i < terms for i in columns) or len(set(ids)) != len(ids):
            raise stored.damage(f"{where} has token ids outside its {terms} score columns")
        retriever = bm25s_module().BM25()
        retriever.scores = {"data": data, "indices": indices, "indptr": indptr,
                            "num_docs": num_docs}  # fmt: skip
        retriever.vocab_dict = vocab
        retriever.unique_token_ids_set = set(ids)
        retriever.nonoccurrence_array = None  # only BM25L/BM25+ need it; this is Lucene BM25
        return cls(retriever)

    def scores(self, tokens: list[str], n: int) -> np.ndarray:
        """BM25 score of each of the ``n`` indexed texts for a tokenised query (float64);
        all zeros when no token is in the vocabulary."""
        known = [t for t in tokens if t in self.retriever.vocab_dict]
        if not known:
            return np.zeros(n)
        return np.asarray(self.retriever.get_scores(known), dtype=np.float64)


def bm25_scores(
    query: Sequence[str], docs: Sequence[Sequence[str]], *, k1: float = 1.5, b: float = 0.75
) -> np.ndarray:
    """Lucene BM25 of one tokenised query against a small tokenised collection, the
    statistics (document frequencies, mean length) taken from that collection alone:
    for ranking a handful of sentences, where building an index would cost more."""
    n = len(docs)
    out = np.zeros(n, dtype=np.float64)
    if n == 0 or not query:
        return out
    lengths = np.array([len(d) for d in docs], dtype=np.float64)
    mean_len = float(lengths.mean()) or 1.0
    counts = [Counter(d) for d in docs]
    for term in set(query):
        tf = np.array([c.get(term, 0) for c in counts], dtype=np.float64)
        df = float(np.count_nonzero(tf))
        if df == 0:
            continue
        idf = np.log(1.0 + (n - df + 0.5) / (df + 0.5))
        out += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * lengths / mean_len))
    return out
