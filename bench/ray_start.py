"""What starting and stopping a local Ray cluster costs, option by option (issue 74).

Each trial is a fresh process that starts a local cluster the way
``lcr.cluster.connect`` does (``ray.init(include_dashboard=False, log_to_driver=False,
...)`` plus the variant's options), makes one actor holding one CPU, waits for its
first reply, and shuts the cluster down. The variants run alternated, round by round
(order reversed every other round), so a change in the machine's load falls on all
of them alike. Reported per variant: the medians of the start (``ray.init``), the first
actor's reply, the shutdown and the whole, with the load average around the trials.

``connect`` variants time ``lcr.cluster.connect.connect("local")`` itself from a
source tree (``--tree``, e.g. this worktree against main's), the whole of what lcr
does, instead of a bare ``ray.init``.

    python bench/ray_start.py --rounds 5 base osm gpus0
    python bench/ray_start.py --rounds 5 --tree /work/main --tree . connect
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

VARIANTS: dict[str, dict[str, object]] = {
    "base": {},
    "osm": {"object_store_memory": 80 * 2**20},
    "gpus0": {"num_gpus": 0},
    "noprestart": {"_system_config": {"prestart_worker_first_driver": False}},
    "nometrics": {"_system_config": {"enable_metrics_collection": False}},
    "osm+gpus0": {"object_store_memory": 80 * 2**20, "num_gpus": 0},
}

TRIAL = """
import json, logging, os, sys, time
variant = json.loads(sys.argv[1])
started = time.perf_counter()
import ray
imported = time.perf_counter()
if variant.pop("__connect__", False):
    from lcr.cluster.connect import connect
    cluster = connect("local", 1)
    close = cluster.close
else:
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False,
             logging_level=logging.ERROR, configure_logging=True, **variant)
    close = ray.shutdown
up = time.perf_counter()

@ray.remote(num_cpus=1)
class Echo:
    def pid(self):
        return os.getpid()

ray.get(Echo.remote().pid.remote())
ready = time.perf_counter()
close()
down = time.perf_counter()
print(json.dumps({"import_s": imported - started, "init_s": up - imported,
                  "actor_s": ready - up, "shutdown_s": down - ready, "total_s": down - started}))
"""


def index_trial(tree: str | None) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="ray-start-") as tmp:
        docs = []
        for i in range(2):
            docs.append(Path(tmp) / f"doc{i}.txt")
            docs[-1].write_text(f"Document {i}. The river runs past the castle.\n" * 40)
        cmd = [sys.executable, "-m", "lcr", "index", *map(str, docs), "-m", "bm25", "-q",
               "--ray", "local", "--workers", "2"]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(Path(tree or ".").resolve())}
        started = time.perf_counter()
        subprocess.run(cmd, env=env, check=True, capture_output=True)
        seconds = time.perf_counter() - started
    return {k: 0.0 for k in ("init_s", "actor_s", "shutdown_s")} | {"total_s": seconds}


def trial(name: str, tree: str | None) -> dict[str, float]:
    if name == "index":
        return index_trial(tree)
    variant = {"__connect__": True} if name == "connect" else dict(VARIANTS[name])
    env = {**os.environ}
    if tree is not None:
        env["PYTHONPATH"] = str(Path(tree).resolve())
    done = subprocess.run([sys.executable, "-c", TRIAL, json.dumps(variant)], env=env,
                          capture_output=True, text=True)  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"{name}: {done.stderr[-1500:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("variants", nargs="+", choices=[*VARIANTS, "connect", "index"])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tree", action="append", help="source tree for `connect` (repeat)")
    args = parser.parse_args()
    trees = args.tree or [None]
    arms = [(v, t) for v in args.variants for t in (trees if v in ("connect", "index") else [None])]
    results: dict[tuple[str, str | None], list[dict[str, float]]] = {arm: [] for arm in arms}
    loads = []
    for round_ in range(args.rounds):
        for arm in arms if round_ % 2 == 0 else list(reversed(arms)):
            loads.append(os.getloadavg()[0])
            results[arm].append(trial(*arm))
            print(json.dumps({"variant": arm[0], "tree": arm[1], **results[arm][-1]}), flush=True)
    loads.append(os.getloadavg()[0])
    print(f"load average {min(loads):.1f}-{max(loads):.1f}, {args.rounds} rounds, medians (s):")
    print("| variant | start | first actor | shutdown | whole |")
    print("|---|---|---|---|---|")
    for (name, tree), runs in results.items():
        keys = ("init_s", "actor_s", "shutdown_s", "total_s")
        cells = [statistics.median(r[k] for r in runs) for k in keys]
        label = name if tree is None else f"{name} ({tree})"
        print(f"| {label} | " + " | ".join(f"{c:.2f}" for c in cells) + " |")


if __name__ == "__main__":
    main()
