"""How much evidence the answer step gets, and which of it to keep: measured without
the LLM (issue 27), so every budget and selection variant is cheap to compare before
any of them is answered.

    # one deep retrieval per method and question (the pool), as lcr eval records it
    .venv/bin/lcr eval ../shared/data/hotpotqa/dev.jsonl -m bm25 -m dense -m hybrid \\
        -m mixpr -k 20 --retrieval-only --index-dir /tmp/hp/indexes --out /tmp/hp/pool20.jsonl
    .venv/bin/python bench/bench_evidence.py ../shared/data/hotpotqa/dev.jsonl \\
        --pool /tmp/hp/pool20.jsonl --index-dir /tmp/hp/indexes

Per method it prints two tables, each with 95% bootstrap intervals over questions:
- the budget curve: the first k items of the pool, for several k: evidence tokens
  (the default LLM's tokenizer), answer found (a gold answer occurs in the text, as
  ``lcr eval`` counts it) and gold recall (the share of gold supporting sentences
  whose text is inside the evidence);
- selection (:mod:`lcr.answer.selection`) from the first ``--from`` items of the pool, for each
  scorer (BM25 over the sentences, the embedder's cosine, their rank fusion), with and
  without the bridge hop and paragraph leads, at each token budget.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lcr.answer import selection
from lcr.answer.shared import ORIGINAL, select_evidence
from lcr.eval import dataset, metrics
from lcr.eval.stats import bootstrap_mean
from lcr.evidence import EvidenceItem
from lcr.models.container import Models
from lcr.models.spec import ModelSpec
from lcr.scoring.bm25 import bm25_scores, bm25_tokenize

Scorer = Callable[[str, Sequence[str]], np.ndarray]


class Scorers:
    """BM25 and embedder scores of sentences against a question, with caches (the same
    sentence recurs across methods and pools)."""

    def __init__(self, models: Models) -> None:
        self.models = models
        self.vectors: dict[str, np.ndarray] = {}
        self.tokens: dict[str, list[str]] = {}

    def _tok(self, texts: list[str]) -> list[list[str]]:
        todo = [t for t in dict.fromkeys(texts) if t not in self.tokens]
        if todo:
            for t, toks in zip(todo, bm25_tokenize(todo, "en", "english"), strict=True):
                self.tokens[t] = toks
        return [self.tokens[t] for t in texts]

    def _vec(self, texts: list[str]) -> np.ndarray:
        todo = [t for t in dict.fromkeys(texts) if t not in self.vectors]
        if todo:
            for t, v in zip(todo, self.models.embedder.encode(todo), strict=True):
                self.vectors[t] = v
        return np.stack([self.vectors[t] for t in texts])

    def bm25(self, question: str, texts: Sequence[str]) -> np.ndarray:
        q, *docs = self._tok([question, *texts])
        return bm25_scores(q, docs)

    def embed(self, question: str, texts: Sequence[str]) -> np.ndarray:
        vecs = self._vec([question, *texts])
        return np.asarray(vecs[1:] @ vecs[0], dtype=np.float64)

    def fused(self, question: str, texts: Sequence[str]) -> np.ndarray:
        return selection.rank_fusion(self.bm25(question, texts), self.embed(question, texts))


def load_pool(path: Path) -> dict[str, dict[str, list[EvidenceItem]]]:
    """{method: {question id: evidence items in rank order}} (the last record wins)."""
    pool: dict[str, dict[str, list[EvidenceItem]]] = defaultdict(dict)
    with path.open(encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            items = [
                EvidenceItem(
                    e["id"],
                    e["doc"],
                    e.get("level", 0),
                    e["score"],
                    e["text"],
                    [tuple(s) for s in e["spans"]],
                    {"rank": r},
                )
                for r, e in enumerate(rec.get("evidence") or [])
            ]
            pool[rec["method"]][rec["id"]] = items
    return pool


def gold_texts(q: dataset.Question) -> list[str]:
    return [g.text for g in q.evidence if g.text]


def measure(text: str, tokens: int, q: dataset.Question) -> dict[str, float]:
    gold = gold_texts(q)
    found = metrics.answer_found(text, q.answers)
    return {
        "tokens": float(tokens),
        "found": float(found) if found is not None else float("nan"),
        "recall": sum(g in text for g in gold) / len(gold) if gold else float("nan"),
    }


def fmt(values: list[float]) -> str:
    vals = [v for v in values if v == v]
    if not vals:
        return "-"
    iv = bootstrap_mean(vals)
    return f"{iv.mean:.3f} [{iv.low:.3f}, {iv.high:.3f}]"


def row(name: str, rows: list[dict[str, float]]) -> str:
    tokens = statistics.mean(r["tokens"] for r in rows)
    found = fmt([r["found"] for r in rows])
    recall = fmt([r["recall"] for r in rows])
    return f"| {name} | {len(rows)} | {tokens:.0f} | {found} | {recall} |"


HEAD = "| {} | n | tokens | answer found | gold recall |\n|---|---:|---:|---:|---:|"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", type=Path)
    ap.add_argument("--pool", type=Path, required=True, help="lcr eval --retrieval-only records")
    ap.add_argument("--index-dir", type=Path, required=True, help="the indexes of that run")
    ap.add_argument("--ks", default="1,2,3,4,6,8,10,12,16,20")
    ap.add_argument("--from", dest="from_k", default="10,20", help="pool depths to select from")
    ap.add_argument("--budgets", default="100,200,300,450")
    ap.add_argument("--scorers", default="bm25,embed,fused")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--llm", default=ModelSpec.llm, help="whose tokenizer counts tokens")
    ap.add_argument("--json", type=Path, default=None, help="also write every figure here")
    args = ap.parse_args()

    questions = dataset.load(args.data, limit=args.limit)
    pool = load_pool(args.pool)
    models = Models(spec=ModelSpec(llm=args.llm))
    count = models.llm.count_tokens
    scorers = Scorers(models)
    sources: dict[str, str] = {}

    def source_of(q: dataset.Question) -> str:
        key = q.corpus_key()
        if key not in sources:
            (found,) = args.index_dir.glob(f"*-{key}.idx/source.txt")
            sources[key] = found.read_text(encoding="utf-8")
        return sources[key]

    ks = [int(k) for k in args.ks.split(",")]
    depths = [int(k) for k in args.from_k.split(",")]
    budgets = [int(b) for b in args.budgets.split(",")]
    names = args.scorers.split(",")
    figures: dict[str, Any] = {}
    gold_rows = []
    for q in questions:
        text = "\n".join(gold_texts(q))
        gold_rows.append(measure(text, count(text), q))
    print(HEAD.format("gold evidence"))
    print(row("gold sentences", gold_rows), "\n")
    for method, by_id in pool.items():
        curve: dict[str, list[dict[str, float]]] = defaultdict(list)
        chosen: dict[str, list[dict[str, float]]] = defaultdict(list)
        for n, q in enumerate(questions):
            items = by_id.get(q.id)
            if items is None:
                continue
            for k in ks:
                text = "\n\n".join(it.text for it in items[:k])
                curve[f"k={k}"].append(measure(text, count(text), q))
            source = source_of(q)
            for depth in depths:
                for name in names:
                    score: Scorer = getattr(scorers, name)
                    for bridge in (False, True):
                        for lead in (False, True):
                            for budget in budgets:
                                settings = ORIGINAL.replace(
                                    select="fused", budget=budget, bridge=bridge, lead=lead
                                )
                                kept, _ = select_evidence(
                                    q.question, items[:depth], settings, source, score, count
                                )
                                text = "\n\n".join(it.text for it in kept)
                                label = (
                                    f"from {depth}, {name}{', bridge' if bridge else ''}"
                                    f"{', lead' if lead else ''}, budget {budget}"
                                )
                                chosen[label].append(measure(text, count(text), q))
            if n % 25 == 0:
                print(f"{method}: {n + 1}/{len(questions)}", file=sys.stderr)
        print(f"**{method}**\n")
        print(HEAD.format("first k of the pool"))
        for name, rows in curve.items():
            print(row(name, rows))
        print()
        print(HEAD.format("selection"))
        for name, rows in chosen.items():
            print(row(name, rows))
        print()
        figures[method] = {"curve": curve, "selection": chosen}
        sys.stdout.flush()
    if args.json:
        args.json.write_text(json.dumps({"gold": gold_rows, **figures}))


if __name__ == "__main__":
    main()
