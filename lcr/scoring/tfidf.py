"""TF-IDF vectors that survive a save/load without pickle (a sparse retrieval scorer).

scikit-learn fits the vocabulary and idf at build time; we persist them as a JSON
term list and an array. At query time a question is vectorised by the pure
NumPy/SciPy functions below, which reproduce ``TfidfVectorizer.transform`` for the
settings lcr stores (word tokens by a regex, lowercase, an optional stop-word list,
plain or sublinear tf, the stored smoothed idf, l2 norm, float32), so a question is
vectorised exactly as the chunks were without importing scikit-learn (about 0.9 s
of a retrieve process).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

if TYPE_CHECKING:
    from lcr.store import MethodReader, MethodWriter

TOKEN_PATTERN = r"(?u)\b\w\w+\b"
# when TOKEN_PATTERN finds no word in any text (one-letter words, symbols only)
FALLBACK_TOKEN_PATTERN = r"(?u)\S+"


# ------------------------------------------------------- the query-time vectoriser
def compile_token_pattern(pattern: str) -> re.Pattern[str]:
    """The tokeniser's regex, refused as scikit-learn refuses it: with one capturing
    group ``findall`` returns the group, with more it would return tuples."""
    compiled = re.compile(pattern)
    if compiled.groups > 1:
        raise ValueError(
            "More than 1 capturing group in token pattern. Only a single group should be captured."
        )
    return compiled


def tokenise(
    text: str, pattern: re.Pattern[str], stop_words: Collection[str] | None = None
) -> list[str]:
    """scikit-learn's word analyzer with its defaults: ``str.lower`` (no accent
    stripping), the pattern's ``findall``, then stop words dropped (unigrams only)."""
    tokens: list[str] = pattern.findall(text.lower())
    if stop_words is not None:
        tokens = [t for t in tokens if t not in stop_words]
    return tokens


def term_counts(
    tokens: Sequence[str], vocabulary: Mapping[str, int]
) -> tuple[np.ndarray, np.ndarray]:
    """The known terms' columns (sorted, int32) and counts (float32) of one text;
    unknown terms are ignored, as a fitted vocabulary ignores them."""
    cols = [vocabulary[t] for t in tokens if t in vocabulary]
    unique, counts = np.unique(np.asarray(cols, dtype=np.int32), return_counts=True)
    return unique.astype(np.int32, copy=False), counts.astype(np.float32)


def counts_matrix(rows: Sequence[tuple[np.ndarray, np.ndarray]], n_features: int) -> sp.csr_array:
    """Stack per-text (columns, counts) into a float32 CSR count matrix, one row a text."""
    lengths = np.fromiter((len(c) for c, _ in rows), dtype=np.int32, count=len(rows))
    indptr = np.zeros(len(rows) + 1, dtype=np.int32)
    np.cumsum(lengths, out=indptr[1:])
    indices = np.concatenate([c for c, _ in rows]) if rows else np.zeros(0, np.int32)
    data = np.concatenate([v for _, v in rows]) if rows else np.zeros(0, np.float32)
    return sp.csr_array(
        (data.astype(np.float32, copy=False), indices.astype(np.int32, copy=False), indptr),
        shape=(len(rows), n_features),
    )


def tfidf_weight(counts: sp.csr_array, idf: np.ndarray, *, sublinear_tf: bool) -> sp.csr_array:
    """tf (``1 + log(count)`` if sublinear) times the stored idf, in scikit-learn's
    precisions: the log in float32, the product in float64 rounded to float32."""
    tf = np.asarray(counts.data, dtype=np.float32)
    if sublinear_tf:
        tf = np.log(tf) + np.float32(1.0)
    data = np.asarray(tf * idf[counts.indices], dtype=np.float32)
    return sp.csr_array((data, counts.indices.copy(), counts.indptr.copy()), shape=counts.shape)


def l2_normalise(matrix: sp.csr_array) -> sp.csr_array:
    """Each row divided by its l2 norm, as scikit-learn's ``normalize`` does it: squares
    in float32 summed in order in float64, the quotient rounded to float32; an empty row
    stays empty. Bit for bit, so a question scores a chunk as a stored row would."""
    data = np.asarray(matrix.data, dtype=np.float32)
    squares = (data * data).astype(np.float64)
    out = data.astype(np.float64)
    indptr = matrix.indptr
    for i in range(matrix.shape[0]):
        start, end = int(indptr[i]), int(indptr[i + 1])
        if start == end:
            continue
        total = float(np.cumsum(squares[start:end])[-1])  # in order, not pairwise
        if total == 0.0:
            continue
        out[start:end] /= np.sqrt(total)
    return sp.csr_array(
        (out.astype(np.float32), matrix.indices.copy(), matrix.indptr.copy()), shape=matrix.shape
    )


def stop_word_set(setting: Any, stored: Sequence[str] | None) -> frozenset[str] | None:
    """The stop words a build removed: the list it stored, else (an index built before
    the list was stored) the one its setting names; only then is scikit-learn imported."""
    if stored is not None:
        return frozenset(stored)
    if setting is None:
        return None
    if setting == "english":
        from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

        return frozenset(ENGLISH_STOP_WORDS)
    if isinstance(setting, str):
        raise ValueError(f"not a built-in stop list: {setting}")
    return frozenset(setting)


# ------------------------------------------------------------------ the model
@dataclass
class TfidfModel:
    """A fitted vocabulary and idf, and the settings that vectorise text with them."""

    terms: list[str]  # column order
    idf: np.ndarray  # float64, smoothing already applied by scikit-learn's fit
    token_pattern: str = TOKEN_PATTERN
    sublinear_tf: bool = False
    stop_words: Any = None  # the setting as given to scikit-learn ("english", None)
    stop_word_list: frozenset[str] | None = None  # the words it removed
    vocabulary: dict[str, int] = field(init=False, repr=False)
    _pattern: re.Pattern[str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if len(self.terms) != len(self.idf):
            raise ValueError(f"{len(self.terms)} terms but {len(self.idf)} idf values")
        self.vocabulary = {t: i for i, t in enumerate(self.terms)}
        self._pattern = compile_token_pattern(self.token_pattern)

    @classmethod
    def fit(
        cls, texts: Sequence[str], *, sublinear_tf: bool = False, stop_words: str | None = None
    ) -> tuple[TfidfModel, sp.csr_array]:
        """Fit on ``texts``; returns the model and their L2-normalised rows (float32 CSR)."""
        from sklearn.feature_extraction.text import TfidfVectorizer

        vec = TfidfVectorizer(
            token_pattern=TOKEN_PATTERN,
            sublinear_tf=sublinear_tf,
            stop_words=stop_words,
            dtype=np.float32,
        )
        try:
            matrix = vec.fit_transform(list(texts))
        except ValueError:
            # Every text is stop words or one-letter tokens: an empty vocabulary.
            vec = TfidfVectorizer(token_pattern=FALLBACK_TOKEN_PATTERN, dtype=np.float32)
            matrix = vec.fit_transform(list(texts))
        terms = [""] * len(vec.vocabulary_)
        for term, col in vec.vocabulary_.items():
            terms[col] = term
        params = vec.get_params()
        stop_list = vec.get_stop_words()
        model = cls(
            terms,
            np.asarray(vec.idf_, dtype=np.float64),
            token_pattern=params["token_pattern"],
            sublinear_tf=params["sublinear_tf"],
            stop_words=params["stop_words"],
            stop_word_list=None if stop_list is None else frozenset(stop_list),
        )
        return model, sp.csr_array(matrix)

    def transform(self, texts: Sequence[str]) -> sp.csr_array:
        """L2-normalised float32 TF-IDF rows of ``texts``, equal to scikit-learn's."""
        if isinstance(texts, str):
            raise ValueError("Iterable over raw text documents expected, string object received.")
        rows = [
            term_counts(tokenise(t, self._pattern, self.stop_word_list), self.vocabulary)
            for t in texts
        ]
        counts = counts_matrix(rows, len(self.terms))
        return l2_normalise(tfidf_weight(counts, self.idf, sublinear_tf=self.sublinear_tf))

    @property
    def vocabulary_size(self) -> int:
        return len(self.terms)

    def save(self, out: MethodWriter, prefix: str = "tfidf") -> None:
        out.write_json(
            f"{prefix}_vocabulary",
            {
                "terms": self.terms,
                "token_pattern": self.token_pattern,
                "sublinear_tf": self.sublinear_tf,
                "stop_words": self.stop_words,
                # the effective list, so a question needs no scikit-learn to drop them
                # (absent in indexes built before it: see stop_word_set)
                "stop_word_list": None
                if self.stop_word_list is None
                else sorted(self.stop_word_list),
            },
        )
        out.write_array(f"{prefix}_idf", np.asarray(self.idf, dtype=np.float64))

    @classmethod
    def load(cls, stored: MethodReader, prefix: str = "tfidf") -> TfidfModel:
        """The model :meth:`save` stored, each field checked: a vocabulary file of the
        wrong shape is damage (one line), never a ``KeyError`` at the first question."""
        meta = stored.json(f"{prefix}_vocabulary")
        idf = stored.array(f"{prefix}_idf")

        def damaged(problem: str) -> Exception:
            return stored.damage(f"{prefix}_vocabulary.json {problem}")

        if not isinstance(meta, dict):
            raise damaged("is not an object")
        terms = meta.get("terms")
        if not isinstance(terms, list) or not all(isinstance(t, str) for t in terms):
            raise damaged("has no list of terms")
        if len(set(terms)) != len(terms):
            raise damaged("lists a term twice")
        if idf.ndim != 1 or len(idf) != len(terms):
            raise stored.damage(f"{prefix}_idf and {prefix}_vocabulary.json disagree")
        pattern = meta.get("token_pattern")
        stop_list = meta.get("stop_word_list")
        if not isinstance(pattern, str) or not isinstance(meta.get("sublinear_tf"), bool):
            raise damaged("has no token_pattern or sublinear_tf")
        if stop_list is not None and not (
            isinstance(stop_list, list) and all(isinstance(w, str) for w in stop_list)
        ):
            raise damaged("has a stop_word_list that is not a list of words")
        if not (meta.get("stop_words") is None or isinstance(meta.get("stop_words"), str)):
            raise damaged("has stop_words that are not a name")
        try:
            return cls(
                list(terms),
                idf,
                token_pattern=pattern,
                sublinear_tf=meta["sublinear_tf"],
                stop_words=meta.get("stop_words"),
                stop_word_list=stop_word_set(meta.get("stop_words"), stop_list),
            )
        except (re.error, ValueError, RecursionError) as exc:
            raise damaged(f"does not make a vectoriser ({exc})") from None
