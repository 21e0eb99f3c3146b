"""`lcr index --estimate` against the builds it estimates: calls, tokens and time.

    nice -n 5 .venv/bin/python bench/bench_estimate.py --llm smollm2-135m \\
        --doc examples/lighthouse.txt --doc /tmp/squality-1.txt --out /tmp/estimate-bench.jsonl

For each document and each LLM method (raptor, graphreader, lightpal with
`lightpal.scorer=llm`, pecan), in a fresh temporary index and a fresh LLM
cache: the estimate (through `estimate_index`, the code behind `--estimate`,
timed), then the real build (through `lcr.api.plan_and_index`, the code behind `lcr
index`), and the two side by side: LLM calls, prompt and reply tokens, wall
seconds, with the load average before and after. `--big` also times the
estimate alone of every method on a document of about 100k tokens (the given
documents repeated). Rates are measured once and cached in `$LCR_CACHE_DIR`
like every estimate's; each build also records what it observed there, so pass
`--fresh-observations` to keep builds of earlier rows from informing later
estimates (the figures are then the built-in defaults').

Prints one Markdown table; `--out` keeps one JSON line per row.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from lcr.api import plan_and_index
from lcr.models.container import Models
from lcr.models.spec import ModelSpec
from lcr.pipeline.estimate import estimate_index
from lcr.pipeline.plans import parse_sets
from lcr.text.inputs import expand_inputs

METHODS = ("graphreader", "lightpal", "pecan", "raptor")
SETS = ("lightpal.scorer=llm", "lightpal.candidates=10", "lightpal.continuation_tokens=16")


def _load() -> float:
    return round(os.getloadavg()[0], 1)


def _ratio(estimate: float, actual: float) -> str:
    if actual == 0:
        return "-" if estimate == 0 else "inf"
    return f"{estimate / actual:.2f}"


def estimate_row(doc: Path, method: str, llm: str, out: Path) -> dict[str, Any]:
    """The estimate's figures for one build, timed."""
    load = _load()
    started = time.perf_counter()
    _, bills = estimate_index(
        expand_inputs([doc]), out, [method], Models(spec=ModelSpec(llm=llm)), parse_sets(SETS)
    )
    estimate_s = time.perf_counter() - started
    bill = bills[0]
    assert bill.work.llm is not None and bill.seconds is not None
    work = bill.work.llm
    return {
        "doc": doc.name,
        "method": method,
        "backend": bill.backend,
        "estimate_s": round(estimate_s, 2),
        "estimate_load": load,
        "calls": [work.calls.expected, work.calls.high],
        "prompt": [work.prompt_tokens.expected, work.prompt_tokens.high],
        "replies": [work.completion_tokens.expected, work.completion_tokens.high],
        "seconds": [round(bill.seconds.expected, 1), round(bill.seconds.high, 1)],
        "rates": bill.sources.get("time", ""),
    }


def one_row(doc: Path, method: str, llm: str, workdir: Path) -> dict[str, Any]:
    """Estimate, then build, one method on one document; the figures side by side."""
    out = workdir / f"{doc.stem}-{method}.idx"
    row = estimate_row(doc, method, llm, out)
    load_before = _load()
    started = time.perf_counter()
    index, _ = plan_and_index([doc], out, [method], Models(spec=ModelSpec(llm=llm)), SETS)
    wall = time.perf_counter() - started
    entry = index.methods[method]
    usage = entry.stats.get("llm_usage", {})
    row["calls"].append(usage.get("calls", 0))
    row["prompt"].append(usage.get("prompt_tokens", 0))
    row["replies"].append(usage.get("completion_tokens", 0))
    row["seconds"].append(round(wall, 1))
    row["build_s"] = entry.build_seconds
    row["load"] = [load_before, _load()]
    return row


def reestimate(rows_file: Path, docs: list[Path], llm: str, workdir: Path) -> list[dict[str, Any]]:
    """The estimates again (this code, the load now) against builds measured before."""
    by_name = {d.name: d for d in docs}
    rows = []
    for line in rows_file.read_text(encoding="utf-8").splitlines():
        built = json.loads(line)
        if "method" not in built or built["doc"] not in by_name:
            continue
        out = workdir / f"{built['doc']}-{built['method']}.idx"
        row = estimate_row(by_name[built["doc"]], built["method"], llm, out)
        for key in ("calls", "prompt", "replies", "seconds"):
            row[key].append(built[key][-1])
        row["build_s"], row["load"] = built["build_s"], built["load"]
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def big_estimate(docs: list[Path], llm: str, workdir: Path, tokens: int) -> dict[str, Any]:
    from lcr.text.tokens import count_tokens

    text = "\n\n".join(d.read_text(encoding="utf-8") for d in docs)
    repeats = max(1, tokens // max(count_tokens(text), 1) + 1)
    big = workdir / "big.txt"
    big.write_text("\n\n".join([text] * repeats), encoding="utf-8")
    per_method = {}
    for method in METHODS:
        started = time.perf_counter()
        summary, _ = estimate_index(
            expand_inputs([big]),
            workdir / f"big-{method}.idx",
            [method],
            Models(spec=ModelSpec(llm=llm)),
            parse_sets(SETS),
        )
        per_method[method] = round(time.perf_counter() - started, 2)
    return {"big_tokens": summary["tokens"], "estimate_s": per_method, "load": _load()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--doc", action="append", required=True, type=Path)
    parser.add_argument("--llm", default="smollm2-135m")
    parser.add_argument("--method", action="append", choices=METHODS)
    parser.add_argument("--big", type=int, default=0, help="also time an estimate of N tokens")
    parser.add_argument("--fresh-observations", action="store_true")
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--defaults",
        action="store_true",
        help="estimate with lcr's defaults, not what earlier builds observed",
    )
    parser.add_argument(
        "--reestimate",
        type=Path,
        help="estimate again against the builds of an earlier --out file (no build)",
    )
    args = parser.parse_args()
    if args.defaults:
        from lcr.estimate import throughput

        throughput.observed = lambda *key: {}  # type: ignore[assignment]
    if args.fresh_observations:
        from lcr.models.cache import cache_dir

        (cache_dir() / "observed.json").unlink(missing_ok=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="lcr-estimate-bench-") as tmp:
        if args.reestimate:
            rows = reestimate(args.reestimate, args.doc, args.llm, Path(tmp))
        for doc in [] if args.reestimate else args.doc:
            for method in args.method or METHODS:
                row = one_row(doc, method, args.llm, Path(tmp))
                rows.append(row)
                print(json.dumps(row), flush=True)
                if args.out:
                    with args.out.open("a", encoding="utf-8") as f:
                        f.write(json.dumps(row) + "\n")
        big = big_estimate(args.doc, args.llm, Path(tmp), args.big) if args.big else None
    print()
    print(
        "| doc | method | calls est (max) / actual | prompt est / actual | replies est / actual "
        "| time est / actual s | load (estimate; build) |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        c, p, o, s = r["calls"], r["prompt"], r["replies"], r["seconds"]
        print(
            f"| {r['doc']} | {r['method']} ({r['backend']}) | {c[0]:.0f} ({c[1]:.0f}) / {c[2]} "
            f"({_ratio(c[0], c[2])}) | {p[0]:.0f} / {p[2]} ({_ratio(p[0], p[2] or 0)}) | "
            f"{o[0]:.0f} / {o[2]} ({_ratio(o[0], o[2] or 0)}) | {s[0]:.0f} / {s[2]:.0f} "
            f"({_ratio(s[0], s[2])}) | {r.get('estimate_load', '?')}; "
            f"{r['load'][0]}-{r['load'][1]} |"
        )
    if big:
        print()
        print(
            f"estimate of {big['big_tokens']:,} tokens: {big['estimate_s']} s at load {big['load']}"
        )
        if args.out:
            with args.out.open("a", encoding="utf-8") as f:
                f.write(json.dumps(big) + "\n")


if __name__ == "__main__":
    main()
