"""bench/bench_collections.py's --scripted seam: it is used, and a run that bypasses it
stops loudly (it once patched a name the CLI no longer read, and silently measured
lcr's own models)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.benches import load_bench

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_bench("bench_collections")


def test_the_scripted_command_goes_through_the_seam(
    bench: ModuleType, tmp_path: Path, cinderella: Path
) -> None:
    shutil.copy(cinderella, tmp_path / "story.txt")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", bench.SCRIPTED, "index", "story.txt", "-m", "bm25", "-q"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "story.idx" / "manifest.json").is_file()


def test_a_run_that_bypasses_the_seam_stops_in_one_line(
    bench: ModuleType, tmp_path: Path, cinderella: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI run without the seam handed on (as the old patch left it) is refused."""
    from lcr.cli.main import main

    def seam_ignored(argv: list[str], models: Any) -> None:
        main(argv)  # lcr's own models

    shutil.copy(cinderella, tmp_path / "story.txt")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stopped:
        bench.scripted_lcr(["index", "story.txt", "-m", "bm25", "-q"], entry=seam_ignored)
    message = str(stopped.value.code)
    assert message.startswith("bench: --scripted: `lcr index story.txt -m bm25 -q` never asked")
    assert "\n" not in message


def test_a_build_recorded_with_another_llm_stops_a_scripted_run(
    bench: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bench, "COMMAND", [sys.executable, "-c", bench.SCRIPTED])
    bench.check_scripted({"models": {"llm": bench.SCRIPTED_LLM}}, "raptor")
    bench.check_scripted({"models": {}}, "bm25")  # a build with no LLM
    with pytest.raises(SystemExit, match=r"built with the LLM 'qwen2\.5-coder-1\.5b'"):
        bench.check_scripted({"models": {"llm": "qwen2.5-coder-1.5b"}}, "raptor")
