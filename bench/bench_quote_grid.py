"""Issue 53: the quote check's tolerances chosen offline, from replies generated once.

The quote check (``answer.check=quote``) is a function of the model's reply and the
evidence it read, so the replies are generated once, with the quote prompt, and
kept with their evidence (``lcr eval`` records carry ``quote_check.reply``)::

    lcr eval dev.A.jsonl -m bm25 --set answer.check=quote --out A.jsonl
    lcr eval dev.U.jsonl -m bm25 --set answer.check=quote --out U.jsonl

Then every tolerance costs nothing: ``grid`` applies :func:`lcr.answer.quotes.check_quotes`
under each :class:`~lcr.answer.quotes.Tolerance` and each way of combining it with the
support check (the fallback lcr 0.1 offered), and prints F1 on the answerable questions,
"not found" on answerable and unanswerable ones, and the score that chooses: the mean
over all questions of F1 (answerable) or 1 for "not found" (unanswerable), as SQuAD
2.0 scores unanswerable questions. ``failures`` prints the answerable replies one
configuration withholds, with why, to be read by hand. ``apply`` scores one
configuration (by default lcr's own: the frozen settings) on records and writes them
again as that configuration would have answered, for ``bench/archive/bench_quotes.py``::

    python bench/bench_quote_grid.py grid --index-dir IDX --answerable A.jsonl \\
        --unanswerable U.jsonl
    python bench/bench_quote_grid.py failures --index-dir IDX --answerable A.jsonl --pieces 3
    python bench/bench_quote_grid.py apply --index-dir IDX --records A.jsonl --out A.checked.jsonl

The support check's score is computed again from each record's text
(:func:`lcr.answer.support.signals_of`, no P(yes): the shipped constants give it no
weight), on the answer of the quote prompt's reply.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from lcr.answer import quotes
from lcr.answer.quotes import QuoteCheck, Tolerance, check_quotes
from lcr.answer.selection import paragraph_leads
from lcr.answer.shared import NOT_FOUND, AnswerSettings, says_not_found
from lcr.answer.support import DEFAULT_THRESHOLD, signals_of, support_score
from lcr.eval import metrics
from lcr.evidence import EvidenceItem

FALLBACKS = ("none", "support", "both")
"""What a reply's quote check decides with the support check: ``none`` (the quote
alone), ``support`` (a reply the quote check withholds is given when its support
score passes), ``both`` (the quote must hold and the score pass)."""


@dataclass(frozen=True)
class Reply:
    """One record: the reply as generated, what it read, and how it scores."""

    id: str
    answerable: bool
    question: str
    answers: tuple[str, ...]
    reply: str | None  # None: the model said "not found" (no check ran)
    items: tuple[EvidenceItem, ...]
    source: str
    support: float


@cache
def _source(path: str) -> str:
    return Path(path).read_text(encoding="utf-8")


def evidence_items(rec: dict) -> tuple[EvidenceItem, ...]:
    """The evidence an eval record says was read, as the items the checks take."""
    return tuple(
        EvidenceItem(
            str(it["id"]),
            int(it["doc"]),
            0,
            float(it["score"]),
            str(it["text"]),
            [(int(s), int(e)) for s, e in it["spans"]],
        )
        for it in rec["evidence"]
    )


def load(path: str, answerable: bool, index_dir: str) -> list[Reply]:
    out: list[Reply] = []
    seen: set[str] = set()
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        if rec["id"] in seen:
            continue
        seen.add(rec["id"])
        source = _source(str(Path(index_dir) / rec["index"] / "source.txt"))
        items = evidence_items(rec)
        check = rec.get("quote_check")
        reply = None if check is None else str(check["reply"])
        if reply is not None and says_not_found(reply):
            reply = None
        answer = "" if check is None else split_answer(reply or "")
        out.append(
            Reply(
                str(rec["id"]),
                answerable,
                str(rec["question"]),
                tuple(rec["answers"]),
                reply,
                items,
                source,
                _support(str(rec["question"]), answer, items, source),
            )
        )
    return out


def split_answer(reply: str) -> str:
    from lcr.answer.quotes import split_reply

    return split_reply(reply).answer


def _support(question: str, answer: str, items: Sequence[EvidenceItem], source: str) -> float:
    if not answer or not items:
        return 0.0
    leads = paragraph_leads([span for it in items for span in it.spans], source)
    evidence = "\n".join(it.text for it in items)
    return support_score(signals_of(None, question, answer, evidence, None, leads))


_LOCATE = quotes.locate
_FOUND: dict[tuple[str, int, Tolerance], quotes.Quote | None] = {}


def _locate(
    quote: str, items: Sequence[EvidenceItem], source: str, tol: Tolerance = quotes.EXACT
) -> quotes.Quote | None:
    """:func:`lcr.answer.quotes.locate`, remembered: where the answer's words must be
    does not change where a quote is (the grid asks the same thing many times)."""
    key = (quote, id(items), dataclasses.replace(tol, answer_in="quote"))
    if key not in _FOUND:
        _FOUND[key] = _LOCATE(quote, items, source, tol)
    return _FOUND[key]


quotes.locate = _locate  # type: ignore[assignment]  # the grid's memo, this script only
_CHECKED: dict[tuple[str, Tolerance], QuoteCheck] = {}


def decide(r: Reply, tol: Tolerance, fallback: str) -> tuple[str, QuoteCheck | None]:
    """The answer given (or :data:`NOT_FOUND`) under ``tol`` and ``fallback``."""
    if r.reply is None:
        return NOT_FOUND, None
    key = (r.id, tol)
    if key not in _CHECKED:
        _CHECKED[key] = check_quotes(r.reply, r.question, r.items, r.source, tol)
    checked = _CHECKED[key]
    passes = r.support >= DEFAULT_THRESHOLD
    given = {
        "none": checked.holds,
        "support": checked.holds or passes,
        "both": checked.holds and passes,
    }[fallback]
    return (checked.answer if given else NOT_FOUND), checked


def f1(answer: str, gold: Sequence[str]) -> float:
    if answer == NOT_FOUND:
        return 0.0
    return float(metrics.answer_scores(answer, list(gold)).get("f1", 0.0))


@dataclass(frozen=True)
class Score:
    f1: float
    nf_answerable: float
    nf_unanswerable: float
    overall: float


def score(replies: Sequence[Reply], tol: Tolerance, fallback: str) -> Score:
    f1s, nfa, nfu = [], [], []
    for r in replies:
        answer, _ = decide(r, tol, fallback)
        if r.answerable:
            f1s.append(f1(answer, r.answers))
            nfa.append(float(answer == NOT_FOUND))
        else:
            nfu.append(float(answer == NOT_FOUND))
    n = len(f1s) + len(nfu)
    return Score(
        sum(f1s) / max(len(f1s), 1),
        sum(nfa) / max(len(nfa), 1),
        sum(nfu) / max(len(nfu), 1),
        (sum(f1s) + sum(nfu)) / max(n, 1),
    )


def tolerances() -> Iterable[Tolerance]:
    for pieces, spread, added, words, where, align in itertools.product(
        (1, 2, 3, 4, 6),
        (200, 400, 800, 100_000),
        (0, 2, 4, 8),
        (2, 3, 4),
        ("quote", "item", "evidence"),
        ("greedy", "blocks"),
    ):
        run = quotes.MIN_RUN_WORDS
        yield Tolerance(words, run, added, pieces, spread, where, align)  # type: ignore[arg-type]


def frozen() -> tuple[Tolerance, str]:
    """lcr's own quote check: the verify stage's tolerance; a failed quote is withheld
    (no fallback since 0.2.0)."""
    return AnswerSettings().quote_tolerance(), "none"


def _label(tol: Tolerance, fallback: str) -> str:
    return (
        f"pieces={tol.pieces} spread={tol.spread} added={tol.added} words={tol.min_words} "
        f"answer_in={tol.answer_in} align={tol.align} fallback={fallback}"
    )


def grid(replies: Sequence[Reply], top: int) -> None:
    guess = [f1(split_answer(r.reply or ""), r.answers) if r.reply else 0.0 for r in replies]
    answerable = [g for g, r in zip(guess, replies, strict=True) if r.answerable]
    print(f"withholding nothing: F1 {sum(answerable) / max(len(answerable), 1):.3f}")
    rows = []
    for tol in tolerances():
        for fallback in FALLBACKS:
            rows.append((score(replies, tol, fallback), tol, fallback))
    base = score(replies, Tolerance(), "none")
    support = _support_alone(replies)
    print(f"support check alone: {_shown(support)}")
    print(f"quote check as built: {_shown(base)}")
    # the rule, fixed before the unanswerable replies were read: the best overall score;
    # ties to the more "not found" on unanswerable questions, then to no fallback (every
    # answer shown carries a verified quote), then to the fewest changes from as built
    rows.sort(
        key=lambda row: (
            -round(row[0].overall, 9),
            -row[0].nf_unanswerable,
            row[2] != "none",
            _changes(row[1]),
        )
    )
    for s, tol, fallback in rows[:top]:
        print(f"{_shown(s)}  {_label(tol, fallback)}")
    own_tol, own_fallback = frozen()
    print(f"lcr's frozen settings: {_shown(score(replies, own_tol, own_fallback))}")


def _changes(tol: Tolerance) -> int:
    built = Tolerance()
    return sum(getattr(tol, f.name) != getattr(built, f.name) for f in dataclasses.fields(tol))


def _support_alone(replies: Sequence[Reply]) -> Score:
    # the support check on the quote prompt's answers: fallback "support" with no quote holding
    never = Tolerance(min_words=10_000)
    return score(replies, never, "support")


def _shown(s: Score) -> str:
    return (
        f"overall {s.overall:.3f} F1 {s.f1:.3f} not found: answerable {s.nf_answerable:.2f}"
        f" unanswerable {s.nf_unanswerable:.2f}"
    )


def failures(replies: Sequence[Reply], tol: Tolerance, fallback: str) -> None:
    for r in replies:
        answer, checked = decide(r, tol, fallback)
        wrong = (answer == NOT_FOUND) == r.answerable
        if not wrong:
            continue
        kind = "withheld" if r.answerable else "given"
        print(f"--- {r.id} {kind}: {r.question} gold={list(r.answers)} support={r.support:.2f}")
        print(f"reply: {r.reply!r}")
        if checked is not None:
            print(f"problem: {checked.problem!r} unfound={list(checked.unfound)}")


def apply(path: str, index_dir: str, out: str, tol: Tolerance, fallback: str) -> None:
    """Records rewritten as ``tol`` and ``fallback`` would have answered (F1, EM, answer,
    ``withheld_answer``), for ``bench/archive/bench_quotes.py``."""
    replies = {r.id: r for r in load(path, True, index_dir)}
    lines = []
    done: set[str] = set()
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        if rec["id"] in done:
            continue
        done.add(rec["id"])
        r = replies[rec["id"]]
        answer, checked = decide(r, tol, fallback)
        rec["answer"] = answer
        if checked is not None and answer == NOT_FOUND:
            rec["withheld_answer"] = checked.answer
        else:
            rec.pop("withheld_answer", None)
        scores = metrics.answer_scores(answer, list(r.answers)) if r.answers else {}
        rec["metrics"].update({k: v for k, v in scores.items() if k in ("f1", "em", "rouge_l")})
        rec["quote_grid"] = {"setting": _label(tol, fallback), "support": round(r.support, 4)}
        lines.append(json.dumps(rec, ensure_ascii=False))
    Path(out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{len(lines)} records to {out} ({_label(tol, fallback)})")


def _tolerance(args: argparse.Namespace) -> tuple[Tolerance, str]:
    tol, fallback = frozen()
    given = {
        k: getattr(args, k)
        for k in ("pieces", "spread", "added", "min_words", "answer_in", "align")
        if getattr(args, k) is not None
    }
    return dataclasses.replace(tol, **given), args.fallback or fallback


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("grid", "failures", "apply"))
    parser.add_argument("--index-dir", required=True)
    parser.add_argument("--answerable", action="append", default=[])
    parser.add_argument("--unanswerable", action="append", default=[])
    parser.add_argument("--records", help="apply: the records to rewrite")
    parser.add_argument("--out", help="apply: where to write them")
    parser.add_argument("--top", type=int, default=25)
    for name in ("pieces", "spread", "added", "min_words"):
        parser.add_argument(f"--{name.replace('_', '-')}", dest=name, type=int)
    parser.add_argument("--answer-in", choices=("quote", "item", "evidence"))
    parser.add_argument("--align", choices=("greedy", "blocks"))
    parser.add_argument("--fallback", choices=FALLBACKS)
    args = parser.parse_args(argv)
    tol, fallback = _tolerance(args)
    if args.command == "apply":
        if not args.records or not args.out:
            parser.error("apply needs --records and --out")
        apply(args.records, args.index_dir, args.out, tol, fallback)
        return
    replies = [r for p in args.answerable for r in load(p, True, args.index_dir)]
    replies += [r for p in args.unanswerable for r in load(p, False, args.index_dir)]
    print(
        f"{sum(r.answerable for r in replies)} answerable, "
        f"{sum(not r.answerable for r in replies)} unanswerable replies"
    )
    if args.command == "grid":
        grid(replies, args.top)
    else:
        failures(replies, tol, fallback)


if __name__ == "__main__":
    main()
