"""Issue 53: what ``answer.check=located`` would have answered, applied offline to eval
records (no LLM call: the check reads only the answer, the question and the evidence).

``answer.check=located`` gives an answer when the support check passes *and* lcr finds
its words in one or two sentences of one excerpt read (:func:`lcr.answer.quotes.answer_quote`).
This script applies that rule to records already made, and prints, for answerable and
unanswerable questions, F1 (answerable), "not found" on each kind, and the share of given
answers lcr located a quote for, beside the records as they were::

    python bench/archive/bench_located.py --index-dir IDX --answerable A.jsonl \\
        --unanswerable U.jsonl
    python bench/archive/bench_located.py --kind quote --index-dir IDX --answerable A.jsonl ...
    python bench/archive/bench_located.py --recheck --index-dir IDX --answerable A.jsonl ...

``--recheck``: records made with ``answer.support=0`` (every answer given) are decided by
today's support check first. The last row applies ``answer.located_floor`` (the step's own
:func:`lcr.answer.grounding.ground` with the default settings) to what the check gives.

``--kind support`` (default): records of the default check (their ``answer`` is the support
check's decision). ``--kind quote``: records of ``answer.check=quote``, whose replies were
made with the quote prompt: the answer is the reply's, the support check recomputed from
the text (as ``bench/bench_quote_grid.py`` does), the model's quotes ignored.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Literal

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout's lcr
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: bench_quote_grid

from bench_quote_grid import evidence_items

from lcr.answer.covering import RELATED_FLOOR
from lcr.answer.grounding import ground, unwritten_terms
from lcr.answer.quotes import answer_quote
from lcr.answer.replies import NOT_FOUND, says_not_found
from lcr.answer.shared import AnswerResult, AnswerSettings
from lcr.answer.support import DEFAULT_THRESHOLD, record_signals, support_score
from lcr.eval import metrics
from lcr.eval.stats import bootstrap_mean, paired_bootstrap
from lcr.evidence import EvidenceItem


@dataclass(frozen=True)
class Record:
    question: str
    answers: tuple[str, ...]
    given: str  # the answer the record's check gave, or NOT_FOUND
    items: tuple[EvidenceItem, ...]
    source: str


def load(path: Path, index_dir: Path, kind: str, recheck: bool = False) -> list[Record]:
    out: list[Record] = []
    seen: set[str] = set()
    sources: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        if rec["id"] in seen:
            continue
        seen.add(rec["id"])
        if rec["index"] not in sources:
            sources[rec["index"]] = (index_dir / rec["index"] / "source.txt").read_text("utf-8")
        source = sources[rec["index"]]
        items = evidence_items(rec)
        given = str(rec["answer"])
        if recheck and given != NOT_FOUND:  # made with answer.support=0: today's check
            named = {str(it.get("document", "")): source for it in rec["evidence"]}
            signals = record_signals(rec, named)
            if signals is None or support_score(signals) < DEFAULT_THRESHOLD:
                given = NOT_FOUND
        if kind == "quote":
            from bench_quote_grid import _support, split_answer

            reply = str((rec.get("quote_check") or {}).get("reply") or "")
            answer = "" if says_not_found(reply) else split_answer(reply)
            passes = bool(answer) and _support(rec["question"], answer, items, source) >= (
                DEFAULT_THRESHOLD
            )
            given = answer if passes else NOT_FOUND
        out.append(Record(rec["question"], tuple(rec["answers"]), given, items, source))
    return out


def located(r: Record) -> str:
    """The answer ``answer.check=located`` gives: the record's, when lcr locates it."""
    if r.given == NOT_FOUND or says_not_found(r.given):
        return NOT_FOUND
    return r.given if answer_quote(r.given, r.question, r.items, r.source) else NOT_FOUND


def never_read(
    r: Record, related_floor: float = 0.0, unquoted: Literal["withhold", "show"] = "show"
) -> str:
    """The answer the step gives once ``answer.located_floor`` withholds words never read
    (a long answer its quotes barely hold, a restated question), by the step's own
    :func:`lcr.answer.grounding.ground`; with ``related_floor``, also an answer whose one
    quote comes from a passage with less than that share of the question's words; with
    ``unquoted="withhold"``, also an answer lcr finds no quote for."""
    if r.given == NOT_FOUND or says_not_found(r.given):
        return NOT_FOUND
    out = AnswerResult(r.given, list(r.items), 0)
    settings = AnswerSettings(related_floor=related_floor, unquoted=unquoted)
    return ground(r.question, out, settings, r.source).text


def defaults(r: Record) -> str:
    """The answer today's default step gives: "not found" unasked for a term of the
    question the document never writes, then every rule of the grounding."""
    if unwritten_terms(r.question, AnswerSettings(), r.source):
        return NOT_FOUND
    return never_read(r, AnswerSettings().related_floor, AnswerSettings().unquoted)


def f1(answer: str, gold: Sequence[str]) -> float:
    if answer == NOT_FOUND:
        return 0.0
    return float(metrics.answer_scores(answer, list(gold)).get("f1", 0.0))


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of k successes in n (95%)."""
    if n == 0:
        return (float("nan"), float("nan"))
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def _share(k: int, n: int) -> str:
    low, high = wilson(k, n)
    return f"{k}/{n} ({k / max(n, 1):.2f} [{low:.2f}, {high:.2f}])"


def report(
    answerable: list[Record], unanswerable: list[Record], related: Sequence[float] = ()
) -> None:
    rows: dict[str, Callable[[Record], str]] = {
        "the records' check": lambda r: NOT_FOUND if says_not_found(r.given) else r.given,
        "+ located required": located,
        "+ words never read withheld": never_read,
    }
    for floor in related:  # answer.related_floor on top of the words never read
        rows[f"+ quote's passage below {floor:g} of the question withheld"] = partial(
            never_read, related_floor=floor
        )
    rows["+ no answer without a quote (lcr's defaults)"] = defaults
    f1s: dict[str, list[float]] = {}
    print("| check | F1 [95%] | not found, answerable | not found, unanswerable | located |")
    print("|---|---:|---:|---:|---:|")
    for name, rule in rows.items():
        got = [rule(r) for r in answerable]
        f1s[name] = [f1(a, r.answers) for a, r in zip(got, answerable, strict=True)]
        mean = bootstrap_mean(f1s[name])
        nfa = sum(a == NOT_FOUND for a in got)
        nfu = sum(rule(r) == NOT_FOUND for r in unanswerable)
        given = [r for r in answerable + unanswerable if rule(r) != NOT_FOUND]
        quoted = sum(
            answer_quote(r.given, r.question, r.items, r.source) is not None for r in given
        )
        print(
            f"| {name} | {mean.mean:.3f} [{mean.low:.3f}, {mean.high:.3f}] | "
            f"{_share(nfa, len(got))} | {_share(nfu, len(unanswerable))} | "
            f"{quoted}/{len(given)} |"
        )
    for name in list(rows)[1:]:
        test = paired_bootstrap(f1s[name], f1s["the records' check"])
        print(
            f"\nF1, {name[2:]} minus the records' check: {test.diff:+.3f} [{test.low:+.3f}, "
            f"{test.high:+.3f}], p = {test.p_value:.3f}, n = {test.n}"
        )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index-dir", type=Path, required=True)
    parser.add_argument("--answerable", type=Path, required=True)
    parser.add_argument("--unanswerable", type=Path, required=True)
    parser.add_argument("--kind", choices=("support", "quote"), default="support")
    parser.add_argument(
        "--recheck",
        action="store_true",
        help="records made with answer.support=0: decide each by today's support check",
    )
    parser.add_argument("--unanswerable-index-dir", type=Path, help="default: --index-dir")
    parser.add_argument(
        "--related-floor",
        type=float,
        action="append",
        help="answer.related_floor values to add a row for (default: lcr's)",
    )
    args = parser.parse_args(argv)
    report(
        load(args.answerable, args.index_dir, args.kind, args.recheck),
        load(args.unanswerable, args.unanswerable_index_dir or args.index_dir, args.kind,
             args.recheck),
        args.related_floor or [RELATED_FLOOR],
    )  # fmt: skip


if __name__ == "__main__":
    main()
