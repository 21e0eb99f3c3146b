"""The quality cost of the book's reduced configurations (issue 55, item 3), on dev data.

docs/speed.md builds RAPTOR and LightPAL on a 103k-token book in reduced
configurations (a 135M summariser or scorer, fewer and shorter LightPAL
candidates). Their retrieval needs no LLM, so two builds of the same small corpus,
one per configuration, are compared by gold-evidence recall at equal word budgets.

``cut`` writes the corpus: HotpotQA dev's first ``--questions`` questions of
``--corpus`` whose supporting sentences all lie in one paragraph each; their gold
paragraphs, and for each question its ``--distractors`` best other paragraphs of the
same corpus by BM25 of the question (HotpotQA chose its distractors by the question
too), in the corpus's own order, joined by blank lines:

    .venv/bin/python bench/bench_reduced.py cut ../shared/data/hotpotqa/dev.jsonl \\
        --questions 15 --out /tmp/q62

``recall`` retrieves each question from each ``LABEL=INDEX`` (the first is the
reference) with ``--method`` and ``--set`` query settings (``LABEL=INDEX@KEY=VALUE,...``
adds query settings of that label's own), reads the items best
first up to each of ``--budgets`` words (the last item cut at the budget), and
prints gold recall (supporting sentences wholly inside one read item, whitespace
normalised) with 95% bootstrap intervals over questions, each configuration paired
against the first:

    .venv/bin/python bench/bench_reduced.py recall /tmp/q62 --method raptor \\
        full=/tmp/q62/raptor-1.5b.idx reduced=/tmp/q62/raptor-smollm.idx

``extract`` sends GraphReader's extraction prompt (its own chunker, prompt and
parser) for the first ``--chunks`` chunks of the corpus to each of ``--llms`` in
turn, and counts per model the chunks left with a grounded fact (the others fall
back to their sentences in a build), facts, malformed lines and seconds:

    .venv/bin/python bench/bench_reduced.py extract /tmp/q62 --chunks 3 \\
        --llms qwen2.5-coder-1.5b,smollm2-135m --max-new-tokens 256

``points`` sends PECAN's build prompt (Table A1, lcr's wording) over the corpus's
first ``--batch-tokens`` of 300-token chunks to each of ``--llms`` through
``generate`` (the build reads attention on transformers as well; the text is the
same call's), parses the reply into Information Points as the build does, and
counts the points and those whose words are mostly the batch's own:

    .venv/bin/python bench/bench_reduced.py points /tmp/q62 --batch-tokens 2000
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's lcr
sys.path.insert(0, str(Path(__file__).resolve().parent))

from dev_texts import taken as _taken

import lcr
from lcr.eval.stats import bootstrap_mean, paired_bootstrap
from lcr.scoring.bm25 import bm25_scores, bm25_tokenize


def norm(text: str) -> str:
    return " ".join(text.split())


def gold_paragraphs(paragraphs: Sequence[str], gold: Sequence[str]) -> list[int] | None:
    """The paragraph holding each gold sentence (normalised), or None if one is in none."""
    flat = [norm(p) for p in paragraphs]
    found: list[int] = []
    for sentence in gold:
        where = [i for i, p in enumerate(flat) if norm(sentence) in p]
        if not where:
            return None
        if where[0] not in found:
            found.append(where[0])
    return found


def cut(
    paragraphs: Sequence[str], questions: Sequence[tuple[str, list[str]]], n: int, distractors: int
) -> tuple[list[int], list[int]]:
    """(kept paragraph indexes in corpus order, the indexes of the questions kept): the
    first ``n`` questions whose gold sentences are all found, their gold paragraphs and
    each one's ``distractors`` best other paragraphs by BM25 of the question."""
    chosen: list[int] = []
    gold_of: list[list[int]] = []
    for qi, (_, gold) in enumerate(questions):
        where = gold_paragraphs(paragraphs, gold)
        if where is not None and gold:
            chosen.append(qi)
            gold_of.append(where)
        if len(chosen) == n:
            break
    kept = {i for where in gold_of for i in where}
    all_gold = set(kept)
    tokens = bm25_tokenize(list(paragraphs), "en", "none")
    for qi in chosen:
        (query,) = bm25_tokenize([questions[qi][0]], "en", "none")
        scores = bm25_scores(query, tokens)
        order = sorted(range(len(paragraphs)), key=lambda i: (-scores[i], i))
        kept.update([i for i in order if i not in all_gold][:distractors])
    return sorted(kept), chosen


def taken(texts: Sequence[str], budget: int) -> list[str]:
    """The items best first until ``budget`` words, each with single spaces (the gold
    sentences are matched so)."""
    return _taken(texts, budget, respace=True)


def recall(gold: Sequence[str], items: Sequence[str]) -> float:
    """Share of gold sentences wholly inside one item (whitespace normalised)."""
    flat = [norm(t) for t in items]
    return sum(any(norm(g) in t for t in flat) for g in gold) / len(gold)


def run_cut(args: argparse.Namespace) -> None:
    rows = [json.loads(line) for line in args.data.open(encoding="utf-8")]
    text = next(
        d["text"] for r in rows for d in r["documents"] if d.get("text") and d["id"] == args.corpus
    )
    paragraphs = [p for p in text.split("\n\n") if p.strip()]
    mine = [r for r in rows if r["documents"][0]["id"] == args.corpus and r.get("evidence")]
    questions = [(r["question"], [e["text"] for e in r["evidence"]]) for r in mine]
    kept, chosen = cut(paragraphs, questions, args.questions, args.distractors)
    args.out.mkdir(parents=True, exist_ok=True)
    corpus = "\n\n".join(paragraphs[i] for i in kept)
    (args.out / "corpus.txt").write_text(corpus + "\n", encoding="utf-8")
    with (args.out / "questions.jsonl").open("w", encoding="utf-8") as fh:
        for qi in chosen:
            fh.write(
                json.dumps(
                    {"id": mine[qi]["id"], "question": questions[qi][0], "gold": questions[qi][1]}
                )
                + "\n"
            )
    words = len(corpus.split())
    print(
        f"{len(chosen)} questions, {len(kept)} paragraphs, {words} words, {len(corpus)} characters"
    )


def run_recall(args: argparse.Namespace) -> None:
    questions = [
        json.loads(line) for line in (args.work / "questions.jsonl").open(encoding="utf-8")
    ]
    budgets = [int(b) for b in args.budgets.split(",")]
    sets: dict[str, Any] = dict(s.split("=", 1) for s in args.set)
    models = lcr.use_models()
    per: dict[str, dict[int, list[float]]] = {}
    read: dict[str, list[int]] = {}
    above: dict[str, list[float]] = {}  # share of the words read from nodes above level 0
    for pair in args.indexes:
        label, spec = pair.split("=", 1)
        path, _, own = spec.partition("@")  # LABEL=INDEX@KEY=VALUE,KEY=VALUE: its own sets
        mine = {**sets, **dict(x.split("=", 1) for x in own.split(",") if x)}
        per[label] = {b: [] for b in budgets}
        read[label] = []
        above[label] = []
        for q in questions:
            res = lcr.retrieve(
                path, q["question"], method=args.method, k=args.k, settings=mine, models=models
            )
            texts = [it.text for it in res.evidence.items]
            read[label].append(sum(len(t.split()) for t in texts))
            levels = [it.level for it in res.evidence.items]
            cut_items = taken(texts, max(budgets))
            words = [len(t.split()) for t in cut_items]
            above[label].append(
                sum(w for w, lv in zip(words, levels, strict=False) if lv > 0) / max(1, sum(words))
            )
            for b in budgets:
                read_items = taken(texts, b)
                if args.leaves_only:  # a summary still takes its words, and finds no gold
                    read_items = [t for t, lv in zip(read_items, levels, strict=False) if lv == 0]
                per[label][b].append(recall(q["gold"], read_items))
    labels = list(per)
    print(
        f"{args.method}: gold recall of {len(questions)} questions at equal word budgets"
        " (95% bootstrap)"
    )
    print(
        "| budget (words) | "
        + " | ".join(labels)
        + " | "
        + " | ".join(f"{x} - {labels[0]} (p)" for x in labels[1:])
        + " |"
    )
    print("|---:|" + "---:|" * (2 * len(labels) - 1))
    for b in budgets:
        cells = []
        for label in labels:
            iv = bootstrap_mean(per[label][b])
            cells.append(f"{iv.mean:.3f} [{iv.low:.3f}, {iv.high:.3f}]")
        for label in labels[1:]:
            t = paired_bootstrap(per[label][b], per[labels[0]][b])
            cells.append(f"{t.diff:+.3f} [{t.low:+.3f}, {t.high:+.3f}] (p {t.p_value:.2f})")
        print(f"| {b} | " + " | ".join(cells) + " |")
    for label in labels:
        words = sorted(read[label])
        share = sum(above[label]) / len(above[label])
        print(
            f"  {label}: {words[len(words) // 2]} words retrieved per question (median); "
            f"{share:.3f} of the {max(budgets)} words read from nodes above the leaves (mean)"
        )
    if args.json is not None:
        args.json.write_text(
            json.dumps({"per_question": per, "words": read, "above": above}, indent=1),
            encoding="utf-8",
        )


def run_extract(args: argparse.Namespace) -> None:
    import time

    from lcr.methods.graphreader import prompts
    from lcr.methods.graphreader.extraction import grounded, parse_extraction
    from lcr.methods.graphreader.method import chunk_nodes

    text = (args.work / "corpus.txt").read_text(encoding="utf-8")
    chunks = chunk_nodes([(0, 0, text)], args.chunk_tokens)[: args.chunks]
    out: dict[str, list[dict[str, Any]]] = {}
    print(
        "| LLM | chunks with a grounded fact | facts parsed | grounded | malformed lines"
        " | reply tokens | seconds |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name in args.llms.split(","):
        llm = lcr.use_models(llm=name).llm
        rows = out.setdefault(name, [])
        for c in chunks:
            started = time.perf_counter()
            gen = llm.generate(
                prompts.extraction_messages(c.text, args.max_new_tokens),
                max_new_tokens=args.max_new_tokens,
            )
            ex = parse_extraction(gen.text)
            kept, _ = grounded(ex.facts, c.text)
            rows.append(
                {
                    "chunk": c.id,
                    "seconds": round(time.perf_counter() - started, 1),
                    "prompt_tokens": gen.prompt_tokens,
                    "reply_tokens": gen.completion_tokens,
                    "facts": len(ex.facts),
                    "grounded": len(kept),
                    "malformed": ex.malformed,
                    "reply": gen.text,
                }
            )
            print(
                json.dumps({k: v for k, v in rows[-1].items() if k != "reply"}),
                file=sys.stderr,
                flush=True,
            )
        sums = {
            k: sum(r[k] for r in rows)
            for k in ("facts", "grounded", "malformed", "reply_tokens", "seconds")
        }
        with_fact = sum(r["grounded"] > 0 for r in rows)
        print(
            f"| {name} | {with_fact} of {len(rows)} | {sums['facts']} | {sums['grounded']} "
            f"| {sums['malformed']} | {sums['reply_tokens']} | {sums['seconds']:.0f} |",
            flush=True,
        )
    if args.json is not None:
        args.json.write_text(json.dumps(out, indent=1), encoding="utf-8")


def on_topic(point: str, source: str) -> bool:
    """At least half of the point's words of four or more letters occur in the source."""
    have = set(re.findall(r"[a-z]{4,}", source.lower()))
    words = re.findall(r"[a-z]{4,}", point.lower())
    return bool(words) and sum(w in have for w in words) >= len(words) / 2


def run_points(args: argparse.Namespace) -> None:
    import time

    from lcr.methods.pecan.build import leaf_nodes
    from lcr.methods.pecan.graph import information_points
    from lcr.methods.pecan.prompts import BUILD_HEAD, BUILD_TAIL, segment_line
    from lcr.text.tokens import count_tokens

    text = (args.work / "corpus.txt").read_text(encoding="utf-8")
    batch: list[str] = []
    for node in leaf_nodes([(0, 0, text)], count_tokens, 300):
        if sum(count_tokens(segment_line(t)) for t in [*batch, node.text]) > args.batch_tokens:
            break
        batch.append(node.text)
    source = "".join(segment_line(t) for t in batch)
    messages = [{"role": "user", "content": BUILD_HEAD + source + BUILD_TAIL}]
    out: dict[str, Any] = {"chunks": len(batch), "batch_tokens": count_tokens(source)}
    print(f"one batch of {len(batch)} chunks, {out['batch_tokens']} tokens (lcr's count)")
    print("| LLM | points | distinct | on topic | reply tokens | seconds |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in args.llms.split(","):
        llm = lcr.use_models(llm=name).llm
        started = time.perf_counter()
        gen = llm.generate(messages, max_new_tokens=args.max_new_tokens)
        seconds = time.perf_counter() - started
        points = [p.text for p in information_points(gen.text)]
        distinct = len({" ".join(p.lower().split()) for p in points})
        topical = sum(on_topic(p, source) for p in points)
        out[name] = {"reply": gen.text, "points": points, "seconds": round(seconds, 1)}
        print(
            f"| {name} | {len(points)} | {distinct} | {topical} | {gen.completion_tokens} "
            f"| {seconds:.0f} |",
            flush=True,
        )
    if args.json is not None:
        args.json.write_text(json.dumps(out, indent=1), encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    c = sub.add_parser("cut", help="write corpus.txt and questions.jsonl")
    c.add_argument("data", type=Path)
    c.add_argument("--corpus", default="corpus0")
    c.add_argument("--questions", type=int, default=15)
    c.add_argument("--distractors", type=int, default=8)
    c.add_argument("--out", type=Path, required=True)
    r = sub.add_parser("recall", help="gold recall of each LABEL=INDEX")
    r.add_argument("work", type=Path, help="the folder cut wrote")
    r.add_argument("indexes", nargs="+", help="LABEL=INDEX, the first the reference")
    r.add_argument("--method", required=True)
    r.add_argument("--set", action="append", default=[], help="METHOD.KEY=VALUE (query)")
    r.add_argument("-k", "--k", type=int, default=None)
    r.add_argument("--budgets", default="500,1000")
    r.add_argument("--json", type=Path, default=None)
    r.add_argument(
        "--leaves-only", action="store_true", help="gold found only in level-0 items counts"
    )
    e = sub.add_parser("extract", help="GraphReader's extraction replies of each LLM")
    e.add_argument("work", type=Path, help="the folder cut wrote")
    e.add_argument("--llms", default="qwen2.5-coder-1.5b,smollm2-135m")
    e.add_argument("--chunks", type=int, default=3)
    e.add_argument("--chunk-tokens", type=int, default=2000)
    e.add_argument("--max-new-tokens", type=int, default=256)
    e.add_argument("--json", type=Path, default=None)
    t = sub.add_parser("points", help="PECAN's Information Points of each LLM, one batch")
    t.add_argument("work", type=Path, help="the folder cut wrote")
    t.add_argument("--llms", default="qwen2.5-coder-1.5b,smollm2-135m")
    t.add_argument("--batch-tokens", type=int, default=2000)
    t.add_argument("--max-new-tokens", type=int, default=512)
    t.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    runs = {"cut": run_cut, "recall": run_recall, "extract": run_extract, "points": run_points}
    runs[args.command](args)


if __name__ == "__main__":
    main()
