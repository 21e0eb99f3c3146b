"""The LLM backends side by side: same prompts, same model, same machine, one run.

    .venv/bin/python bench/bench_backends.py micro --llm qwen2.5-coder-1.5b --llm qwen2.5-coder-0.5b
    .venv/bin/python bench/bench_backends.py ask --llm qwen2.5-coder-1.5b

``micro``: for each model and backend, in a fresh process each (so peak RSS is
that backend's alone): load time, prefill tokens/s of a ~1,200-token chat prompt
(a SQuALITY story excerpt and a question, as the answer step builds it), decode
tokens/s of 128 greedy tokens after it, and the process's peak RSS. ``ask``: the
README's ``lcr ask`` end to end as a user runs it (``/usr/bin/time`` style wall
time and peak RSS of the whole command), once per backend.

Run it by hand on an idle machine: wall times move with the load of other jobs.
The transformers runs of the 1.5B model take the shared big-model lock.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("LCR_SHARED_DATA", REPO.parent / "shared" / "data"))
QUESTION = "What is the plot of the story? Answer in a few sentences."
LOCK = "/tmp/lcr-bigmodel.lock"


def prompt_messages(target_tokens: int = 1150) -> list[dict[str, str]]:
    """The answer step's prompt over the first ~target_tokens of a SQuALITY story."""
    from lcr.answer.shared import build_messages
    from lcr.evidence import EvidenceItem
    from lcr.text.tokens import count_tokens

    story = json.loads((SHARED / "squality" / "dev.jsonl").open().readline())["document"]
    words = story.split()
    lo, hi = 0, len(words)
    while lo < hi:  # the longest prefix within the token target
        mid = (lo + hi + 1) // 2
        if count_tokens(" ".join(words[:mid])) <= target_tokens:
            lo = mid
        else:
            hi = mid - 1
    text = " ".join(words[:lo])
    item = EvidenceItem("c0", 0, 0, 1.0, text, [(0, len(text))])
    return build_messages(QUESTION, [item])


def micro_one(llm_name: str, backend: str, new_tokens: int) -> dict[str, object]:
    """Runs in its own process: load, prefill, decode, peak RSS."""
    from lcr.models.loading import load_llm
    from lcr.models.spec import ModelSpec
    from lcr.progress import NULL_PROGRESS

    messages = prompt_messages()
    started = time.perf_counter()
    llm = load_llm(ModelSpec(llm=llm_name, device="cpu"), NULL_PROGRESS, backend=backend)
    load_s = time.perf_counter() - started
    forget = getattr(llm, "reset_cache", None)  # llama.cpp would reuse the cached prompt

    t0 = time.perf_counter()
    first = llm.generate(messages, max_new_tokens=1)
    prefill_s = time.perf_counter() - t0
    if forget is not None:
        forget()
    t0 = time.perf_counter()
    gen = llm.generate(messages, max_new_tokens=new_tokens)
    total_s = time.perf_counter() - t0
    decode_s = max(total_s - prefill_s, 1e-9)
    return {
        "llm": llm_name,
        "backend": backend,
        "threads": getattr(llm, "threads", None),
        "load_s": round(load_s, 2),
        "prompt_tokens": first.prompt_tokens,
        "prefill_tok_s": round(first.prompt_tokens / prefill_s, 1),
        "completion_tokens": gen.completion_tokens,
        "decode_tok_s": round((gen.completion_tokens - 1) / decode_s, 2),
        "prompt_plus_completion_s": round(total_s, 2),
        "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 2),
        "answer_start": gen.text[:80],
    }


def run_child(args: list[str], locked: bool) -> str:
    cmd = [sys.executable, *args]
    if locked:
        cmd = ["flock", LOCK, *cmd]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr[-3000:]}")
    return done.stdout.strip().splitlines()[-1]


def ask_one(backend: str, llm_name: str) -> dict[str, object]:
    """The README's ask, end to end, in a child process: wall time and its peak RSS."""
    index = REPO / "examples" / "lighthouse.idx"
    if not index.exists():
        subprocess.run(
            [sys.executable, "-m", "lcr", "index", str(REPO / "examples" / "lighthouse.txt")],
            check=True,
            cwd=REPO,
        )
    question = "What was the name of the boat that brought stores to Gull Rock every Thursday?"
    cmd = [
        sys.executable,
        "-m",
        "lcr",
        "ask",
        str(index),
        question,
        "--method",
        "bm25",
        "--json",
        "--backend",
        backend,
        "--llm",
        llm_name,
        "-q",
    ]
    if backend == "transformers" and "1.5b" in llm_name:
        cmd = ["flock", LOCK, *cmd]
    started = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(done.stderr[-2000:])
    out = json.loads(done.stdout.strip().splitlines()[-1])
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return {
        "backend": backend,
        "llm": llm_name,
        "wall_s": round(wall, 1),
        "peak_rss_gb": round(max(peak, before) / 1e6, 2),  # the largest child so far
        "answer": out["answer"],
        "usage": out["usage"],
        "timings": out["timings"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    micro = sub.add_parser("micro")
    micro.add_argument("--llm", action="append", default=None)
    micro.add_argument("--backend", action="append", default=None)
    micro.add_argument("--new-tokens", type=int, default=128)
    one = sub.add_parser("_one")
    one.add_argument("llm")
    one.add_argument("backend")
    one.add_argument("new_tokens", type=int)
    ask = sub.add_parser("ask")
    ask.add_argument("--llm", default="qwen2.5-coder-1.5b")
    ask.add_argument("--backend", action="append", default=None)
    args = parser.parse_args()
    if args.what == "_one":
        print(json.dumps(micro_one(args.llm, args.backend, args.new_tokens)))
        return
    if args.what == "micro":
        for name in args.llm or ["qwen2.5-coder-1.5b"]:
            for backend in args.backend or ["llamacpp", "transformers"]:
                locked = backend == "transformers" and "1.5b" in name
                line = run_child(
                    [str(Path(__file__)), "_one", name, backend, str(args.new_tokens)], locked
                )
                print(line, flush=True)
        return
    # ask: the transformers run last, so its large peak does not mask llama.cpp's
    for backend in args.backend or ["llamacpp", "transformers"]:
        print(json.dumps(ask_one(backend, args.llm)), flush=True)


if __name__ == "__main__":
    main()
