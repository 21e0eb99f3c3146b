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

REPO = Path(__file__).resolve().parents[1]
METHODS = ("bm25", "tfidf", "mixpr", "full")  # every method that needs no model at all


def build(story: Path, out: Path, seed: str) -> None:
    args = [sys.executable, "-m", "lcr", "index", str(story), "-o", str(out), "-q"]
    for m in METHODS:
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


def test_two_processes_with_different_hash_seeds_build_identical_files(
    tmp_path: Path, cinderella: Path
) -> None:
    story = tmp_path / "cinderella.txt"
    shutil.copy(cinderella, story)
    build(story, tmp_path / "one.idx", "1")
    build(story, tmp_path / "two.idx", "2")
    one, two = files_by_method(tmp_path / "one.idx"), files_by_method(tmp_path / "two.idx")
    assert sorted(one) == sorted(two)
    differ = [rel for rel in one if one[rel] != two[rel]]
    assert differ == []
    assert comparable_manifest(tmp_path / "one.idx") == comparable_manifest(tmp_path / "two.idx")
