"""The BM25 index layout lcr stores, and bm25s's, must not drift apart.

lcr stores bm25s's precomputed score matrix as its own arrays and restores a
``bm25s.BM25`` by setting the attributes bm25s's ``load`` sets (see
lcr/scoring/bm25.py). These tests fail if a bm25s release changes that matrix
(its form, its dtypes, its attributes) or the scores it gives, so a bm25s upgrade
past the pin in pyproject.toml is a decision, not an accident, and indexes
already on disk keep opening with the same scores.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lcr import api
from lcr.models.container import Models
from lcr.scoring.bm25 import BM25Index, bm25_token_ids, bm25_tokenize, bm25s_module
from lcr.store.arrays import (
    DamagedArrayError,
    Parts,
    check_csr,
    read_csr,
    write_arrays,
    write_csr,
)
from tests.fakes import ForbiddenLLM

DOCS = ["The cat sat on the mat.", "A dog chased the cat.", "Birds sing in the morning."]
# each stemmed term's column of the score matrix, {document: score}, as bm25s 0.2-0.3 computes it
COLUMNS = {
    "cat": {0: 0.18800145, 1: 0.18800145},
    "sat": {0: 0.39233169},
    "mat": {0: 0.39233169},
    "dog": {1: 0.39233169},
    "chase": {1: 0.39233169},
    "bird": {2: 0.39233169},
    "sing": {2: 0.39233169},
    "morn": {2: 0.39233169},
}
# an index written by lcr before this test existed (vocabulary order is bm25s's own)
STORED = {
    "bm25_data": np.array([0.39233169] * 5 + [0.18800145] * 2 + [0.39233169] * 2, np.float32),
    "bm25_indices": np.array([1, 2, 1, 2, 2, 0, 1, 0, 0], np.int32),
    "bm25_indptr": np.array([0, 1, 2, 3, 4, 5, 7, 8, 9], np.int64),
}
STORED_VOCAB = {
    "vocab": {
        "dog": 0,
        "morn": 1,
        "chase": 2,
        "bird": 3,
        "sing": 4,
        "cat": 5,
        "mat": 6,
        "sat": 7,
        "": 8,
    },
    "num_docs": 3,
}
QUERY_SCORES = [0.58033311, 0.18800145, 0.0]  # "cat on a mat"
_PARTS = ("data", "indices", "indptr")


class MemoryStore:
    """The calls BM25Index makes of a MethodWriter / MethodReader."""

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}
        self.jsons: dict[str, Any] = {}

    def write_array(self, name: str, array: np.ndarray) -> None:
        self.arrays[name] = np.array(array)

    def write_csr(self, name: str, parts: Parts, *, loose: bool) -> None:
        assert loose  # bm25's loose arrays, each under its own name
        for part, array in zip(_PARTS, parts, strict=True):
            self.write_array(f"{name}_{part}", array)

    def write_json(self, name: str, obj: Any) -> None:
        self.jsons[name] = obj

    def csr(self, name: str, *, loose: int) -> Parts:
        data, indices, indptr = (self.arrays[f"{name}_{part}"] for part in _PARTS)
        check_csr(Path(name), (len(indptr) - 1, loose), data, indices, indptr)
        return data, indices, indptr

    def json(self, name: str) -> Any:
        return self.jsons[name]


def _tokens(texts: list[str]) -> list[list[str]]:
    return bm25_tokenize(texts, "en", "english")


def _columns(scores: dict[str, Any], vocab: dict[str, int]) -> dict[str, dict[int, float]]:
    data, indices, indptr = scores["data"], scores["indices"], scores["indptr"]
    return {
        term: {
            int(indices[i]): round(float(data[i]), 6) for i in range(indptr[col], indptr[col + 1])
        }
        for term, col in vocab.items()
        if term  # bm25s adds an empty token to the vocabulary, after the matrix: no column
    }


def test_bm25s_score_matrix_is_the_layout_lcr_stores() -> None:
    index = BM25Index.fit(_tokens(DOCS))
    scores = index.retriever.scores
    assert set(scores) == {"data", "indices", "indptr", "num_docs"}
    assert scores["data"].dtype == np.float32 and scores["num_docs"] == len(DOCS)
    assert np.issubdtype(scores["indices"].dtype, np.integer)
    vocab = index.retriever.vocab_dict
    assert vocab[""] == len(vocab) - 1 == len(scores["indptr"]) - 1  # one column a real term
    expected = {t: {d: round(v, 6) for d, v in col.items()} for t, col in COLUMNS.items()}
    assert _columns(scores, vocab) == expected
    for attribute in ("vocab_dict", "unique_token_ids_set", "nonoccurrence_array"):
        assert hasattr(index.retriever, attribute)


def test_what_lcr_stores_is_what_bm25s_saves(tmp_path: Path) -> None:
    """bm25s's public save writes the very arrays lcr stores, and its public load
    scores a query as lcr's restored index does."""
    index = BM25Index.fit(_tokens(DOCS))
    store = MemoryStore()
    index.save(store)
    index.retriever.save(tmp_path, show_progress=False)
    for ours, theirs in (("data", "data"), ("indices", "indices"), ("indptr", "indptr")):
        saved = np.load(tmp_path / f"{theirs}.csc.index.npy")
        assert np.array_equal(store.arrays[f"bm25_{ours}"], saved)
    query = _tokens(["cat on a mat"])[0]
    loaded = bm25s_module().BM25.load(tmp_path)
    restored = BM25Index.load(store)
    assert np.allclose(restored.scores(query, 3), loaded.get_scores(query), atol=1e-6)


def test_an_index_stored_earlier_gives_the_same_scores() -> None:
    store = MemoryStore()
    store.arrays.update(STORED)
    store.jsons["bm25_vocabulary"] = STORED_VOCAB
    index = BM25Index.load(store)
    query = _tokens(["cat on a mat"])[0]
    assert index.scores(query, 3) == pytest.approx(QUERY_SCORES, abs=1e-6)
    assert index.scores(_tokens(["unicorns"])[0], 3).tolist() == [0.0, 0.0, 0.0]
    fresh = BM25Index.fit(_tokens(DOCS))
    assert fresh.scores(query, 3) == pytest.approx(QUERY_SCORES, abs=1e-6)


def test_the_bm25_method_stores_and_reopens_through_one_path(
    cinderella: Path, tmp_path: Path
) -> None:
    index, _ = api.plan_and_index(
        [cinderella], tmp_path / "c.idx", ["bm25"], Models.with_objects(llm=ForbiddenLLM())
    )
    reader = index.reader("bm25")
    nodes = reader.nodes()
    question = "What did the bird throw down to Cinderella?"
    tokens = _tokens([question])[0]
    restored = BM25Index.load(reader).scores(tokens, len(nodes))
    fresh = BM25Index.fit(_tokens([n.text for n in nodes])).scores(tokens, len(nodes))
    assert np.allclose(restored, fresh, atol=1e-6) and restored.max() > 0
    got = api.plan_and_retrieve(
        index, "bm25", question, Models.with_objects(llm=ForbiddenLLM()), k=3
    )
    assert [item.score for item in got.evidence.items] == pytest.approx(
        sorted(restored, reverse=True)[:3], abs=1e-6
    )


def _stored(index: BM25Index) -> MemoryStore:
    store = MemoryStore()
    index.save(store)
    return store


@pytest.mark.parametrize(("stopwords", "stemmer"), [("en", "english"), ("none", "none")])
def test_a_build_from_token_ids_stores_what_a_build_from_tokens_does(
    cinderella: Path, stopwords: str, stemmer: str
) -> None:
    """The bm25 method's build (token ids, renumbered in order of first occurrence)
    writes the very arrays and vocabulary that fitting the token strings writes, and
    scores every question as bm25s's own index over the same texts does."""
    texts = [p for p in cinderella.read_text().split("\n\n") if p.strip()]
    texts += ["Ünïcode STRASSE Straße 1999 café CAFÉ runs running ran x_y 2b", "the a of", ""]
    ids, vocab = bm25_token_ids(texts, stopwords, stemmer)
    tokens = bm25_tokenize(texts, stopwords, stemmer)
    assert list(vocab) == list(dict.fromkeys(t for doc in tokens for t in doc))
    assert len(vocab) > 100 and ids[-1] == []
    ours = _stored(BM25Index.fit_ids(ids, vocab))
    theirs = _stored(BM25Index.fit(tokens))
    assert ours.jsons == theirs.jsons
    for name, array in theirs.arrays.items():
        assert ours.arrays[name].dtype == array.dtype
        assert np.array_equal(ours.arrays[name], array)
    # bm25s's own index over the same texts (its vocabulary numbered its own way)
    bm25s = bm25s_module()
    stem = None if stemmer == "none" else __import__("Stemmer").Stemmer(stemmer)
    words = None if stopwords == "none" else stopwords
    own = bm25s.BM25()
    own.index(bm25s.tokenize(texts, stopwords=words, stemmer=stem, show_progress=False),
              show_progress=False)  # fmt: skip
    restored = BM25Index.load(ours)
    for question in ("Who threw down the golden dress?", "the king's son and the slipper"):
        query = bm25_tokenize([question], stopwords, stemmer)[0]
        known = [t for t in query if t in own.vocab_dict]
        mine = restored.scores(query, len(texts))
        assert mine.max() > 0 and np.array_equal(mine, own.get_scores(known).astype(np.float64))


def test_token_ids_of_texts_without_a_term_are_empty() -> None:
    ids, vocab = bm25_token_ids(["the a", "", "of"], "en", "english")
    assert ids == [[], [], []] and vocab == {}
    assert BM25Index.fit_ids(ids, vocab).scores(["cat"], 3).tolist() == [0.0, 0.0, 0.0]


def test_bm25s_matrix_goes_through_the_stores_one_sparse_pair(tmp_path: Path) -> None:
    """Issue 71: one home for sparse matrices. bm25s's CSC score matrix is written and read
    by :func:`lcr.store.arrays.write_csr` / :func:`~lcr.store.arrays.read_csr` (their
    loose layout), as the very files bm25 always stored (three zarr arrays written
    together), read back as stored and checked there; no other module checks a matrix."""
    parts = tuple(STORED[f"bm25_{part}"] for part in _PARTS)
    before = tmp_path / "before"
    before.mkdir()
    write_arrays({before / f"{name}.zarr": array for name, array in STORED.items()})
    after = tmp_path / "after"
    after.mkdir()
    write_csr(after / "bm25", (parts[0], parts[1], parts[2]), loose=True)
    files = sorted(p.relative_to(before) for p in before.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(after) for p in after.rglob("*") if p.is_file())
    assert all((before / f).read_bytes() == (after / f).read_bytes() for f in files)
    read = read_csr(before / "bm25", loose=3)
    for got, stored in zip(read, parts, strict=True):
        assert got.dtype == stored.dtype and np.array_equal(got, stored)
    with pytest.raises(DamagedArrayError, match="outside its 2 columns"):
        read_csr(before / "bm25", loose=2)  # a text index past the texts counted
    root = Path(__file__).resolve().parents[1] / "lcr"
    checkers = [p.name for p in root.rglob("*.py") if "check_csr(" in p.read_text("utf-8")]
    assert checkers == ["arrays.py"]
