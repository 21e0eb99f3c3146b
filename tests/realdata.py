"""Real texts from tests/data shared by the text and chunker tests (no ../shared needed)."""

from __future__ import annotations

import json
from functools import cache

from tests.conftest import FIXTURES


@cache
def real_texts() -> dict[str, str]:
    """A fairy tale, a SQuALITY story and a QMSum meeting transcript (openings of each)."""
    texts = {"cinderella": (FIXTURES / "cinderella.txt").read_text("utf-8")}
    with (FIXTURES / "squality.jsonl").open(encoding="utf-8") as f:
        texts["squality"] = json.loads(f.readline())["document"]
    with (FIXTURES / "qmsum.jsonl").open(encoding="utf-8") as f:
        turns = json.loads(f.readline())["meeting_transcripts"]
    texts["qmsum"] = "\n".join(f"{t['speaker']}: {t['content']}" for t in turns)
    return texts
