"""Real texts from ../shared/data shared by the text and chunker tests."""

from __future__ import annotations

import json
from functools import cache

from tests.conftest import SHARED_DATA as DATA


@cache
def real_texts() -> dict[str, str]:
    """A fairy tale, a SQuALITY story and a QMSum meeting transcript."""
    texts = {"cinderella": (DATA / "stories" / "cinderella.txt").read_text("utf-8")}
    with (DATA / "squality" / "dev.jsonl").open(encoding="utf-8") as f:
        texts["squality"] = json.loads(f.readline())["document"]
    with (DATA / "qmsum" / "val.jsonl").open(encoding="utf-8") as f:
        turns = json.loads(f.readline())["meeting_transcripts"]
    texts["qmsum"] = "\n".join(f"{t['speaker']}: {t['content']}" for t in turns)
    return texts
