"""Foundation benchmarks, run by hand (no asserts on time; the machine is shared).

    .venv/bin/python bench/bench_foundation.py bm25 --tokens 1000000
    .venv/bin/python bench/bench_foundation.py models

``bm25``: `lcr index --method bm25` on a text of real, distinct documents (SQuALITY
stories and QMSum transcripts from ../shared/data, repeated only past
their ~1M tokens), timed as a separate process with its peak RSS; then the first
retrieval (loading included) and the steady per-question latency over 20 questions.
``models``: load time of every installed preset from the cache (first use from the
GGUF needs an empty $LCR_CACHE_DIR: set it to a new folder to measure that).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DATA = Path(
    os.environ.get("LCR_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")
)


def real_text(tokens: int) -> str:
    """Distinct real documents until ``tokens`` (approximate counter) are reached."""
    from lcr.text.tokens import count_tokens

    docs: list[str] = []
    for line in (DATA / "squality" / "dev.jsonl").read_text().splitlines():
        docs.append(json.loads(line)["document"])
    for line in (DATA / "qmsum" / "val.jsonl").read_text().splitlines():
        turns = json.loads(line)["meeting_transcripts"]
        docs.append("\n".join(f"{t['speaker']}: {t['content']}" for t in turns))
    out: list[str] = []
    total = 0
    while total < tokens:
        for d in docs:
            out.append(d)
            total += count_tokens(d)
            if total >= tokens:
                break
    return "\n\n".join(out)


def bench_bm25(tokens: int) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="lcr-bench-"))
    src = tmp / "big.txt"
    src.write_text(real_text(tokens))
    from lcr.text.tokens import count_tokens

    print(f"text: {src.stat().st_size / 1e6:.1f} MB, ~{count_tokens(src.read_text()):,} tokens")
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "lcr", "index", str(src), "--method", "bm25", "-q"],
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(proc.stdout.strip() or proc.stderr.strip())
    print(f"lcr index --method bm25: {wall:.1f} s wall (process), peak RSS {peak:.0f} MB")

    from lcr import api
    from lcr.models.container import Models
    from lcr.store import Index

    questions = [
        "Who was in charge of the expedition?",
        "What did the committee decide about the budget?",
        "Why did the ship land on the planet?",
        "What was the remote control design about?",
        "Who betrayed the captain?",
    ] * 4
    index = Index.open(tmp / "big.idx")
    models = Models()
    t0 = time.perf_counter()
    api.plan_and_retrieve(index, "bm25", questions[0], models)
    first = time.perf_counter() - t0
    times = []
    for q in questions:
        t0 = time.perf_counter()
        api.plan_and_retrieve(index, "bm25", q, models)
        times.append(time.perf_counter() - t0)
    times.sort()
    print(
        f"first retrieval (loading the index): {first:.2f} s; then per question: "
        f"median {times[len(times) // 2] * 1000:.0f} ms, max {times[-1] * 1000:.0f} ms"
    )


def bench_models() -> None:
    from lcr.models.loading import load_embedder, load_llm
    from lcr.models.presets import list_presets
    from lcr.models.spec import ModelSpec
    from lcr.progress import NULL_PROGRESS

    for p in list_presets():
        if not p.installed:
            print(f"{p.name}: not installed")
            continue
        t0 = time.perf_counter()
        if p.kind == "llm":
            load_llm(ModelSpec(llm=p.name, device="cpu"), NULL_PROGRESS)
        else:
            load_embedder(ModelSpec(embedder=p.name, device="cpu"), NULL_PROGRESS)
        state = "cached copy" if p.cached else "first use (GGUF join + dequantise + save)"
        print(f"{p.name}: {time.perf_counter() - t0:.1f} s ({state})")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["bm25", "models"])
    ap.add_argument("--tokens", type=int, default=1_000_000)
    args = ap.parse_args()
    if args.what == "bm25":
        bench_bm25(args.tokens)
    else:
        bench_models()


if __name__ == "__main__":
    main()
