"""PECAN's Information Points replies with the default LLM (issue 56): how long are they,
and how many would ``points_max_new_tokens`` (512) cut?

    nice .venv/bin/python bench/archive/pecan_points_lengths.py --stories 4 --cap 1024

The first ``--stories`` SQuALITY dev stories (the 4 of docs/methods/pecan.md's SQuALITY
table) are cut into the build's level-1 nodes (``leaf_nodes``, 300 tokens of the
model's own count) and batched as the build batches them (``batch_nodes``, at most
``s`` = 8,192 tokens). Each first-level batch gets Table A1's prompt (``BUILD_HEAD``,
one ``segment_line`` per node, ``BUILD_TAIL``), and the reply is generated greedily
with ``--cap`` new tokens at most, above the default, so a reply's own length shows
whether 512 would have cut it. Reported: each reply's tokens (the model's count), how
many pass 512 and how many reach ``--cap``, and the Information Points each holds.

It runs on llama.cpp (the same Q4_K_M weights that the transformers backend
dequantises for the build's attention capture): generation only, no attention, so it
measures reply lengths, not edges.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout's lcr
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: dev_texts

from dev_texts import squality_stories

from lcr.methods.pecan.build import leaf_nodes
from lcr.methods.pecan.graph import batch_nodes, information_points
from lcr.methods.pecan.prompts import BUILD_HEAD, BUILD_TAIL, segment_line
from lcr.methods.pecan.settings import PecanBuild
from lcr.models.container import Models
from lcr.models.spec import ModelSpec

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"  # ../shared/data


def stories(data: Path, n: int) -> list[str]:
    return squality_stories(data / "squality" / "dev.jsonl", n)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DATA, help="the shared data folder")
    ap.add_argument("--stories", type=int, default=4)
    ap.add_argument("--cap", type=int, default=1024)
    ap.add_argument("--skip", type=int, default=0, help="the first stories not run (done)")
    ap.add_argument("--dry", action="store_true", help="count the batches only")
    args = ap.parse_args()
    params = PecanBuild()
    llm = Models(spec=ModelSpec(backend="llamacpp", device="cpu")).llm
    # the build's s, lowered only when the window cannot hold it (not for this model)
    s = min(params.s, llm.context_window - params.points_max_new_tokens - 256)
    lengths: list[int] = []
    started = time.perf_counter()
    for n, story in enumerate(stories(args.data, args.stories)):
        if n < args.skip:
            continue
        nodes = leaf_nodes([(0, 0, story)], llm.count_tokens, params.chunk_tokens)
        tokens = [int(node.meta["tokens"]) for node in nodes]
        batches = batch_nodes(tokens, s)
        print(f"story {n}: {len(nodes)} chunks, {sum(tokens)} tokens, batches of "
              f"{[sum(tokens[i] for i in b) for b in batches]} tokens", flush=True)  # fmt: skip
        if args.dry:
            continue
        for batch in batches:
            text = BUILD_HEAD + "".join(segment_line(nodes[i].text) for i in batch) + BUILD_TAIL
            gen = llm.generate([{"role": "user", "content": text}], max_new_tokens=args.cap)
            lengths.append(gen.completion_tokens)
            points = information_points(gen.text)
            print(f"  reply: {gen.prompt_tokens} prompt, {gen.completion_tokens} new tokens, "
                  f"{len(points)} points; ends {gen.text[-60:]!r}", flush=True)  # fmt: skip
    if args.dry or not lengths:
        return
    took = time.perf_counter() - started
    cap = params.points_max_new_tokens
    q = " / ".join(f"{v:.0f}" for v in np.percentile(lengths, [0, 25, 50, 75, 100]))
    print(f"\n{len(lengths)} replies in {took:.0f} s (load {os.getloadavg()[0]:.1f})")
    print(f"tokens min/q1/median/q3/max: {q}; mean {np.mean(lengths):.0f}")
    print(f"over the default {cap}: {sum(n > cap for n in lengths)}; "
          f"at --cap {args.cap}: {sum(n >= args.cap for n in lengths)}")  # fmt: skip
    print(f"lengths: {lengths}")


if __name__ == "__main__":
    main()
