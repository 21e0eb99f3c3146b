"""A default against its neighbours (issue 56): gold recall at equal word budgets
for a small grid of one setting's values, retrieval only, no LLM.

    nice .venv/bin/python bench/archive/bench_defaults.py ../shared/data/hotpotqa/dev.jsonl \\
        --work /tmp/defaults --method bm25 --setting stemmer --values english,none,porter

The first value is the default the others are compared with. Each corpus is indexed
by lcr itself once per value (``--set METHOD.SETTING=VALUE``; a query setting needs
one index), each question retrieved ``-k`` deep, and the items read best first up to
``--budgets`` words, the last cut at the budget (as ``bench_chunking.py`` does: the
same ``taken`` and ``recall``). Intervals are 95% bootstrap over questions, the
paired difference against the first value's too. Choose on development data only.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

import lcr
from lcr.eval.stats import bootstrap_mean

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: dev_texts
sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/archive/: bench_chunking
from bench_chunking import recall
from dev_texts import gold_questions, taken


def build_key(method: str, setting: str) -> bool:
    """Whether ``METHOD.SETTING`` is a build setting (each value is its own index)."""
    from lcr.methods import get_method

    return setting in get_method(method).build_settings.by_name()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", type=Path)
    ap.add_argument("--work", type=Path, required=True, help="where the indexes go")
    ap.add_argument("--limit", type=int, default=0, help="first N questions only (0: all)")
    ap.add_argument("--method", default="bm25")
    ap.add_argument("--setting", required=True)
    ap.add_argument("--values", required=True, help="comma-separated; the first is the default")
    ap.add_argument("--budgets", default="500,1000,2000")
    ap.add_argument("--k", type=int, default=80, help="items retrieved per question")
    args = ap.parse_args()
    questions = gold_questions(args)
    values = args.values.split(",")
    budgets = [int(b) for b in args.budgets.split(",")]
    method, name = args.method, args.setting
    is_build = build_key(method, name)
    models = lcr.use_models()
    per: dict[tuple[str, int], list[float]] = defaultdict(list)
    sizes: dict[str, list[int]] = defaultdict(list)
    built: dict[tuple[str, str], Path] = {}
    print(f"{args.data}: {len(questions)} questions; {method}.{name} in {values}\n")
    for q in questions:
        gold = [g.text for g in q.evidence if g.text]
        key = q.corpus_key()
        text_file = args.work / f"{key}.txt"
        if not text_file.exists():
            (doc,) = q.documents
            text_file.write_text(doc.text, encoding="utf-8")
        for value in values:
            tag = value if is_build else "query"
            if (key, tag) not in built:
                out = args.work / f"{key}-{method}-{name}-{tag}.idx"
                sets = {f"{method}.{name}": value} if is_build else {}
                lcr.index(text_file, out, methods=[method], settings=sets)
                built[(key, tag)] = out
            query_sets = {} if is_build else {f"{method}.{name}": value}
            res = lcr.retrieve(
                built[(key, tag)], q.question, method=method, k=args.k, models=models,
                settings=query_sets,
            )  # fmt: skip
            texts = [it.text for it in res.evidence.items]
            sizes[value].extend(len(t.split()) for t in texts)
            for budget in budgets:
                per[(value, budget)].append(recall(gold, taken(texts, budget)))
    head = values[0]
    print(f"{method}.{name}: gold recall at equal word budgets (95% bootstrap interval)")
    diffs = [f"{v} - {head}" for v in values[1:]]
    print("| words | " + " | ".join(values + diffs) + " |")
    print("|---:|" + "---:|" * (2 * len(values) - 1))
    for budget in budgets:
        cells = []
        base = per[(head, budget)]
        for value in values:
            iv = bootstrap_mean(per[(value, budget)])
            cells.append(f"{iv.mean:.3f} [{iv.low:.3f}, {iv.high:.3f}]")
        for value in values[1:]:
            iv = bootstrap_mean(list(np.subtract(per[(value, budget)], base)))
            cells.append(f"{iv.mean:+.3f} [{iv.low:+.3f}, {iv.high:+.3f}]")
        print(f"| {budget:,} | " + " | ".join(cells) + " |")
    for value in values:
        print(f"  {value}: retrieved items of {np.median(sizes[value]):.0f} words (median)")


if __name__ == "__main__":
    main()
