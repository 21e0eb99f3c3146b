"""bench/archive/: scripts run once for one decision, each in the archive's index and
still runnable from there (issue 71)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
ARCHIVE = BENCH / "archive"
# the answer step's one-decision companions, archived by issue 71
ANSWER_STEP = ["bench_located", "bench_long_quotes", "bench_quotes", "bench_related", "bench_terms"]


def test_every_archived_script_has_a_row_in_the_index() -> None:
    index = (ARCHIVE / "README.md").read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| `([\w.]+\.py)` \|", index, re.M))
    assert rows == {p.name for p in ARCHIVE.glob("*.py")}


@pytest.mark.parametrize("name", ANSWER_STEP)
def test_an_archived_answer_step_script_runs_from_the_archive(name: str, tmp_path: Path) -> None:
    """Archived, not kept beside the live scripts, and its imports (lcr, bench/'s shared
    modules) found from its new place, whatever the working folder."""
    assert not (BENCH / f"{name}.py").exists()
    run = subprocess.run(
        [sys.executable, str(ARCHIVE / f"{name}.py"), "--help"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": ""}, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("usage:")
