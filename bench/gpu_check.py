"""The same questions on the CPU and on the GPU: answers, scores and speed compared.

    python bench/gpu_check.py                      # every configuration this machine has
    python bench/gpu_check.py --json > gpu-check.json
    python bench/gpu_check.py --configs transformers:cpu:float32,transformers:cpu:bfloat16

For a user with a GPU to run and send back (with ``lcr doctor --json``). The
reference is transformers in fp32 on the CPU; every other configuration runs the
same readouts and is compared with it:

- **yes/no** (PECAN's progress check, read from the first token's logits):
  P(yes) for each (passage, question) pair; the largest change, and how many
  pairs cross the 0.5 threshold PECAN uses.
- **continuation scores** (LightPAL's log P(passage j | passage i)): the largest
  change, and how many passages' best-scored partner changes.
- **attention** (PECAN's edge weights: the mean over layers and heads):
  the largest change of a weight, relative to the largest weight (transformers only).
- **answers**: greedy answers to the questions, identical or not.
- **speed**: wall seconds of each readout (the first configuration also pays
  for warming up, so compare later rows with care).

On a machine without a GPU the default compares fp32 with bf16 on the CPU (the
rounding a GPU's bf16 brings, measured without one); on a GPU it adds
transformers on CUDA (bf16, or fp16 before Ampere) and llama.cpp with every layer
offloaded where its build can.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("LCR_SHARED_DATA", REPO.parent / "shared" / "data"))
QUESTIONS = [
    "Where did the maiden go every day?",
    "What did the father bring back for the stepsisters?",
    "Who helped Cinderella pick the lentils out of the ashes?",
    "What did the king's son do to find the girl who lost the slipper?",
    "What happened to the stepsisters at the wedding?",
]


def passages(words_each: int = 120, count: int = 8) -> list[str]:
    words = (SHARED / "stories" / "cinderella.txt").read_text().split()
    step = max(words_each, len(words) // count)
    return [" ".join(words[i : i + words_each]) for i in range(0, step * count, step)][:count]


def default_configs() -> list[str]:
    from lcr.models import machine

    m = machine.current()
    configs = ["transformers:cpu:float32"]
    if m.gpu:
        configs.append(f"transformers:cuda:{m.gpu_dtype}")
    else:
        configs.append("transformers:cpu:bfloat16")
    if m.llamacpp_version:
        configs.append("llamacpp:cpu")
        if m.llamacpp_gpu:
            configs.append("llamacpp:cuda")
    return configs


def load(llm_name: str, config: str) -> Any:
    """Load ``llm_name`` as ``backend:device[:dtype]`` asks (bf16 on a CPU by casting)."""
    from lcr.models.loading import load_llm
    from lcr.models.spec import ModelSpec
    from lcr.progress import NULL_PROGRESS

    backend, device, *rest = config.split(":")
    llm = load_llm(ModelSpec(llm=llm_name, device=device), NULL_PROGRESS, backend=backend)
    if backend == "transformers" and rest:
        import torch

        wanted = getattr(torch, rest[0])
        if llm.model.dtype != wanted:
            llm.model = llm.model.to(wanted)
    return llm


def yes_no_messages(passage: str, question: str) -> list[dict[str, str]]:
    return [
        {
            "role": "user",
            "content": f"Information:\n{passage}\n\nQuestion: {question}\n"
            "Does the information answer the question? Answer Yes or No.",
        }
    ]


def readouts(llm: Any, texts: list[str], questions: list[str], max_new: int) -> dict[str, Any]:
    out: dict[str, Any] = {"seconds": {}}
    t = time.perf_counter()
    out["p_yes"] = [
        [llm.choice_probability(yes_no_messages(p, q)) for p in texts] for q in questions
    ]
    out["seconds"]["yes_no"] = time.perf_counter() - t
    t = time.perf_counter()
    out["scores"] = [
        [s.logprob for s in llm.continuation_logprobs(p, [o for o in texts if o is not p])]
        for p in texts
    ]
    out["seconds"]["continuations"] = time.perf_counter() - t
    if hasattr(llm, "forward_mean_attention"):
        t = time.perf_counter()
        ids = llm.render(yes_no_messages(texts[0], questions[0]))
        mean = llm.forward_mean_attention(ids).attentions
        out["attention"] = mean[-1].float().cpu().tolist()
        out["seconds"]["attention"] = time.perf_counter() - t
    t = time.perf_counter()
    msgs = [
        [{"role": "user", "content": f"{' '.join(texts)}\n\nAnswer briefly: {q}"}]
        for q in questions
    ]
    gens = llm.generate_batch(msgs, max_new_tokens=max_new)
    out["answers"] = [g.text.strip() for g in gens]
    out["seconds"]["answers"] = time.perf_counter() - t
    out["completion_tokens"] = sum(g.completion_tokens for g in gens)
    return out


def compare(ref: dict[str, Any], run: dict[str, Any], threshold: float = 0.5) -> dict[str, Any]:
    pairs = [
        (a, b)
        for ra, rb in zip(ref["p_yes"], run["p_yes"], strict=True)
        for a, b in zip(ra, rb, strict=True)
    ]
    flips = sum((a > threshold) != (b > threshold) for a, b in pairs)
    score_diffs = [
        abs(a - b)
        for ra, rb in zip(ref["scores"], run["scores"], strict=True)
        for a, b in zip(ra, rb, strict=True)
    ]
    best_changed = sum(
        max(range(len(ra)), key=ra.__getitem__) != max(range(len(rb)), key=rb.__getitem__)
        for ra, rb in zip(ref["scores"], run["scores"], strict=True)
    )
    result: dict[str, Any] = {
        "p_yes_max_abs_diff": max(abs(a - b) for a, b in pairs),
        "p_yes_mean_abs_diff": sum(abs(a - b) for a, b in pairs) / len(pairs),
        "p_yes_pairs": len(pairs),
        "p_yes_threshold_flips": flips,
        "score_max_abs_diff": max(score_diffs),
        "score_mean_abs_diff": sum(score_diffs) / len(score_diffs),
        "best_partner_changed": best_changed,
        "passages": len(ref["scores"]),
        "answers_identical": sum(
            a == b for a, b in zip(ref["answers"], run["answers"], strict=True)
        ),
        "questions": len(ref["answers"]),
    }
    if "attention" in ref and "attention" in run:
        a, b = ref["attention"], run["attention"]
        top = max(a) or 1.0
        result["attention_max_rel_diff"] = max(abs(x - y) for x, y in zip(a, b, strict=True)) / top
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--llm", default="smollm2-135m")
    parser.add_argument(
        "--configs", default=None, help="backend:device[:dtype],... (first: reference)"
    )
    parser.add_argument("--questions", type=int, default=len(QUESTIONS))
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    from lcr.cli.doctor import report
    from lcr.models.spec import ModelSpec

    configs = args.configs.split(",") if args.configs else default_configs()
    texts, questions = passages(), QUESTIONS[: args.questions]
    runs: dict[str, dict[str, Any]] = {}
    for config in configs:
        print(f"{config}: loading and reading out", file=sys.stderr, flush=True)
        t = time.perf_counter()
        llm = load(args.llm, config)
        loaded = time.perf_counter() - t
        runs[config] = readouts(llm, texts, questions, args.max_new_tokens)
        runs[config]["seconds"]["load"] = loaded
        del llm
    ref = runs[configs[0]]
    summary = {
        "llm": args.llm,
        "machine": report(ModelSpec(llm=args.llm))["machine"],
        "reference": configs[0],
        "runs": {c: {"seconds": r["seconds"], "answers": r["answers"]} for c, r in runs.items()},
        "compared": {c: compare(ref, r) for c, r in runs.items() if c != configs[0]},
    }
    if args.json:
        print(json.dumps(summary))
        return 0
    print(f"llm {args.llm}; reference {configs[0]}")
    for config, r in runs.items():
        secs = ", ".join(f"{k} {v:.1f}s" for k, v in r["seconds"].items())
        print(f"{config:28} {secs}")
    for config, c in summary["compared"].items():
        print(f"\n{config} against {configs[0]}:")
        for key, value in c.items():
            shown = f"{value:.4g}" if isinstance(value, float) and math.isfinite(value) else value
            print(f"  {key:24} {shown}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
