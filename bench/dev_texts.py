"""The development texts the benches read, each once: one home for how they are taken."""

from __future__ import annotations

import json
from pathlib import Path


def squality_stories(path: Path, limit: int | None = None) -> list[str]:
    """SQuALITY's distinct stories in file order, stripped (the file repeats a story per
    question set); only the first ``limit`` when given."""
    out: list[str] = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            story = str(json.loads(line)["document"]).strip()
            if story not in out:
                out.append(story)
            if limit is not None and len(out) == limit:
                break
    return out
