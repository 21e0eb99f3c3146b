"""Where PECAN's ``max_levels`` binds (issue 56), from the build's own rule; no model.

    python bench/archive/pecan_levels.py

A level above the chunks holds at most one reply of ``points_max_new_tokens`` per
batch of the level below; a batch packs consecutive nodes up to ``s`` tokens, so it
closes no earlier than ``s`` less its largest node plus one (a ``chunk_tokens`` chunk
at level 0, a point of up to a whole reply above). ``top=summary`` stops at the level
that summarises one batch, so ``max_levels`` binds only when level ``max_levels - 1``
still has more than ``s`` tokens. Worked backwards from there with the slowest
shrinking those rules allow, this prints the fewest tokens a text must have first.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout's lcr

from lcr.methods.pecan.settings import PecanBuild


def fewest_tokens(s: int, reply: int, chunk: int, levels: int) -> int:
    """The fewest level-0 tokens with which level ``levels - 1`` still exceeds ``s``."""
    need = s + 1  # tokens at level levels - 1: two batches
    for level in range(levels - 1, 0, -1):
        batches = math.ceil(need / reply)  # replies that can hold ``need`` tokens
        largest = reply if level - 1 > 0 else chunk  # the largest node one level down
        need = (batches - 1) * (s - largest + 1) + 1  # the fewest that make that many
    return need


def main() -> None:
    d = PecanBuild()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--s", default=f"{d.s},7500,4096,2048")
    ap.add_argument("--reply", type=int, default=d.points_max_new_tokens)
    args = ap.parse_args()
    print(f"| s | points_max_new_tokens | fewest tokens for {d.max_levels} levels to bind |")
    print("|---:|---:|---:|")
    for s in (int(v) for v in args.s.split(",")):
        n = fewest_tokens(s, args.reply, d.chunk_tokens, d.max_levels)
        print(f"| {s:,} | {args.reply} | {n:.2g} |")


if __name__ == "__main__":
    main()
