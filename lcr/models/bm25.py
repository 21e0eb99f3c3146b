"""bm25s as lcr uses it: one tokenisation for every BM25 index (the baseline, LightPAL's
initial retrieval), so a question is tokenised exactly as the chunks were."""

from __future__ import annotations

from typing import Any


def bm25s_module() -> Any:
    """bm25s, with its logger (set to DEBUG by the library) kept to warnings."""
    import logging

    import bm25s

    logging.getLogger("bm25s").setLevel(logging.WARNING)
    return bm25s


def bm25_tokenize(texts: list[str], stopwords: str, stemmer: str) -> list[list[str]]:
    """Tokens of each text: stop words dropped (``"none"`` keeps them) and Snowball stems
    (``"none"`` for no stemming)."""
    stemmer_obj = None
    if stemmer != "none":
        import Stemmer

        stemmer_obj = Stemmer.Stemmer(stemmer)
    out = bm25s_module().tokenize(
        texts,
        stopwords=None if stopwords == "none" else stopwords,
        stemmer=stemmer_obj,
        return_ids=False,
        show_progress=False,
    )
    return [list(t) for t in out]
