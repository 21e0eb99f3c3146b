"""Markdown tables from the ``--json`` summaries that run.sh writes (one per task)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from lcr.eval.summary import markdown, markdown_builds


def main(work: str, tag: str) -> None:
    for task in ("hashhop2", "hashhop4", "vt", "babilong-qa2", "babilong-qa3"):
        path = Path(work) / f"{task}.{tag}.summary.json"
        if not path.exists() or path.stat().st_size == 0:  # not run, or still running
            continue
        payload = json.loads(path.read_text(encoding="utf-8"))
        print(f"**{task}** ({payload['questions']} questions)\n")
        print(markdown(payload["summary"]))
        builds = markdown_builds(payload["summary"])
        if builds:
            print(f"Index builds ({task}), mean per index:\n\n{builds}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/lcr-eval-bench", *sys.argv[2:3] or ["all"])
