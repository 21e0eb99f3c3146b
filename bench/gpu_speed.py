"""How fast the transformers backend generates on a GPU, before and after the static
KV cache and compiled steps (issue #55, item 2), in one run of at most 8 minutes.

    python bench/gpu_speed.py --llm smol.gguf               # on the GPU machine
    python bench/gpu_speed.py --cpu --llm smollm2-135m      # the dry run on a CPU
    python bench/gpu_speed.py --cpu --steps stream,batched --json out.json

Steps, each skipped once ``--budget-s`` is spent (the order is the order of value):

0. **hook**: the work lcr adds after each step, alone (no model call): 1,000 steps of a
   streamed reply through the hook before this change and through ``StepWatch``.
1. **one stream**: one prompt, greedy, the reply streamed (as ``lcr ask`` does):
   transformers' bare ``model.generate`` (dynamic cache, no hooks), lcr with
   ``LCR_STATIC_CACHE=off``, lcr with the stream decoded after every step (the
   per-step work before this change), and lcr with ``--static`` (``on``: a static
   cache, compiled steps on a GPU from the first call; ``none`` leaves it out).
   Alternated, ``--rounds`` times, after one warm-up call each (the compile happens
   there); median tokens/s.
2. **batched**: ``generate_batch`` of ``--batch`` conversations, static cache off
   and ``--static``, tokens/s over the whole batch (on a CPU with ``batch_on_cpu``).
2b. **profile**: lcr's one stream (static cache off) and the bare call once each under
   cProfile; the functions whose own time lcr spends beyond the bare call's, most first.
3. **builds**: ``lcr index examples/lighthouse.txt`` with ``--methods`` (PECAN, RAPTOR;
   ``--embedder hashing-384``), ``LCR_STATIC_CACHE`` off and auto, wall seconds
   (with ``--cpu`` off only: the dry run checks that they run).
4. **tests**: ``tests/test_gpu.py`` and ``tests/test_transformers_decode.py``.

Prints one line per measurement and, with ``--json``, writes them all.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PROMPT = "Write a long story about a lighthouse keeper and the boat that brings his stores."
TOPICS = ["a lighthouse", "a harbour", "a storm", "a ship's cat", "the tide", "a fog bell"]


class Budget:
    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return self.end - time.monotonic()


def messages(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def bare_generate(llm: Any, prompt: list[int], new: int) -> int:
    """transformers' own greedy generate: the tokens it produced."""
    import torch
    from transformers import GenerationConfig

    config = GenerationConfig(
        max_new_tokens=new,
        do_sample=False,
        temperature=None,
        top_p=None,
        top_k=None,
        pad_token_id=llm._pad_id,
        eos_token_id=sorted(llm.end_ids),
    )
    ids = torch.tensor([prompt], device=llm.model.device)
    with torch.no_grad():
        out = llm.model.generate(
            input_ids=ids, attention_mask=torch.ones_like(ids), generation_config=config
        )
    return int(out.shape[1]) - len(prompt)


def one_stream(llm: Any, new: int, rounds: int, static: str, budget: Budget) -> list[dict]:
    from lcr.models import transformers_decode as decoding

    prompt = llm.render(messages(PROMPT))
    interval = decoding.STREAM_INTERVAL_S

    def lcr_call(mode: str, every_step: bool = False) -> int:
        llm.static_cache = mode
        decoding.STREAM_INTERVAL_S = 0.0 if every_step else interval
        try:
            gen = llm.generate(messages(PROMPT), max_new_tokens=new, on_text=lambda _t: None)
        finally:
            decoding.STREAM_INTERVAL_S = interval
        return int(gen.completion_tokens)

    variants = {
        "bare model.generate": lambda: bare_generate(llm, prompt, new),
        "lcr, static cache off": lambda: lcr_call("off"),
        "lcr, off, stream decoded every step": lambda: lcr_call("off", every_step=True),
    }
    if static != "none":
        variants[f"lcr, static cache {static}"] = lambda: lcr_call(static)
    rates: dict[str, list[float]] = {name: [] for name in variants}
    for name, call in variants.items():  # warm-up: the first call compiles
        start = time.perf_counter()
        call()
        print(f"  warm-up {name}: {time.perf_counter() - start:.1f} s", flush=True)
    for _ in range(rounds):
        if budget.left() < 30:
            break
        for name, call in variants.items():
            sync(llm)
            start = time.perf_counter()
            tokens = call()
            sync(llm)
            rates[name].append(tokens / (time.perf_counter() - start))
    base = statistics.median(rates["bare model.generate"] or [float("nan")])
    rows = []
    for name, got in rates.items():
        rate = statistics.median(got) if got else float("nan")
        rows.append(
            {
                "step": "one stream",
                "what": name,
                "tokens_per_s": round(rate, 1),
                "ratio_to_bare": round(rate / base, 2),
                "runs": len(got),
            }
        )
    return rows


def batched(llm: Any, new: int, size: int, static: str, budget: Budget) -> list[dict]:
    convs = [messages(f"Write a short story about {TOPICS[i % len(TOPICS)]}.") for i in range(size)]
    rows = []
    llm.batch_on_cpu = llm.device == "cpu"
    try:
        for mode in ("off", static, "off", static) if static != "none" else ("off", "off"):
            if budget.left() < 30:
                break
            llm.static_cache = mode
            sync(llm)
            start = time.perf_counter()
            gens = llm.generate_batch(convs, max_new_tokens=new)
            sync(llm)
            seconds = time.perf_counter() - start
            tokens = sum(g.completion_tokens for g in gens)
            rows.append(
                {
                    "step": "batched",
                    "what": f"static cache {mode}",
                    "rows": size,
                    "batch_rows": llm.batch_rows([llm.render(c) for c in convs], new),
                    "tokens": tokens,
                    "seconds": round(seconds, 2),
                    "tokens_per_s": round(tokens / seconds, 1),
                }
            )
    finally:
        llm.batch_on_cpu = False
    return rows


def hook_overhead(llm: Any, steps: int = 1000, rounds: int = 3) -> list[dict]:
    """The per-step hook alone, over ``steps`` steps of a streamed reply whose steps take
    no time: the hook before this change (the whole reply read back and decoded every
    step) against :class:`StepWatch` (so it decodes twice: the first step and the end)."""
    import torch

    from lcr.models import transformers_decode as decoding
    from lcr.models.text_stream import TextPieces
    from lcr.progress import NULL_PROGRESS, TokenMeter

    tok = llm.tokenizer
    prompt = llm.render(messages(PROMPT))
    text = "The keeper climbed the stair each night to light the lamp. " * 400
    reply = tok(text, add_special_tokens=False)["input_ids"][:steps]
    full = torch.tensor([prompt + reply])
    views = [full[:, : len(prompt) + n] for n in range(1, len(reply) + 1)]

    def decode(ids: list[int]) -> str:
        return str(tok.decode(ids, skip_special_tokens=True))

    def before(pieces: TextPieces) -> None:
        for view in views:
            new = [int(t) for t in view[0, len(prompt) :].tolist()]
            ends = [i for i, t in enumerate(new) if t in llm.end_ids]
            pieces.update(decode(new[: ends[0]] if ends else new))

    def after(pieces: TextPieces) -> None:
        meter = TokenMeter(NULL_PROGRESS, "t", len(views))
        watch = decoding.StepWatch(
            lambda: None,
            meter,
            1,
            len(prompt),
            pieces=pieces,
            decode=decode,
            end_ids=frozenset(llm.end_ids),
        )
        for view in views:
            watch(view, None)
        watch.flush()

    seconds: dict[str, list[float]] = {"before": [], "after": []}
    texts: dict[str, str] = {}
    for _ in range(rounds):
        for name, hook in (("before", before), ("after", after)):
            sent: list[str] = []
            start = time.perf_counter()
            hook(TextPieces(sent.append))
            seconds[name].append(time.perf_counter() - start)
            texts[name] = "".join(sent)
    old, new = (statistics.median(seconds[k]) for k in ("before", "after"))
    return [
        {
            "step": "hook",
            "steps": len(views),
            "before_us_per_step": round(old / len(views) * 1e6, 1),
            "after_us_per_step": round(new / len(views) * 1e6, 2),
            "same_text": texts["before"] == texts["after"],
        }
    ]


def profile(llm: Any, new: int, top: int = 15) -> list[dict]:
    """Where lcr's one stream spends host time the bare call does not (issue #55's 0.85x
    on the H200): one call of each under cProfile after a warm-up, static cache off, and
    the functions whose own time differs most. On a GPU a step's kernels take
    microseconds, so the host's work between them, and any wait for the device (a read
    back, ``.item()``, ``.tolist()``), is what separates the two here."""
    import cProfile
    import pstats

    prompt = llm.render(messages(PROMPT))

    def lcr_call() -> int:
        llm.static_cache = "off"
        gen = llm.generate(messages(PROMPT), max_new_tokens=new, on_text=lambda _t: None)
        return int(gen.completion_tokens)

    calls = {"bare": lambda: bare_generate(llm, prompt, new), "lcr": lcr_call}
    own: dict[str, dict[str, float]] = {}
    calls_made: dict[str, dict[str, int]] = {}
    rows: list[dict] = []
    for name, call in calls.items():
        call()  # warm-up
        prof = cProfile.Profile()
        sync(llm)
        start = time.perf_counter()
        prof.enable()
        tokens = call()
        sync(llm)
        prof.disable()
        seconds = time.perf_counter() - start
        table = pstats.Stats(prof).stats  # type: ignore[attr-defined]
        own[name] = {
            f"{Path(where).name}:{line}({func})": row[2]
            for (where, line, func), row in table.items()
        }
        calls_made[name] = {
            f"{Path(where).name}:{line}({func})": row[1]
            for (where, line, func), row in table.items()
        }
        rows.append(
            {"step": "profile", "what": name, "tokens": tokens, "seconds": round(seconds, 3)}
        )
    names = set(own["bare"]) | set(own["lcr"])
    gaps = sorted(
        ((own["lcr"].get(k, 0.0) - own["bare"].get(k, 0.0), k) for k in names), reverse=True
    )
    for gap, key in gaps[:top]:
        rows.append(
            {
                "step": "profile",
                "function": key,
                "lcr_minus_bare_s": round(gap, 4),
                "lcr_s": round(own["lcr"].get(key, 0.0), 4),
                "bare_s": round(own["bare"].get(key, 0.0), 4),
                "lcr_calls": calls_made["lcr"].get(key, 0),
                "bare_calls": calls_made["bare"].get(key, 0),
            }
        )
    return rows


def sync(llm: Any) -> None:
    if llm.device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def builds(
    model: str,
    device: str,
    modes: tuple[str, ...],
    budget: Budget,
    limit: float,
    methods: tuple[str, ...] = ("pecan", "raptor"),
) -> list:
    rows = []
    for method in methods:
        for mode in modes:
            left = budget.left()
            if left < 30:
                rows.append({"step": "build", "what": f"{method}, {mode}", "skipped": "budget"})
                continue
            with tempfile.TemporaryDirectory() as tmp:
                cmd = [
                    sys.executable,
                    "-m",
                    "lcr",
                    "index",
                    str(REPO / "examples/lighthouse.txt"),
                    "-o",
                    str(Path(tmp) / "i"),
                    "-m",
                    method,
                    "--llm",
                    model,
                    "--embedder",
                    "hashing-384",
                    "--device",
                    device,
                    "--backend",
                    "transformers",
                    "--quiet",
                ]
                env = dict(os.environ, LCR_STATIC_CACHE=mode)
                start = time.perf_counter()
                try:
                    done = subprocess.run(
                        cmd, env=env, capture_output=True, text=True, timeout=min(limit, left - 10)
                    )
                    rc: Any = done.returncode
                    tail = (done.stderr or done.stdout).strip().splitlines()[-1:] if rc else []
                except subprocess.TimeoutExpired:
                    rc, tail = "timeout", []
                seconds = time.perf_counter() - start
            rows.append(
                {
                    "step": "build",
                    "what": f"{method}, static cache {mode}",
                    "rc": rc,
                    "seconds": round(seconds, 1),
                    **({"error": tail[0]} if tail else {}),
                }
            )
    return rows


def tests(budget: Budget) -> list[dict]:
    left = budget.left()
    if left < 30:
        return [{"step": "tests", "skipped": "budget"}]
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "tests/test_gpu.py",
        "tests/test_transformers_decode.py",
    ]
    try:
        done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=left - 5)
        last = (done.stdout.strip().splitlines() or [""])[-1]
        return [{"step": "tests", "rc": done.returncode, "summary": last}]
    except subprocess.TimeoutExpired:
        return [{"step": "tests", "rc": "timeout"}]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llm", default="smollm2-135m", help="preset name or model file")
    parser.add_argument("--cpu", action="store_true", help="the dry run on a CPU")
    parser.add_argument("--budget-s", type=float, default=450.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--new", type=int, default=None, help="new tokens (256; 24 with --cpu)")
    parser.add_argument("--batch", type=int, default=None, help="conversations (32; 4 --cpu)")
    parser.add_argument(
        "--steps", default="hook,stream,batched,builds,tests", help="which steps, comma-separated"
    )
    parser.add_argument(
        "--build-limit-s", type=float, default=None, help="one build at most (150; 900 --cpu)"
    )
    parser.add_argument(
        "--methods", default="pecan,raptor", help="the builds step's methods, in order"
    )
    parser.add_argument(
        "--static",
        default="on",
        choices=("on", "auto", "none"),
        help="the static cache setting set against off (on: compiled from the first call "
        "on a GPU; none: off alone)",
    )
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    budget = Budget(args.budget_s)
    sys.path.insert(0, str(REPO))
    from lcr.models.loading import load_llm
    from lcr.models.spec import ModelSpec
    from lcr.models.transformers_decode import decode_plan
    from lcr.progress import NULL_PROGRESS

    device = "cpu" if args.cpu else "cuda"
    static = args.static
    new = args.new or (24 if args.cpu else 256)
    size = args.batch or (4 if args.cpu else 32)
    llm = load_llm(ModelSpec(llm=args.llm, device=device), NULL_PROGRESS, backend="transformers")
    plan = decode_plan(llm.device, "off" if static == "none" else static)
    print(f"device {llm.device}, {llm.model_id}, static cache {static}: {plan.why}", flush=True)
    rows: list[dict] = [{"step": "plan", "device": llm.device, "why": plan.why}]
    steps = set(args.steps.split(","))
    modes = ("off",) if args.cpu else ("off", "auto")  # a CPU build: the mechanics only
    limit = args.build_limit_s or (900.0 if args.cpu else 150.0)
    for name, part in (
        ("hook", lambda: hook_overhead(llm)),
        ("stream", lambda: one_stream(llm, new, args.rounds, static, budget)),
        ("batched", lambda: batched(llm, new, size, static, budget)),
        ("profile", lambda: profile(llm, new)),
        (
            "builds",
            lambda: builds(args.llm, device, modes, budget, limit, tuple(args.methods.split(","))),
        ),
        ("tests", lambda: tests(budget)),
    ):
        if name not in steps:
            continue
        if budget.left() < 20:
            rows.append({"skipped": "budget"})
            break
        for row in part():
            rows.append(row)
            print("  " + json.dumps(row), flush=True)
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
