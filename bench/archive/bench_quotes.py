"""Issue 53: lcr eval records of two answer steps side by side, held out.

Reads ``lcr eval`` results files (one per configuration, answerable and
unanswerable questions apart), keeps one record per question id (the first), and
prints per configuration: n, F1 and EM with 95% bootstrap intervals, the share
answered "not found in the document", prompt and completion tokens per answer and
the median seconds of the answer step; and, for the configurations' common
questions, F1 after minus before (paired bootstrap)::

    python bench/archive/bench_quotes.py --label before --answerable base.A.jsonl \
        --unanswerable base.U.jsonl --label after --answerable after.A.jsonl \
        --unanswerable after.U.jsonl

Reporting only: nothing here chooses a setting.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout's lcr

from lcr.answer.shared import NOT_FOUND
from lcr.eval import dataset, metrics
from lcr.eval.stats import bootstrap_mean, paired_bootstrap


def records(path: str | None) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    if not path:
        return out
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        out.setdefault(str(rec["id"]), rec)
    return out


def shown(iv: Any) -> str:
    return f"{iv.mean:.3f} [{iv.low:.3f}, {iv.high:.3f}]"


def guessed_f1(rec: dict[str, Any], gold: dict[str, list[str]]) -> float:
    """F1 had nothing been withheld: with the quote check's prompt, ``guess`` writes the
    same reply (greedy decoding), and its answer is the record's ``withheld_answer``."""
    withheld = rec.get("withheld_answer")
    if withheld is None or rec["id"] not in gold:
        return float(rec["metrics"]["f1"])
    return float(metrics.answer_scores(withheld, gold[rec["id"]]).get("f1", 0.0))


def summary(
    answerable: dict[str, dict[str, Any]],
    unanswerable: dict[str, dict[str, Any]],
    gold: dict[str, list[str]],
) -> str:
    rows = list(answerable.values())
    parts = [f"answerable n={len(rows)}"]
    if rows:
        parts.append("F1 " + shown(bootstrap_mean([r["metrics"]["f1"] for r in rows])))
        if any("quote_check" in r for r in rows):
            guessed = [guessed_f1(r, gold) for r in rows]
            parts.append("F1 withholding nothing " + shown(bootstrap_mean(guessed)))
        parts.append("EM " + shown(bootstrap_mean([r["metrics"]["em"] for r in rows])))
        nf = [float(r["answer"] == NOT_FOUND) for r in rows]
        parts.append("not found " + shown(bootstrap_mean(nf)))
        parts.append(
            f"prompt {statistics.mean(r['usage']['prompt_tokens'] for r in rows):.0f}"
            f" + reply {statistics.mean(r['usage']['completion_tokens'] for r in rows):.1f} tokens"
        )
        parts.append(
            f"answer_s median {statistics.median(r['timings']['answer_s'] for r in rows):.1f}"
        )
    urows = list(unanswerable.values())
    if urows:
        nf = [float(r["answer"] == NOT_FOUND) for r in urows]
        parts.append(f"| unanswerable n={len(urows)} not found " + shown(bootstrap_mean(nf)))
        parts.append(
            f"prompt {statistics.mean(r['usage']['prompt_tokens'] for r in urows):.0f}"
            f" + reply {statistics.mean(r['usage']['completion_tokens'] for r in urows):.1f}"
        )
    return "; ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--label", action="append", required=True)
    parser.add_argument("--answerable", action="append", default=[])
    parser.add_argument("--unanswerable", action="append", default=[])
    parser.add_argument("--data", help="the answerable questions' data (gold answers)")
    args = parser.parse_args()
    gold = {q.id: list(q.answers) for q in dataset.load(args.data)} if args.data else {}
    runs = []
    for i, label in enumerate(args.label):
        a = records(args.answerable[i] if i < len(args.answerable) else None)
        u = records(args.unanswerable[i] if i < len(args.unanswerable) else None)
        runs.append((label, a, u))
        print(f"{label}: {summary(a, u, gold)}")
    if len(runs) == 2:
        (_, a0, _), (label, a1, _) = runs
        common = sorted(set(a0) & set(a1))
        if len(common) > 1:
            diff = paired_bootstrap(
                [a1[q]["metrics"]["f1"] for q in common], [a0[q]["metrics"]["f1"] for q in common]
            )
            print(f"F1 {label} - {runs[0][0]} on the {len(common)} common questions: {diff}")


if __name__ == "__main__":
    main()
