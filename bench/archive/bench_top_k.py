"""The baselines' ``top_k`` (issue 56): gold recall and evidence tokens at a few k,
retrieval only, no LLM.

    nice .venv/bin/python bench/archive/bench_top_k.py ../shared/data/hotpotqa/dev.jsonl \\
        --work /tmp/top-k --methods bm25,tfidf,dense,hybrid --ks 5,10,20

Each corpus is indexed once by lcr itself with every method's defaults, each question
retrieved at each k (``-k``), and two figures kept per question: the gold recall of
the k items (the share of the supporting-fact sentences wholly inside one item, as
``bench_chunking.py`` counts it) and the evidence the answer step would read, in lcr's
model-free tokens. Means with 95% bootstrap intervals over questions. Unlike
``bench_defaults.py`` nothing is cut at a word budget: k decides how much is read.
Choose on development data only.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import lcr
from lcr.eval import dataset
from lcr.eval.stats import bootstrap_mean
from lcr.text.tokens import count_tokens

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: dev_texts
sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/archive/: bench_chunking
from bench_chunking import recall
from dev_texts import gold_questions


def corpus_index(q: dataset.Question, work: Path, methods: list[str]) -> Path:
    """The question's corpus, indexed once with every method (lcr's defaults)."""
    key = q.corpus_key()
    out = work / f"{key}-{'-'.join(methods)}.idx"
    if not out.exists():
        text_file = work / f"{key}.txt"
        (doc,) = q.documents
        text_file.write_text(doc.text, encoding="utf-8")
        lcr.index(text_file, out, methods=methods)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", type=Path)
    ap.add_argument("--work", type=Path, required=True, help="where the indexes go")
    ap.add_argument("--limit", type=int, default=0, help="first N questions only (0: all)")
    ap.add_argument("--methods", default="bm25,tfidf,dense,hybrid")
    ap.add_argument("--ks", default="5,10,20", help="comma-separated k")
    args = ap.parse_args()
    questions = gold_questions(args)
    methods = args.methods.split(",")
    ks = [int(k) for k in args.ks.split(",")]
    models = lcr.use_models()
    gold_recall: dict[tuple[str, int], list[float]] = defaultdict(list)
    tokens: dict[tuple[str, int], list[float]] = defaultdict(list)
    print(f"{args.data}: {len(questions)} questions; k in {ks}\n")
    for q in questions:
        gold = [g.text for g in q.evidence if g.text]
        idx = corpus_index(q, args.work, methods)
        for method in methods:
            for k in ks:
                res = lcr.retrieve(idx, q.question, method=method, k=k, models=models)
                texts = [it.text for it in res.evidence.items]
                gold_recall[(method, k)].append(recall(gold, texts))
                tokens[(method, k)].append(float(sum(count_tokens(t) for t in texts)))
    print("| method | k | gold recall | evidence tokens |")
    print("|---|---:|---|---:|")
    for method in methods:
        for k in ks:
            r = bootstrap_mean(gold_recall[(method, k)])
            t = bootstrap_mean(tokens[(method, k)])
            cell = f"{r.mean:.3f} [{r.low:.3f}, {r.high:.3f}]"
            print(f"| {method} | {k} | {cell} | {t.mean:,.0f} [{t.low:,.0f}, {t.high:,.0f}] |")


if __name__ == "__main__":
    main()
