"""Measure ``answer.names_floor`` on HotpotQA without generating every answer.

The floor reads only the question and the evidence the answer step selects, and bm25's
selection depends on nothing the model writes (only its tokenizer, which counts the
selection's budget). So the evidence of every question is made once with no generation
(``signals``: the answer step run with an LLM that copies words and counts tokens as the
default model does), and the support score is bounded from above by giving every answer
its best overlap (1.0, every answer word in the evidence). A question whose bound is
below the threshold is "not found" whatever the model answers; only the rest need the
model (``undecided`` writes them out for ``lcr eval``), and ``report`` joins the two::

    python -m lcr.eval.unanswerable dev.jsonl -o dev.U.jsonl
    lcr index corpus0.txt -o corpus0.idx -m bm25        # one index per corpus
    python bench/bench_names_floor.py signals dev.jsonl A.sig.jsonl corpus0=corpus0.idx ...
    python bench/bench_names_floor.py signals dev.U.jsonl U.sig.jsonl corpus0=corpus0.idx ...
    python bench/bench_names_floor.py undecided --signals U.sig.jsonl --data dev.U.jsonl \\
        --texts DIR --out U.undecided.jsonl              # the bound passes: ask the model
    lcr eval U.undecided.jsonl -m bm25 --set answer.support=0 --out U.records.jsonl
    python bench/bench_names_floor.py report --answerable A.sig.jsonl \\
        --unanswerable U.sig.jsonl --records U.records.jsonl

An answerable question the floor would withhold is listed by ``report`` (``--fired``
writes them for ``lcr eval``: their F1 is what the floor can cost).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lcr.answer.shared import NOT_FOUND
from lcr.answer.support import (
    DEFAULT_THRESHOLD,
    NAMES_FLOOR,
    SupportSignals,
    record_signals,
    support_score,
)

FLOORS = (0.0, NAMES_FLOOR)


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines()]


def bound(signals: dict[str, float], floor: float) -> float:
    """The highest support score any answer can get from this evidence: every answer word
    in it (overlap 1.0); the model's P(yes) weighs nothing in the shipped constants."""
    best = SupportSignals(None, 1.0, signals["coverage"], None, signals["names"])
    return support_score(best, names_floor=floor)


def caught(
    question: dict[str, Any],
    record: dict[str, Any] | None,
    floor: float,
    documents: dict[str, str] | None = None,
) -> bool | None:
    """Whether the check says "not found" to an unanswerable question: by the bound, or by
    the model's recorded answer and its signals (None: undecided and no record), measured
    again from the record's text when ``documents`` (name -> text) are given, so records
    made before a change to the signals are read as the code now reads them."""
    if bound(question["signals"], floor) < DEFAULT_THRESHOLD:
        return True
    if record is None:
        return None
    if record["answer"] == NOT_FOUND:
        return True
    signals = record_signals(record, documents) if documents is not None else None
    if signals is None:
        g = record["support_signals"]
        signals = SupportSignals(g.get("p_yes"), g["overlap"], g["coverage"], None, g["names"])
    return support_score(signals, names_floor=floor) < DEFAULT_THRESHOLD


def report(
    answerable: Sequence[dict[str, Any]],
    unanswerable: Sequence[dict[str, Any]],
    records: dict[str, dict[str, Any]],
    documents: dict[str, str] | None = None,
) -> str:
    """A Markdown table: for each floor, the answerable questions it withholds at any
    answer (names below it), and the unanswerable ones said "not found"."""
    lines = [
        '| names floor | answerable withheld by the floor | unanswerable "not found" | undecided |',
        "|---|---:|---:|---:|",
    ]
    for floor in FLOORS:
        fired = sum(q["signals"]["names"] < floor for q in answerable)
        verdicts = [caught(q, records.get(q["id"]), floor, documents) for q in unanswerable]
        yes = sum(v is True for v in verdicts)
        open_ = sum(v is None for v in verdicts)
        lines.append(
            f"| {floor} | {fired} of {len(answerable)} | {yes} of {len(unanswerable)} "
            f"({yes / max(len(unanswerable), 1):.3f}) | {open_} |"
        )
    return "\n".join(lines)


def _signals(args: argparse.Namespace) -> None:
    from lcr import api
    from lcr.estimate.tokenizers import load_tokenizer
    from lcr.models.container import Models
    from lcr.models.spec import ModelSpec
    from lcr.testing import ScriptedLLM

    spec = ModelSpec()
    tokenizer = load_tokenizer(spec.llm, "llamacpp", spec)

    class Counting(ScriptedLLM):
        """Copies words; counts tokens as the default model does (the budget's unit)."""

        def count_tokens(self, text: str) -> int:
            return tokenizer.count_tokens(text)

        @property
        def context_window(self) -> int:
            return tokenizer.context_window

    indexes = {name: api.open_index(path) for name, path in (a.split("=", 1) for a in args.index)}
    models = Models.with_objects(llm=Counting(words=3))
    with open(args.out, "w", encoding="utf-8") as out:
        for q in read_jsonl(args.data):
            corpus = q["documents"][0]["id"]
            settings = {"answer.support": 0}
            res = api.ask(
                indexes[corpus], q["question"], method=args.method, settings=settings, models=models
            )
            row = {"id": q["id"], "corpus": corpus, "question": q["question"]}
            out.write(json.dumps({**row, "signals": res.support["support_signals"]}) + "\n")


def _subset(data: str, ids: set[str], texts: Path, out: str) -> int:
    """The questions of ``data`` named in ``ids``, each corpus's text inline at its first
    use (the file may name a corpus before giving it)."""
    given: set[str] = set()
    written = 0
    with open(out, "w", encoding="utf-8") as f:
        for q in read_jsonl(data):
            if q["id"] not in ids:
                continue
            doc = q["documents"][0]
            if doc["id"] not in given:
                doc["text"] = (texts / f"{doc['id']}.txt").read_text(encoding="utf-8")
                given.add(doc["id"])
            f.write(json.dumps(q) + "\n")
            written += 1
    return written


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sig = sub.add_parser("signals", help="evidence signals of every question, no generation")
    sig.add_argument("data")
    sig.add_argument("out")
    sig.add_argument("index", nargs="+", help="CORPUS=PATH.idx, one per corpus")
    sig.add_argument("--method", default="bm25", help="a method whose evidence needs no LLM")
    und = sub.add_parser("undecided", help="write the questions the bound cannot decide")
    und.add_argument("--signals", required=True)
    und.add_argument("--data", required=True)
    und.add_argument("--texts", type=Path, required=True, help="folder of CORPUS.txt")
    und.add_argument("--out", required=True)
    und.add_argument("--fired", action="store_true", help="answerable: those the floor fires on")
    rep = sub.add_parser("report")
    rep.add_argument("--answerable", required=True)
    rep.add_argument("--unanswerable", required=True)
    rep.add_argument("--records", nargs="*", default=[])
    rep.add_argument("--texts", type=Path, help="folder of CORPUS.txt: read the records again")
    args = parser.parse_args(argv)
    if args.command == "signals":
        _signals(args)
    elif args.command == "undecided":
        rows = read_jsonl(args.signals)
        if args.fired:
            ids = {q["id"] for q in rows if q["signals"]["names"] < NAMES_FLOOR}
        else:
            ids = {q["id"] for q in rows if bound(q["signals"], 0.0) >= DEFAULT_THRESHOLD}
        print(f"{_subset(args.data, ids, args.texts, args.out)} questions in {args.out}")
    else:
        records = {r["id"]: r for path in args.records for r in read_jsonl(path)}
        documents = None
        if args.texts is not None:
            documents = {p.stem: p.read_text(encoding="utf-8") for p in args.texts.glob("*.txt")}
        questions = read_jsonl(args.answerable), read_jsonl(args.unanswerable)
        print(report(*questions, records, documents))


if __name__ == "__main__":
    main()
