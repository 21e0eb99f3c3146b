"""``lcr ARGS`` in a process of its own that also says whether Ray was imported: the
cluster tests' check that a run without --ray never imports it."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import REPO


def in_process(args: list[str], stdin: str | None = None) -> tuple[str, str]:
    """``lcr ARGS`` in a process of its own that also says whether Ray was imported."""
    script = (
        "import sys\nfrom lcr.cli.main import main\n"
        f"try:\n    main({args!r})\nexcept SystemExit as exc:\n    code = exc.code\n"
        "print('exit', code, 'ray' in sys.modules)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("LCR_RAY_ADDRESS", None)
    done = subprocess.run(
        [sys.executable, "-c", script],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    *out, last = done.stdout.splitlines()
    assert last == "exit 0 False", done.stdout + done.stderr
    return "\n".join(out) + "\n", done.stderr
