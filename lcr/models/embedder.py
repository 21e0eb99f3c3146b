"""Sentence embeddings with sentence-transformers, as the :class:`Embedder` protocol."""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lcr.progress import NULL_PROGRESS, Progress

if TYPE_CHECKING:
    import numpy as np


# Vectors remembered per embedder, by the text's hash (~1.5 KB each at 384 dims).
MEMO_ROWS = 100_000


class SentenceTransformerEmbedder:
    """L2-normalised float32 sentence vectors; cosine similarity is a dot product.

    Each text is encoded once per process: repeated chunks (boilerplate, a
    filler text shared by many documents) and a second method over the same
    chunks (``hybrid`` after ``dense``) reuse the vectors already computed.
    """

    def __init__(self, model: Any, *, model_id: str) -> None:
        self.model = model
        self.model_id = model_id
        self._memo: OrderedDict[bytes, np.ndarray] = OrderedDict()
        dim = _dimension(model)
        if dim is None:  # some models only know their width after a first encode
            dim = int(model.encode(["x"], convert_to_numpy=True).shape[1])
        self._dim = int(dim)

    @classmethod
    def load(
        cls, source: str | Path, *, model_id: str, device: str = "cpu", local_only: bool = True
    ) -> SentenceTransformerEmbedder:
        """``device`` must be resolved already; library errors propagate to the caller.

        Never runs code shipped with a model: an index names the embedder it was
        built with, so an index from someone else chooses what is loaded here.
        """
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(
            str(source), device=device, local_files_only=local_only, trust_remote_code=False
        )
        model.eval()
        return cls(model, model_id=model_id)

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def max_tokens(self) -> int:
        """Tokens of a text the model reads (its window less the two special
        tokens); the rest would be dropped without a word."""
        window = int(getattr(self.model, "max_seq_length", 0) or 0)
        return max(window - 2, 1) if window else 0

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        """Each text's length in the model's own tokens (no special tokens)."""
        if not texts:
            return []
        ids = self.model.tokenizer(list(texts), add_special_tokens=False)["input_ids"]
        return [len(x) for x in ids]

    def count_tokens(self, text: str) -> int:
        return self.token_counts([text])[0]

    def encode(
        self, texts: Sequence[str], *, batch_size: int = 32, progress: Progress = NULL_PROGRESS
    ) -> np.ndarray:
        """Encode in batches of similar length (less padding), rows in the input order.

        Texts already encoded (in this call or an earlier one) are not encoded
        again. Reports one progress task ("embedding", total = number of texts).
        """
        import numpy as np

        n = len(texts)
        out = np.zeros((n, self._dim), dtype=np.float32)
        if n == 0:
            return out
        batch_size = max(1, int(batch_size))
        task = progress.task("embedding", total=n)
        keys = [hashlib.blake2b(t.encode("utf-8"), digest_size=16).digest() for t in texts]
        todo: dict[bytes, int] = {}  # distinct texts to encode -> one row holding it
        for i, key in enumerate(keys):
            if key not in self._memo and key not in todo:
                todo[key] = i
        task.advance(n - len(todo))
        order = sorted(todo.values(), key=lambda i: -len(texts[i]))
        fresh: dict[bytes, np.ndarray] = {}
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            vecs = self.model.encode(
                [texts[i] for i in idx],
                batch_size=len(idx),
                convert_to_numpy=True,
                normalize_embeddings=False,
                show_progress_bar=False,
            )
            for i, vec in zip(idx, _normalise(np.asarray(vecs, dtype=np.float32)), strict=True):
                fresh[keys[i]] = vec
            task.advance(len(idx))
        for i, key in enumerate(keys):
            vec = fresh.get(key)
            if vec is None:
                vec = self._memo[key]
                self._memo.move_to_end(key)  # recently used: kept longest
            out[i] = vec
        self._remember(fresh)
        return out

    def _remember(self, fresh: dict[bytes, np.ndarray]) -> None:
        for key, vec in fresh.items():
            self._memo[key] = vec
            self._memo.move_to_end(key)
        while len(self._memo) > MEMO_ROWS:
            self._memo.popitem(last=False)


def _dimension(model: Any) -> int | None:
    for name in ("get_embedding_dimension", "get_sentence_embedding_dimension"):
        fn = getattr(model, name, None)
        if fn is not None:
            value = fn()
            if value:
                return int(value)
    return None


def _normalise(rows: np.ndarray) -> np.ndarray:
    """Unit rows in float32; an all-zero row stays zero rather than NaN."""
    import numpy as np

    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (rows / norms).astype(np.float32, copy=False)
