"""TF-IDF vectors that survive a save/load without pickle (a sparse retrieval scorer).

scikit-learn fits the vocabulary and idf; we persist them as a JSON term list and
a zarr array, and rebuild an equivalent vectoriser at query time, so a question
is vectorised exactly as the chunks were.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

if TYPE_CHECKING:
    from sklearn.feature_extraction.text import TfidfVectorizer

    from lcr.store import MethodReader, MethodWriter

TOKEN_PATTERN = r"(?u)\b\w\w+\b"


@dataclass
class TfidfModel:
    vectorizer: TfidfVectorizer

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
            vec = TfidfVectorizer(token_pattern=r"(?u)\S+", dtype=np.float32)
            matrix = vec.fit_transform(list(texts))
        return cls(vec), sp.csr_array(matrix)

    def transform(self, texts: Sequence[str]) -> sp.csr_array:
        return sp.csr_array(self.vectorizer.transform(list(texts)))

    @property
    def vocabulary_size(self) -> int:
        return len(self.vectorizer.vocabulary_)

    def save(self, out: MethodWriter, prefix: str = "tfidf") -> None:
        vocab = self.vectorizer.vocabulary_
        terms = [""] * len(vocab)
        for term, col in vocab.items():
            terms[col] = term
        params = self.vectorizer.get_params()
        out.write_json(
            f"{prefix}_vocabulary",
            {
                "terms": terms,
                "token_pattern": params["token_pattern"],
                "sublinear_tf": params["sublinear_tf"],
                "stop_words": params["stop_words"],
            },
        )
        out.write_array(f"{prefix}_idf", np.asarray(self.vectorizer.idf_, dtype=np.float64))

    @classmethod
    def load(cls, stored: MethodReader, prefix: str = "tfidf") -> TfidfModel:
        from sklearn.feature_extraction.text import TfidfVectorizer

        meta = stored.json(f"{prefix}_vocabulary")
        idf = stored.array(f"{prefix}_idf")
        vec = TfidfVectorizer(
            token_pattern=meta["token_pattern"],
            sublinear_tf=meta["sublinear_tf"],
            stop_words=meta["stop_words"],
            vocabulary={t: i for i, t in enumerate(meta["terms"])},
            dtype=np.float32,
        )
        vec.idf_ = idf
        return cls(vec)
