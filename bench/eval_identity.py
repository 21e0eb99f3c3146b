"""Fingerprint `lcr eval` results, to show a refactor changed no result.

Runs a fixed, small set of evaluations (generated Hash-Hop and variable-tracking
tasks, and the first HotpotQA dev questions when ../shared/data is beside the
project) with every cheap method retrieval-only, and answers with SmolLM2 for
bm25, mixpr and the gold ceiling on three HotpotQA questions. Each results
record is written with its run-dependent fields removed (wall times, dates):
everything else, run keys, evidence, scores, prompts' token counts, answers,
must be bitwise the same between two commits.

    python bench/eval_identity.py /tmp/ident-before --out before.json
    python bench/eval_identity.py /tmp/ident-after --out after.json --compare before.json

The second prints every record that differs and exits 1 if any does. Each
workdir holds its own indexes, so the two runs share nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("LCR_SHARED_DATA", HERE.parent / "shared" / "data"))
CHEAP = ["bm25", "tfidf", "dense", "hybrid", "mixpr"]
# Keys whose values depend on the machine and the moment, never on the code's logic.
# ``made_by`` (the commit and the command line, with the workdir) says which run made a
# record, so it differs between the two runs by design.
VOLATILE = {"timings", "seconds", "wall_s", "date", "started", "finished", "elapsed_s", "made_by"}


def lcr_eval(*args: str) -> None:
    """One `lcr eval` call from this tree's code, failing loudly."""
    cmd = [sys.executable, "-m", "lcr", "eval", *args]
    env = {**os.environ, "PYTHONPATH": str(HERE)}
    subprocess.run(cmd, check=True, env=env)


def prepare(work: Path) -> list[tuple[str, Path, int]]:
    """The tasks (name, data file, question limit) this fingerprint covers."""
    tasks = []
    hashhop = work / "hashhop2.jsonl"
    if not hashhop.exists():
        lcr_eval(
            "generate",
            "hashhop",
            "--hops",
            "2",
            "--length",
            "8k",
            "--count",
            "6",
            "--seed",
            "0",
            "-o",
            str(hashhop),
        )
    tasks.append(("hashhop2", hashhop, 6))
    vt = work / "vt.jsonl"
    if not vt.exists():
        lcr_eval("generate", "vt", "--length", "8k", "--count", "6", "--seed", "0", "-o", str(vt))
    tasks.append(("vt", vt, 6))
    hotpot = SHARED / "hotpotqa" / "dev.jsonl"
    if hotpot.exists():
        tasks.append(("hotpotqa", hotpot, 6))
    else:
        print(f"note: {hotpot} not found; HotpotQA left out", file=sys.stderr)
    return tasks


def run_all(work: Path) -> list[Path]:
    """Every evaluation; returns the results files in a fixed order."""
    work.mkdir(parents=True, exist_ok=True)
    outputs = []
    for name, data, limit in prepare(work):
        out = work / f"{name}.retrieval.jsonl"
        methods = [a for m in CHEAP for a in ("-m", m)]
        lcr_eval(
            "run",
            str(data),
            *methods,
            "--limit",
            str(limit),
            "--retrieval-only",
            "--set",
            "mixpr.mode=local",
            "--device",
            "cpu",
            "--quiet",
            "--index-dir",
            str(work / f"{name}.indexes"),
            "--out",
            str(out),
        )
        outputs.append(out)
    # answers: the shared answer step (bm25, mixpr) and the gold ceiling; the LLM
    # methods' builds take an hour at a load of 5-8 on 2 cores, too slow for a check
    hotpot = SHARED / "hotpotqa" / "dev.jsonl"
    answer_runs = []
    if hotpot.exists():
        answer_runs.append(("hotpotqa.answers", hotpot, ["bm25", "mixpr", "gold"], 3))
    for name, data, methods_list, limit in answer_runs:
        out = work / f"{name}.jsonl"
        methods = [a for m in methods_list for a in ("-m", m)]
        lcr_eval(
            "run",
            str(data),
            *methods,
            "--limit",
            str(limit),
            "--llm",
            "smollm2-135m",
            "--device",
            "cpu",
            "--quiet",
            "--set",
            "mixpr.mode=local",
            "--index-dir",
            str(work / f"{name}.indexes"),
            "--out",
            str(out),
        )
        outputs.append(out)
    return outputs


def stable(value: Any) -> Any:
    """The value with every run-dependent field removed, recursively."""
    if isinstance(value, dict):
        return {
            k: stable(v)
            for k, v in value.items()
            if k not in VOLATILE and not k.endswith("_s") and not k.endswith("_seconds")
        }
    if isinstance(value, list):
        return [stable(v) for v in value]
    return value


def fingerprint(outputs: list[Path]) -> dict[str, dict[str, str]]:
    """Per results file, per record (method/question), the digest of its stable fields."""
    prints: dict[str, dict[str, str]] = {}
    for path in outputs:
        records = {}
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            key = f"{record['method']}/{record['id']}"
            text = json.dumps(stable(record), sort_keys=True)
            records[key] = hashlib.sha256(text.encode()).hexdigest()[:16]
            (path.parent / "stable").mkdir(exist_ok=True)
            with open(path.parent / "stable" / f"{path.stem}.jsonl", "a", encoding="utf-8") as f:
                f.write(text + "\n")
        prints[path.stem] = records
    return prints


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workdir", type=Path)
    parser.add_argument("--out", type=Path, required=True, help="fingerprint JSON to write")
    parser.add_argument("--compare", type=Path, help="an earlier fingerprint to compare with")
    args = parser.parse_args()
    outputs = run_all(args.workdir)
    prints = fingerprint(outputs)
    args.out.write_text(json.dumps(prints, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    total = sum(len(r) for r in prints.values())
    print(f"{total} records in {len(prints)} files -> {args.out}")
    if args.compare is None:
        return 0
    before = json.loads(args.compare.read_text(encoding="utf-8"))
    differ = [
        f"{name}: {key}"
        for name in sorted(set(before) | set(prints))
        for key in sorted(set(before.get(name, {})) | set(prints.get(name, {})))
        if before.get(name, {}).get(key) != prints.get(name, {}).get(key)
    ]
    for line in differ:
        print(f"differs: {line}")
    print(f"{total - len(differ)} of {total} records identical" if differ else "all identical")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
