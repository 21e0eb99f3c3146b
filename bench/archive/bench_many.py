"""How to rank evidence pooled from several indexes (issue 53, item 3), without an LLM.

    .venv/bin/python bench/archive/bench_many.py ../shared/data/hotpotqa/dev.jsonl --work /tmp/many

Each HotpotQA corpus becomes a bm25 index (one document each); every question is
asked of all of them, its own corpus holding the answer and the others not. Each
index gives its ``--k`` best chunks (bm25's answer pool, 20), and the pool is ranked
three ways: ``pooled bm25`` (lcr's: one BM25 over the pooled texts,
:func:`lcr.pipeline.many.pooled_ranking`), ``raw scores`` (each index's own BM25
score, compared as if on one scale) and ``interleaved`` (rank 1 of every index, then
rank 2, ...). Printed per ranking, with 95% bootstrap intervals over questions: the
share of the best ``--keep`` pooled items that come from the question's own corpus,
and gold recall (supporting sentences inside one item) of the pool read best first
up to ``--words`` words, beside the own index alone at the same words.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path

import lcr
from lcr.eval import dataset
from lcr.eval.stats import bootstrap_mean
from lcr.evidence import EvidenceItem
from lcr.pipeline.many import pooled_ranking

Ranking = Callable[[str, Sequence[EvidenceItem]], list[int]]


def by_pooled_bm25(question: str, items: Sequence[EvidenceItem]) -> list[int]:
    return pooled_ranking(question, items)[0]


def by_raw_scores(question: str, items: Sequence[EvidenceItem]) -> list[int]:
    return sorted(range(len(items)), key=lambda i: -items[i].score)


def interleaved(question: str, items: Sequence[EvidenceItem]) -> list[int]:
    return sorted(range(len(items)), key=lambda i: int(items[i].extra.get("rank", 0)))


RANKINGS: dict[str, Ranking] = {
    "pooled bm25": by_pooled_bm25,
    "raw scores": by_raw_scores,
    "interleaved": interleaved,
}


def recall_at(gold: list[str], texts: list[str], words: int) -> float:
    flat: list[str] = []
    left = words
    for t in texts:
        w = t.split()
        flat.append(" ".join(w[:left]))
        left -= min(len(w), left)
        if left <= 0:
            break
    return sum(any(" ".join(g.split()) in f for f in flat) for g in gold) / len(gold)


def fmt(values: list[float]) -> str:
    iv = bootstrap_mean(values)
    return f"{iv.mean:.3f} [{iv.low:.3f}, {iv.high:.3f}]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", type=Path)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--k", type=int, default=20)
    ap.add_argument("--keep", type=int, default=20)
    ap.add_argument("--words", type=int, default=500)
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    questions = [q for q in dataset.load(args.data) if q.evidence]
    indexes: dict[str, Path] = {}
    for q in questions:
        key = q.corpus_key()
        if key not in indexes:
            (doc,) = q.documents
            text = args.work / f"{key}.txt"
            text.write_text(doc.text, encoding="utf-8")
            indexes[key] = args.work / f"{key}.idx"
            lcr.index(text, indexes[key], methods=["bm25"])
    own_share: dict[str, list[float]] = {name: [] for name in RANKINGS}
    recall: dict[str, list[float]] = {name: [] for name in [*RANKINGS, "own index alone"]}
    for q in questions:
        gold = [g.text for g in q.evidence if g.text]
        items: list[EvidenceItem] = []
        own: list[EvidenceItem] = []
        for key, path in indexes.items():
            found = lcr.retrieve(path, q.question, k=args.k).evidence.items
            for it in found:
                it.extra["own"] = key == q.corpus_key()
            items.extend(found)
            if key == q.corpus_key():
                own = found
        recall["own index alone"].append(recall_at(gold, [it.text for it in own], args.words))
        for name, rank in RANKINGS.items():
            order = rank(q.question, items)
            kept = [items[i] for i in order[: args.keep]]
            own_share[name].append(sum(bool(it.extra["own"]) for it in kept) / max(1, len(kept)))
            recall[name].append(recall_at(gold, [it.text for it in kept], args.words))
    print(f"{args.data}: {len(questions)} questions, each asked of {len(indexes)} indexes\n")
    share = f"own corpus's share of the best {args.keep}"
    words = f"gold recall at {args.words} words"
    print(f"| ranking | {share} | {words} |")
    print("|---|---:|---:|")
    for name in recall:
        share = fmt(own_share[name]) if name in own_share else "1"
        print(f"| {name} | {share} | {fmt(recall[name])} |")


if __name__ == "__main__":
    main()
