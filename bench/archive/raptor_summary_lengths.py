"""RAPTOR's summaries with the default LLM (issue 56): how long are they, and how many
end at ``summary_max_new_tokens``? Also ``batch_size``: a batch against one call at a
time, same prompts, alternated.

    nice .venv/bin/python bench/archive/raptor_summary_lengths.py --stories 2 --clusters 18

The first ``--stories`` SQuALITY dev stories are cut into RAPTOR's leaves (100 tokens),
embedded and clustered as a build's first layer is (``cluster_layer`` with the default
settings); the first ``--clusters`` clusters are summarised with the paper's prompt
(``summary_messages``) by ``--llm`` on llama.cpp with ``--cap`` new tokens at most,
greedy, one call each. Reported: each reply's tokens (the model's count), how many
reached the cap (cut) or would pass the reference code's 100, and each reply's length
in the embedder's word pieces against its window (does ``embed_long`` bind on a
summary?). Then ``--batch`` of those prompts with ``--batch-tokens`` new tokens each,
``generate_batch`` (the backend decodes up to 4 together) against ``generate`` one at a
time, alternated ``--rounds`` times: wall seconds and whether the replies are the same.
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

from lcr.methods.raptor.clustering import cluster_layer
from lcr.methods.raptor.method import RaptorBuild, summary_messages
from lcr.models.container import Models
from lcr.models.spec import ModelSpec
from lcr.text.chunking import token_windows
from lcr.text.tokens import count_tokens

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"  # ../shared/data


def clusters_of(data: Path, stories: int, embedder: object) -> list[list[str]]:
    """The first layer's clusters of each story, as lists of leaf texts, in order."""
    seen = squality_stories(data / "squality" / "dev.jsonl", stories)
    out: list[list[str]] = []
    for story in seen:
        leaves = [c.text for c in token_windows(story, 100)]
        emb = embedder.encode(leaves)  # type: ignore[attr-defined]
        found, _ = cluster_layer(emb, [count_tokens(t) for t in leaves], RaptorBuild())
        out.extend([leaves[i] for i in cluster] for cluster in found)
    return out


def quartiles(values: list[int]) -> str:
    q = np.percentile(values, [0, 25, 50, 75, 100])
    return " / ".join(f"{v:.0f}" for v in q)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DATA, help="the shared data folder")
    ap.add_argument("--stories", type=int, default=2)
    ap.add_argument("--clusters", type=int, default=18)
    ap.add_argument("--llm", default="qwen2.5-coder-1.5b")
    ap.add_argument("--cap", type=int, default=150)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--batch-tokens", type=int, default=48)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    models = Models(spec=ModelSpec(llm=args.llm, backend="llamacpp", device="cpu"))
    embedder = models.embedder
    found = clusters_of(args.data, args.stories, embedder)
    convs = [summary_messages(c) for c in found][: args.clusters]
    llm = models.llm
    lengths: list[int] = []
    pieces: list[int] = []
    started = time.perf_counter()
    for conv in convs:
        gen = llm.generate(conv, max_new_tokens=args.cap)
        lengths.append(gen.completion_tokens)
        pieces.append(embedder.token_counts([gen.text])[0])
        print(f"  summary {len(lengths)}: {lengths[-1]} tokens", flush=True)
    took = time.perf_counter() - started
    print(f"{len(convs)} summaries of {args.stories} stories, cap {args.cap}: {took:.0f} s")
    print(f"reply tokens min/q1/median/q3/max: {quartiles(lengths)}; mean {np.mean(lengths):.0f}")
    at_cap = sum(n >= args.cap for n in lengths)
    print(f"at the cap ({args.cap}): {at_cap}; over 100: {sum(n > 100 for n in lengths)}")
    window = int(embedder.max_tokens)
    over = sum(p > window for p in pieces)
    print(f"word pieces min/q1/median/q3/max: {quartiles(pieces)}; over {window}: {over}")
    print(f"lengths: {lengths}")
    batch = convs[: args.batch]
    times: dict[str, list[float]] = {"batch": [], "one at a time": []}
    texts: dict[str, list[str]] = {}
    for _ in range(args.rounds):
        for way in times:
            started = time.perf_counter()
            if way == "batch":
                gens = llm.generate_batch(batch, max_new_tokens=args.batch_tokens)
            else:
                gens = [llm.generate(c, max_new_tokens=args.batch_tokens) for c in batch]
            times[way].append(time.perf_counter() - started)
            texts.setdefault(way, [g.text for g in gens])
    same = sum(a == b for a, b in zip(texts["batch"], texts["one at a time"], strict=True))
    load = os.getloadavg()[0]
    print(f"\n{len(batch)} prompts, {args.batch_tokens} new tokens each, load {load:.1f}:")
    for way, secs in times.items():
        print(f"  {way}: " + ", ".join(f"{s:.1f} s" for s in secs))
    print(f"  the same replies: {same} of {len(batch)}")


if __name__ == "__main__":
    main()
