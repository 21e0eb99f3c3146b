"""Issue 53: quotes for long answers, applied offline to answers already made (no LLM
call: :func:`lcr.answer.grounding.ground` reads only the answer, the question, the
evidence read and source.txt).

    python bench/archive/bench_long_quotes.py RECORDS.jsonl [RECORDS.jsonl ...] [--show]
    python bench/archive/bench_long_quotes.py RECORDS.jsonl --pairs   # own answers, other story

Each record is an ``lcr ask --json`` object (or an ``lcr.ask(...).to_json()`` one) with
its ``index`` (the index path, whose source.txt the spans point into; ``--index``
gives it for records without one). For every answer the model gave (``answer``, or
``withheld_answer`` where the support check withheld it) it prints what the
single-run rule (:func:`lcr.answer.quotes.answer_quote`) and the several-quote rule
(:func:`lcr.answer.covering.cover_quotes`) found, and counts, over the answers the
default check gave: one quote, grounded by the long rule, long but not grounded
(below the share, or off the question), short and unlocated; then what
``answer.check=located`` would give. ``--show`` prints every quote under its answer,
for reading by hand.

``--pairs``: records with ``story``, ``question_number`` and ``own`` (as
``bench/many_documents.py`` and the issue's SQuALITY set write them): each own-story
answer is grounded again on the evidence the same question read from every other
story it was asked of, where it must not be grounded.
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

from lcr.answer.grounding import ground
from lcr.answer.replies import NOT_FOUND
from lcr.answer.shared import AnswerResult, AnswerSettings
from lcr.pipeline.plans import answer_settings, parse_sets

DEFAULT = answer_settings(None, parse_sets([]))
LOCATED = answer_settings(None, parse_sets(["answer.check=located"]))
SHOWN = ("located", "located_words", "unlocated", "off_question")


def reply(rec: dict[str, Any]) -> str:
    """The model's answer: the one given, or the one the support check withheld."""
    answer = str(rec.get("answer") or NOT_FOUND)
    return answer if answer != NOT_FOUND else str(rec.get("withheld_answer") or NOT_FOUND)


class Sources:
    def __init__(self, index: Path | None) -> None:
        self.index = index
        self.texts: dict[str, str] = {}

    def of(self, rec: dict[str, Any]) -> str:
        path = str(self.index or rec["index"])
        if path not in self.texts:
            self.texts[path] = (Path(path) / "source.txt").read_text(encoding="utf-8")
        return self.texts[path]


def grounded(rec: dict[str, Any], answer: str, src: str, settings: AnswerSettings) -> AnswerResult:
    items = list(evidence_items(rec))
    return ground(rec["question"], AnswerResult(answer, items, 0), settings, src)


def kind(out: AnswerResult) -> str:
    if "located_words" not in out.info:
        return "one quote" if out.quotes else "short, unlocated"
    return "long rule, grounded" if out.quotes else "long, not grounded"


def summary(records: list[dict[str, Any]], sources: Sources, show: bool) -> None:
    kinds: Counter[str] = Counter()
    withheld = given = 0
    counts: list[int] = []
    for rec in records:
        answer = str(rec.get("answer") or NOT_FOUND)
        if answer == NOT_FOUND:
            continue  # the default check gave nothing: nothing to ground
        given += 1
        src = sources.of(rec)
        out = grounded(rec, answer, src, DEFAULT)
        kinds[kind(out)] += 1
        if "located_words" in out.info and out.quotes:
            counts.append(len(out.quotes))
        withheld += grounded(rec, answer, src, LOCATED).text == NOT_FOUND
        info = {k: out.info[k] for k in SHOWN if k in out.info}
        print(f"- {rec['question'][:70]}\n  A: {answer[:160]}\n  {kind(out)} {info}")
        if show:
            for q in out.quotes:
                where = f"{q.item} {q.spans[0][0]}-{q.spans[-1][1]}"
                print(f"    > [{where}] {' '.join(q.text.split())}")
    print(f"\nanswers given by the default check: {given}")
    for name in ("one quote", "long rule, grounded", "long, not grounded", "short, unlocated"):
        print(f"  {name}: {kinds[name]}")
    print(f"  quotes under each answer the long rule grounded: {counts}")
    print(f"  with quotes: {kinds['one quote'] + kinds['long rule, grounded']}/{given} "
          f"(the single-run rule alone: {kinds['one quote']}/{given})")  # fmt: skip
    print(f"answer.check=located would withhold {withheld} of the {given} "
          f"(the single-run rule alone: {given - kinds['one quote']})")  # fmt: skip


def pairs(records: list[dict[str, Any]], sources: Sources) -> None:
    own = {(r["story"], r["question_number"]): r for r in records if r["own"]}
    grounded_n = total = 0
    shares: list[float] = []
    for rec in records:
        if rec["own"]:
            continue
        mine = own.get((rec["story"], rec["question_number"]))
        if mine is None or reply(mine) == NOT_FOUND:
            continue
        out = grounded(rec, reply(mine), sources.of(rec), DEFAULT)
        total += 1
        grounded_n += bool(out.quotes)
        share = float(out.info.get("located", 0))
        shares.append(share)
        print(f"story {rec['story']} q{rec['question_number']} on story {rec['asked_of']}: "
              f"{kind(out)}, located {share}")  # fmt: skip
    top = max(shares, default=0.0)
    print(f"\nown answers on another story's evidence: {grounded_n}/{total} given quotes "
          f"(highest share {top})")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("records", type=Path, nargs="+")
    ap.add_argument("--index", type=Path, help="the index, for records that name none")
    ap.add_argument("--own", action="store_true", help="only records with own=true")
    ap.add_argument("--check", help="only records with this check (bench/many_documents.py)")
    ap.add_argument("--pairs", action="store_true")
    ap.add_argument("--show", action="store_true", help="print every quote")
    args = ap.parse_args()
    records = [
        json.loads(line)
        for path in args.records
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    if args.check:
        records = [r for r in records if r.get("check") == args.check]
    sources = Sources(args.index)
    if args.pairs:
        pairs(records, sources)
        return
    if args.own:
        records = [r for r in records if r.get("own")]
    summary(records, sources, args.show)


if __name__ == "__main__":
    main()
