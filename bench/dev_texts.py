"""The development texts the benches read, each once: one home for how they are taken."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any


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


def gold_questions(args: argparse.Namespace) -> list[Any]:
    """The questions of ``args.data`` that have gold sentences, the first ``--limit``
    (when the bench takes one); ``--work`` made ready for their indexes."""
    from lcr.eval import dataset

    args.work.mkdir(parents=True, exist_ok=True)
    questions = [q for q in dataset.load(args.data) if q.evidence]
    limit = getattr(args, "limit", 0)
    return questions[:limit] if limit else questions


def taken(texts: Sequence[str], budget: int, *, respace: bool = False) -> list[str]:
    """The items best first until ``budget`` words, the last cut at the budget; with
    ``respace`` every item's whitespace made single spaces, as the cut one's is."""
    out: list[str] = []
    left = budget
    for text in texts:
        words = text.split()
        if len(words) >= left:
            out.append(" ".join(words[:left]))
            break
        out.append(" ".join(words) if respace else text)
        left -= len(words)
    return out
