"""PECAN's two efficiency claims, measured with a real model (default smollm2-135m).

1. Search: the node-level KV cache (each node encoded once, each Yes/No suffix
   run on top and rolled back) against re-encoding prompt + visited nodes +
   suffix from scratch at every check, on the same nodes in the same order, in
   the same run: tokens encoded and seconds, cumulative by number of steps.
2. Build: greedy generation of one batch's Information Points with attention
   capture (generate_with_attention) against plain generation (llm.generate) of
   the same prompt: seconds and peak RSS, each in its own process.
3. Decode: seconds per decoding step with a long cache (the first SQuALITY dev
   story's first N tokens) under SDPA without weights, eager attention with
   capture, and SDPA with weights with capture (what the build uses), in
   interleaved rounds in one process.

    PYTHONPATH=. python bench/archive/bench_pecan.py [--llm smollm2-135m] [--s 1024] [--steps 12]
    PYTHONPATH=. python bench/archive/bench_pecan.py --only decode --llm qwen2.5-coder-1.5b
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

SHARED = Path(
    os.environ.get("LCR_SHARED_DATA", Path(__file__).resolve().parents[3] / "shared" / "data")
)


def _llm(name: str):  # type: ignore[no-untyped-def]
    import torch

    from lcr.models.loading import load_llm
    from lcr.models.spec import ModelSpec
    from lcr.progress import NULL_PROGRESS

    torch.set_num_threads(1)
    # attention capture and the node cache are transformers-only: never llama.cpp
    return load_llm(ModelSpec(llm=name, device="cpu", backend="transformers"), NULL_PROGRESS)


def _chunks(llm, tokens: int, limit: int) -> list[str]:  # type: ignore[no-untyped-def]
    from lcr.text.chunking import token_windows

    text = (SHARED / "stories" / "cinderella.txt").read_text(encoding="utf-8")
    return [c.text for c in token_windows(text, tokens, count=llm.count_tokens)][:limit]


def bench_search(name: str, steps: int, node_tokens: int) -> dict[str, object]:
    import torch

    from lcr.methods.pecan.prompts import search_prompt, segment_line

    llm = _llm(name)
    nodes = [llm.encode(segment_line(t)) for t in _chunks(llm, node_tokens, steps)]
    prompt = search_prompt(llm, "Why could Cinderella not go to the festival at first?")
    yes, no = llm.first_token_ids("Yes"), llm.first_token_ids("No")
    rows = []
    started = time.perf_counter()
    before = llm.usage.prompt_tokens
    cache = llm.node_cache(prompt.prefix, prompt.question)
    cached_tokens, cached_s = [], []
    for nd in nodes:
        cache.append(nd)
        cache.yes_probability(prompt.check, yes, no)
        cached_tokens.append(llm.usage.prompt_tokens - before)
        cached_s.append(time.perf_counter() - started)
    re_tokens, re_s = [], []
    total, t0 = 0, time.perf_counter()
    for n in range(1, len(nodes) + 1):
        ids = prompt.prefix + [t for nd in nodes[:n] for t in nd] + prompt.check
        with torch.no_grad():
            llm.model(input_ids=torch.tensor([ids]), use_cache=False, logits_to_keep=1)
        total += len(ids)
        re_tokens.append(total)
        re_s.append(time.perf_counter() - t0)
    for n in range(len(nodes)):
        rows.append(
            {
                "steps": n + 1,
                "cached_tokens": cached_tokens[n],
                "reencode_tokens": re_tokens[n],
                "token_ratio": round(re_tokens[n] / cached_tokens[n], 2),
                "cached_s": round(cached_s[n], 2),
                "reencode_s": round(re_s[n], 2),
                "time_ratio": round(re_s[n] / cached_s[n], 2),
            }
        )
    return {"llm": name, "node_tokens": node_tokens, "rows": rows}


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def bench_one_generation(name: str, variant: str, s: int, new: int) -> dict[str, object]:
    from lcr.methods.pecan.prompts import build_prompt

    llm = _llm(name)
    chunks, batch, used = _chunks(llm, 300, 100), [], 0
    for c in chunks:
        t = llm.count_tokens(c)
        if used + t > s:
            break
        batch.append(c)
        used += t
    prompt = build_prompt(llm, batch)
    llm.generate([{"role": "user", "content": "Hi"}], max_new_tokens=2)  # warm up
    base = _rss_mb()
    started = time.perf_counter()
    if variant == "attention":
        gen = llm.generate_with_attention(prompt.ids, spans=prompt.spans, max_new_tokens=new)
        text, count = gen.text, gen.completion_tokens
    else:
        # the backend's own generation on the very same token ids
        ids = [list(prompt.ids)]
        plain = llm._generations(ids, llm._decode_batch(ids, new, (), 0.0), ())[0]
        text, count = plain.text, plain.completion_tokens
    seconds = time.perf_counter() - started
    return {
        "variant": variant,
        "prompt_tokens": len(prompt.ids),
        "completion_tokens": count,
        "seconds": round(seconds, 2),
        "rss_before_mb": round(base, 1),
        "peak_rss_mb": round(_rss_mb(), 1),
        "text_head": text[:80],
    }


def bench_decode(name: str, lengths: list[int], steps: int, rounds: int) -> dict[str, object]:
    import contextlib
    import copy

    import torch

    from lcr.models.transformers_attend import accumulate_attention

    llm = _llm(name)
    with (SHARED / "squality" / "dev.jsonl").open(encoding="utf-8") as fh:
        story = json.loads(fh.readline())["document"]
    ids = llm.encode(story)
    seconds: dict[str, list[float]] = {}
    for n in lengths:
        if n > len(ids):
            raise SystemExit(f"the story has {len(ids)} tokens, fewer than {n}")
        with torch.no_grad():
            base = llm.model(input_ids=torch.tensor([ids[:n]]), use_cache=True).cache
        for _ in range(rounds):
            for mode in ("sdpa", "eager", "sdpa_weights"):
                cache = copy.deepcopy(base)
                switch = {
                    "sdpa": contextlib.nullcontext(),
                    "eager": llm.eager_attention(),
                    "sdpa_weights": llm.weights_attention(),
                }[mode]
                capture = (
                    contextlib.nullcontext([]) if mode == "sdpa" else accumulate_attention(llm, n)
                )
                started = time.perf_counter()
                with torch.no_grad(), switch, capture as total:
                    for _ in range(steps):
                        total.clear()
                        llm.model(input_ids=torch.tensor([[ids[n]]]), cache=cache, use_cache=True)
                per_step = (time.perf_counter() - started) / steps
                seconds.setdefault(f"{n}:{mode}", []).append(per_step)
    medians = {k: round(sorted(v)[len(v) // 2], 3) for k, v in seconds.items()}
    return {"seconds_per_step": medians, "steps": steps, "rounds": rounds}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--llm", default="smollm2-135m")
    ap.add_argument("--s", type=int, default=1024)
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--node-tokens", type=int, default=100)
    ap.add_argument("--only", choices=("search", "build", "decode"), default=None)
    ap.add_argument("--lengths", default="1000,6000", help="decode: cache lengths")
    ap.add_argument("--rounds", type=int, default=2, help="decode: interleaved rounds")
    ap.add_argument("--variant", choices=("attention", "plain"), default=None)
    args = ap.parse_args()
    if args.variant:  # a child process: one generation, one JSON line
        print(json.dumps(bench_one_generation(args.llm, args.variant, args.s, args.new)))
        return
    if args.only == "decode":
        lengths = [int(x) for x in args.lengths.split(",")]
        print(json.dumps(bench_decode(args.llm, lengths, 6, args.rounds)))
        return
    if args.only in (None, "search"):
        out = bench_search(args.llm, args.steps, args.node_tokens)
        print(json.dumps(out))
    if args.only in (None, "build"):
        results = {}
        for variant in ("plain", "attention"):
            cmd = [
                sys.executable,
                __file__,
                "--llm",
                args.llm,
                "--s",
                str(args.s),
                "--new",
                str(args.new),
                "--variant",
                variant,
            ]
            line = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
            results[variant] = json.loads(line.strip().splitlines()[-1])
            print(json.dumps(results[variant]))
        a, p = results["attention"], results["plain"]
        print(
            json.dumps(
                {
                    "time_ratio": round(float(a["seconds"]) / float(p["seconds"]), 2),
                    "peak_rss_delta_mb": {
                        k: round(float(v["peak_rss_mb"]) - float(v["rss_before_mb"]), 1)
                        for k, v in results.items()
                    },
                }
            )
        )


if __name__ == "__main__":
    main()
