"""lcr.scoring.tfidf: the query-time vectoriser equals scikit-learn's, without importing it."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

from lcr import api
from lcr.models.container import Models
from lcr.scoring.tfidf import (
    FALLBACK_TOKEN_PATTERN,
    TOKEN_PATTERN,
    TfidfModel,
    compile_token_pattern,
    l2_normalise,
    term_counts,
    tokenise,
)
from lcr.store import Document, Index, MethodWriter
from lcr.store.index import _dir_digests, _dir_files
from lcr.text.chunking import sentence_word_chunks, split_sentences

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"

# questions a user types: unknown words, nothing, punctuation, unicode, upper case,
# stop words only, one-letter words, repeats (counts above one), digits and hyphens
ODD_QUESTIONS = [
    "Where did the BIRD sit?",
    "",
    "   \n\t ",
    "?!... --- ;;",
    "zzqx qqzz xylophone",
    "Ünïcode: naïve café, Straße, ΑΒΓ δέντρο, 灰姑娘, Cinderella's",
    "THE the The tHe of and",
    "a b c i o u",
    "hazel-tree hazel tree HAZEL, hazel! hazel? tree tree tree",
    "2 twigs, 3 doves and 12 o'clock",
    "ASHES ashes Ashes cinders",
]


def chunks_of(text: str, max_words: int = 32) -> list[str]:
    return [c.text for c in sentence_word_chunks(text, max_words=max_words)]


def chunks(path: Path, max_words: int = 32) -> list[str]:
    return chunks_of(path.read_text(), max_words)


def sklearn_vectoriser(texts: Sequence[str], **kw: Any) -> Any:
    from sklearn.feature_extraction.text import TfidfVectorizer

    return TfidfVectorizer(dtype=np.float32, **kw).fit(list(texts))


def assert_same_rows(ours: sp.csr_array, theirs: Any) -> None:
    """Same shape, dtype, row pointers and columns; values within 1e-6."""
    theirs = sp.csr_array(theirs)
    theirs.sort_indices()
    assert ours.shape == theirs.shape
    assert ours.dtype == theirs.dtype == np.float32
    assert ours.indptr.tolist() == theirs.indptr.tolist()
    assert ours.indices.tolist() == theirs.indices.tolist()
    np.testing.assert_allclose(ours.data, theirs.data, rtol=0, atol=1e-6)


@pytest.mark.parametrize("sublinear_tf", [False, True])
@pytest.mark.parametrize("stop_words", [None, "english"])
def test_transform_equals_sklearns(sublinear_tf: bool, stop_words: str | None) -> None:
    texts = chunks(DATA / "cinderella.txt")
    model, rows = TfidfModel.fit(texts, sublinear_tf=sublinear_tf, stop_words=stop_words)
    vec = sklearn_vectoriser(
        texts, token_pattern=TOKEN_PATTERN, sublinear_tf=sublinear_tf, stop_words=stop_words
    )
    assert model.token_pattern == TOKEN_PATTERN and model.sublinear_tf is sublinear_tf
    assert model.terms == vec.get_feature_names_out().tolist()
    np.testing.assert_array_equal(model.idf, vec.idf_)
    other = json.loads((DATA / "squality.jsonl").read_text().splitlines()[0])
    questions = [
        *ODD_QUESTIONS,
        *[c.text for c in split_sentences((DATA / "cinderella.txt").read_text())[:40]],
        *chunks(DATA / "babi-qa2.txt"),  # another text: many words the vocabulary lacks
        *[q["question_text"] for q in other["questions"]],
        *chunks_of(other["document"])[:30],
    ]
    for batch in (texts, questions, [questions[0]]):
        assert_same_rows(model.transform(batch), vec.transform(batch))
    assert model.transform([]).shape == (0, len(model.terms))  # scikit-learn refuses none
    # a chunk vectorised as a question is its stored row (what mixpr's cosine assumes)
    assert_same_rows(model.transform(texts), rows)
    if stop_words == "english":
        from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

        assert model.stop_word_list == ENGLISH_STOP_WORDS
        assert model.transform(["the of and"]).nnz == 0
    else:
        assert model.stop_word_list is None


@pytest.mark.parametrize(
    "texts",
    [
        ["a b c.", "x y z.", "a a b!", "é ü ß.", "1 2 3"],
        ["the of and", "an a the", "it is"],  # only stop words (with stop_words='english')
    ],
)
def test_the_whitespace_fallback_equals_sklearns(texts: list[str]) -> None:
    """No word of two letters (or every word a stop word): fit falls back to whitespace
    tokens with default settings, and the question is vectorised the same way."""
    model, rows = TfidfModel.fit(texts, sublinear_tf=True, stop_words="english")
    assert model.token_pattern == FALLBACK_TOKEN_PATTERN
    assert model.stop_words is None and model.stop_word_list is None and not model.sublinear_tf
    vec = sklearn_vectoriser(texts, token_pattern=FALLBACK_TOKEN_PATTERN)
    questions = [*texts, *ODD_QUESTIONS, "A B C. x. y z. the", "b b b c"]
    assert_same_rows(model.transform(questions), vec.transform(questions))
    assert_same_rows(model.transform(texts), rows)


def test_the_pure_steps() -> None:
    pattern = compile_token_pattern(TOKEN_PATTERN)
    assert tokenise("The BIRD, the bird's nest; a I", pattern) == [
        "the",
        "bird",
        "the",
        "bird",
        "nest",
    ]
    assert tokenise("The BIRD, the nest", pattern, frozenset({"the"})) == ["bird", "nest"]
    assert compile_token_pattern(r"(\w)\w+").findall("abc de") == ["a", "d"]
    with pytest.raises(ValueError, match="capturing group"):
        compile_token_pattern(r"(\w)(\w)")
    cols, counts = term_counts(["b", "z", "a", "b"], {"a": 3, "b": 1})
    assert cols.tolist() == [1, 3] and counts.tolist() == [2.0, 1.0]
    assert cols.dtype == np.int32 and counts.dtype == np.float32
    m = sp.csr_array(
        (np.array([3.0, 4.0, 1.0], np.float32), np.array([0, 2, 1]), np.array([0, 2, 2, 3])),
        shape=(3, 3),
    )
    out = l2_normalise(m)
    assert out.dtype == np.float32 and out.indptr.tolist() == [0, 2, 2, 3]
    assert out.data.tolist() == pytest.approx([0.6, 0.8, 1.0])
    assert m.data.tolist() == [3.0, 4.0, 1.0]  # the input is left as it was
    model, _ = TfidfModel.fit(chunks(DATA / "cinderella.txt"))
    with pytest.raises(ValueError, match="string object"):
        model.transform("a question, not a list of them")


class DirReader:
    """What ``TfidfModel.load`` reads of a method's build, from a folder of files."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory

    def json(self, name: str) -> Any:
        return json.loads((self.dir / f"{name}.json").read_text(encoding="utf-8"))

    def array(self, name: str) -> np.ndarray:
        return np.load(self.dir / f"{name}.npy")


def drop_stop_word_list(path: Path) -> None:
    """Rewrite a vocabulary file as builds before the stored stop-word list wrote it."""
    meta = json.loads(path.read_text(encoding="utf-8"))
    del meta["stop_word_list"]
    path.write_text(json.dumps(meta, ensure_ascii=False, sort_keys=True), encoding="utf-8")


@pytest.mark.parametrize("stop_words", [None, "english"])
def test_a_vocabulary_saved_before_the_stop_word_list_loads_the_same(
    tmp_path: Path, stop_words: str | None
) -> None:
    texts = chunks(DATA / "cinderella.txt")
    model, _ = TfidfModel.fit(texts, sublinear_tf=True, stop_words=stop_words)
    out = MethodWriter(tmp_path)
    out.mapped = True
    model.save(out)
    saved = json.loads((tmp_path / "tfidf_vocabulary.json").read_text())
    assert saved["stop_word_list"] == (None if stop_words is None else sorted(model.stop_word_list))
    new = TfidfModel.load(DirReader(tmp_path))  # type: ignore[arg-type]
    drop_stop_word_list(tmp_path / "tfidf_vocabulary.json")
    old = TfidfModel.load(DirReader(tmp_path))  # type: ignore[arg-type]
    assert old.stop_word_list == new.stop_word_list == model.stop_word_list
    questions = [*ODD_QUESTIONS, *texts]
    want = model.transform(questions)
    for loaded in (new, old):
        got = loaded.transform(questions)
        assert got.indptr.tolist() == want.indptr.tolist()
        assert got.indices.tolist() == want.indices.tolist()
        assert got.data.tobytes() == want.data.tobytes()  # identical, not merely close


def make_index(tmp: Path, text: str, methods: list[str]) -> Index:
    doc = Document("doc.txt", text, hashlib.sha256(text.encode()).hexdigest(), len(text))
    idx = Index.create(tmp / "doc.idx", [doc])
    api.plan_and_build(idx, methods, Models.with_objects(), [])
    return idx


@pytest.fixture(scope="module")
def small_index(tmp_path_factory: pytest.TempPathFactory) -> Index:
    text = (DATA / "cinderella.txt").read_text()
    return make_index(tmp_path_factory.mktemp("tfidf"), text, ["mixpr", "tfidf"])


def test_an_index_built_before_the_stop_word_list_gives_the_same_evidence(
    small_index: Index, tmp_path: Path
) -> None:
    import shutil

    old_path = tmp_path / "old.idx"
    shutil.copytree(small_index.path, old_path)
    manifest = json.loads((old_path / "manifest.json").read_text())
    for method in ("mixpr", "tfidf"):
        entry = manifest["methods"][method]
        mdir = old_path / entry["dir"]
        drop_stop_word_list(mdir / "tfidf_vocabulary.json")
        entry["files"], entry["sha256"] = _dir_files(mdir), _dir_digests(mdir)
    (old_path / "manifest.json").write_text(json.dumps(manifest))
    for method, sets in (("tfidf", []), ("mixpr", ["mixpr.mode=local"])):
        new_model = TfidfModel.load(Index.open(small_index.path).reader(method))
        old_model = TfidfModel.load(Index.open(old_path).reader(method))
        a, b = new_model.transform(ODD_QUESTIONS), old_model.transform(ODD_QUESTIONS)
        assert (a != b).nnz == 0 and a.indices.tolist() == b.indices.tolist()
        for question in ODD_QUESTIONS[:1] + ODD_QUESTIONS[-2:]:
            new_ev, old_ev = (
                api.plan_and_retrieve(Index.open(p), method, question, Models.with_objects(), sets)
                for p in (small_index.path, old_path)
            )
            assert new_ev.evidence.items
            assert [it.to_json() for it in new_ev.evidence.items] == [
                it.to_json() for it in old_ev.evidence.items
            ]


def test_loading_and_vectorising_does_not_import_sklearn(
    small_index: Index, tmp_path: Path
) -> None:
    """scikit-learn costs a retrieve process ~0.9 s to import; only fitting needs it."""
    model, _ = TfidfModel.fit(chunks(DATA / "cinderella.txt"), stop_words="english")
    out = MethodWriter(tmp_path)
    out.mapped = True
    model.save(out)
    code = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path

        import numpy as np

        import lcr.scoring.tfidf
        from lcr.scoring.tfidf import TfidfModel
        from lcr.store import Index
        from tests.test_tfidf import DirReader

        assert "sklearn" not in sys.modules, "on import"
        idx = Index.open({str(small_index.path)!r})
        for method in ("mixpr", "tfidf"):
            q = TfidfModel.load(idx.reader(method)).transform(["Where did the bird sit?"])
            assert q.nnz > 0
        english = TfidfModel.load(DirReader(Path({str(tmp_path)!r})))
        assert english.transform(["the bird and the tree"]).nnz == 2
        assert "sklearn" not in sys.modules, "after load and transform"

        from lcr import api
        from lcr.models.container import Models

        for method, sets in (("mixpr", ["mixpr.mode=local"]), ("tfidf", [])):
            q = "Where did the bird sit?"
            assert api.plan_and_retrieve(idx, method, q, Models.with_objects(), sets).evidence.items
        assert "sklearn" not in sys.modules, "after retrieving"
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
