"""How long ODSum Story's reference summaries are (issue 56: LightPAL's
``answer_words`` default), in words, over the queries of the dev stories.

    .venv/bin/python bench/archive/odsum_lengths.py ../shared/data/odsum

Queries are matched to ``story_docs_dev.jsonl`` by title, as ``lcr eval prepare
odsum`` matches them; every worker's response counts once.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path, help="holds story_docs_dev.jsonl, story_queries.jsonl")
    args = ap.parse_args()

    def key(title: str) -> str:
        return " ".join(title.lower().split())

    with (args.folder / "story_docs_dev.jsonl").open(encoding="utf-8") as fh:
        dev = {key(json.loads(line)["title"]) for line in fh}
    words: list[int] = []
    queries = 0
    with (args.folder / "story_queries.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            for q in json.loads(line):
                if key(q["title"]) not in dev:
                    continue
                queries += 1
                words += [len(r["response_text"].split()) for r in q["responses"]]
    words.sort()
    quart = (words[len(words) // 4], words[3 * len(words) // 4])
    print(f"{len(dev)} dev stories, {queries} queries, {len(words)} reference summaries")
    print(
        f"words: mean {statistics.mean(words):.0f}, median {statistics.median(words):.0f}, "
        f"quartiles {quart[0]}-{quart[1]}"
    )


if __name__ == "__main__":
    main()
