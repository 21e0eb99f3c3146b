"""The shared answer step's variants on one data set and one method, side by side.

    .venv/bin/python bench/bench_answer.py DATA.jsonl --method mixpr --limit 50 \\
        --out-dir /tmp/lcr-answer/qa2-mixpr

Runs, through the runner behind `lcr eval` (one results file per variant in
--out-dir, resumable like `lcr eval`): today's answer step; each of
answer.order=rank, answer.passages=merged, answer.instruction=strict,
answer.not_found=abstain and --max-new-tokens 32 alone; and all of them together.
Then prints Markdown tables: EM, F1, RULER match (all) and the share of questions
whose evidence held a gold answer ("found"), with 95% bootstrap intervals; the
same accuracy split by found / not found (and how often the reply was the
abstain phrase); and a paired bootstrap test of each variant against today's step.

Every variant shares one --index-dir (built once), and a question's retrieval is
computed once and reused by the later variants (retrieval does not depend on the
answer settings and is deterministic), so "wall s" of those variants is the answer
step alone. PECAN answers inside its search: no reuse there.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import sys
from pathlib import Path
from typing import Any

from lcr import pipeline
from lcr.answer.shared import NOT_FOUND
from lcr.eval import runner, summary
from lcr.eval.stats import bootstrap_mean, paired_bootstrap
from lcr.models.container import Models
from lcr.models.spec import ModelSpec
from lcr.pipeline import Result
from lcr.pipeline.plans import QueryPlan

# (name, --set lines, --max-new-tokens or None for --max-new-tokens of the command)
ALL_SETS = [
    "answer.order=rank",
    "answer.passages=merged",
    "answer.instruction=strict",
    "answer.not_found=abstain",
]
VARIANTS: list[tuple[str, list[str], int | None]] = [
    ("today", [], None),
    ("order=rank", ["answer.order=rank"], None),
    ("passages=merged", ["answer.passages=merged"], None),
    ("instruction=strict", ["answer.instruction=strict"], None),
    ("not_found=abstain", ["answer.not_found=abstain"], None),
    ("max_new_tokens=32", [], 32),
    ("all together", ALL_SETS, 32),
    ("evidence=quoted", ["answer.evidence=quoted"], None),
]
ACCURACY = (("em", "EM"), ("f1", "F1"), ("rouge_l", "ROUGE-L"), ("match_all", "match"))


class RetrievalMemo:
    """``pipeline.retrieve_query`` once per (index, method, question, settings, k);
    later calls get a copy (``ask`` changes the result it is given). Evidence that
    keeps state for its method's own answer (PECAN's KV cache) is never reused."""

    def __init__(self) -> None:
        self.memo: dict[str, Result] = {}
        self.real = pipeline.retrieve_query
        self.hits = 0

    def __call__(
        self, index: Any, query: QueryPlan, question: str, models: Models, **kw: Any
    ) -> Result:
        key = json.dumps(
            [str(index.path), query.method.name, question, query.settings.to_json(), query.k],
            default=str,
        )
        if key in self.memo:
            self.hits += 1
            return copy.deepcopy(self.memo[key])
        result = self.real(index, query, question, models, **kw)
        if result.evidence.state is None:
            self.memo[key] = copy.deepcopy(result)
        return result


def run_variants(args: argparse.Namespace) -> dict[str, list[dict[str, Any]]]:
    spec = ModelSpec(llm=args.llm, device=args.device, backend=args.backend)
    models = Models(spec=spec)
    memo = RetrievalMemo()
    pipeline.retrieve_query = memo  # ask_query looks it up at call time
    out: dict[str, list[dict[str, Any]]] = {}
    try:
        for name, sets, tokens in VARIANTS:
            if args.only and name not in args.only:
                continue
            opts = runner.RunOptions(
                methods=[args.method],
                k=args.k,
                limit=args.limit,
                sets=[*args.set, *sets],
                max_new_tokens=tokens or args.max_new_tokens,
                index_dir=args.index_dir or args.out_dir / "indexes",
                out=args.out_dir / f"{name.replace('=', '-').replace(' ', '-')}.jsonl",
            )
            outcome = runner.run(args.data, models, opts)
            print(
                f"{name}: {outcome.new} run, {outcome.skipped} already in {outcome.out}",
                file=sys.stderr,
            )
            out[name] = outcome.records
    finally:
        pipeline.retrieve_query = memo.real
    print(f"retrievals reused: {memo.hits}", file=sys.stderr)
    return out


def fmt(iv: dict[str, float] | None) -> str:
    if iv is None or math.isnan(iv["mean"]):
        return "-"
    return f"{iv['mean']:.3f} [{iv['low']:.3f}, {iv['high']:.3f}]"


def _metric(records: list[dict[str, Any]], name: str) -> dict[str, float]:
    return {
        r["id"]: float(r["metrics"][name])
        for r in records
        if isinstance(r.get("metrics", {}).get(name), int | float)
    }


def abstained(records: list[dict[str, Any]], found: float) -> dict[str, float] | None:
    """Share of replies that are the abstain phrase, among questions found / not found."""
    vals = [
        float(r.get("answer") == NOT_FOUND)
        for r in records
        if r.get("metrics", {}).get("answer_found") == found
    ]
    return bootstrap_mean(vals).to_json() if vals else None


def tables(results: dict[str, list[dict[str, Any]]], method: str) -> str:
    lines = [
        "| variant | n | EM | F1 | ROUGE-L | match | answer found |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    sums = {name: summary.summarize(recs, [method]) for name, recs in results.items()}
    for name, s in sums.items():
        row = s["methods"].get(method, {})
        cells = [fmt(row.get(m)) for m, _ in ACCURACY] + [fmt(row.get("answer_found"))]
        lines.append(f"| {name} | {row.get('questions', 0)} | " + " | ".join(cells) + " |")
    lines += ["", "Split by whether a gold answer was in the evidence the answer step read:", ""]
    head = ["variant"]
    for tag in ("in ev.", "not in ev."):
        head += [f"n {tag}", *(f"{label} {tag}" for _, label in ACCURACY), f"abstained {tag}"]
    lines += ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for name, s in sums.items():
        split = s.get("split", {}).get(method)
        if split is None:
            continue
        cells = [name]
        for part, flag in (("found", 1.0), ("not_found", 0.0)):
            half = split[part]
            cells.append(str(half["questions"]))
            cells += [fmt(half.get(m)) for m, _ in ACCURACY]
            cells.append(fmt(abstained(results[name], flag)))
        lines.append("| " + " | ".join(cells) + " |")
    base = results.get("today")
    if base:
        lines += ["", "Paired bootstrap, variant - today (same questions):", ""]
        lines += ["| variant | metric | difference [95%] | p | n |", "|---|---|---:|---:|---:|"]
        for name, recs in results.items():
            if name == "today":
                continue
            for metric, label in (*ACCURACY, ("answer_found", "answer found")):
                a, b = _metric(recs, metric), _metric(base, metric)
                shared = [i for i in a if i in b]
                if not shared:
                    continue
                t = paired_bootstrap([a[i] for i in shared], [b[i] for i in shared])
                lines.append(
                    f"| {name} | {label} | {t.diff:+.3f} [{t.low:+.3f}, {t.high:+.3f}] | "
                    f"{t.p_value:.3f} | {t.n} |"
                )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", type=Path, help="an lcr eval data set (JSONL) with answers")
    ap.add_argument("--method", "-m", required=True)
    ap.add_argument("--out-dir", type=Path, required=True, help="one results file per variant")
    ap.add_argument("--index-dir", type=Path, default=None, help="default OUT_DIR/indexes")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("-k", type=int, default=None)
    ap.add_argument("--max-new-tokens", type=int, default=256, help="today's reply length")
    ap.add_argument("--llm", default=ModelSpec.llm)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--set", action="append", default=[], help="method settings for all")
    ap.add_argument("--only", action="append", default=[], help="run only these variants")
    ap.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME=SET[,SET...]",
        help="an extra variant: a name and its answer.* settings, e.g. "
        "'sel=answer.select=sentences,answer.budget=300' (repeat; runs with --only too)",
    )
    ap.add_argument("--json", action="store_true", help="also write OUT_DIR/summary.json")
    args = ap.parse_args()
    for text in args.variant:
        name, sep, sets = text.partition("=")
        if not sep or not name or not sets:
            ap.error(f"--variant {text!r}: expected NAME=SET[,SET...]")
        VARIANTS.append((name, sets.split(","), None))
        if args.only:
            args.only.append(name)
    unknown = set(args.only) - {name for name, _, _ in VARIANTS}
    if unknown:
        ap.error(f"unknown variant(s) {sorted(unknown)}; known: {[v[0] for v in VARIANTS]}")
    results = run_variants(args)
    text = tables(results, args.method)
    print(f"**{args.data.name}**, method {args.method}, LLM {args.llm}\n")
    print(text)
    if args.json:
        sums = {name: summary.summarize(recs, [args.method]) for name, recs in results.items()}
        (args.out_dir / "summary.json").write_text(json.dumps(sums, indent=1))


if __name__ == "__main__":
    main()
