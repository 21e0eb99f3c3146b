"""Calibrate and measure the support check of ``answer.not_found=abstain`` offline.

Each answer is generated once, with the check scoring it but never withholding it
(``--set answer.support=0``: the answer is the ``guess`` prompt's, and the record
carries ``support`` and ``support_signals``), on answerable questions and on the
unanswerable set (``python -m lcr.eval.unanswerable``)::

    lcr eval dev.jsonl -m bm25 --max-new-tokens 64 --set answer.support=0 --out A.jsonl
    lcr eval unanswerable.jsonl -m bm25 --max-new-tokens 64 --set answer.support=0 --out U.jsonl

Then every threshold costs nothing: a record abstains at threshold t when its
score is below t (its F1 becomes 0, as "not found in the document" scores against
any gold answer).

    python bench/bench_support.py fit --answerable A.jsonl --unanswerable U.jsonl \\
        --data dev.jsonl --fit-corpus corpus0
    python bench/bench_support.py report --answerable A.jsonl --unanswerable U.jsonl \\
        --data dev.jsonl --fit-corpus corpus0 --threshold 0.5

``fit`` fits :func:`lcr.answer.support.support_score`'s logistic constants on the
questions of one corpus (answerable ones whose draft scored F1 > 0 against the
unanswerable ones asked *from* that corpus; the L2 penalty by 5-fold
cross-validation inside that corpus), then picks the threshold: the highest
at which abstaining loses at most ``--max-loss`` F1 against guessing on that corpus.
``report`` prints, for the fit corpus, each other corpus and all, F1 of ``guess``
and of ``abstain`` at the threshold (paired bootstrap), and the "not found" rate on
answerable and unanswerable questions, with 95% intervals.

``compare`` sets answer-step configurations side by side at the threshold: each
``--answerable`` file is one configuration's run (``--unanswerable`` files, if
given, pair with them by position; ``--labels`` names them), with F1, EM and ROUGE-L,
the "not found" rates, prompt tokens, LLM calls and seconds per answer, and each
configuration's F1 against the first's (paired bootstrap over the questions both
answered). A run made without the check (``guess``, ``instruct``) is taken as it
answered::

    python bench/bench_support.py compare --answerable A.jsonl B.jsonl \
        --unanswerable UA.jsonl UB.jsonl --labels "ten chunks" selection --data dev.jsonl
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lcr.answer.shared import NOT_FOUND
from lcr.answer.support import (
    CONSTANTS,
    DEFAULT_THRESHOLD,
    SupportSignals,
    record_signals,
    support_score,
)
from lcr.eval import dataset
from lcr.eval.stats import bootstrap_mean, paired_bootstrap

Constants = tuple[float, float, float, float, float]
P_YES_ALONE: Constants = (0.0, 1.0, 0.0, 0.0, 0.0)


@dataclass(frozen=True)
class Scored:
    """One generated answer: its question's home corpus, F1 as guessed, and signals."""

    id: str
    corpus: str
    answerable: bool
    f1: float
    signals: SupportSignals | None  # None: the draft said "not found" (score 0, no check)


def load(
    path: Path, answerable: bool, corpus_of: dict[str, str], documents: dict[str, str]
) -> list[Scored]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        signals = record_signals(rec, documents)  # again from the text (newer signals)
        home = rec["id"].split("@")[0]
        f1 = float(rec["metrics"].get("f1", 0.0)) if rec["answer"] != NOT_FOUND else 0.0
        out.append(Scored(rec["id"], corpus_of[home], answerable, f1, signals))
    return out


def score(s: Scored, constants: Constants) -> float:
    return 0.0 if s.signals is None else support_score(s.signals, constants)


SIGNALS = ("p_yes", "overlap", "coverage", "names")


def features(s: SupportSignals) -> list[float]:
    """The logistic model's inputs, in the order of the constants after the bias."""
    return [0.0 if s.p_yes is None else _logit(s.p_yes), s.overlap, s.coverage, s.names]


def fit_logistic(
    rows: Sequence[Scored], l2: float = 1.0, use: Sequence[str] = SIGNALS
) -> Constants:
    """(bias, then the weights of ``SIGNALS``) by Newton's method on the log-loss, a small
    L2 penalty on the weights; a signal not in ``use`` keeps weight 0. Label 1: an
    answerable question answered with F1 > 0.

    Every signal says "supported" when it rises, so no weight may be negative: a signal
    fitted below 0 is dropped and the rest fitted again (a more confident yes must never
    lower the score). Records made without the scoring call (``answer.p_yes=false``)
    have no P(yes): with any of them, P(yes) is left out."""
    fit = [r for r in rows if r.signals is not None and (not r.answerable or r.f1 > 0)]
    if any(r.signals is not None and r.signals.p_yes is None for r in fit):
        use = [name for name in use if name != "p_yes"]
    y = np.array([float(r.answerable) for r in fit])
    if len(set(y.tolist())) < 2:
        raise SystemExit("fit needs answerable and unanswerable records of the fit corpus")
    x_all = np.array([[1.0, *features(r.signals)] for r in fit if r.signals is not None])
    keep = [0] + [1 + SIGNALS.index(name) for name in use]
    while True:
        x = x_all[:, keep]
        w = np.zeros(len(keep))
        penalty = np.diag([0.0] + [l2] * (len(keep) - 1))
        for _ in range(50):
            p = 1 / (1 + np.exp(-x @ w))
            grad = x.T @ (p - y) + penalty @ w
            hess = (x.T * (p * (1 - p))) @ x + penalty
            w -= np.linalg.solve(hess, grad)
        negative = [k for k, v in zip(keep[1:], w[1:], strict=True) if v < 0]
        if not negative:
            break
        keep = [k for k in keep if k not in negative]
    full = np.zeros(1 + len(SIGNALS))
    full[keep] = w
    a, b, c, d, e = (float(v) for v in full)
    return a, b, c, d, e


L2_GRID = (0.01, 0.1, 1.0, 10.0)


def log_loss(rows: Sequence[Scored], constants: Constants) -> float:
    """Mean log-loss of the fit's labels (see :func:`fit_logistic`) under ``constants``."""
    use = [r for r in rows if r.signals is not None and (not r.answerable or r.f1 > 0)]
    losses = []
    for r in use:
        p = min(max(score(r, constants), 1e-9), 1 - 1e-9)
        losses.append(-math.log(p if r.answerable else 1 - p))
    return float(np.mean(losses)) if losses else 0.0


def pick_l2(rows: Sequence[Scored], use: Sequence[str], folds: int = 5) -> float:
    """The L2 penalty of :data:`L2_GRID` with the least held-out log-loss in ``folds``-fold
    cross-validation inside ``rows`` (the fit corpus: nothing else is looked at)."""
    order = sorted(rows, key=lambda r: r.id)
    best, best_loss = L2_GRID[-1], math.inf
    for l2 in L2_GRID:
        losses = []
        for k in range(folds):
            train = [r for i, r in enumerate(order) if i % folds != k]
            test = [r for i, r in enumerate(order) if i % folds == k]
            try:
                losses.append(log_loss(test, fit_logistic(train, l2, use)))
            except SystemExit:  # a fold without both labels
                continue
        if losses and float(np.mean(losses)) < best_loss:
            best, best_loss = l2, float(np.mean(losses))
    return best


def _logit(p: float) -> float:
    p = min(max(p, 1e-6), 1 - 1e-6)
    return math.log(p / (1 - p))


def f1_at(rows: Sequence[Scored], t: float, constants: Constants) -> list[float]:
    return [r.f1 if score(r, constants) >= t else 0.0 for r in rows]


def pick_threshold(rows: Sequence[Scored], constants: Constants, max_loss: float) -> float:
    """The highest threshold (on a 0.01 grid) at which abstaining loses at most
    ``max_loss`` mean F1 against guessing on ``rows`` (answerable ones)."""
    answerable = [r for r in rows if r.answerable]
    guess = float(np.mean([r.f1 for r in answerable]))
    best = 0.0
    for t in np.arange(0.0, 1.0001, 0.01):
        if guess - float(np.mean(f1_at(answerable, float(t), constants))) <= max_loss:
            best = float(t)
    return round(best, 2)


def _iv(values: Sequence[float]) -> str:
    if not values:
        return "-"
    iv = bootstrap_mean(values)
    return f"{iv.mean:.3f} [{iv.low:.3f}, {iv.high:.3f}]"


def report_rows(rows: Sequence[Scored], t: float, constants: Constants, label: str) -> str:
    ans = [r for r in rows if r.answerable]
    una = [r for r in rows if not r.answerable]
    guess = [r.f1 for r in ans]
    abst = f1_at(ans, t, constants)
    cells = [label, str(len(ans)), _iv(guess), _iv(abst)]
    if ans:
        d = paired_bootstrap(abst, guess)
        cells.append(f"{d.diff:+.3f} [{d.low:+.3f}, {d.high:+.3f}], p = {d.p_value:.2f}")
    else:
        cells.append("-")
    nf_ans = [float(score(r, constants) < t) for r in ans]
    nf_una = [float(score(r, constants) < t) for r in una]
    cells += [_iv(nf_ans), str(len(una)), _iv(nf_una)]
    return "| " + " | ".join(cells) + " |"


def table(rows: Sequence[Scored], t: float, constants: Constants, fit_corpus: str) -> str:
    head = (
        "| questions from | n answerable | F1 guess | F1 abstain | abstain - guess [95%] | "
        '"not found", answerable | n unanswerable | "not found", unanswerable |\n'
        "|---|---:|---:|---:|---:|---:|---:|---:|"
    )
    corpora = sorted({r.corpus for r in rows})
    lines = [head, report_rows([r for r in rows if r.corpus == fit_corpus], t, constants,
                               f"{fit_corpus} (fit)")]  # fmt: skip
    for c in corpora:
        if c != fit_corpus:
            lines.append(report_rows([r for r in rows if r.corpus == c], t, constants, c))
    others = [r for r in rows if r.corpus != fit_corpus]
    lines.append(report_rows(others, t, constants, "all but the fit corpus"))
    lines.append(report_rows(rows, t, constants, "all"))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("action", choices=["fit", "report", "compare"])
    ap.add_argument("--answerable", type=Path, nargs="+", required=True, help="eval records")
    ap.add_argument(
        "--unanswerable", type=Path, nargs="*", default=[], help="eval records, unanswerable"
    )
    ap.add_argument("--data", type=Path, required=True, help="the answerable data set")
    ap.add_argument("--fit-corpus", default="corpus0")
    ap.add_argument("--threshold", type=float, default=None, help="report: default the fitted")
    ap.add_argument("--max-loss", type=float, default=0.005, help="fit: F1 lost at most")
    ap.add_argument(
        "--constants",
        default=None,
        help="report: BIAS,P_YES,OVERLAP,COVERAGE,NAMES weights (default lcr.answer.support's; "
        "0,1,0,0,0: P(yes) alone)",
    )
    ap.add_argument("--labels", nargs="*", default=[], help="compare: one per --answerable")
    args = ap.parse_args(argv)
    questions = list(dataset.iter_questions(args.data))
    corpus_of = {q.id: q.documents[0].id for q in questions}
    texts = {d.id: d.text for q in questions for d in q.documents if d.text}
    rows = [r for path in args.answerable for r in load(path, True, corpus_of, texts)]
    rows += [r for path in args.unanswerable for r in load(path, False, corpus_of, texts)]
    constants: Constants = CONSTANTS
    if args.constants:
        values = [float(v) for v in args.constants.split(",")]
        values += [0.0] * (5 - len(values))  # four constants: from before the names signal
        a, b, c, d, e = values[:5]
        constants = (a, b, c, d, e)
    if args.action == "compare":
        t = DEFAULT_THRESHOLD if args.threshold is None else args.threshold
        labels = args.labels or [p.stem for p in args.answerable]
        if len(labels) != len(args.answerable) or len(args.unanswerable) not in (
            0,
            len(args.answerable),
        ):
            raise SystemExit("compare: one label and one --unanswerable file per --answerable")
        print(f"constants {constants}, threshold {t}\n")
        print(compare_table(args.answerable, args.unanswerable, labels, t, constants, texts))
        return
    fit_rows = [r for r in rows if r.corpus == args.fit_corpus]
    if args.action == "fit":
        models = [("P(yes) alone", P_YES_ALONE)]
        for use in (SIGNALS[:3], SIGNALS):
            l2 = pick_l2(fit_rows, use)
            fitted = fit_logistic(fit_rows, l2, use)
            models.append((f"logistic of {', '.join(use)} (L2 {l2}, by cross-validation)", fitted))
        for name, k in models:
            t = pick_threshold(fit_rows, k, args.max_loss)
            print(f"**{name}**: constants {tuple(round(v, 4) for v in k)}, threshold {t}\n")
            print(table(rows, t, k, args.fit_corpus) + "\n")
        return
    t = args.threshold
    if t is None:
        t = pick_threshold(fit_rows, constants, args.max_loss)
    print(f"constants {constants}, threshold {t}\n")
    print(table(rows, t, constants, args.fit_corpus))


def given(rec: dict[str, Any], documents: dict[str, str], t: float, constants: Constants) -> bool:
    """Whether a record's answer is given at threshold ``t``: a checked answer when it
    scores at least ``t`` (scored again from its text), an unchecked one unless it says
    "not found"."""
    signals = record_signals(rec, documents)
    if signals is not None:
        return support_score(signals, constants) >= t
    return rec["answer"] != NOT_FOUND and "support" not in rec


def _run_rows(
    path: Path, documents: dict[str, str], t: float, constants: Constants
) -> dict[str, dict[str, float]]:
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        kept = given(rec, documents, t, constants)
        m = rec["metrics"]
        usage = rec.get("usage", {})
        out[rec["id"]] = {
            "f1": float(m.get("f1", 0.0)) if kept else 0.0,
            "em": float(m.get("em", 0.0)) if kept else 0.0,
            "rouge_l": float(m.get("rouge_l", 0.0)) if kept else 0.0,
            "not_found": 0.0 if kept else 1.0,
            "prompt_tokens": float(usage.get("prompt_tokens", 0)),
            "calls": float(usage.get("calls", 0)),
            "seconds": float(rec.get("timings", {}).get("answer_s", 0.0)),
        }
    return out


def _paired_cell(
    run: dict[str, dict[str, float]], first: dict[str, dict[str, float]], key: str
) -> str:
    common = [q for q in first if q in run]
    if not common:
        return "-"
    d = paired_bootstrap([run[q][key] for q in common], [first[q][key] for q in common])
    return f"{d.diff:+.3f} [{d.low:+.3f}, {d.high:+.3f}], {d.p_value:.3f}"


def compare_table(
    answerable: Sequence[Path],
    unanswerable: Sequence[Path],
    labels: Sequence[str],
    t: float,
    constants: Constants,
    documents: dict[str, str],
) -> str:
    """Configurations side by side at threshold ``t`` (see the module docstring)."""
    head = (
        '| evidence read | n | F1 [95%] | EM | ROUGE-L | "not found", answerable | '
        '"not found", unanswerable | prompt tokens / q | LLM calls / q | s / answer (median) | '
        "F1 - first [95%], p |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    )
    if unanswerable:  # the unanswerable questions' "not found", paired the same way
        title, rule = head.split("\n")
        head = f'{title} "not found", unanswerable - first [95%], p |\n{rule}---:|'
    runs = [_run_rows(p, documents, t, constants) for p in answerable]
    unans = [_run_rows(p, documents, t, constants) for p in unanswerable]
    lines = [head]
    for i, (label, run) in enumerate(zip(labels, runs, strict=True)):
        rows = list(run.values())

        def mean(key: str, rows: Sequence[dict[str, float]] = rows) -> float:
            return float(np.mean([r[key] for r in rows])) if rows else 0.0

        cells = [label, str(len(rows)), _iv([r["f1"] for r in rows])]
        cells += [f"{mean('em'):.3f}", f"{mean('rouge_l'):.3f}", f"{mean('not_found'):.3f}"]
        if unans:
            u = list(unans[i].values())
            cells.append(f"{mean('not_found', u):.3f} (of {len(u)})")
        else:
            cells.append("-")
        seconds = float(np.median([r["seconds"] for r in rows])) if rows else 0.0
        cells += [f"{mean('prompt_tokens'):,.0f}", f"{mean('calls'):.2f}", f"{seconds:.1f}"]
        if i == 0:
            cells.append("")
        else:
            common = [q for q in runs[0] if q in run]
            d = paired_bootstrap([run[q]["f1"] for q in common], [runs[0][q]["f1"] for q in common])
            cells.append(f"{d.diff:+.3f} [{d.low:+.3f}, {d.high:+.3f}], {d.p_value:.3f}")
        if unans:
            cells.append(_paired_cell(unans[i], unans[0], "not_found") if i else "")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def records_summary(rows: Sequence[Scored]) -> dict[str, Any]:
    """Counts for a quick look (``python -c``): questions per corpus and kind."""
    out: dict[str, Any] = {}
    for r in rows:
        key = f"{r.corpus}/{'answerable' if r.answerable else 'unanswerable'}"
        out[key] = out.get(key, 0) + 1
    return out


if __name__ == "__main__":
    main()
