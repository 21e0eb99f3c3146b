"""Issue 53, item 5: one question asked of its own document and of ten others.

    python bench/many_documents.py run ../shared/data/squality/dev.jsonl --work /tmp/many61
    python bench/many_documents.py summary ../shared/data/squality/dev.jsonl --work /tmp/many61
    python bench/many_documents.py regrade ../shared/data/squality/dev.jsonl --work /tmp/many61 \
        --check support    # then: summary ... --check support --check support+floor

SQuALITY dev stories, each indexed once (bm25, default settings) under ``--work``.
The questions are chosen by a fixed rule, written before any reply was read
(:func:`choose_questions`): for each story in file order, its first question (by
``question_number``) that names at least one person or thing (a capitalised word
after the question's first word, titles such as "Mr" left out), every name of
which occurs as a whole word in its own story and in none of the other stories.
Such a question cannot be answered from another story. The first ``--questions``
stories with such a question are used. Each question is asked of its own story's
index and of ``--others`` other stories' indexes drawn by a fixed seed
(:func:`other_documents`), with ``lcr.ask(..., each=True)`` (as ``lcr ask IDX...
Q --each --json``), once per ``--check`` (default: ``support``, lcr's default,
then ``both``), the default LLM and every other setting at its default. Questions
run in order, both checks each, so a run cut short still pairs its questions.

``run`` appends one JSON line per answer to ``WORK/records.jsonl`` (the result's
``--json`` object: answer, evidence ids, the checks' fields with the raw reply;
with ``story``, ``question_number``, ``own``, ``check``) and skips answers it
already has. ``summary`` prints, per check: "not found" on the other stories and on
the own story (Wilson 95% intervals), ROUGE-L and token F1 of the own story's
answers against the four references (best of four; bootstrap 95% intervals: over the
answers given, over all with "not found" scoring 0, and over the replies had nothing
been withheld), the answer step's seconds and prompt and reply tokens per answer (the
seconds also as a ratio on the same question and story), and per question what each
check did. Only questions with every answer under every check are counted.
``regrade`` decides the records of one check again with today's grounding (no LLM
call; :func:`regrade`), as check ``CHECK+floor``.
Reporting only: nothing here chooses a setting.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lcr.answer.replies import NOT_FOUND
from lcr.eval.metrics import best_over

SEED = 61
TITLES = frozenset({"Mr", "Mrs", "Ms", "Miss", "Dr", "I"})


@dataclass(frozen=True)
class Chosen:
    story: int  # the story's line in the data file, from 0
    number: int  # the question's question_number
    question: str
    names: tuple[str, ...]
    references: tuple[str, ...]


def names_in(question: str) -> list[str]:
    """The capitalised words of ``question`` after its first word, titles left out."""
    words = re.findall(r"[A-Za-z]+", question)
    return [w for w in words[1:] if w[0].isupper() and w not in TITLES]


def _occurs(word: str, text: str) -> bool:
    return re.search(rf"\b{re.escape(word)}\b", text) is not None


def choose_questions(stories: Sequence[dict[str, Any]], limit: int) -> list[Chosen]:
    """The fixed rule: per story (file order), the first question whose names all occur
    in its own story and in no other; the first ``limit`` stories that have one."""
    texts = [s["document"] for s in stories]
    chosen: list[Chosen] = []
    for i, story in enumerate(stories):
        for q in sorted(story["questions"], key=lambda q: int(q["question_number"])):
            names = names_in(q["question_text"])
            if not names or not all(_occurs(n, texts[i]) for n in names):
                continue
            if any(_occurs(n, t) for j, t in enumerate(texts) if j != i for n in names):
                continue
            refs = tuple(r["response_text"] for r in q["responses"])
            number = int(q["question_number"])
            chosen.append(Chosen(i, number, q["question_text"], tuple(names), refs))
            break
        if len(chosen) == limit:
            break
    return chosen


def other_documents(own: int, count: int, total: int, seed: int = SEED) -> list[int]:
    """``count`` stories other than ``own`` out of ``total``, fixed by ``seed`` and ``own``."""
    rng = random.Random(seed * 1000 + own)
    return sorted(rng.sample([j for j in range(total) if j != own], count))


def wilson(hits: int, n: int, z: float = 1.959964) -> tuple[float, float, float]:
    """The share ``hits / n`` with its Wilson score interval (95% by default)."""
    if n == 0:
        return (math.nan, math.nan, math.nan)
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (p, max(0.0, centre - half), min(1.0, centre + half))


def load(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def index_path(work: Path, story: int) -> Path:
    return work / f"story{story:02d}.idx"


def run(args: argparse.Namespace, stories: list[dict[str, Any]]) -> None:
    import lcr

    chosen = choose_questions(stories, args.questions)
    args.work.mkdir(parents=True, exist_ok=True)
    out = args.work / "records.jsonl"
    done = set()
    if out.exists():
        done = {(r["story"], r["check"], r["asked_of"]) for r in load(out)}
    models = lcr.use_models(llm=args.llm) if args.llm else lcr.use_models()
    for c in chosen:
        asked = [c.story, *other_documents(c.story, args.others, len(stories))]
        for j in asked:
            path = index_path(args.work, j)
            if not path.exists():
                text = args.work / f"story{j:02d}.txt"
                text.write_text(stories[j]["document"], encoding="utf-8")
                lcr.index(text, path, methods=["bm25"])
        for check in args.check:
            todo = [j for j in asked if (c.story, check, j) not in done]
            if not todo:
                continue
            results = lcr.ask(
                [index_path(args.work, j) for j in todo],
                c.question,
                each=True,
                settings={"answer.check": check},
                max_new_tokens=args.max_new_tokens,
                models=models,
            )
            with out.open("a", encoding="utf-8") as f:
                for j, res in zip(todo, results, strict=True):
                    rec = res.to_json()
                    rec.update(story=c.story, question_number=c.number, asked_of=j)
                    rec.update(own=j == c.story, check=check)
                    f.write(json.dumps(rec) + "\n")
            print(f"story {c.story} q{c.number} {check}: {len(todo)} answers", flush=True)


def _share(flags: list[bool]) -> str:
    p, low, high = wilson(sum(flags), len(flags))
    return f"{sum(flags)}/{len(flags)} = {p:.2f} [{low:.2f}, {high:.2f}]"


def _mean(values: list[float], digits: int = 3) -> str:
    from lcr.eval.stats import bootstrap_mean

    if not values:
        return "-"
    iv = bootstrap_mean(values)
    return f"{iv.mean:.{digits}f} [{iv.low:.{digits}f}, {iv.high:.{digits}f}] (n={iv.n})"


def complete_questions(records: list[dict[str, Any]], checks: Sequence[str], n: int) -> set[int]:
    """Stories whose question has all ``n`` answers under every check."""
    count: dict[tuple[int, str], int] = {}
    for r in records:
        key = (r["story"], r["check"])
        count[key] = count.get(key, 0) + 1
    stories = {r["story"] for r in records}
    return {s for s in stories if all(count.get((s, c), 0) >= n for c in checks)}


def own_scores(
    own: list[dict[str, Any]], refs: Mapping[int, Sequence[str]], metric: Any, *, withheld: bool
) -> list[float]:
    """``metric`` of each own-story answer, best over its references: the answers given,
    or with ``withheld`` every one, a "not found" scoring 0."""
    out = []
    for r in own:
        if r["answer"] == NOT_FOUND:
            if withheld:
                out.append(0.0)
            continue
        out.append(float(best_over(metric, r["answer"], refs[r["story"]]) or 0.0))
    return out


def per_question(records: list[dict[str, Any]]) -> list[float]:
    """Each question's share of "not found" (its answers are not independent: one
    question's name may draw answers from every story)."""
    shares: dict[int, list[bool]] = {}
    for r in records:
        shares.setdefault(r["story"], []).append(r["answer"] == NOT_FOUND)
    return [sum(v) / len(v) for v in shares.values()]


def why_not_found(records: list[dict[str, Any]]) -> str:
    """How the other stories' "not found" came: a reply the check withheld, or the
    model's own reply (or no evidence, no call)."""
    missing = [r for r in records if not r["own"] and r["answer"] == NOT_FOUND]
    withheld = sum("withheld_answer" in r for r in missing)
    return f"{withheld} / {len(missing) - withheld}"


def summary_rows(
    records: list[dict[str, Any]], refs: Mapping[int, Sequence[str]], check: str
) -> dict[str, str]:
    """One check's row: every figure of the table, as printed."""
    from lcr.eval.metrics import rouge_l, token_f1

    mine = [r for r in records if r["check"] == check]
    others_of = [r for r in mine if not r["own"]]
    others = [r["answer"] == NOT_FOUND for r in others_of]
    own = [r for r in mine if r["own"]]
    called = [r for r in mine if r["usage"].get("completion_tokens", 0) > 0]
    unwithheld = [{**r, "answer": r.get("withheld_answer", r["answer"])} for r in own]
    tokens = "-"
    if called:
        prompt = statistics.mean(r["usage"]["prompt_tokens"] for r in called)
        reply = statistics.mean(r["usage"]["completion_tokens"] for r in called)
        tokens = f"{prompt:.0f} + {reply:.0f}"
    return {
        "check": check,
        "questions": str(len(own)),
        "not found, other stories": _share(others),
        "not found, other stories, bootstrap over questions": _mean(per_question(others_of)),
        "not found, own story": _share([r["answer"] == NOT_FOUND for r in own]),
        "others' not found: withheld by the check / the model's own": why_not_found(mine),
        "ROUGE-L, own answers given": _mean(own_scores(own, refs, rouge_l, withheld=False)),
        "token F1, own answers given": _mean(own_scores(own, refs, token_f1, withheld=False)),
        "ROUGE-L, own, not found = 0": _mean(own_scores(own, refs, rouge_l, withheld=True)),
        "ROUGE-L, own, nothing withheld": _mean(
            own_scores(unwithheld, refs, rouge_l, withheld=True)
        ),
        "s / answer": _mean([float(r["timings"].get("answer_s", 0.0)) for r in called], 1),
        "prompt + reply tokens": tokens,
        "LLM calls": f"{len(called)} of {len(mine)}",
    }


def paired_seconds(records: list[dict[str, Any]], base: str, other: str) -> str:
    """The answer step's seconds under ``other`` over those under ``base``, on the same
    (question, story) pairs (run one block after the other, question by question)."""
    seconds = {
        (r["story"], r["asked_of"], r["check"]): float(r["timings"].get("answer_s", 0.0))
        for r in records
    }
    pairs = [
        (seconds[(s, j, base)], seconds[(s, j, other)])
        for (s, j, c) in seconds
        if c == base and (s, j, other) in seconds and seconds[(s, j, base)] > 0
    ]
    if not pairs:
        return f"answer_s {other} / {base}: no pairs"
    total = sum(b for _, b in pairs) / sum(a for a, _ in pairs)
    median = statistics.median(b / a for a, b in pairs)
    return (
        f"answer_s {other} / {base} on the same {len(pairs)} (question, story) pairs:"
        f" {total:.2f} (sums), median pair {median:.2f}"
    )


def summary(args: argparse.Namespace, stories: list[dict[str, Any]]) -> None:
    records = load(args.work / "records.jsonl")
    keep = complete_questions(records, args.check, args.others + 1)
    records = [r for r in records if r["story"] in keep and r["check"] in args.check]
    refs = {
        c.story: c.references for c in choose_questions(stories, len(stories)) if c.story in keep
    }
    rows = [summary_rows(records, refs, check) for check in args.check]
    print(f"{len(keep)} questions, each asked of its own story and {args.others} others\n")
    print("| | " + " | ".join(f"`answer.check={row.pop('check')}`" for row in rows) + " |")
    print("|---|" + "---:|" * len(rows))
    for head in rows[0]:
        print(f"| {head} | " + " | ".join(row[head] for row in rows) + " |")
    if len(args.check) == 2:
        print("\n" + paired_seconds(records, args.check[0], args.check[1]))
    print('\nper question: answers given on the other stories (not "not found"); own story')
    for story in sorted(keep):
        parts = [f"{check}: {outcome(records, story, check)}" for check in args.check]
        print(f"  story {story}: " + "; ".join(parts))


def regrade(work: Path, check: str) -> int:
    """Append to ``records.jsonl`` each ``check`` record decided again by today's defaults,
    no LLM call: "not found" unasked for a term the story never writes
    (``answer.term_zipf``), else the step's own grounding (``answer.located_floor`` and
    after) on the same reply; check ``CHECK+floor``. Returns how many it wrote."""
    from bench_quote_grid import evidence_items

    from lcr.answer.grounding import ground, unwritten_terms
    from lcr.answer.shared import AnswerResult, AnswerSettings

    path = work / "records.jsonl"
    records = [r for r in load(path) if r["check"] == check]
    sources: dict[str, str] = {}
    lines = []
    for r in records:
        out = dict(r, check=f"{check}+floor")
        src = sources.setdefault(r["index"], (Path(r["index"]) / "source.txt").read_text())
        absent = unwritten_terms(r["question"], AnswerSettings(), src)
        if absent:  # today's step would not ask: a term the story never writes
            out.update(answer=NOT_FOUND, info={"absent": ", ".join(absent)})
        elif r["answer"] != NOT_FOUND:
            step = AnswerResult(r["answer"], list(evidence_items(r)), 0)
            got = ground(r["question"], step, AnswerSettings(), src)
            if got.text == NOT_FOUND:
                out.update(answer=NOT_FOUND, withheld_answer=r["answer"], info=got.info)
        lines.append(json.dumps(out) + "\n")
    with path.open("a", encoding="utf-8") as fh:
        fh.writelines(lines)
    return len(lines)


def outcome(records: list[dict[str, Any]], story: int, check: str) -> str:
    """One question under one check: others answered, and the own story's outcome
    (answered, or "not found" and why: the quote check's problem, a support score)."""
    mine = [r for r in records if r["story"] == story and r["check"] == check]
    given = sum(not r["own"] and r["answer"] != NOT_FOUND for r in mine)
    (own,) = [r for r in mine if r["own"]]
    if own["answer"] != NOT_FOUND:
        said = "answered"
    elif "withheld_answer" not in own:
        said = "not found (the model's reply)"
    else:
        problem = own.get("quote_check", {}).get("problem")
        said = f"withheld ({problem or 'support ' + str(own.get('support'))})"
    return f"{given} given on others, own {said}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=["run", "summary", "questions", "regrade"])
    ap.add_argument("data", type=Path)
    ap.add_argument("--work", type=Path, default=Path("/tmp/many61"))
    ap.add_argument("--questions", type=int, default=12)
    ap.add_argument("--others", type=int, default=10)
    ap.add_argument("--check", action="append", help="answer.check values (support, both)")
    ap.add_argument("--llm", help="the LLM (default: lcr's)")
    ap.add_argument("--max-new-tokens", type=int, default=256)
    args = ap.parse_args()
    args.check = args.check or ["support", "both"]
    stories = load(args.data)
    if args.mode == "questions":
        for c in choose_questions(stories, args.questions):
            others = other_documents(c.story, args.others, len(stories))
            print(f"story {c.story} q{c.number} {c.names}: {c.question} | others {others}")
    elif args.mode == "run":
        run(args, stories)
    elif args.mode == "regrade":
        print(f"wrote {regrade(args.work, args.check[0])} records")
    else:
        summary(args, stories)


if __name__ == "__main__":
    main()
