"""Issue 53: how often a question's term is one its document never writes
(``answer.term_zipf``, :mod:`lcr.answer.terms`), with no model and no index: each
question against the text it is answered from, and against every other text of its set.

    python bench/archive/bench_terms.py ../shared/data/hotpotqa/dev.jsonl --floor 2.5 --floor 3
    python bench/archive/bench_terms.py ../shared/data/squality/dev.jsonl --floor 3

HotpotQA files (``documents``: each question names its corpus; the corpus text is given
once), SQuALITY files (one story and its questions a line) and QMSum files (one meeting's
transcript and its queries a line) are read. For each
floor it prints: questions whose own text lacks one of their terms (the answers the rule
would withhold), the (question, other text) pairs it would answer "not found" without a
call, and, with ``--list``, the own-text misses. Reporting only: a floor is chosen on dev
sets; a test set is read once the floor is frozen.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout's lcr
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: many_documents

from many_documents import wilson

from lcr.answer.terms import absent_terms, question_terms


def load(path: Path) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """The texts by name, and (question, name of the text that answers it) pairs."""
    texts: dict[str, str] = {}
    asked: list[tuple[str, str]] = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        row = json.loads(line)
        if "documents" in row:  # HotpotQA: the corpus named, its text on one line only
            for doc in row["documents"]:
                if "text" in doc:
                    texts.setdefault(doc["id"], doc["text"])
            asked.append((row["question"], row["documents"][0]["id"]))
        elif "meeting_transcripts" in row:  # QMSum: a meeting and its queries
            turns = row["meeting_transcripts"]
            texts[f"meeting{n}"] = "\n".join(f"{t['speaker']}: {t['content']}" for t in turns)
            queries = row["general_query_list"] + row["specific_query_list"]
            asked += [(q["query"], f"meeting{n}") for q in queries]
        else:  # SQuALITY: a story and its questions
            texts[f"story{n}"] = row["document"]
            asked += [(q["question_text"], f"story{n}") for q in row["questions"]]
    return texts, asked


def measure(
    texts: dict[str, str], asked: Sequence[tuple[str, str]], floor: float
) -> tuple[list[tuple[str, list[str]]], int, int]:
    """Own-text misses (question, its absent terms), and the other-text pairs: absent, all."""
    own: list[tuple[str, list[str]]] = []
    absent = pairs = 0
    for question, name in asked:
        terms = question_terms(question, floor)
        for other, text in texts.items():
            missing = absent_terms(terms, text)
            if other == name:
                if missing:
                    own.append((question, missing))
            else:
                pairs += 1
                absent += bool(missing)
    return own, absent, pairs


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", type=Path, help="a HotpotQA or SQuALITY jsonl file")
    ap.add_argument("--floor", type=float, action="append", help="answer.term_zipf values")
    ap.add_argument("--list", action="store_true", help="print the own-text misses")
    args = ap.parse_args(argv)
    texts, asked = load(args.data)
    print(f"{args.data.name}: {len(asked)} questions, {len(texts)} texts\n")
    print("| `answer.term_zipf` | own text lacks a term | other texts lack a term |")
    print("|---:|---:|---:|")
    for floor in args.floor or [3.0]:
        own, absent, pairs = measure(texts, asked, floor)
        share, lo, hi = wilson(absent, pairs)
        print(
            f"| {floor:g} | {len(own)}/{len(asked)} | "
            f"{absent}/{pairs} = {share:.2f} [{lo:.2f}, {hi:.2f}] |"
        )
        if args.list:
            for question, missing in own:
                print(f"|  | {question[:70]}: {', '.join(missing)} | |")


if __name__ == "__main__":
    main()
