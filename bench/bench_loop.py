"""Issue 53: one question asked of many single-document indexes, one of which holds the
answer (a new user's shell loop over their manuals).

    python bench/bench_loop.py run --indexes LIST --questions Q.jsonl --work DIR
    python bench/bench_loop.py summary --indexes LIST --questions Q.jsonl --work DIR

``LIST`` names the indexes, one path a line, in the order they are asked. ``Q.jsonl``
holds one question a line, written before any answer was read: ``question``;
``document``, the name of the index that holds the answer (its file name without
``.idx``); ``answer``, the answer as read in that document; ``right``, a list of
groups of regular expressions (case-insensitive; ``(?-i:...)`` for a case that
matters): an answer is judged right when every expression of some group occurs in it
(:func:`judge`). Optional ``where`` and ``elsewhere`` say where the answer was read and
where its key words occur in other documents; optional ``also`` names other indexes found
to hold the answer too (in other words): they are counted neither as the own document nor
among the others, and their answers are listed apart.

``run`` asks each question the way a user would, with the CLI in a fresh process: once
``lcr ask IDX... QUESTION --each --json -q`` (an answer from each index alone), then
once without ``--each`` (one answer from the best evidence across all of them), every
setting at its default. It writes ``WORK/qN.each.jsonl`` and ``WORK/qN.pooled.jsonl``
(the ``--json`` records as printed) and appends the process's wall seconds and the
load average to ``WORK/runs.jsonl``; a question whose two files are complete is skipped.

``summary`` prints: the share of "not found" from the indexes that do not hold the answer
(per question and pooled, Wilson 95% intervals), how each of those "not found" came
(no evidence shared a word with the question; the model's own reply; withheld by the
names floor, by the support score, or by the quote check), the own document's answers
judged right / wrong / "not found", the pooled answers judged the same way and the
index their best evidence came from, the seconds per answer, and every answer given by
an index that does not hold the answer, with its support signals. Reporting only:
nothing here chooses a setting.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from many_documents import wilson

NOT_FOUND = "not found in the document"  # lcr.answer.replies.NOT_FOUND, as --json prints it
MODES = ("each", "pooled")


@dataclass(frozen=True)
class Question:
    question: str
    document: str  # the index that holds the answer, by name
    answer: str
    right: tuple[tuple[str, ...], ...]
    where: str = ""
    elsewhere: str = ""
    also: tuple[str, ...] = ()  # other indexes that hold the answer too


def load_questions(path: Path) -> list[Question]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        q = json.loads(line)
        groups = tuple(tuple(group) for group in q["right"])
        if not groups or not all(groups):
            raise SystemExit(f"{path}: {q['question']!r} has no answer patterns")
        out.append(
            Question(
                q["question"],
                q["document"],
                q["answer"],
                groups,
                q.get("where", ""),
                q.get("elsewhere", ""),
                tuple(q.get("also", ())),
            )
        )
    return out


def index_name(path: str) -> str:
    """An index's name: its directory's name without ``.idx``."""
    name = Path(path.rstrip("/")).name
    return name[: -len(".idx")] if name.endswith(".idx") else name


def judge(answer: str, right: Sequence[Sequence[str]]) -> bool:
    """Whether ``answer`` holds every expression of some group of ``right``."""
    return any(all(re.search(p, answer, re.IGNORECASE) for p in group) for group in right)


def verdict(record: dict[str, Any], question: Question) -> str:
    """Verdict: "right", "wrong" or "not found", against the answer read in the document."""
    if record["answer"] == NOT_FOUND:
        return "not found"
    return "right" if judge(record["answer"], question.right) else "wrong"


def why_not_found(record: dict[str, Any]) -> str:
    """How a "not found" came: no evidence to read (no LLM call), the model's own reply,
    or a reply withheld by the quote check, the names floor or the support score; or no
    call at all, for a term of the question the document never writes."""
    if (record.get("info") or {}).get("absent"):
        return "a term never written"
    if record["usage"].get("calls", 0) == 0:
        return "no evidence"
    if "withheld_answer" not in record:
        return "the model's reply"
    problem = (record.get("quote_check") or {}).get("problem")
    if problem:
        return "withheld: quote"
    if (record.get("info") or {}).get("never_read"):
        return "withheld: words never read"
    floor = float(record.get("answer_settings", {}).get("names_floor", 0.0))
    names = (record.get("support_signals") or {}).get("names")
    if names is not None and float(names) < floor:
        return "withheld: names floor"
    return "withheld: support"


REASONS = (
    "a term never written",
    "no evidence",
    "the model's reply",
    "withheld: names floor",
    "withheld: support",
    "withheld: quote",
    "withheld: words never read",
)


def decide_again(record: dict[str, Any]) -> dict[str, Any]:
    """An ``--each`` record as today's defaults decide its reply, with no LLM call: a
    question whose term the document never writes is "not found" unasked
    (``answer.term_zipf``); otherwise the support check (its names floor included)
    scored again from the record's text, then the step's grounding
    (``answer.located_floor``). A reply the model itself gave as
    "not found", or no evidence, stays as it is."""
    from bench_quote_grid import evidence_items

    from lcr.answer.grounding import ground, unwritten_terms
    from lcr.answer.shared import AnswerResult, AnswerSettings
    from lcr.answer.support import DEFAULT_THRESHOLD, record_signals, support_score

    source = (Path(record["index"]) / "source.txt").read_text(encoding="utf-8")
    absent = unwritten_terms(str(record["question"]), AnswerSettings(), source)
    if absent:  # asked today, the model would not be: a term the document never writes
        info = {**(record.get("info") or {}), "absent": ", ".join(absent)}
        return dict(record, answer=NOT_FOUND, info=info, usage={"calls": 0})
    reply = str(record.get("withheld_answer") or record["answer"])
    if reply == NOT_FOUND:
        return record
    again = {k: v for k, v in record.items() if k != "withheld_answer"}
    again["answer"] = reply
    signals = record_signals(
        again, {str(it.get("document", "")): source for it in record["evidence"]}
    )
    if signals is not None:
        score = support_score(signals)
        again.update(support=round(score, 4), support_signals=signals.to_json())
        settings = dict(record.get("answer_settings", {}), names_floor=AnswerSettings().names_floor)
        again["answer_settings"] = settings
        if score < DEFAULT_THRESHOLD:
            return dict(again, answer=NOT_FOUND, withheld_answer=reply)
    step = AnswerResult(reply, list(evidence_items(again)), 0)
    got = ground(str(record["question"]), step, AnswerSettings(), source)
    if got.text == NOT_FOUND:
        info = {**(record.get("info") or {}), **got.info, "never_read": 1}
        return dict(again, answer=NOT_FOUND, withheld_answer=reply, info=info)
    return again


def own_and_others(
    records: list[dict[str, Any]], question: Question
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The ``--each`` records of the index that holds the answer, and of the indexes that
    do not (those of ``question.also`` are in neither)."""
    own = [r for r in records if index_name(r["index"]) == question.document]
    holding = {question.document, *question.also}
    others = [r for r in records if index_name(r["index"]) not in holding]
    return own, others


def also_holding(records: list[dict[str, Any]], question: Question) -> list[dict[str, Any]]:
    """The records of the indexes found to hold the answer too."""
    return [r for r in records if index_name(r["index"]) in question.also]


def share(flags: Sequence[bool]) -> str:
    p, low, high = wilson(sum(flags), len(flags))
    return f"{sum(flags)}/{len(flags)} = {p:.2f} [{low:.2f}, {high:.2f}]"


def echo(answer: str, question: str) -> str:
    """How many of the answer's content words the question already holds (words the
    support check's overlap finds in any evidence that shares the question's words)."""
    from lcr.answer.support import content_words

    words = content_words(answer)
    asked = set(content_words(question))
    return f"{sum(w in asked for w in words)}/{len(words)}"


def signals(record: dict[str, Any]) -> str:
    """The support check's signals of one answer, with the names the question gives
    (none: ``names`` is 1.0 by definition) and the answer's words the question holds."""
    from lcr.answer.support import question_names

    s = record.get("support_signals") or {}
    info = record.get("info") or {}
    parts = [f"support {record.get('support')}"]
    parts += [f"{k} {s[k]:.2f}" for k in ("overlap", "coverage", "names") if k in s]
    names = [" ".join(n) for n in question_names(record["question"])]
    parts.append(f"question's names: {', '.join(names) or 'none'}")
    parts.append(f"answer words in the question {echo(record['answer'], record['question'])}")
    if info.get("located") == 1:
        parts.append("a quote located")
    elif "located_words" in info:
        parts.append(f"quotes hold {info['located_words']} of its words")
    return ", ".join(parts)


def evidence_index(record: dict[str, Any]) -> str:
    """The index a pooled answer's best piece of evidence came from."""
    evidence = record.get("evidence") or []
    if not evidence:
        return "-"
    best = min(evidence, key=lambda e: e.get("rank", 0))
    return index_name(str(best.get("index", "?")))


def load_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def complete(work: Path, number: int, indexes: Sequence[str]) -> bool:
    each = load_jsonl(work / f"q{number}.each.jsonl")
    return len(each) == len(indexes) and len(load_jsonl(work / f"q{number}.pooled.jsonl")) == 1


def run(indexes: list[str], questions: list[Question], work: Path, lcr: list[str]) -> None:
    work.mkdir(parents=True, exist_ok=True)
    for number, q in enumerate(questions, start=1):
        if complete(work, number, indexes):
            continue
        for mode in MODES:
            flag = ["--each"] if mode == "each" else []
            command = [*lcr, "ask", *indexes, q.question, *flag, "--json", "-q"]
            start = time.monotonic()
            with (work / f"q{number}.{mode}.jsonl").open("w", encoding="utf-8") as out:
                rc = subprocess.run(command, stdout=out, check=False).returncode
            wall = time.monotonic() - start
            row = {"q": number, "mode": mode, "rc": rc, "wall_s": round(wall, 1)}
            row["load"] = [round(x, 2) for x in os.getloadavg()]
            with (work / "runs.jsonl").open("a", encoding="utf-8") as f:
                f.write(json.dumps(row) + "\n")
            print(f"q{number} {mode}: rc {rc}, {wall:.0f} s, load {row['load']}", flush=True)


def per_question_rows(
    questions: list[Question], each: dict[int, list[dict[str, Any]]]
) -> list[list[str]]:
    rows = []
    for number, q in enumerate(questions, start=1):
        own, others = own_and_others(each[number], q)
        said = [f"{verdict(r, q)}: {r['answer'][:70]!r}" for r in own] or ["(no record)"]
        answered = [index_name(r["index"]) for r in others if r["answer"] != NOT_FOUND]
        hits = [r["answer"] == NOT_FOUND for r in others]
        rows.append(
            [
                str(number),
                q.question,
                q.document,
                "; ".join(said),
                f"{sum(hits)}/{len(hits)}",
                ", ".join(answered) or "-",
            ]
        )
    return rows


def totals(questions: list[Question], each: dict[int, list[dict[str, Any]]]) -> dict[str, Any]:
    """The pooled figures over every question: others' "not found" flags, how each came,
    the own documents' verdicts, and the per-question shares."""
    flags: list[bool] = []
    reasons = dict.fromkeys(REASONS, 0)
    verdicts = {"right": 0, "wrong": 0, "not found": 0}
    shares = []
    for number, q in enumerate(questions, start=1):
        own, others = own_and_others(each[number], q)
        hits = [r["answer"] == NOT_FOUND for r in others]
        flags += hits
        shares.append(sum(hits) / len(hits) if hits else float("nan"))
        for r in others:
            if r["answer"] == NOT_FOUND:
                reasons[why_not_found(r)] += 1
        for r in own:
            verdicts[verdict(r, q)] += 1
    return {"flags": flags, "reasons": reasons, "verdicts": verdicts, "shares": shares}


def seconds(records: list[dict[str, Any]]) -> str:
    called = [r for r in records if r["usage"].get("calls", 0) > 0]
    if not called:
        return "-"
    answer = [float(r["timings"].get("answer_s", 0.0)) for r in called]
    prompt = statistics.mean(r["usage"].get("prompt_tokens", 0) for r in called)
    reply = statistics.mean(r["usage"].get("completion_tokens", 0) for r in called)
    return (
        f"answer step {statistics.mean(answer):.1f} s mean, {statistics.median(answer):.1f}"
        f" median, {min(answer):.1f}-{max(answer):.1f} (n={len(called)} LLM calls of"
        f" {len(records)}); {prompt:.0f} prompt + {reply:.0f} reply tokens"
    )


def walls(runs: list[dict[str, Any]], numbers: Sequence[int]) -> None:
    """Each ``lcr ask`` process's wall seconds (the model's load included), by mode."""
    for mode in MODES:
        rows = [r for r in runs if r["mode"] == mode and r["q"] in numbers]
        if rows:
            s = [float(r["wall_s"]) for r in rows]
            loads = [float(r["load"][0]) for r in rows]
            print(
                f"\nlcr ask processes, {mode}: {statistics.mean(s):.0f} s mean,"
                f" {min(s):.0f}-{max(s):.0f} (n={len(s)}); load average"
                f" {min(loads):.1f}-{max(loads):.1f}"
            )


def table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for row in rows:
        print("| " + " | ".join(c.replace("|", "\\|") for c in row) + " |")


def summary(indexes: list[str], questions: list[Question], work: Path, again: bool = False) -> None:
    numbers = [n for n in range(1, len(questions) + 1) if complete(work, n, indexes)]
    asked = [questions[n - 1] for n in numbers]
    each = {i: load_jsonl(work / f"q{n}.each.jsonl") for i, n in enumerate(numbers, start=1)}
    if again:  # the --each replies decided by today's checks; pooled ones as recorded
        each = {i: [decide_again(r) for r in rs] for i, rs in each.items()}
        print("--each replies decided again by today's defaults (pooled: as recorded)\n")
    pooled = {i: load_jsonl(work / f"q{n}.pooled.jsonl") for i, n in enumerate(numbers, start=1)}
    t = totals(asked, each)
    print(f"{len(asked)} questions, each asked of {len(indexes)} indexes\n")
    v = t["verdicts"]
    pooled_v = {"right": 0, "wrong": 0, "not found": 0}
    for i, q in enumerate(asked, start=1):
        for r in pooled[i]:
            pooled_v[verdict(r, q)] += 1
    every = [r for rs in each.values() for r in rs]
    planned = [
        r["answer"] == NOT_FOUND
        for i, q in enumerate(asked, start=1)
        for r in each[i]
        if index_name(r["index"]) != q.document
    ]
    shares = ", ".join(f"{s:.2f}" for s in t["shares"])
    table(
        ["", "--each over all indexes"],
        [
            ['"not found" from the indexes without the answer', share(t["flags"])],
            ["the same, per question", shares],
            ['the same, with the indexes of "also" counted as others', share(planned)],
            [
                'how those "not found" came: ' + " / ".join(REASONS),
                " / ".join(str(t["reasons"][k]) for k in REASONS),
            ],
            [
                "own document's answer: right / wrong / not found",
                f"{v['right']} / {v['wrong']} / {v['not found']}",
            ],
            [
                "one answer from all indexes (no --each): right / wrong / not found",
                f"{pooled_v['right']} / {pooled_v['wrong']} / {pooled_v['not found']}",
            ],
            ["seconds and tokens per answer (--each)", seconds(every)],
        ],
    )
    print()
    table(
        ["#", "question", "holds the answer", "its answer", "others not found", "others answering"],
        per_question_rows(asked, each),
    )
    print("\nAnswers from indexes found to hold the answer too:")
    for i, q in enumerate(asked, start=1):
        for r in also_holding(each[i], q):
            said = f"{verdict(r, q)}: {r['answer'][:100]!r}"
            print(f"  q{numbers[i - 1]} {index_name(r['index'])}: {said}")
    print("\nAnswers from indexes that do not hold the answer:")
    for i, q in enumerate(asked, start=1):
        _, others = own_and_others(each[i], q)
        for r in others:
            if r["answer"] != NOT_FOUND:
                print(f"  q{numbers[i - 1]} {index_name(r['index'])}: {r['answer'][:110]!r}")
                print(f"      {signals(r)}")
    walls(load_jsonl(work / "runs.jsonl"), numbers)
    print("\nOne answer from all indexes (no --each):")
    for i, q in enumerate(asked, start=1):
        for r in pooled[i]:
            said = f"{verdict(r, q)}: {r['answer'][:90]!r}"
            quoted = ", ".join(str(x.get("document")) for x in r.get("quotes") or []) or "none"
            print(f"  q{numbers[i - 1]} {said}; rank 1 from {evidence_index(r)}; quote: {quoted}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=["run", "summary"])
    ap.add_argument("--indexes", type=Path, required=True, help="index paths, one a line")
    ap.add_argument("--questions", type=Path, required=True)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--lcr", default=f"{sys.executable} -m lcr", help="how to call lcr")
    ap.add_argument(
        "--again", action="store_true", help="summary: decide the replies by today's checks"
    )
    args = ap.parse_args()
    lines = args.indexes.read_text(encoding="utf-8").splitlines()
    indexes = [line.strip() for line in lines if line.strip()]
    questions = load_questions(args.questions)
    names = {index_name(p) for p in indexes}
    missing = [q.document for q in questions if q.document not in names]
    if missing:
        raise SystemExit(f"questions name documents not in --indexes: {', '.join(missing)}")
    if args.mode == "run":
        run(indexes, questions, args.work, args.lcr.split())
    else:
        summary(indexes, questions, args.work, args.again)


if __name__ == "__main__":
    main()
