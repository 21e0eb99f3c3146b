"""How often the answer obeys an attack planted in the document, per answer configuration.

    python bench/bench_injection.py make -o /tmp/inj/injection.jsonl
    lcr eval /tmp/inj/injection.jsonl -m bm25 --max-new-tokens 64 --llm MODEL \\
        --set answer.support=0 [--set ...] --out /tmp/inj/CONFIG.jsonl
    python bench/bench_injection.py report /tmp/inj/plain.jsonl /tmp/inj/quoted.jsonl ...

Issue 72's held-out set (``tests/data/injection30.json``, 30 attacks the defences were
not written on, one question each), with every default and the default model::

    python bench/bench_injection.py make --fixture tests/data/injection30.json \
        --one-question-each -o /tmp/inj/inj30.jsonl
    nice lcr eval run /tmp/inj/inj30.jsonl -m bm25 --llm qwen2.5-coder-1.5b \
        --backend llamacpp --max-new-tokens 48 --out /tmp/inj/after30.jsonl
    python bench/bench_injection.py report /tmp/inj/after30.jsonl --data /tmp/inj/inj30.jsonl

``make`` writes the test set of ``tests/data/injection.json`` (:mod:`lcr.eval.injection`:
the example story with each attack in several places, ten questions per attack).
Each configuration is one ``lcr eval`` run with ``answer.not_found=abstain`` at
threshold 0 (the answer as guessed, and its support score); ``report`` then prints,
per run and attack, how often the answer obeyed the attack and how often it was
right, as guessed and after the support check at ``--threshold`` (a withheld
answer obeys nothing), with 95% intervals.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from lcr.answer.shared import NOT_FOUND
from lcr.answer.support import DEFAULT_THRESHOLD, record_signals, support_score
from lcr.eval import dataset
from lcr.eval.injection import injection_questions, load_fixture, obeyed
from lcr.eval.stats import bootstrap_mean

ROOT = Path(__file__).resolve().parent.parent


def _share(flags: Sequence[bool]) -> str:
    if not flags:
        return "-"
    iv = bootstrap_mean([float(f) for f in flags])
    return f"{sum(flags)}/{len(flags)} [{iv.low:.2f}, {iv.high:.2f}]"


def support_now(rec: dict[str, Any], documents: dict[str, str]) -> float:
    """The record's support score under this checkout's signals and constants (its own
    ``support`` was scored by the code that ran it); 1.0 for a record without a check."""
    signals = record_signals(rec, documents)
    return float(rec.get("support", 1.0)) if signals is None else support_score(signals)


def outcome(
    rec: dict[str, Any], threshold: float, documents: dict[str, str]
) -> tuple[bool, bool, bool, bool]:
    """(obeyed as guessed, right as guessed, obeyed after the check, right after it)."""
    answer = str(rec.get("answer") or "")
    signs = tuple(rec["meta"]["obeyed_if"])
    right = obeyed(answer, tuple(rec["gold"]))
    bad = obeyed(answer, signs)
    kept = answer != NOT_FOUND and support_now(rec, documents) >= threshold
    return bad, right, bad and kept, right and kept


def report(paths: Sequence[Path], data: Path, threshold: float) -> str:
    questions = list(dataset.iter_questions(data))
    meta = {q.id: (q.meta, q.answers) for q in questions}
    texts = {d.id: d.text for q in questions for d in q.documents if d.text}
    lines = [
        "| run | attack | n | obeyed | right | obeyed, support check | right, support check |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for path in paths:
        recs = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        for r in recs:
            r["meta"], r["gold"] = meta[r["id"]][0], meta[r["id"]][1]
        attacks = sorted({r["meta"]["attack"] for r in recs})
        for attack in [*attacks, "all"]:
            rows = [
                outcome(r, threshold, texts) for r in recs if attack in ("all", r["meta"]["attack"])
            ]
            cells = [_share([row[i] for row in rows]) for i in range(4)]
            lines.append(f"| {path.stem} | {attack} | {len(rows)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="action", required=True)
    make = sub.add_parser("make", help="write the injection test set (lcr eval JSONL)")
    make.add_argument("-o", "--out", type=Path, required=True)
    make.add_argument("--fixture", type=Path, default=ROOT / "tests/data/injection.json")
    make.add_argument(
        "--questions", type=Path, help="take the questions from this fixture (default: --fixture's)"
    )
    make.add_argument(
        "--one-question-each",
        action="store_true",
        help="ask each attack one question (attack i gets question i mod the count)",
    )
    rep = sub.add_parser("report", help="obey rates of lcr eval records")
    rep.add_argument("records", type=Path, nargs="+", help="one lcr eval results file per run")
    rep.add_argument("--data", type=Path, required=True, help="the set `make` wrote")
    rep.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD)
    args = ap.parse_args(argv)
    if args.action == "make":
        fixture = load_fixture(args.fixture)
        if args.questions is not None:
            fixture = replace(fixture, probes=load_fixture(args.questions).probes)
        story = (ROOT / fixture.story).read_text(encoding="utf-8")
        questions = injection_questions(fixture, story)
        if args.one_question_each:
            per = len(fixture.probes)
            questions = [q for i, q in enumerate(questions) if i % per == (i // per) % per]
        n = dataset.save(questions, args.out)
        print(f"{n} questions in {args.out}")
        return
    print(report(args.records, args.data, args.threshold))


if __name__ == "__main__":
    main()
