"""Cut the small fixtures in this folder out of the shared development data.

Run by hand, never by the tests: ``python tests/data/make_fixtures.py /path/to/shared/data``.
Each output is a few KB, and its source and licence are in ``README.md`` here.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _cut(text: str, limit: int, sep: str) -> str:
    """``text`` up to the last ``sep`` before ``limit`` characters (``sep`` kept)."""
    end = text.rfind(sep, 0, limit)
    return text[: end + len(sep)] if end > 0 else text[:limit]


def _short(answer: str, limit: int = 300) -> str:
    return answer if len(answer) <= limit else _cut(answer, limit, ". ").strip()


def main(data: Path) -> None:
    # Cinderella: the opening, to the end of a sentence before 7,000 characters.
    text = (data / "stories" / "cinderella.txt").read_text(encoding="utf-8")
    (HERE / "cinderella.txt").write_text(_cut(text, 7000, "house.") + "\n", encoding="utf-8")

    # SQuALITY: the first dev story's opening, two of its questions, answers shortened.
    with (data / "squality" / "dev.jsonl").open(encoding="utf-8") as fh:
        story = json.loads(fh.readline())
    story["document"] = _cut(story["document"], 5000, ".\n").rstrip() + "\n"
    story["questions"] = [q for q in story["questions"] if q["question_number"] in (1, 4)]
    for q in story["questions"]:
        for r in q["responses"]:
            r["response_text"] = _short(r["response_text"])
    (HERE / "squality.jsonl").write_text(json.dumps(story) + "\n", encoding="utf-8")

    # QMSum: the first 60 turns of validation meeting 6 and its two queries on turns 5-27.
    with (data / "qmsum" / "val.jsonl").open(encoding="utf-8") as fh:
        meeting = json.loads(fh.readlines()[6])
    meeting["meeting_transcripts"] = meeting["meeting_transcripts"][:60]
    meeting["topic_list"] = []
    meeting["general_query_list"] = []
    meeting["specific_query_list"] = [
        q for q in meeting["specific_query_list"] if int(q["relevant_text_span"][-1][1]) < 60
    ]
    (HERE / "qmsum.jsonl").write_text(json.dumps(meeting) + "\n", encoding="utf-8")

    # bAbI task 2: its first three stories (a question line carries its supporting lines).
    lines = (data / "babi" / "qa2_two-supporting-facts_test.txt").read_text().splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("1 ")]
    (HERE / "babi-qa2.txt").write_text("\n".join(lines[: starts[3]]) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
