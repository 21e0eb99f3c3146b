"""The same document built twice, in two processes, gives byte-identical files
(issue 37, row 17): nothing a build writes may follow the hash seed, the clock
or the process (the manifest's timestamps, build ids and timings aside)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
NO_MODEL = ("bm25", "tfidf", "mixpr", "full")  # the methods that need no model at all
EMBEDDER_ONLY = ("dense", "hybrid")  # the embedder, but no LLM


def build(story: Path, out: Path, seed: str, methods: tuple[str, ...]) -> None:
    args = [sys.executable, "-m", "lcr", "index", str(story), "-o", str(out), "-q"]
    for m in methods:
        args += ["-m", m]
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONHASHSEED": seed}
    done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr


def comparable_manifest(idx: Path) -> dict[str, Any]:
    raw: dict[str, Any] = json.loads((idx / "manifest.json").read_text())
    raw.pop("created")
    for entry in raw["methods"].values():
        for key in ("dir", "built_at", "build_seconds"):
            entry.pop(key)
        entry["stats"] = {
            k: v for k, v in entry["stats"].items() if not k.endswith("_s") and k != "seconds"
        }
    return raw


def files_by_method(idx: Path) -> dict[str, bytes]:
    raw = json.loads((idx / "manifest.json").read_text())
    out = {"source.txt": (idx / "source.txt").read_bytes()}
    for name, entry in raw["methods"].items():
        root = idx / entry["dir"]
        for path in sorted(root.rglob("*")):
            if path.is_file():
                out[f"{name}/{path.relative_to(root)}"] = path.read_bytes()
    return out


def assert_identical_builds(tmp_path: Path, story_file: Path, methods: tuple[str, ...]) -> None:
    story = tmp_path / "cinderella.txt"
    shutil.copy(story_file, story)
    build(story, tmp_path / "one.idx", "1", methods)
    build(story, tmp_path / "two.idx", "2", methods)
    one, two = files_by_method(tmp_path / "one.idx"), files_by_method(tmp_path / "two.idx")
    assert sorted(one) == sorted(two)
    differ = [rel for rel in one if one[rel] != two[rel]]
    assert differ == []
    assert comparable_manifest(tmp_path / "one.idx") == comparable_manifest(tmp_path / "two.idx")


def test_two_processes_with_different_hash_seeds_build_identical_files(
    tmp_path: Path, cinderella: Path
) -> None:
    assert_identical_builds(tmp_path, cinderella, NO_MODEL)


@pytest.mark.slow  # loads the embedder in two processes
def test_the_embedder_methods_build_identical_files_too(tmp_path: Path, cinderella: Path) -> None:
    assert_identical_builds(tmp_path, cinderella, EMBEDDER_ONLY)
