"""Chunks that follow the document (issue 53, item 4): the baselines' gold recall at
equal evidence budgets, cut into 128-token windows across paragraphs (``windows``,
before) or one chunk per paragraph (``paragraphs``, after). Retrieval only: no LLM.

    .venv/bin/python bench/archive/bench_chunking.py ../shared/data/hotpotqa/dev.jsonl \\
        --work /tmp/chunking --methods bm25,tfidf

Each corpus is indexed by lcr itself (``lcr.index`` with ``--set METHOD.chunking=``),
each question retrieved with ``-k`` deep enough to fill the largest budget, and the
items taken best first until ``--budgets`` words (whitespace-separated) are reached,
the last item cut at the budget, so every chunking is read at the same number of
words. Gold recall is the share of a question's supporting-fact sentences whose text
lies wholly inside one taken item (as ``bench_evidence.py`` counts it); intervals
are 95% bootstrap over questions, and the paired difference's too.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

import lcr
from lcr.eval import dataset
from lcr.eval.stats import bootstrap_mean

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: dev_texts
from dev_texts import gold_questions, taken

CHUNKINGS = ("windows", "paragraphs")


def recall(gold: list[str], items: list[str]) -> float:
    """Gold sentences wholly inside one item (whitespace normalised on both sides)."""
    flat = [" ".join(t.split()) for t in items]
    golds = [" ".join(g.split()) for g in gold]
    return sum(any(g in t for t in flat) for g in golds) / len(golds)


_BUILT: dict[tuple[str, str, str], Path] = {}


def corpus_index(q: dataset.Question, work: Path, method: str, chunking: str) -> Path:
    key = q.corpus_key()
    if (key, method, chunking) in _BUILT:
        return _BUILT[(key, method, chunking)]
    text_file = work / f"{key}.txt"
    if not text_file.exists():
        (doc,) = q.documents
        text_file.write_text(doc.text, encoding="utf-8")
    out = work / f"{key}-{chunking}.idx"
    lcr.index(text_file, out, methods=[method], settings={f"{method}.chunking": chunking})
    _BUILT[(key, method, chunking)] = out
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", type=Path)
    ap.add_argument("--work", type=Path, required=True, help="where the indexes go")
    ap.add_argument("--methods", default="bm25,tfidf")
    ap.add_argument("--budgets", default="500,1000,2000")
    ap.add_argument("--k", type=int, default=80, help="items retrieved per question")
    ap.add_argument("--json", type=Path, default=None, help="also write every figure here")
    args = ap.parse_args()
    questions = gold_questions(args)
    budgets = [int(b) for b in args.budgets.split(",")]
    models = lcr.use_models()
    figures: dict[str, dict[str, dict[str, float]]] = {}
    print(f"{args.data}: {len(questions)} questions with gold sentences\n")
    for method in args.methods.split(","):
        per: dict[tuple[str, int], list[float]] = defaultdict(list)
        chunks: dict[str, list[int]] = defaultdict(list)
        for q in questions:
            gold = [g.text for g in q.evidence if g.text]
            for chunking in CHUNKINGS:
                idx = corpus_index(q, args.work, method, chunking)
                res = lcr.retrieve(idx, q.question, method=method, k=args.k, models=models)
                texts = [it.text for it in res.evidence.items]
                chunks[chunking].extend(len(t.split()) for t in texts)
                for budget in budgets:
                    per[(chunking, budget)].append(recall(gold, taken(texts, budget)))
        print(f"{method}: gold recall at equal word budgets (95% bootstrap interval)")
        print("| budget | windows | paragraphs | paragraphs - windows |")
        print("|---:|---:|---:|---:|")
        for budget in budgets:
            a = per[("windows", budget)]
            b = per[("paragraphs", budget)]
            cells = []
            for values in (a, b, list(np.subtract(b, a))):
                iv = bootstrap_mean(values)
                cells.append(f"{iv.mean:+.3f} [{iv.low:+.3f}, {iv.high:+.3f}]")
                figures.setdefault(method, {})[f"{budget}"] = {
                    "windows": float(np.mean(a)),
                    "paragraphs": float(np.mean(b)),
                }
            print(f"| {budget} | " + " | ".join(cells) + " |")
        for chunking in CHUNKINGS:
            sizes = chunks[chunking]
            print(f"  {chunking}: retrieved items of {np.median(sizes):.0f} words (median)")
        print()
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
