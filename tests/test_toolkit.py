"""The build toolkit (lcr.methods.toolkit): long texts pooled over pieces, the one
cached-call primitive, chunk nodes and timed stages; and what it fixed in RAPTOR's
and PECAN's builds (a node past the embedder's window was embedded by its start)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lcr import api, pipeline
from lcr.errors import LLMCallError
from lcr.methods import get_method
from lcr.methods.pecan.settings import PecanBuild
from lcr.methods.raptor.method import PROMPT_VERSION, summary_messages
from lcr.methods.toolkit import (
    BuildStages,
    Generations,
    LLMCalls,
    chunk_nodes,
    embed_pooled,
    embedding_pieces,
)
from lcr.models.base import llm_configuration
from lcr.models.container import Models
from lcr.models.hashing import HashingEmbedder
from lcr.pipeline.plans import parse_sets
from lcr.store import Document, Index, LLMCache, cache_key
from lcr.testing import ScriptedLLM
from lcr.text.chunking import token_windows

WINDOW = 12  # words the windowed hashing embedder reads of a text


def _words(n: int, stem: str) -> str:
    return " ".join(f"{stem}{i}" for i in range(n))


def test_a_text_past_the_window_is_pooled_over_pieces_and_its_tail_counts() -> None:
    embedder = HashingEmbedder(64, max_tokens=WINDOW)
    head = _words(WINDOW, "head")
    one, two = f"{head}. {_words(20, 'tail')}.", f"{head}. {_words(20, 'other')}."
    # as the embedder reads them, the two are the same text: the tails are dropped
    assert np.array_equal(embedder.encode([one]), embedder.encode([two]))
    pooled = embed_pooled(embedder, [one, two, "short text"])
    assert pooled.dtype == np.float32 and pooled.shape == (3, 64)
    assert not np.allclose(pooled[0], pooled[1])  # the tail decides part of the row
    assert np.allclose(np.linalg.norm(pooled, axis=1), 1.0, atol=1e-6)
    # a text read whole keeps the embedder's own row, bit for bit
    assert np.array_equal(pooled[2], embedder.encode(["short text"])[0])
    pieces, owner = embedding_pieces(embedder, [one])
    assert len(pieces) > 1 and set(owner.tolist()) == {0}
    assert max(embedder.token_counts(pieces)) <= WINDOW


def _raptor_index(tmp_path: Path, name: str, text: str) -> Index:
    doc = Document(f"{name}.txt", text, hashlib.sha256(text.encode()).hexdigest(), len(text))
    return Index.create(tmp_path / f"{name}.idx", [doc])


def _leaf_row(index: Index) -> np.ndarray:
    reader = Index.open(index.path).reader("raptor")
    rows: np.ndarray = reader.array("embeddings")
    return rows[0]


def test_raptor_embeds_a_long_leaf_by_its_tail(tmp_path: Path) -> None:
    """Two texts that differ only past the embedder's window: pooled (fixed in 0.2.0)
    their leaves' rows differ."""
    head = _words(WINDOW, "head") + "."
    rows = []
    for i, tail in enumerate(("tail", "other")):
        index = _raptor_index(tmp_path, f"t{i}", f"{head} {_words(30, tail)}.")
        models = Models.with_objects(llm=ScriptedLLM(), embedder=HashingEmbedder(64, WINDOW))
        api.plan_and_build(index, ["raptor"], models, [])
        assert Index.open(index.path).reader("raptor").nodes()[0].text.endswith("29.")
        rows.append(_leaf_row(index))
    assert not np.array_equal(rows[0], rows[1])


def test_an_index_from_before_pooling_is_rebuilt_paying_no_llm_call_twice(
    tmp_path: Path, cinderella: Path
) -> None:
    text = cinderella.read_text(encoding="utf-8")
    index = _raptor_index(tmp_path, "story", text)
    sets = ["raptor.summary_max_new_tokens=40"]
    first = ScriptedLLM()
    embedder = HashingEmbedder(64)  # no window: the tree is the same either way
    api.plan_and_build(index, ["raptor"], Models.with_objects(llm=first, embedder=embedder), sets)
    assert first.usage.calls > 0
    before = (Index.open(index.path).path / "cache" / "raptor.jsonl").read_bytes()
    # 0.2.0 fixed embed_long at pooled, and records it so
    manifest = index.path / "manifest.json"
    data = json.loads(manifest.read_text())
    settings = data["methods"]["raptor"]["settings"]
    assert settings["embed_long"] == "pooled"
    method = get_method("raptor")
    asked = pipeline.build_settings(method, parse_sets(sets))
    assert pipeline._same_settings(method, settings, asked)
    assert not pipeline._same_settings(method, {**settings, "embed_long": "truncated"}, asked)
    # the manifest as lcr wrote it before embed_long existed: it embedded "truncated"
    del settings["embed_long"]
    manifest.write_text(json.dumps(data))
    old = Index.open(index.path)
    assert not pipeline._same_settings(method, old.methods["raptor"].settings, asked)
    again = ScriptedLLM()
    models = Models.with_objects(llm=again, embedder=embedder)
    # with today's default it is stale and rebuilt, every summary read from the cache
    [rebuilt] = api.plan_and_build(Index.open(index.path), ["raptor"], models, sets)
    assert rebuilt.built and again.usage.calls == 0
    assert Index.open(index.path).methods["raptor"].settings["embed_long"] == "pooled"
    assert (index.path / "cache" / "raptor.jsonl").read_bytes() == before  # nothing new paid


def test_pecan_embeds_pooled_and_an_old_record_is_not_up_to_date() -> None:
    assert PecanBuild.fixed["embed_long"].value == "pooled"
    method = get_method("pecan")
    fresh = pipeline.build_settings(method, parse_sets([]))
    assert not pipeline._same_settings(method, {"chunk_tokens": 300}, fresh)


def test_generation_keys_are_the_documented_recipe(tmp_path: Path) -> None:
    """The cache key of a summary is what every earlier build wrote: a change here
    would make a rebuild pay for every summary again."""
    cache = LLMCache(tmp_path / "raptor.jsonl")
    llm = ScriptedLLM()
    gens = Generations(
        Models.with_objects(llm=llm),
        cache,
        prompt_version=PROMPT_VERSION,
        max_new_tokens=40,
        batch_size=0,
        what="summarising",
    )
    messages = summary_messages(["Cinderella went to the ball.", "The prince looked for her."])
    identity = cache.llm_identity(llm.model_id, llm_configuration(llm))
    expected = cache_key(PROMPT_VERSION, identity, messages, 40)
    assert gens.key(messages) == expected


def test_llm_calls_cache_call_wrap_store(tmp_path: Path) -> None:
    cache = LLMCache(tmp_path / "m.jsonl")
    calls = LLMCalls(cache, kept="scores")
    paid: list[int] = []

    def fails() -> Any:
        raise RuntimeError("the server went away")

    with pytest.raises(LLMCallError, match=r"^LLM call failed while scoring \(RuntimeError: "):
        calls.once("k", fails, what="scoring", valid=lambda hit: "v" in hit)
    assert "k" not in cache and "scores already paid for are kept" in _message(calls, fails)

    def pays() -> dict[str, Any]:
        paid.append(1)
        return {"v": 1, "prompt_tokens": 7, "completion_tokens": 3}

    assert calls.once("k", pays, what="scoring", valid=lambda hit: "v" in hit)["v"] == 1
    assert calls.once("k", pays, what="scoring", valid=lambda hit: "v" in hit)["v"] == 1
    assert paid == [1] and (calls.calls, calls.cached) == (1, 1)
    assert (calls.prompt_tokens, calls.completion_tokens) == (7, 3)
    # stored on disk the moment it was paid: a new process reads it back
    assert LLMCache(tmp_path / "m.jsonl").get("k") == pays()


def _message(calls: LLMCalls, call: Any) -> str:
    with pytest.raises(LLMCallError) as caught:
        calls.once("x", call, what="scoring", valid=lambda hit: True)
    return str(caught.value)


def test_chunk_nodes_carry_their_exact_spans() -> None:
    source = "First document. It has two sentences.\n\nSecond one here."
    docs = [(0, 0, source[:37]), (1, 39, source[39:])]
    nodes = chunk_nodes(
        docs, lambda text, start: token_windows(text, 4, offset=start), prefix="s", tokens=len
    )
    assert [n.id for n in nodes] == [f"s{i}" for i in range(len(nodes))]
    assert {n.doc for n in nodes} == {0, 1}
    for n in nodes:
        (a, b) = n.spans[0]
        assert source[a:b] == n.text and n.meta == {"tokens": len(n.text)}


def test_build_stages_add_up_and_keep_one_shape() -> None:
    stages = BuildStages()
    with stages.stage("embedding"):
        pass
    with stages.stage("embedding"):
        pass
    with pytest.raises(ValueError), stages.stage("graph"):
        raise ValueError("a failed stage is still timed")
    out = stages.to_json(("chunking", "embedding"))
    assert list(out) == ["chunking", "embedding", "graph"] and out["chunking"] == 0.0
    assert all(v >= 0 for v in out.values())
