"""Sentence embeddings with sentence-transformers, as the :class:`Embedder` protocol."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lcr.progress import NULL_PROGRESS, Progress

if TYPE_CHECKING:
    import numpy as np


class SentenceTransformerEmbedder:
    """L2-normalised float32 sentence vectors; cosine similarity is a dot product."""

    def __init__(self, model: Any, *, model_id: str) -> None:
        self.model = model
        self.model_id = model_id
        dim = _dimension(model)
        if dim is None:  # some models only know their width after a first encode
            dim = int(model.encode(["x"], convert_to_numpy=True).shape[1])
        self._dim = int(dim)

    @classmethod
    def load(
        cls, source: str | Path, *, model_id: str, device: str = "cpu", local_only: bool = True
    ) -> SentenceTransformerEmbedder:
        """``device`` must be resolved already; library errors propagate to the caller."""
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(str(source), device=device, local_files_only=local_only)
        model.eval()
        return cls(model, model_id=model_id)

    @property
    def dim(self) -> int:
        return self._dim

    def encode(
        self, texts: Sequence[str], *, batch_size: int = 32, progress: Progress = NULL_PROGRESS
    ) -> np.ndarray:
        """Encode in batches of similar length (less padding), rows in the input order.

        Reports one progress task ("embedding", total = number of texts).
        """
        import numpy as np

        n = len(texts)
        out = np.zeros((n, self._dim), dtype=np.float32)
        if n == 0:
            return out
        batch_size = max(1, int(batch_size))
        task = progress.task("embedding", total=n)
        order = sorted(range(n), key=lambda i: -len(texts[i]))
        for start in range(0, n, batch_size):
            idx = order[start : start + batch_size]
            vecs = self.model.encode(
                [texts[i] for i in idx],
                batch_size=len(idx),
                convert_to_numpy=True,
                normalize_embeddings=False,
                show_progress_bar=False,
            )
            out[idx] = np.asarray(vecs, dtype=np.float32)
            task.advance(len(idx))
        return _normalise(out)


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
