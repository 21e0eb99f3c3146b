"""Markdown tables from the ``--json`` summaries that run.sh writes (one per task).

    table.py WORKDIR TAG [WORKDIR TAG ...]            # bench/results/eval_results.md's tables
    table.py --compact WORKDIR TAG [WORKDIR TAG ...]  # docs/evaluation.md's two tables

Several WORKDIR TAG pairs (runs of different methods, e.g. a smaller ``LIMIT`` for
the slow ones) are merged per task, method by method; each row keeps its own n.
``--compact``: recall per task and method, then evidence tokens, the tables
docs/evaluation.md quotes.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from lcr.eval.summary import markdown, markdown_builds

TASKS = ("hashhop2", "hashhop4", "vt", "babilong-qa2", "babilong-qa3")
NAMES = {
    "hashhop2": "Hash-Hop, 2 hops",
    "hashhop4": "Hash-Hop, 4 hops",
    "vt": "RULER variable tracking",
    "babilong-qa2": "BABILong qa2",
    "babilong-qa3": "BABILong qa3",
}
METHODS = ("bm25", "tfidf", "dense", "hybrid", "mixpr")


def merged(task: str, sources: list[tuple[str, str]]) -> tuple[int, dict[str, Any]] | None:
    """The task's summaries from every source, one method's row from the first that has it."""
    questions = 0
    summary: dict[str, Any] = {"metrics": [], "methods": {}, "build": {}}
    for work, tag in sources:
        path = Path(work) / f"{task}.{tag}.summary.json"
        if not path.exists() or path.stat().st_size == 0:  # not run, or still running
            continue
        payload = json.loads(path.read_text(encoding="utf-8"))
        questions = max(questions, int(payload["questions"]))
        part = payload["summary"]
        summary["metrics"] += [m for m in part["metrics"] if m not in summary["metrics"]]
        for key in ("methods", "build"):
            for method, row in part.get(key, {}).items():
                summary[key].setdefault(method, row)
    return (questions, summary) if summary["methods"] else None


def full(sources: list[tuple[str, str]]) -> None:
    for task in TASKS:
        found = merged(task, sources)
        if found is None:
            continue
        questions, summary = found
        print(f"**{task}** ({questions} questions)\n")
        print(markdown(summary))
        builds = markdown_builds(summary)
        if builds:
            print(f"Index builds ({task}), mean per index:\n\n{builds}")


def _recall(row: dict[str, Any], questions: int) -> str:
    r = row["recall"]
    n = f" (n = {row['questions']})" if row["questions"] != questions else ""
    return f"{r['mean']:.2f} [{r['low']:.2f}, {r['high']:.2f}]{n}"


def compact(sources: list[tuple[str, str]]) -> None:
    """Recall (mean [95%]) and mean evidence tokens, one row a task, one column a method
    (no times: they mean something only from a run on an idle machine)."""
    rows = {t: f for t in TASKS if (f := merged(t, sources)) is not None}
    head = "| task | " + " | ".join(METHODS) + " |"
    sep = "|---|" + "---|" * len(METHODS)
    recall = [head, sep]
    tokens = [head.replace("| task |", "| task, evidence tokens (mean) |"), sep]
    for task, (questions, summary) in rows.items():
        got = summary["methods"]
        cells = [_recall(got[m], questions) if m in got else "not run" for m in METHODS]
        recall.append(f"| {NAMES[task]} | " + " | ".join(cells) + " |")
        toks = [f"{got[m]['evidence_tokens']['mean']:,.0f}" if m in got else "" for m in METHODS]
        tokens.append(f"| {NAMES[task]} | " + " | ".join(toks) + " |")
    print("\n".join(recall) + "\n")
    print("\n".join(tokens))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--compact", action="store_true", help="docs/evaluation.md's tables")
    ap.add_argument("pairs", nargs="*", default=["/tmp/lcr-eval-bench", "all"])
    args = ap.parse_args(argv)
    pairs = args.pairs + (["all"] if len(args.pairs) % 2 else [])
    sources = list(zip(pairs[::2], pairs[1::2], strict=True))
    (compact if args.compact else full)(sources)


if __name__ == "__main__":
    main()
