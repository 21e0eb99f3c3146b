"""What a Ray cluster buys on one machine (issue 74): ``lcr index DOCS... -m bm25 -m mixpr``
and ``lcr eval`` of ``--questions`` HotpotQA questions answered by smollm2-135m, each
serially against ``--ray local --workers 1`` and ``--workers 2``, the three alternated
round by round (serial, 1, 2, then 2, 1, serial), each run a fresh process.

Index part: the documents are real texts written to a temporary folder: windows of
``--doc-chars`` characters cut from the SQuALITY dev stories
(``$LCR_SHARED_DATA/squality/dev.jsonl``, Project Gutenberg) or, without them, from the
texts in tests/data; ``--doc-chars 0``: the stories whole, uncut, repeated in turn to
reach ``--docs``. Every run builds every index afresh (the last run's removed first).

Eval part (``--questions N``): the first N questions of
``$LCR_SHARED_DATA/hotpotqa/dev.jsonl`` (50 per corpus, one index per corpus) with
``-m bm25 --llm smollm2-135m --device cpu``, the backend ``lcr eval`` picks (llama.cpp
where installed; the records say which). The indexes the questions need are built once
before any timed run (``lcr eval --retrieval-only`` into one ``--index-dir`` every run
shares), so the timed runs measure answering, not building. Each timed run writes a
fresh results file; the records of every run are compared with the first serial run's,
every field but the timings (``bench/eval_identity.py``'s rule). llama.cpp's replies
depend on its thread count, so the eval runs pin ``LCR_THREADS=--threads`` (default 1,
the CPU a Ray worker holds; ``--threads 0`` leaves it unset).

Fixed cost apart from the per-unit cost: each round also times a 1-document (and a
1-question) run of every configuration, and starting and shutting down a local cluster
by itself (``lcr.cluster.connect``). Ray's overhead is printed as the ratio and as
"fixed seconds + per-unit %": fixed, the 1-unit runs' difference; per unit, the slope
from 1 to N units against serial's (meaningful at the full sizes, noise at small ones).
A 1-unit run with ``--workers 2`` starts one worker: lcr starts no more than its tasks.

Reported: each configuration's wall time (median over the rounds), the ratios, the load
average around each run, and each Ray worker's peak resident memory (psutil over the
``ray::BuildWorker`` / ``ray::EvalWorker`` processes the run started).

    .venv/bin/python bench/bench_cluster.py --docs 200 --questions 50 --rounds 2 --out t.md
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil

REPO = Path(__file__).resolve().parents[1]
# ../shared/data beside the project (a worktree in /work/wt/NAME: two levels up)
SHARED = [REPO.parent / "shared" / "data", REPO.parents[1] / "shared" / "data"]
DATA = Path(os.environ.get("LCR_SHARED_DATA") or next((p for p in SHARED if p.is_dir()), SHARED[0]))
HOTPOT = DATA / "hotpotqa" / "dev.jsonl"
CONFIGS = ("serial", "ray1", "ray2")
ARGS = {"serial": [], "ray1": ["--ray", "local", "--workers", "1"],
        "ray2": ["--ray", "local", "--workers", "2"]}  # fmt: skip
LABEL = {"serial": "serial", "ray1": "`--ray local --workers 1`",
         "ray2": "`--ray local --workers 2`"}  # fmt: skip
EVAL_ARGS = ["-m", "bm25", "--llm", "smollm2-135m", "--device", "cpu", "-q", "--json"]

sys.path.insert(0, str(REPO / "bench"))
from eval_identity import stable  # noqa: E402


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
    the texts, each starting at a paragraph break where there is one; ``chars`` 0: the
    texts whole, repeated in turn."""
    sources = [t for t in texts() if len(t) > chars]
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        text = sources[i % len(sources)]
        if chars:
            start = (i // len(sources)) * chars % max(1, len(text) - chars)
            cut = text.find("\n\n", start)
            start = cut + 2 if 0 <= cut < start + chars // 2 else start
            text = text[start : start + chars]
        path = folder / f"doc{i:03d}.txt"
        path.write_text(text.strip() + "\n", encoding="utf-8")
        paths.append(path)
    return paths


class PeakRss:
    """Each Ray worker's (``ray::NAME``) peak resident memory, polled among the
    descendants of one process."""

    def __init__(self, pid: int, actor: str) -> None:
        self.pid, self.actor, self.peaks = pid, f"ray::{actor}", {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self.stop.is_set():
            try:
                children = psutil.Process(self.pid).children(recursive=True)
            except psutil.Error:
                return
            for proc in children:
                try:
                    if self.actor in " ".join(proc.cmdline()):
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


def environment(threads: int | None = None) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("LCR_RAY_ADDRESS", None)
    if threads is not None:
        env.pop("LCR_THREADS", None)
        if threads:
            env["LCR_THREADS"] = str(threads)
    return env


def timed(config: str, cmd: list[str], env: dict[str, str], actor: str) -> dict[str, Any]:
    """One timed command: its wall time, the load around it, its workers' peak RSS."""
    load = os.getloadavg()[0]
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    with PeakRss(proc.pid, actor) as peaks:
        output, _ = proc.communicate()
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{config} failed ({proc.returncode}): {output.decode()[-2000:]}")
    return {
        "config": config,
        "seconds": round(seconds, 2),
        "load_before": round(load, 2),
        "load_after": round(os.getloadavg()[0], 2),
        "worker_peak_rss_mb": sorted(round(v / 2**20) for v in peaks.peaks.values()),
    }


def index_run(config: str, docs: list[Path]) -> dict[str, Any]:
    """One timed ``lcr index`` of every document, their indexes removed first."""
    for doc in docs:
        shutil.rmtree(doc.with_suffix(".idx"), ignore_errors=True)
    cmd = [sys.executable, "-m", "lcr", "index", *map(str, docs), "-m", "bm25", "-m", "mixpr",
           "-q", *ARGS[config]]  # fmt: skip
    run = timed(config, cmd, environment(), "BuildWorker")
    built = sum(1 for d in docs if (d.with_suffix(".idx") / "manifest.json").is_file())
    if built != len(docs):
        raise SystemExit(f"{config}: {built} of {len(docs)} indexes built")
    return {"part": "index", "units": len(docs), **run}


def build_eval_indexes(work: Path, questions: int, threads: int) -> None:
    """The indexes the questions need, built once into the shared ``--index-dir``."""
    cmd = [sys.executable, "-m", "lcr", "eval", "run", str(HOTPOT), "-m", "bm25",
           "--retrieval-only", "--limit", str(questions), "--index-dir", str(work / "indexes"),
           "--out", str(work / "prebuild.jsonl"), "-q", "--json"]  # fmt: skip
    subprocess.run(cmd, env=environment(threads), check=True, stdout=subprocess.DEVNULL)


def eval_run(config: str, work: Path, questions: int, threads: int, n: int) -> dict[str, Any]:
    """One timed ``lcr eval`` of the first ``questions`` questions into a fresh file."""
    out = work / f"{config}.{questions}q.{n}.jsonl"
    cmd = [sys.executable, "-m", "lcr", "eval", "run", str(HOTPOT), *EVAL_ARGS,
           "--limit", str(questions), "--index-dir", str(work / "indexes"), "--out", str(out),
           *ARGS[config]]  # fmt: skip
    run = timed(config, cmd, environment(threads), "EvalWorker")
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    if len(records) != questions:
        raise SystemExit(f"{config}: {len(records)} of {questions} records written")
    return {"part": "eval", "units": questions, "records": str(out), **run}


STARTUP = """
import json, time
started = time.perf_counter()
import ray
imported = time.perf_counter()
from lcr.cluster.connect import connect
cluster = connect("local", 1)
up = time.perf_counter()
cluster.close()
down = time.perf_counter()
print(json.dumps({"import_s": round(imported - started, 2), "init_s": round(up - imported, 2),
                  "shutdown_s": round(down - up, 2)}))
"""


def startup() -> dict[str, Any]:
    """Starting and shutting down a local cluster, by itself, in a fresh process."""
    load = os.getloadavg()[0]
    done = subprocess.run([sys.executable, "-c", STARTUP], env=environment(),
                          capture_output=True, text=True, check=True)  # fmt: skip
    return {"part": "startup", "load_before": round(load, 2),
            **json.loads(done.stdout.strip().splitlines()[-1])}  # fmt: skip


def differing(path: Path, reference: Path) -> tuple[int, set[str]]:
    """Records differing from the reference's (timings apart), and the fields that do."""
    ours = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    theirs = [json.loads(line) for line in reference.read_text(encoding="utf-8").splitlines()]
    fields: set[str] = set()
    count = abs(len(ours) - len(theirs))
    for a, b in zip(ours, theirs, strict=False):
        a, b = stable(a), stable(b)
        keys = {k for k in set(a) | set(b) if a.get(k) != b.get(k)}
        count += bool(keys)
        fields |= keys
    return count, fields


def median(runs: list[dict[str, Any]], part: str, config: str, units: int) -> float | None:
    key = (part, config, units)
    times = [r["seconds"] for r in runs if (r["part"], r.get("config"), r.get("units")) == key]
    return statistics.median(times) if times else None


def overhead(runs: list[dict[str, Any]], part: str, n: int, unit: str) -> list[str]:
    """Ray's overhead with one worker as the ratio and as fixed seconds + per-unit %."""
    big = {c: median(runs, part, c, n) for c in CONFIGS}
    one = {c: median(runs, part, c, 1) for c in CONFIGS}
    lines = [f"Ray's overhead with one worker: {big['ray1'] / big['serial']:.2f}x serial"]  # type: ignore[operator]
    if n > 1 and None not in one.values():
        slope = {c: (big[c] - one[c]) / (n - 1) for c in CONFIGS}  # type: ignore[operator]
        fixed = one["ray1"] - one["serial"]  # type: ignore[operator]
        per = (slope["ray1"] / slope["serial"] - 1) * 100 if slope["serial"] > 0 else float("nan")
        lines[0] += (
            f" = {fixed:.1f} s fixed + {per:+.0f}% per {unit} (fixed: the 1-{unit} runs' "
            f"difference, {one['ray1']:.1f} s against {one['serial']:.1f} s; per {unit}: "
            f"{slope['ray1']:.3f} s against serial's {slope['serial']:.3f} s, the slope "
            f"from 1 to {n})"
        )
    lines[0] += f"; two workers against one: {big['ray1'] / big['ray2']:.2f}x faster."  # type: ignore[operator]
    return lines


def table(runs: list[dict[str, Any]], part: str, n: int, unit: str) -> list[str]:
    ours = [r for r in runs if r["part"] == part]
    loads = [r[k] for r in ours for k in ("load_before", "load_after")]
    rows = [
        f"load average {min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} cores",
        "",
        f"| run | {n} {unit}s (median) | each run | against serial | 1 {unit} (median) "
        "| peak RSS per worker |",
        "|---|---|---|---|---|---|",
    ]
    serial = median(runs, part, "serial", n)
    for c in CONFIGS:
        each = ", ".join(f"{r['seconds']:.1f}" for r in ours if (r["config"], r["units"]) == (c, n))
        rss = [m for r in ours if r["config"] == c for m in r["worker_peak_rss_mb"]]
        peak = f"{min(rss)}-{max(rss)} MB" if rss else "-"
        big, one = median(runs, part, c, n), median(runs, part, c, 1)
        single = f"{one:.1f} s" if one is not None else "-"
        rows.append(
            f"| {LABEL[c]} | {big:.1f} s | {each} | {big / serial:.2f}x | {single} | {peak} |"  # type: ignore[operator]
        )
    return [*rows, "", *overhead(runs, part, n, unit)]


def stamp() -> str:
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()  # fmt: skip
    command = shlex.join([".venv/bin/python", "bench/bench_cluster.py", *sys.argv[1:]])
    return f"Made at commit `{commit or 'unknown'}` with `{command}`."


def report(runs: list[dict[str, Any]], args: argparse.Namespace) -> str:
    text: list[str] = []
    if args.docs:
        size = "whole SQuALITY stories, repeated" if args.doc_chars == 0 else (
            f"of {args.doc_chars:,} characters")  # fmt: skip
        title = f"## lcr index: {args.docs} documents {size}, bm25 + mixpr"
        text += [f"{title}, {args.rounds} round(s) alternated", "",
                 *table(runs, "index", args.docs, "document"), ""]  # fmt: skip
    if args.questions:
        evals = [r for r in runs if r["part"] == "eval" and r["units"] == args.questions]
        pinned = f"LCR_THREADS={args.threads}" if args.threads else "LCR_THREADS unset"
        text += [f"## lcr eval: {args.questions} HotpotQA dev questions, bm25, smollm2-135m "
                 f"({args.backend}), {pinned}, {args.rounds} round(s) alternated", "",
                 "The indexes were built once before timing (one shared --index-dir): "
                 "the timed runs answer, they build nothing.", "",
                 *table(runs, "eval", args.questions, "question"), ""]  # fmt: skip
        reference = Path(evals[0]["records"])
        for r in evals[1:]:
            count, fields = differing(Path(r["records"]), reference)
            said = "identical" if not count else f"{count} differ in {', '.join(sorted(fields))}"
            text.append(f"- {r['config']} ({Path(r['records']).name}): records against "
                        f"{reference.name}, timings apart: {said}")  # fmt: skip
        text.append("")
    starts = [r for r in runs if r["part"] == "startup"]
    if starts:

        def span(key: str) -> str:
            values = [r[key] for r in starts]
            return f"{min(values):.1f}-{max(values):.1f} s (median {statistics.median(values):.1f})"

        text += ["A local cluster by itself (`lcr.cluster.connect('local', 1)` then close, "
                 f"{len(starts)} fresh processes): import ray {span('import_s')}, start "
                 f"{span('init_s')}, shutdown {span('shutdown_s')}.", ""]  # fmt: skip
    return "\n".join([*text, stamp()])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=200, help="documents to index (0: none)")
    parser.add_argument("--doc-chars", type=int, default=3000, help="0: whole stories")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--questions", type=int, default=0, help="also time an eval (0: none)")
    parser.add_argument("--threads", type=int, default=1, help="eval's LCR_THREADS (0: unset)")
    parser.add_argument("--no-single", action="store_true", help="skip the 1-unit runs")
    parser.add_argument("--out", type=Path, default=None, help="write the report here too")
    args = parser.parse_args()
    if args.questions and not HOTPOT.is_file():
        raise SystemExit(f"--questions needs {HOTPOT}")
    runs: list[dict[str, Any]] = []

    def keep(run: dict[str, Any]) -> None:
        runs.append(run)
        print(json.dumps(run), flush=True)

    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as tmp:
        docs = write_documents(Path(tmp) / "docs", args.docs, args.doc_chars)
        work = Path(tmp) / "eval"
        if args.questions:
            work.mkdir()
            build_eval_indexes(work, args.questions, args.threads)
            print("eval indexes built once, before timing, into one shared --index-dir",
                  flush=True)  # fmt: skip
        for round_ in range(args.rounds):
            order = CONFIGS if round_ % 2 == 0 else tuple(reversed(CONFIGS))
            keep(startup())
            for config in order:
                if args.docs:
                    keep(index_run(config, docs))
                    if not args.no_single and args.docs > 1:
                        keep(index_run(config, docs[:1]))
                if args.questions:
                    keep(eval_run(config, work, args.questions, args.threads, round_))
                    if not args.no_single and args.questions > 1:
                        keep(eval_run(config, work, 1, args.threads, round_))
        args.backend = "?"
        evals = [r for r in runs if r["part"] == "eval"]
        if evals:
            record = json.loads(Path(evals[0]["records"]).read_text().splitlines()[0])
            args.backend = record.get("models", {}).get("llm_run", "?")
        text = report(runs, args)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
