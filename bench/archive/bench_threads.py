"""torch threads of the transformers backend beside a busy core, measured like llama.cpp's.

    .venv/bin/python bench/archive/bench_threads.py --llm smollm2-135m --tokens 48

For each mode, in a fresh process: load the model on the transformers backend (CPU),
start a busy-loop process (one core taken *after* the load chose its threads, as when
another job starts mid-build), then time one greedy generation of the answer step's
prompt. Modes: ``follow`` (the governor, LCR_THREADS unset), ``fixed2`` (LCR_THREADS=2,
the count torch picked before) and ``fixed1`` (LCR_THREADS=1). Run it by hand: wall times
move with the load of other jobs, so compare the modes of one run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MODES = {"follow": None, "fixed2": "2", "fixed1": "1"}


def one(llm_name: str, tokens: int) -> dict[str, object]:
    sys.path.insert(0, str(REPO / "bench"))
    from bench_backends import prompt_messages

    from lcr.models.loading import load_llm
    from lcr.models.spec import ModelSpec
    from lcr.progress import NULL_PROGRESS

    llm = load_llm(ModelSpec(llm=llm_name, device="cpu"), NULL_PROGRESS, backend="transformers")
    messages = prompt_messages()
    llm.generate(messages, max_new_tokens=2)  # warm up: the first call pays one-off costs
    threads_at_load = getattr(llm, "threads", None)
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(1.0)
        t0 = time.perf_counter()
        gen = llm.generate(messages, max_new_tokens=tokens)
        seconds = time.perf_counter() - t0
    finally:
        hog.kill()
        hog.wait()
    return {
        "threads_at_load": threads_at_load,
        "threads_after": getattr(llm, "threads", None),
        "prompt_tokens": gen.prompt_tokens,
        "completion_tokens": gen.completion_tokens,
        "seconds": round(seconds, 2),
        "tokens_per_s": round(gen.completion_tokens / seconds, 2),
        "load_avg_1m": os.getloadavg()[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llm", default="smollm2-135m")
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--one", choices=sorted(MODES), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.llm, args.tokens)))
        return
    for mode, fixed in MODES.items():
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        env.pop("LCR_THREADS", None)
        if fixed is not None:
            env["LCR_THREADS"] = fixed
        cmd = [sys.executable, __file__, "--llm", args.llm, "--tokens", str(args.tokens)]
        out = subprocess.run(
            [*cmd, "--one", mode], env=env, capture_output=True, text=True, check=True
        )
        print(mode, out.stdout.strip().splitlines()[-1], flush=True)


if __name__ == "__main__":
    main()
