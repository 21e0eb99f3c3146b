"""The answer step's defaults against ``answer.not_found=guess`` on held-out questions,
paying for a model call only where the two can differ (issue 71).

With greedy decoding ``guess`` asks the model the same prompt as the defaults, so where
the defaults answered, ``guess`` answers the same; only the questions the defaults said
"not found" to (before reading, or by withholding a reply) need a ``guess`` run.

    python bench/heldout_guess.py pick DATA.jsonl DEFAULT.results.jsonl -o PICK.jsonl
    lcr eval run PICK.jsonl -m bm25 --set answer.not_found=guess --out GUESS.jsonl
    python bench/heldout_guess.py compare --answerable A.default.jsonl A.guess.jsonl \\
        --unanswerable U.default.jsonl U.guess.jsonl

``pick`` keeps the "not found" questions and the first ``--controls`` answered ones (the
check that ``guess`` does answer them the same), each with its documents' text inline.
``compare`` prints F1 with 95% bootstrap intervals, their paired difference, and the
"not found" rate with Wilson intervals, for each set given.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from lcr.eval.metrics import answer_scores
from lcr.eval.stats import bootstrap_mean, paired_bootstrap


def _records(path: Path) -> dict[str, dict[str, Any]]:
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            record = json.loads(line)
            out[record["id"]] = record
    return out


def said_not_found(answer: str | None) -> bool:
    return (answer or "").startswith("not found")


def pick(data: Path, results: Path, out: Path, controls: int) -> int:
    """Write the questions ``guess`` must be asked; returns how many."""
    done = _records(results)
    wanted = [i for i, r in done.items() if said_not_found(r["answer"])]
    wanted += [i for i, r in done.items() if not said_not_found(r["answer"])][:controls]
    keep, texts, written = set(wanted), {}, set()
    with out.open("w", encoding="utf-8") as f:
        for line in data.read_text(encoding="utf-8").splitlines():
            question = json.loads(line)
            for doc in question["documents"]:
                if "text" in doc:  # the data gives a corpus's text on its first line only
                    texts[doc["id"]] = doc
            if question["id"] not in keep:
                continue
            docs = []
            for doc in question["documents"]:
                docs.append({"id": doc["id"]} if doc["id"] in written else texts[doc["id"]])
                written.add(doc["id"])
            question["documents"] = docs
            f.write(json.dumps(question, ensure_ascii=False) + "\n")
    return len(wanted)


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return math.nan, math.nan
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def compare(label: str, default_path: Path, guess_path: Path) -> list[str]:
    """The lines that compare one set's defaults with guess."""
    defaults, guesses = _records(default_path), _records(guess_path)
    f1_default, f1_guess, nf_default, nf_guess = [], [], 0, 0
    same = controls = missing = 0
    for qid, record in defaults.items():
        guessed = guesses.get(qid)
        if said_not_found(record["answer"]):
            if guessed is None:
                missing += 1
                continue
            answer = guessed["answer"]
        else:
            answer = record["answer"]
            if guessed is not None:
                controls += 1
                same += guessed["answer"] == record["answer"]
        f1_default.append(record["metrics"]["f1"])
        f1_guess.append(answer_scores(answer, record["answers"])["f1"])
        nf_default += said_not_found(record["answer"])
        nf_guess += said_not_found(answer)
    n = len(f1_default)
    a, b = bootstrap_mean(f1_default), bootstrap_mean(f1_guess)
    d = paired_bootstrap(f1_default, f1_guess)
    lines = [
        f"{label}: n={n} ({missing} without a guess run); controls answered the same: "
        f"{same} of {controls}",
        f"  F1 defaults {a.mean:.3f} [{a.low:.3f}, {a.high:.3f}], guess {b.mean:.3f} "
        f"[{b.low:.3f}, {b.high:.3f}], defaults - guess {d.diff:+.3f} "
        f"[{d.low:+.3f}, {d.high:+.3f}], p = {d.p_value:.3f}",
    ]
    for name, k in (("defaults", nf_default), ("guess", nf_guess)):
        low, high = wilson(k, n)
        lines.append(f'  "not found" {name}: {k} of {n} [{low:.2f}, {high:.2f}]')
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("pick", help="the questions guess must be asked")
    p.add_argument("data", type=Path)
    p.add_argument("results", type=Path)
    p.add_argument("-o", "--out", type=Path, required=True)
    p.add_argument("--controls", type=int, default=5)
    c = sub.add_parser("compare", help="defaults against guess")
    c.add_argument("--answerable", nargs=2, type=Path, metavar=("DEFAULT", "GUESS"))
    c.add_argument("--unanswerable", nargs=2, type=Path, metavar=("DEFAULT", "GUESS"))
    args = parser.parse_args(argv)
    if args.command == "pick":
        if args.controls < 0:
            parser.error("--controls must be at least 0")
        print(f"{args.out}: {pick(args.data, args.results, args.out, args.controls)} questions")
        return 0
    for label, pair in (("answerable", args.answerable), ("unanswerable", args.unanswerable)):
        if pair is not None:
            print("\n".join(compare(label, *pair)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
