"""The quick tier's guard fails a quick test that takes too long, and spares slow ones."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

BUSY = """
import time
import pytest

def _spin(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass

def test_quick_but_busy():
    _spin(1.0)

@pytest.mark.slow
def test_slow_and_busy():
    _spin(1.0)

def test_quick():
    pass
"""


def test_a_quick_test_over_the_limit_fails(tmp_path: Path) -> None:
    (tmp_path / "test_busy.py").write_text(BUSY)
    env = {**os.environ, "PYTHONPATH": str(REPO), "LCR_QUICK_TEST_SECONDS": "0.5"}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.quick_tier_guard", "-p", "no:cacheprovider",
         "-o", "markers=slow", "-q", str(tmp_path / "test_busy.py")],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout
    assert "1 failed, 2 passed" in proc.stdout
    assert "FAILED test_busy.py::test_quick_but_busy" in proc.stdout
    assert "over 0.5 s (LCR_QUICK_TEST_SECONDS): make it quicker or mark it slow" in proc.stdout
    assert "slowest quick-tier tests (limit 0.5 s of CPU)" in proc.stdout
