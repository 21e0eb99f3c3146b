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
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mixpr_tasks import DATA, hash_hop, variable_tracking

from lcr import pipeline
from lcr.models.container import Models
from lcr.store import DocumentInput, Index
from lcr.text.tokens import count_tokens


def unique_parts() -> list[str]:
    """Distinct real text, ~1.48M tokens: SQuALITY stories (189k), QMSum transcripts
    (519k) and the distinct human summaries in ODSum's story queries (768k). ODSum's
    story documents are the SQuALITY stories again, so they are left out."""
    parts = [json.loads(x)["document"] for x in (DATA / "squality" / "dev.jsonl").open()]
    for line in (DATA / "qmsum" / "val.jsonl").open():
        m = json.loads(line)
        parts.append("\n".join(f"{t['speaker']}: {t['content']}" for t in m["meeting_transcripts"]))
    seen: set[str] = set()
    for line in (DATA / "odsum" / "story_queries.jsonl").open():
        for q in json.loads(line):
            for r in q["responses"]:
                if r["response_text"] not in seen:
                    seen.add(r["response_text"])
                    parts.append(r["response_text"])
    return parts


def corpus(tokens: int) -> str:
    """``tokens`` of real text: distinct up to ~1.48M tokens, repeated beyond that."""
    base = "\n\n".join(unique_parts())
    per = count_tokens(base) / len(base)
    need = int(tokens / per) + 1
    return ((base + "\n\n") * (need // len(base) + 1))[:need]


def make(tmp: Path, text: str) -> Index:
    sha = hashlib.sha256(text.encode()).hexdigest()
    return Index.create(tmp / "b.idx", [DocumentInput("b.txt", text, sha, len(text))])


class PrintProgress:
    """Prints each phase and, for long phases, every 2% with elapsed time and RSS."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()

    def task(self, description: str, total: float | None = None) -> PrintProgress._Task:
        print(f"[{time.perf_counter() - self.t0:7.1f}s] {description}", flush=True)
        return PrintProgress._Task(self, description, total)

    def log(self, message: str) -> None:
        print(message, flush=True)

    class _Task:
        def __init__(self, owner: PrintProgress, description: str, total: float | None) -> None:
            self.owner, self.description, self.total, self.done, self.shown = (
                owner, description, total, 0.0, 0
            )  # fmt: skip

        def advance(self, n: float = 1) -> None:
            self.done += n
            if self.total and int(50 * self.done / self.total) > self.shown:
                self.shown = int(50 * self.done / self.total)
                rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
                print(
                    f"[{time.perf_counter() - self.owner.t0:7.1f}s] {self.description} "
                    f"{self.done:.0f}/{self.total:.0f} peak RSS {rss:.2f} GB load "
                    f"{os.getloadavg()[0]:.1f}",
                    flush=True,
                )

        def update(self, *, total: float | None = None, description: str | None = None) -> None:
            self.total = total if total is not None else self.total


def speed(tokens: int, with_bm25: bool, sets: list[str]) -> None:
    text = corpus(tokens)
    print(f"tokens={count_tokens(text)} chars={len(text)}", flush=True)
    with tempfile.TemporaryDirectory() as d:
        idx = make(Path(d), text)
        t0 = time.perf_counter()
        pipeline.build(idx, ["mixpr"], Models.with_objects(), sets, progress=PrintProgress())
        t_mixpr = time.perf_counter() - t0
        print(f"mixpr index {t_mixpr:.2f}s stats={idx.methods['mixpr']['stats']}", flush=True)
        print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6:.2f} GB")
        if with_bm25:
            t0 = time.perf_counter()
            pipeline.build(idx, ["bm25"], Models.with_objects(), ["bm25.chunk_tokens=40"])
            t_bm25 = time.perf_counter() - t0
            print(f"bm25 index {t_bm25:.2f}s ratio mixpr/bm25 = {t_mixpr / t_bm25:.2f}")
        # A fresh Index, as `lcr ask INDEX -` opens it: the first question pays for
        # loading the graph and TF-IDF; later ones reuse the reader's memoised state.
        idx = Index.open(idx.path)
        qs = ["What did the team decide about the remote control design?",
              "Why did the captain leave the ship?",
              "What did Magnan tell Retief about the exchange students?",
              "Who spoke about the budget and what was the conclusion?"]  # fmt: skip
        models = Models.with_objects()
        for mode in ("local", "global"):
            times = []
            for rnd in range(4):
                for q in qs:
                    r = pipeline.retrieve(idx, "mixpr", q, models, [f"mixpr.mode={mode}"])
                    times.append(r.timings["retrieve_s"])
                    if rnd == 0 and q == qs[0]:
                        print(f"{mode} first question {times[0]:.3f}s info={r.evidence.info}")
            steady = sorted(times[1:])
            print(
                f"{mode} steady: median {steady[len(steady) // 2]:.3f}s min {steady[0]:.3f}s "
                f"max {steady[-1]:.3f}s over {len(steady)} questions; "
                f"load {os.getloadavg()[0]:.1f}",
                flush=True,
            )


def recall(idx: Index, method: str, q: str, gold: list[str], sets: list[str]) -> float:
    r = pipeline.retrieve(idx, method, q, Models.with_objects(), sets, k=100)
    texts = [it.text for it in r.evidence.items]
    return sum(any(g in t for t in texts) for g in gold) / len(gold)


# sim_share=0 is the paper's pure walk ranking; the default (0.5) is the last mixpr row
VARIANTS = {
    "threshold": ["mixpr.link=threshold", "mixpr.sim_share=0"],
    "topm5": ["mixpr.link=topm", "mixpr.link_m=5", "mixpr.sim_share=0"],
    "threshold+topm5": ["mixpr.link=threshold+topm", "mixpr.link_m=5", "mixpr.sim_share=0"],
    "relative": ["mixpr.link=relative", "mixpr.link_m=5", "mixpr.sim_share=0"],
    "all": ["mixpr.link=all", "mixpr.sim_share=0"],
    "thr+topm5,share.5": ["mixpr.link=threshold+topm", "mixpr.sim_share=0.5"],
    "tfidf(alpha=1)": ["mixpr.alpha_local=1.0", "mixpr.link=all", "mixpr.sim_share=0"],
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
                    res = pipeline.retrieve(
                        idx, "mixpr", sq["query"], Models.with_objects(),
                        [*sets, "mixpr.mode=local"], k=100,
                    )  # fmt: skip
                    cover = 0
                    total = sum(e - s for s, e in gold_spans)
                    for s, e in gold_spans:
                        for it in res.evidence.items:
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
    ap.add_argument("--set", action="append", default=[], help="e.g. mixpr.max_degree=50")
    args = ap.parse_args()
    speed(args.tokens, args.bm25, args.set) if args.what == "speed" else linking()
