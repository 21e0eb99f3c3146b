"""Issue 53: what ``answer.related_floor`` costs right answers.

    python bench/archive/bench_related.py ../shared/data/hotpotqa/dev.jsonl --work DIR

Each question's gold answer stands as the reply to the evidence lcr's default answer
step reads for it (bm25's retrieval and sentence selection run for real; the LLM is
scripted, so no model is loaded and nothing is generated). The step's own grounding
(:func:`lcr.answer.grounding.ground`) then locates the gold answer's quote and measures
the share of the question's words in that quote's passage. Printed: how many located
right answers each ``--floors`` value would withhold, and the ones the default withholds.
What the floor catches (wrong answers from texts without the answer) is measured on eval
records by ``bench/archive/bench_located.py``.

Each corpus (a question's first document) is indexed once under ``--work``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout's lcr
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: bench_quote_grid

from bench_quote_grid import evidence_items

from lcr import api
from lcr.answer.covering import RELATED_FLOOR
from lcr.answer.grounding import ground
from lcr.answer.shared import NOT_FOUND, AnswerResult, AnswerSettings
from lcr.models.container import Models
from lcr.testing import ScriptedLLM


def corpus_index(work: Path, doc: dict[str, Any], models: Models) -> Path:
    """The bm25 index of one corpus, built under ``work`` the first time it is asked for."""
    text = work / f"{doc['id']}.txt"
    out = work / f"{doc['id']}.idx"
    if not out.exists():
        text.write_text(str(doc["text"]), encoding="utf-8")
        api.index(text, out, models=models)
    return out


def why_withheld(info: dict[str, Any]) -> str:
    """The rule of :func:`~lcr.answer.grounding.ground` that withheld an answer."""
    for key, rule in (
        ("restates", "restates the question"),
        ("unrelated", "quote about something else (related_floor)"),
        ("unquoted", "no quote (unquoted)"),
    ):
        if key in info:
            return rule
    return "words never read (located_floor)"


def shares(
    data: Path, work: Path, limit: int, reasons: Counter[str]
) -> list[tuple[float, str, str]]:
    """For each question whose gold answer lcr locates in what the step read: the share
    of the question's words in the quote's passage, the answer and the question. Counts
    in ``reasons`` why the default grounding withholds gold answers, and how many it gives."""
    models = Models.with_objects(llm=ScriptedLLM(words=3))
    open_fully = AnswerSettings(related_floor=0.0)  # measure every share, withhold none
    out: list[tuple[float, str, str]] = []
    lines = data.read_text(encoding="utf-8").splitlines()
    for line in lines[:limit] if limit else lines:
        rec = json.loads(line)
        path = corpus_index(work, rec["documents"][0], models)
        got = api.ask(path, rec["question"], settings={"answer.support": 0}, models=models)
        record = got.to_json()
        source = (path / "source.txt").read_text(encoding="utf-8")
        gold = str(rec["answers"][0])
        step = AnswerResult(gold, list(evidence_items(record)), 0)
        grounded = ground(rec["question"], step, open_fully, source)
        if grounded.text != NOT_FOUND and "related" in grounded.info:
            out.append((float(grounded.info["related"]), gold, rec["question"]))
        default = ground(rec["question"], step, AnswerSettings(), source)
        withheld = default.text == NOT_FOUND
        reasons[why_withheld(default.info) if withheld else "given, with a quote"] += 1
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", type=Path, help="HotpotQA-form questions (documents, answers)")
    ap.add_argument("--work", type=Path, required=True, help="where the corpora's indexes go")
    ap.add_argument("--limit", type=int, default=0, help="the first N questions (0: all)")
    ap.add_argument("--floors", default="0.1,0.15,0.2,0.25,0.3")
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    reasons: Counter[str] = Counter()
    found = shares(args.data, args.work, args.limit, reasons)
    print(f"{len(found)} gold answers located in the evidence read\n")
    print("| `answer.related_floor` | located right answers withheld |")
    print("|---:|---:|")
    for floor in (float(f) for f in args.floors.split(",")):
        held = sum(share < floor for share, _, _ in found)
        print(f"| {floor:g} | {held}/{len(found)} ({held / max(1, len(found)):.3f}) |")
    print("\nthe default grounding, every gold answer:")
    for reason, count in reasons.most_common():
        print(f"  {count:4d}  {reason}")
    print(f"\nwithheld at the default {RELATED_FLOOR:g}:")
    for share, gold, question in sorted(found):
        if share < RELATED_FLOOR:
            print(f"  {share:.2f} | {gold} | {question}")


if __name__ == "__main__":
    main()
