"""dense/hybrid: chunks longer than the embedder's window are embedded in pieces."""

from __future__ import annotations

import hashlib
import random
from pathlib import Path
from typing import Any

import pytest

from lcr import api
from lcr.methods.toolkit import embedding_pieces
from lcr.models.container import Models
from lcr.store import Document, Index


def hash_lines(count: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

    def key() -> str:
        return "".join(rng.choice(letters) for _ in range(16))

    return [f"{key()} = {key()}" for _ in range(count)]


def test_long_chunks_are_embedded_in_pieces_that_fit(embedder: Any) -> None:
    lines = hash_lines(60)
    long_chunk = "\n".join(lines)  # ~12 wordpieces a line: far over 254
    short = "The lighthouse keeper climbed the stairs."
    pieces, owner = embedding_pieces(embedder, [short, long_chunk, short])
    assert embedder.max_tokens == 254
    assert pieces[0] == short and pieces[-1] == short
    inner = pieces[1:-1]
    assert len(inner) >= 3 and list(owner) == [0] + [1] * len(inner) + [2]
    assert max(embedder.token_counts(inner)) <= embedder.max_tokens
    assert "\n".join(inner).split("\n") == lines  # whole lines, in order, none lost


@pytest.mark.parametrize("method", ["dense", "hybrid"])
def test_a_line_past_the_embedders_window_is_still_found(
    tmp_path: Path, embedder: Any, method: str
) -> None:
    lines = hash_lines(400, seed=1)
    text = "\n".join(lines) + "\n"
    idx = Index.create(
        tmp_path / "hh.idx",
        [Document("hh.txt", text, hashlib.sha256(text.encode()).hexdigest(), len(text))],
    )
    models = Models.with_objects(embedder=embedder)
    api.plan_and_build(idx, [method], models)
    stats = Index.open(idx.path).methods[method].stats
    assert stats["split_chunks"] > 0 and stats["embedded_pieces"] > stats["split_chunks"]
    nodes = Index.open(idx.path).reader(method).nodes()
    # the tail of a chunk whose start alone fills the embedder's window:
    # truncated, it would never be seen
    long = next(n for n in nodes if embedder.count_tokens(n.text) > embedder.max_tokens + 40)
    pieces, _ = embedding_pieces(embedder, [long.text])
    tail = pieces[-1]
    assert tail not in pieces[0] and long.text.endswith(tail)
    ev = api.plan_and_retrieve(idx, method, tail, models, k=3).evidence
    assert ev.items[0].id == long.id  # the chunk scores as its best piece
    if method == "dense":
        assert ev.items[0].score > 0.99


def test_the_index_names_the_query_embedder_and_the_user_hears_it(
    tmp_path: Path, embedder: Any
) -> None:
    import json

    from lcr.errors import ModelError
    from lcr.models.spec import ModelSpec

    text = "The lighthouse keeper kept a cat. The boat came on Thursdays with stores."
    doc = Document("t.txt", text, hashlib.sha256(text.encode()).hexdigest(), len(text))
    index = Index.create(tmp_path / "t.idx", [doc])
    api.plan_and_build(index, ["dense"], Models.with_objects(embedder=embedder))
    built_with = index.methods["dense"].models["embedder"]
    notes: list[str] = []
    models = Models(spec=ModelSpec(embedder="sentence-transformers/other-model", device="cpu"))
    result = api.plan_and_retrieve(
        index, "dense", "When did the boat come?", models, note=notes.append
    )
    assert notes == [
        f"the index was built with the embedder {built_with}: loading it instead of "
        "--embedder sentence-transformers/other-model"
    ]
    assert result.evidence.items and models.embedder_id() == built_with
    # an index naming a path that is not there is refused by name, nothing loaded
    manifest = index.path / "manifest.json"
    data = json.loads(manifest.read_text())
    data["methods"]["dense"]["models"]["embedder"] = "../../no/such/model"
    manifest.write_text(json.dumps(data))
    with pytest.raises(ModelError, match="no such model file or folder"):
        api.plan_and_retrieve(Index.open(index.path), "dense", "boat?", Models(spec=ModelSpec()))


def test_embedders_load_without_a_models_own_code(monkeypatch: pytest.MonkeyPatch) -> None:
    import sentence_transformers

    from lcr.models.embedder import SentenceTransformerEmbedder

    seen: dict[str, Any] = {}

    class Refused(Exception):
        pass

    def capture(*args: Any, **kwargs: Any) -> None:
        seen.update(kwargs)
        raise Refused

    monkeypatch.setattr(sentence_transformers, "SentenceTransformer", capture)
    with pytest.raises(Refused):
        SentenceTransformerEmbedder.load("some/model", model_id="some/model")
    assert seen["trust_remote_code"] is False and seen["local_files_only"] is True
