"""PECAN's first build level with ``pecan.llm_batch`` at two values, alternated (issue 55);
or with the attention read at two times (``--values 1:during,1:after``: a value's
``:during`` or ``:after`` sets ``LCR_ATTENTION_CAPTURE`` for its builds).

The level is built by the build's own code (``_level_points`` of
``lcr/methods/pecan/build.py``: the Table A1 prompt of each batch, the batches sent
``llm_batch`` at a time through ``generate_with_attention_batch``, the points and their
weights read from each reply), over a text cut into the build's 300-token chunks and
batched up to ``--s`` tokens, the first ``--batches`` batches. Each round builds the
level once per value, a fresh cache each time (nothing is served from a cache), the
order reversed every other round; one untimed call of the first batch's prompt (4 new
tokens) warms the device first.
It prints each value's median seconds, the ratio against the first value, the group
size the build used (``llm_batch=0`` is auto: 1 on a CPU, by free memory on CUDA),
whether both values wrote the same points, and the machine's load.

    PYTHONPATH=. nice python bench/pecan_llm_batch.py --s 2000 --batches 2 --new 128
    PYTHONPATH=. python bench/pecan_llm_batch.py --device cuda --llm smol.gguf --s 7500 \\
        --batches 4 --new 64 --values 1,0 --budget-s 100      # the GPU step of gpu_run.sh
    PYTHONPATH=. python bench/pecan_llm_batch.py --s 7500 --batches 1 --new 64 \\
        --values 1:during,1:after
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("LCR_SHARED_DATA", REPO.parent / "shared" / "data"))


def _text(path: str | None, needed_words: int) -> tuple[str, str]:
    """The text and where it came from: ``--text``, else SQuALITY dev's first story where the
    shared data are, else examples/lighthouse.txt; repeated until it holds enough words."""
    if path:
        text, source = Path(path).read_text(encoding="utf-8"), path
    elif (SHARED / "squality" / "dev.jsonl").exists():
        with (SHARED / "squality" / "dev.jsonl").open(encoding="utf-8") as fh:
            text = json.loads(fh.readline())["document"]
        source = "squality dev, first story"
    else:
        text, source = (
            (REPO / "examples" / "lighthouse.txt").read_text(encoding="utf-8"),
            "lighthouse",
        )
    copies = 1 + needed_words // max(1, len(text.split()))
    return "\n\n".join([text] * copies), source + (f" x{copies}" if copies > 1 else "")


def _level(llm: Any, batches: list[list[str]], params: Any) -> tuple[float, dict[str, Any]]:
    from lcr.methods.pecan.build import Graph, _level_points
    from lcr.methods.toolkit import LLMCalls
    from lcr.progress import NULL_PROGRESS
    from lcr.store import MemoryCache

    calls, graph = LLMCalls(MemoryCache()), Graph()
    task = NULL_PROGRESS.task("level", total=len(batches))
    started = time.perf_counter()
    replies = _level_points(llm, batches, params, calls, graph, task)
    spent = time.perf_counter() - started
    return spent, {
        "group": graph.llm_batch,
        "prompt_tokens": calls.prompt_tokens,
        "completion_tokens": calls.completion_tokens,
        "points": [points for points, _ in replies],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--llm", default="smollm2-135m")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--text", default=None, help="a text file (default: see the module)")
    ap.add_argument("--s", type=int, default=2000, help="batch size in tokens (pecan.s)")
    ap.add_argument("--batches", type=int, default=2, help="batches of the level timed")
    ap.add_argument("--new", type=int, default=128, help="pecan.points_max_new_tokens")
    ap.add_argument(
        "--values",
        default="1,2",
        help="two pecan.llm_batch values (0: auto), each with an "
        "optional :during or :after (LCR_ATTENTION_CAPTURE)",
    )
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--budget-s", type=float, default=0, help="start no round past this (0: none)")
    ap.add_argument("--json", default=None, help="write the result here too")
    args = ap.parse_args()
    started = time.monotonic()

    from lcr.methods.pecan.build import leaf_nodes
    from lcr.methods.pecan.graph import batch_nodes
    from lcr.methods.pecan.settings import PecanBuild
    from lcr.models.loading import load_llm
    from lcr.models.spec import ModelSpec
    from lcr.progress import NULL_PROGRESS

    values = [v.strip() for v in args.values.split(",")]
    modes = {v: v.partition(":")[2] or os.environ.get("LCR_ATTENTION_CAPTURE", "") for v in values}
    load = [round(x, 2) for x in os.getloadavg()]
    llm = load_llm(
        ModelSpec(llm=args.llm, device=args.device, backend="transformers"), NULL_PROGRESS
    )
    text, source = _text(args.text, args.s * args.batches)
    leaves = leaf_nodes([(0, 0, text)], llm.count_tokens, 300)
    tokens = [int(n.meta["tokens"]) for n in leaves]
    picked = batch_nodes(tokens, args.s)[: args.batches]
    batches = [[leaves[j].text for j in batch] for batch in picked]
    # untimed: one batch's own prompt, so that kernels and memory for that length are
    # ready before the first round (on the H200 a short warm-up left round 1 1.8x slower)
    from lcr.methods.pecan.prompts import build_prompt

    llm.generate_with_attention(build_prompt(llm, batches[0]).ids, max_new_tokens=4)
    seconds: dict[str, list[float]] = {v: [] for v in values}
    seen: dict[str, dict[str, Any]] = {}
    same = True
    for r in range(args.rounds):
        if r and args.budget_s and time.monotonic() - started > args.budget_s:
            break
        for v in values if r % 2 == 0 else values[::-1]:
            os.environ["LCR_ATTENTION_CAPTURE"] = modes[v]
            group = int(v.partition(":")[0])
            params = PecanBuild(s=args.s, points_max_new_tokens=args.new, llm_batch=group)
            spent, info = _level(llm, batches, params)
            seconds[v].append(round(spent, 2))
            if v in seen:
                same = same and seen[v]["points"] == info["points"]
            seen[v] = info
            print(f"round {r + 1} llm_batch={v}: {spent:.2f} s, group {info['group']}", flush=True)
    medians = {v: statistics.median(s) for v, s in seconds.items() if s}
    first = medians[values[0]]
    result = {
        "llm": args.llm,
        "device": args.device,
        "text": source,
        "batch_node_tokens": [sum(tokens[j] for j in b) for b in picked],
        "s": args.s,
        "new": args.new,
        "prompt_tokens": seen[values[0]]["prompt_tokens"],
        "completion_tokens": {v: seen[v]["completion_tokens"] for v in values},
        "groups": {v: seen[v]["group"] for v in values},
        "seconds": seconds,
        "median_s": {v: round(m, 2) for v, m in medians.items()},
        "speedup_vs_first": {v: round(first / m, 3) for v, m in medians.items()},
        "same_points": same and seen[values[0]]["points"] == seen[values[-1]]["points"],
        "load_before": load,
        "load_after": [round(x, 2) for x in os.getloadavg()],
    }
    print(json.dumps(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
