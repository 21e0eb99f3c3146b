"""MixPR benchmarks: index/retrieve speed at 1M/10M tokens, and the question-linking study.

    .venv/bin/python bench/bench_mixpr.py speed --tokens 1000000
    .venv/bin/python bench/bench_mixpr.py linking

Text: SQuALITY stories + QMSum transcripts from ../shared/data, repeated to size.
Measure only here; tests never assert timings.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mixpr_tasks import DATA, hash_hop, variable_tracking

from lcr import pipeline
from lcr.models.base import Models
from lcr.store import DocumentInput, Index
from lcr.text.tokens import count_tokens


def corpus(tokens: int) -> str:
    parts = [json.loads(x)["document"] for x in (DATA / "squality" / "dev.jsonl").open()]
    for line in (DATA / "qmsum" / "val.jsonl").open():
        m = json.loads(line)
        parts.append("\n".join(f"{t['speaker']}: {t['content']}" for t in m["meeting_transcripts"]))
    base = "\n\n".join(parts)
    per = count_tokens(base) / len(base)
    need = int(tokens / per) + 1
    return ((base + "\n\n") * (need // len(base) + 1))[:need]


def make(tmp: Path, text: str) -> Index:
    sha = hashlib.sha256(text.encode()).hexdigest()
    return Index.create(tmp / "b.idx", [DocumentInput("b.txt", text, sha, len(text))])


def speed(tokens: int, with_bm25: bool) -> None:
    text = corpus(tokens)
    print(f"tokens={count_tokens(text)} chars={len(text)}", flush=True)
    with tempfile.TemporaryDirectory() as d:
        idx = make(Path(d), text)
        t0 = time.perf_counter()
        pipeline.build(idx, ["mixpr"], Models.with_objects())
        t_mixpr = time.perf_counter() - t0
        print(f"mixpr index {t_mixpr:.2f}s stats={idx.methods['mixpr']['stats']}", flush=True)
        print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6:.2f} GB")
        if with_bm25:
            t0 = time.perf_counter()
            pipeline.build(idx, ["bm25"], Models.with_objects(), ["bm25.chunk_tokens=40"])
            t_bm25 = time.perf_counter() - t0
            print(f"bm25 index {t_bm25:.2f}s ratio mixpr/bm25 = {t_mixpr / t_bm25:.2f}")
        idx = Index.open(idx.path)
        qs = ["What did the team decide about the remote control design?",
              "Why did the captain leave the ship?", "Summarise the whole document"]  # fmt: skip
        for mode in ("local", "global"):
            for q in qs:
                r = pipeline.retrieve(
                    idx, "mixpr", q, Models.with_objects(), [f"mixpr.mode={mode}"]
                )
                print(f"{mode} retrieve {r.timings['retrieve_s']:.3f}s info={r.evidence.info}")


def recall(idx: Index, method: str, q: str, gold: list[str], sets: list[str]) -> float:
    r = pipeline.retrieve(idx, method, q, Models.with_objects(), sets, k=100)
    texts = [it.text for it in r.evidence.items]
    return sum(any(g in t for t in texts) for g in gold) / len(gold)


VARIANTS = {
    "threshold": ["mixpr.link=threshold"],
    "topm5": ["mixpr.link=topm", "mixpr.link_m=5"],
    "threshold+topm5": ["mixpr.link=threshold+topm", "mixpr.link_m=5"],
    "relative": ["mixpr.link=relative", "mixpr.link_m=5"],
    "all": ["mixpr.link=all"],
    "thr+topm5,share.5": ["mixpr.link=threshold+topm", "mixpr.sim_share=0.5"],
    "sparse(alpha=1)": ["mixpr.alpha_local=1.0", "mixpr.link=all"],
}


def linking() -> None:
    rows: dict[str, list[float]] = {}
    for gen in (variable_tracking, hash_hop):
        for seed in range(3):
            t = gen(seed)
            with tempfile.TemporaryDirectory() as d:
                idx = make(Path(d), t.text)
                pipeline.build(idx, ["mixpr"], Models.with_objects())
                for name, sets in VARIANTS.items():
                    r = recall(idx, "mixpr", t.question, t.gold, [*sets, "mixpr.mode=local"])
                    rows.setdefault(f"{gen.__name__}/{name}", []).append(r)
    # QMSum specific queries: gold = the relevant turns' text (chunk-level containment
    # of each gold turn's first 32 words is too strict; use turn-word recall instead)
    qm = [json.loads(x) for x in (DATA / "qmsum" / "val.jsonl").open()][:8]
    for m in qm:
        turns = [f"{t['speaker']}: {t['content']}" for t in m["meeting_transcripts"]]
        text = "\n".join(turns)
        with tempfile.TemporaryDirectory() as d:
            idx = make(Path(d), text)
            pipeline.build(idx, ["mixpr"], Models.with_objects())
            for sq in m["specific_query_list"]:
                gold_spans = []
                for a, b in sq["relevant_text_span"]:
                    start = sum(len(x) + 1 for x in turns[: int(a)])
                    end = sum(len(x) + 1 for x in turns[: int(b) + 1])
                    gold_spans.append((start, end))
                for name, sets in VARIANTS.items():
                    r = pipeline.retrieve(
                        idx, "mixpr", sq["query"], Models.with_objects(),
                        [*sets, "mixpr.mode=local"], k=100,
                    )  # fmt: skip
                    cover = 0
                    total = sum(e - s for s, e in gold_spans)
                    for s, e in gold_spans:
                        for it in r.evidence.items:
                            a2, b2 = it.spans[0]
                            cover += max(0, min(e, b2) - max(s, a2))
                    rows.setdefault(f"qmsum/{name}", []).append(cover / max(total, 1))
    for key, vals in rows.items():
        print(f"{key:40s} mean recall {sum(vals) / len(vals):.3f} (n={len(vals)})")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["speed", "linking"])
    ap.add_argument("--tokens", type=int, default=1_000_000)
    ap.add_argument("--bm25", action="store_true")
    args = ap.parse_args()
    speed(args.tokens, args.bm25) if args.what == "speed" else linking()
