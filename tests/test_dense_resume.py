"""#73: Ctrl-C during a dense build keeps the batches already embedded; the build run
again embeds only the rest and writes the rows an uninterrupted build writes."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lcr import api
from lcr.models.container import Models
from lcr.store import Document, Index


class Interrupted:
    """The real embedder, counting the texts it is asked to embed and raising
    KeyboardInterrupt (as Ctrl-C does) on its ``stop_after + 1``-th call."""

    def __init__(self, real: Any, stop_after: int | None = None) -> None:
        self.real = real
        self.stop_after = stop_after
        self.calls = 0
        self.texts = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    @property
    def dim(self) -> int:
        return int(self.real.dim)

    @property
    def max_tokens(self) -> int:
        return int(self.real.max_tokens)

    def encode(self, texts: Any, **kwargs: Any) -> Any:
        if self.stop_after is not None and self.calls >= self.stop_after:
            raise KeyboardInterrupt
        self.calls += 1
        self.texts += len(texts)
        return self.real.encode(texts, **kwargs)


def _story(n: int) -> str:
    words = [
        "keeper",
        "lamp",
        "tide",
        "harbour",
        "gull",
        "rope",
        "stair",
        "fog",
        "bell",
        "oil",
        "wick",
        "glass",
    ]
    return "\n\n".join(
        f"Paragraph {i}: the {words[i % 12]} and the {words[(i * 5) % 12]} "
        f"were {'checked' if i % 3 else 'mended'} on day {i} " + "by the keeper " * (i % 7)
        for i in range(n)
    )


def _index(path: Path, text: str) -> Index:
    sha = hashlib.sha256(text.encode()).hexdigest()
    return Index.create(path, [Document("story.txt", text, sha, len(text))])


@pytest.mark.parametrize("method", ["dense", "hybrid"])
def test_an_interrupted_dense_build_resumes_where_it_stopped(
    tmp_path: Path, embedder: Any, method: str
) -> None:
    text = _story(140)  # one chunk a paragraph: 5 batches of 32
    embedder._memo.clear()  # the process's memo would hide what the cache keeps
    whole = Interrupted(embedder)
    ref = _index(tmp_path / "whole.idx", text)
    api.plan_and_build(ref, [method], Models.with_objects(embedder=whole))
    expected = Index.open(ref.path).reader(method).array("embeddings")
    total = whole.texts
    assert whole.calls >= 4, "the story must take several batches"

    embedder._memo.clear()
    idx = _index(tmp_path / "cut.idx", text)
    cut = Interrupted(embedder, stop_after=2)
    with pytest.raises(KeyboardInterrupt):
        api.plan_and_build(idx, [method], Models.with_objects(embedder=cut))
    assert method not in Index.open(idx.path).methods
    done = cut.texts
    assert 0 < done < total

    embedder._memo.clear()
    again = Interrupted(embedder)
    api.plan_and_build(Index.open(idx.path), [method], Models.with_objects(embedder=again))
    assert again.texts == total - done  # only the rest
    got = Index.open(idx.path).reader(method).array("embeddings")
    assert got.dtype == expected.dtype and np.array_equal(got, expected)

    # a third build (--force) embeds nothing: every batch is kept
    embedder._memo.clear()
    third = Interrupted(embedder)
    api.plan_and_build(
        Index.open(idx.path), [method], Models.with_objects(embedder=third), force=True
    )
    assert third.texts == 0
    assert np.array_equal(Index.open(idx.path).reader(method).array("embeddings"), expected)
