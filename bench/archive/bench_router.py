"""How often MixPR's LLM router picks the right mode, on labelled questions.

Labels: QMSum general queries ("summarise the meeting") are global, QMSum
specific queries local, generated RULER/Hash-Hop tasks (``lcr eval generate``)
local. Each question is routed twice through ``pipeline.retrieve`` (the real
path): with the paper's router input (the context's first and last two chunks,
then the question; ``router_chunks=2``) and with the question alone
(``router_chunks=0``, lcr's router before issue 18). The walk is cheap; the time
is the LLM's prefill.

    flock /tmp/lcr-bigmodel.lock env PYTHONPATH=$PWD .venv/bin/python \\
        bench/archive/bench_router.py --general 30 --specific 30 --generated 20 --out /tmp/router

Raw rows go to OUT/rows.jsonl (a rerun skips rows already there; ``--max-minutes``
stops a run early so the big-model lock is not held too long); the table is
printed at the end (accuracy at router_threshold 0.5, and mean P(global)).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from lcr import api
from lcr.eval.convert import qmsum
from lcr.eval.dataset import Question, load
from lcr.eval.runner import open_index
from lcr.models.container import Models
from lcr.models.spec import ModelSpec

DATA = Path(os.environ.get("LCR_SHARED_DATA", Path(__file__).resolve().parents[3] / "shared/data"))
GENERATED = (("niah-single", 1), ("niah-multikey", 2), ("vt", 3), ("hashhop", 4))
VARIANTS = {"paper (first/last 2 chunks + question)": 2, "question only": 0}


def spread(items: list[Question], n: int) -> list[Question]:
    """``n`` items evenly spaced over the list, so every part of the set is sampled."""
    if n >= len(items):
        return items
    return [items[round(i * (len(items) - 1) / max(n - 1, 1))] for i in range(n)]


def labelled(args: argparse.Namespace, work: Path) -> list[tuple[str, str, Question]]:
    """``(group, gold mode, question)`` for the sample."""
    qs = qmsum(DATA / "qmsum" / "val.jsonl")
    general = spread([q for q in qs if q.meta.get("type") == "general"], args.general)
    specific = spread([q for q in qs if q.meta.get("type") == "specific"], args.specific)
    rows = [("QMSum general", "global", q) for q in general]
    rows += [("QMSum specific", "local", q) for q in specific]
    per_kind = -(-args.generated // len(GENERATED))
    generated: list[Question] = []
    for kind, seed in GENERATED:
        path = work / f"{kind}.jsonl"
        if not path.exists():
            subprocess.run(
                [sys.executable, "-m", "lcr", "eval", "generate", kind, "--length", "4096",
                 "--count", str(per_kind), "--seed", str(seed), "-o", str(path), "-q"],
                check=True,
            )  # fmt: skip
        generated += load(path)
    rows += [("generated (NIAH, VT, Hash-Hop)", "local", q) for q in generated[: args.generated]]
    # interleaved, so a run stopped early still has every group
    by_group: dict[str, list[tuple[str, str, Question]]] = {}
    for row in rows:
        by_group.setdefault(row[0], []).append(row)
    lanes = list(by_group.values())
    return [lane[i] for i in range(max(map(len, lanes))) for lane in lanes if i < len(lane)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--general", type=int, default=30)
    ap.add_argument("--specific", type=int, default=30)
    ap.add_argument("--generated", type=int, default=20)
    ap.add_argument("--llm", default="qwen2.5-coder-1.5b")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", type=Path, default=Path("/tmp/lcr-router"))
    ap.add_argument("--variants", choices=("all", "paper", "question"), default="all")
    ap.add_argument(
        "--max-minutes",
        type=float,
        default=35.0,
        help="stop after this long (the big-model "
        "lock is held at most 40 minutes); a rerun goes on where it stopped",
    )
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows_path = args.out / "rows.jsonl"
    done = {}
    if rows_path.exists():
        for line in rows_path.read_text().splitlines():
            r = json.loads(line)
            done[(r["id"], r["router_chunks"])] = r
    models = Models(spec=ModelSpec(llm=args.llm, device=args.device))
    sample = labelled(args, args.out)
    started = time.perf_counter()
    edges = [VARIANTS[name] for name in VARIANTS if args.variants in ("all", name.split()[0])]
    with rows_path.open("a") as fh:
        for edge in edges:  # the paper's router first, over the whole sample
            for group, gold, q in sample:
                if (q.id, edge) in done:
                    continue
                if time.perf_counter() - started > 60 * args.max_minutes:
                    print("time is up: run again to go on", flush=True)
                    break
                index = open_index(q, args.out / "indexes")
                api.plan_and_build(index, ["mixpr"], models)
                t0 = time.perf_counter()
                res = api.plan_and_retrieve(
                    index, "mixpr", q.question, models, [f"mixpr.router_chunks={edge}"], k=1
                )
                row = {
                    "id": q.id,
                    "group": group,
                    "gold": gold,
                    "router_chunks": edge,
                    "p_global": res.evidence.info["router_p_global"],
                    "mode": res.evidence.info["mode"],
                    "prompt_tokens": res.usage.prompt_tokens,
                    "seconds": round(time.perf_counter() - t0, 2),
                }
                done[(q.id, edge)] = row
                fh.write(json.dumps(row) + "\n")
                fh.flush()
                print(json.dumps(row), flush=True)
    print_table(list(done.values()), args.llm)


def print_table(rows: list[dict], llm: str) -> None:
    groups = list(dict.fromkeys(r["group"] for r in rows))
    print(f"\nrouter accuracy, {llm}, router_threshold 0.5 (mean P(global) in brackets)\n")
    print("| router input | " + " | ".join(groups) + " | all |")
    print("|---|" + "---|" * (len(groups) + 1))
    for name, edge in VARIANTS.items():
        cells = []
        mine = [r for r in rows if r["router_chunks"] == edge]
        for g in [*groups, None]:
            sel = [r for r in mine if g is None or r["group"] == g]
            if not sel:
                cells.append("-")
                continue
            right = sum(r["mode"] == r["gold"] for r in sel)
            p = sum(r["p_global"] for r in sel) / len(sel)
            cells.append(f"{right}/{len(sel)} = {right / len(sel):.2f} ({p:.2f})")
        secs = sum(r["seconds"] for r in mine) / max(len(mine), 1)
        print(f"| {name}, {secs:.1f} s/question | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
