"""An embedder with no model: words and their neighbours hashed into a fixed vector.

``--embedder hashing-384`` (any width from 16 to 4096): texts that share words
get similar vectors, with no download, no torch and the same bytes on every
machine. It is far weaker than a trained model; it is there for what needs an
embedding but not its quality: lcr's own quick tests, the conformance checks of
:mod:`lcr.testing`, and an index on a machine with no model.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from itertools import pairwise
from typing import TYPE_CHECKING

from lcr.progress import NULL_PROGRESS, Progress

if TYPE_CHECKING:
    import numpy as np

PREFIX = "hashing-"
DEFAULT_DIM = 384
MIN_DIM, MAX_DIM = 16, 4096
_WORD = re.compile(r"\w+", re.UNICODE)


def hashing_dim(name: str) -> int | None:
    """The width ``hashing-N`` names, or None when ``name`` is not one."""
    if not name.startswith(PREFIX) or not name[len(PREFIX) :].isdigit():
        return None
    dim = int(name[len(PREFIX) :])
    return dim if MIN_DIM <= dim <= MAX_DIM else None


class HashingEmbedder:
    """The hashing trick over lower-cased words and adjacent word pairs.

    Each feature adds +1 or -1 (a second bit of its hash) to the bucket its hash
    picks, so collisions cancel on average instead of piling up; rows are
    L2-normalised float32, and a text with no word is the zero vector.
    """

    def __init__(self, dim: int = DEFAULT_DIM, max_tokens: int = 0) -> None:
        """``max_tokens`` > 0 reads only a text's first that many words, as a trained
        model reads only its window: for tests of what a build does with longer texts."""
        if not MIN_DIM <= dim <= MAX_DIM:
            raise ValueError(f"a hashing embedder's width is {MIN_DIM} to {MAX_DIM}; got {dim}")
        self._dim = dim
        self._max_tokens = max(0, max_tokens)
        self.model_id = f"{PREFIX}{dim}" + (f"-window{max_tokens}" if max_tokens > 0 else "")

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def max_tokens(self) -> int:
        return self._max_tokens  # 0: every word of any length of text is read

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        return [len(_WORD.findall(t)) for t in texts]

    def count_tokens(self, text: str) -> int:
        return len(_WORD.findall(text))

    def encode(
        self, texts: Sequence[str], *, batch_size: int = 32, progress: Progress = NULL_PROGRESS
    ) -> np.ndarray:
        import numpy as np

        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        if not texts:
            return out
        task = progress.task("embedding", total=len(texts))
        for row, text in enumerate(texts):
            words = [w.lower() for w in _WORD.findall(text)]
            if self._max_tokens:
                words = words[: self._max_tokens]  # the rest silently dropped, as a model does
            for feature in (*words, *(f"{a} {b}" for a, b in pairwise(words))):
                digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
                value = int.from_bytes(digest, "little")
                out[row, value % self._dim] += 1.0 if (value >> 63) & 1 else -1.0
            task.advance(1)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return (out / norms).astype(np.float32, copy=False)
