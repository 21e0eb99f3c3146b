"""lcr's bm25 build and query against bm25s's own index over the same chunk texts.

    .venv/bin/python bench/archive/bench_bm25_build.py                      # SQuALITY, ~40k words
    .venv/bin/python bench/archive/bench_bm25_build.py --corpus hotpotqa --runs 7

The corpus: ``squality`` joins the first SQuALITY dev stories (``../shared/data``,
``$LCR_SHARED_DATA``) until ``--words`` words are reached; ``hotpotqa`` takes the
first HotpotQA dev corpus (``corpus0``, about 45k words of Wikipedia paragraphs).

Both builds run in this process, warmed once (imports, the stemmer), then alternated
``--runs`` times; medians of wall time and of the process's CPU time are printed (on a
loaded machine the CPU time moves less; lcr's waits for the disk show only in the
wall time). lcr's build is ``lcr.api.index`` of the text
file with ``methods=["bm25"]`` (reading, chunking, tokenising, fitting, writing the
store), a new index each time (the last one is removed first, outside the timing);
bm25s's is ``bm25s.tokenize`` (the same stop words and Snowball stemmer) and
``BM25.index`` over the texts of lcr's chunks. ``--runs`` more lcr builds split its
CPU time by stage (each stage's function wrapped in a timer); ``--profile N`` adds
cProfile's top N functions of one more build, which the profiler slows. Peak memory
is tracemalloc's peak over one untimed build each. Queries: lcr's ``retrieve``
(opening the stored index every question, as ``lcr retrieve`` does) and lcr's
scoring alone on a loaded index, against bm25s's ``tokenize`` + ``get_scores``; the
scores of each question are compared between lcr's stored index and bm25s's (the
largest difference is printed).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import shutil
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("LCR_SHARED_DATA", HERE.parent / "shared" / "data"))

QUESTIONS = [
    "Who was in charge of the expedition?",
    "Why did the ship land on the planet?",
    "What did the captain find in the cave?",
    "Which film did the director make in 1982?",
    "Where was the author of the novel born?",
    "How did the crew escape from the aliens?",
    "What is the name of the band's first album?",
    "Who betrayed the captain, and why?",
]

# (label, module, attribute paths) of each stage's functions, timed by wrappers; a
# path this tree lacks is skipped, so one bench times the code before and after #55
STAGES = [
    ("chunking", "lcr.methods.baselines", "chunk_nodes"),
    ("tokenising (bm25s + stemmer)", "lcr.methods.baselines", "_bm25_tokenize bm25_token_ids"),
    ("fitting (BM25Index)", "lcr.scoring.bm25", "BM25Index.fit BM25Index.fit_ids"),
    ("writing arrays + vocabulary", "lcr.scoring.bm25", "BM25Index.save"),
    ("writing nodes", "lcr.store.index", "MethodWriter.write_nodes"),
]


def corpus(name: str, words: int) -> tuple[str, str]:
    """The corpus text and a line saying what it is."""
    if name == "hotpotqa":
        first = json.loads((DATA / "hotpotqa" / "dev.jsonl").open().readline())
        text = next(d["text"] for d in first["documents"] if d.get("text"))
        return text, f"HotpotQA dev corpus0, {len(text.split()):,} words"
    docs: list[str] = []
    total = 0
    for line in (DATA / "squality" / "dev.jsonl").read_text().splitlines():
        docs.append(json.loads(line)["document"])
        total += len(docs[-1].split())
        if total >= words:
            break
    return "\n\n".join(docs), f"the first {len(docs)} SQuALITY dev stories, {total:,} words"


def median_ms(times: list[float]) -> float:
    return statistics.median(times) * 1000


class Runner:
    """lcr's build and bm25s's, over one corpus file."""

    def __init__(self, src: Path, work: Path) -> None:
        from lcr.models.container import Models

        self.src, self.work, self.models = src, work, Models()
        self.out = work / "bench.idx"
        self.texts: list[str] = []

    def lcr_build(self) -> None:
        """A new index each time (an old one is removed first, untimed by the caller)."""
        from lcr import api

        api.index(self.src, self.out, methods=["bm25"], models=self.models)

    def clear(self) -> None:
        shutil.rmtree(self.out, ignore_errors=True)

    def chunk_texts(self) -> list[str]:
        from lcr.store import Index

        index = Index.open(self.out)
        return [n.text for n in index.reader("bm25").nodes()]

    def bm25s_build(self) -> Any:
        import Stemmer

        from lcr.scoring.bm25 import bm25s_module

        bm25s = bm25s_module()
        tokens = bm25s.tokenize(
            self.texts, stopwords="en", stemmer=Stemmer.Stemmer("english"), show_progress=False
        )
        retriever = bm25s.BM25(k1=1.5, b=0.75)
        retriever.index(tokens, show_progress=False)
        return retriever


def timed(fn: Callable[[], object], before: Callable[[], object] = lambda: None) -> float:
    before()
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def peak_mb(fn: Callable[[], object], before: Callable[[], object] = lambda: None) -> float:
    before()
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 1e6


def stage_split(runner: Runner, runs: int) -> tuple[list[tuple[str, float]], float]:
    """Median CPU seconds of each stage over ``runs`` lcr builds, each stage's function
    wrapped in a timer for these builds only; and the median whole build's."""
    import importlib

    spent: dict[str, list[float]] = {label: [] for label, _, _ in STAGES}
    saved = []
    for label, module, paths in STAGES:
        for path in paths.split():
            *outer, attr = path.split(".")
            owner: Any = importlib.import_module(module)
            for name in outer:
                owner = getattr(owner, name)
            if attr in owner.__dict__:
                saved.append((owner, attr, owner.__dict__[attr], label))
    for owner, attr, raw, label in saved:
        func = raw.__func__ if isinstance(raw, classmethod) else raw

        def wrapper(*args: Any, _f: Any = func, _label: str = label, **kw: Any) -> Any:
            t0 = time.process_time()
            try:
                return _f(*args, **kw)
            finally:
                spent[_label][-1] += time.process_time() - t0

        setattr(owner, attr, classmethod(wrapper) if isinstance(raw, classmethod) else wrapper)
    wholes = []
    try:
        for _ in range(runs):
            for times in spent.values():
                times.append(0.0)
            runner.clear()
            c0 = time.process_time()
            runner.lcr_build()
            wholes.append(time.process_time() - c0)
    finally:
        for owner, attr, raw, _ in saved:
            setattr(owner, attr, raw)
    return [(label, statistics.median(t)) for label, t in spent.items()], statistics.median(wholes)


def top_functions(runner: Runner, count: int) -> None:
    """cProfile of one lcr build: the functions with the most time of their own."""
    runner.clear()
    prof = cProfile.Profile()
    prof.enable()
    runner.lcr_build()
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(count)


def queries(runner: Runner, retriever: Any) -> tuple[float, float, float, float]:
    """Median ms per question: lcr's retrieve, lcr's scoring on a loaded index,
    bm25s's tokenize + get_scores; and the largest score difference between the two."""
    import numpy as np
    import Stemmer

    from lcr import api
    from lcr.scoring.bm25 import BM25Index, bm25_tokenize, bm25s_module
    from lcr.store import Index

    bm25s = bm25s_module()
    stemmer = Stemmer.Stemmer("english")
    index = Index.open(runner.out)
    stored = index.reader("bm25")
    loaded = BM25Index.load(stored)
    n = len(runner.texts)
    lcr_q, lcr_s, raw_q = [], [], []
    worst = 0.0
    for q in QUESTIONS * 3:
        lcr_q.append(timed(partial(api.plan_and_retrieve, index, "bm25", q, runner.models)))
        t0 = time.perf_counter()
        mine = loaded.scores(bm25_tokenize([q], "en", "english")[0], n)
        lcr_s.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        toks = bm25s.tokenize(
            [q], stopwords="en", stemmer=stemmer, return_ids=False, show_progress=False
        )[0]
        known = [t for t in toks if t in retriever.vocab_dict]
        theirs = retriever.get_scores(known) if known else np.zeros(n)
        raw_q.append(time.perf_counter() - t0)
        worst = max(worst, float(np.max(np.abs(mine - np.asarray(theirs, np.float64)))))
    return median_ms(lcr_q), median_ms(lcr_s), median_ms(raw_q), worst


def tokenise_fit_ab(texts: list[str], against: Path | None, runs: int) -> None:
    """lcr's tokenising + fitting of the chunks, this tree's way and (``--against``) an
    older tree's ``lcr/scoring/bm25.py`` loaded beside it, against bm25s's, alternated in
    this one process: wall and CPU medians, and whether the stored arrays are equal."""
    import importlib.util

    import numpy as np

    from lcr.scoring import bm25 as ours

    ways: dict[str, Callable[[], Any]] = {}
    if hasattr(ours, "bm25_token_ids"):
        ways["lcr (this tree)"] = lambda: ours.BM25Index.fit_ids(
            *ours.bm25_token_ids(texts, "en", "english")
        )
    else:
        ways["lcr (this tree)"] = lambda: ours.BM25Index.fit(
            ours.bm25_tokenize(texts, "en", "english")
        )
    if against is not None:
        spec = importlib.util.spec_from_file_location(
            "lcr_bm25_against", against / "lcr" / "scoring" / "bm25.py"
        )
        assert spec is not None and spec.loader is not None
        old: Any = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(old)
        ways[f"lcr ({against})"] = lambda: old.BM25Index.fit(
            old.bm25_tokenize(texts, "en", "english")
        )
    import Stemmer

    bm25s = ours.bm25s_module()

    def own() -> Any:
        tokens = bm25s.tokenize(
            texts, stopwords="en", stemmer=Stemmer.Stemmer("english"), show_progress=False
        )
        retriever = bm25s.BM25(k1=1.5, b=0.75)
        retriever.index(tokens, show_progress=False)
        return ours.BM25Index(retriever)

    ways["bm25s"] = own
    wall: dict[str, list[float]] = {k: [] for k in ways}
    cpu: dict[str, list[float]] = {k: [] for k in ways}
    for _ in range(runs):
        for name, fn in ways.items():
            c0, t0 = time.process_time(), time.perf_counter()
            fn()
            wall[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
    base = median_ms(cpu["bm25s"])
    print(f"tokenising + fitting alone, medians of {runs} alternated:")
    for name in ways:
        print(f"  {name:40s} wall {median_ms(wall[name]):6.1f} ms, CPU {median_ms(cpu[name]):6.1f}"
              f" ms ({median_ms(cpu[name]) / base:.2f}x bm25s's CPU)")  # fmt: skip
    if against is not None:
        first, second, _ = ways.values()
        a, b = first().retriever.scores, second().retriever.scores
        same = all(np.array_equal(a[k], b[k]) for k in ("data", "indices", "indptr"))
        print(f"  the two lcr trees' score arrays equal: {same}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", choices=["squality", "hotpotqa"], default="squality")
    ap.add_argument("--words", type=int, default=40_000, help="squality: words to reach")
    ap.add_argument("--runs", type=int, default=5, help="alternated builds of each")
    ap.add_argument("--profile", type=int, default=0, help="print cProfile's top N functions")
    ap.add_argument("--code", type=Path, default=HERE, help="the lcr tree to time (this one)")
    ap.add_argument("--against", type=Path, help="an older lcr tree: its tokenising + fitting too")
    args = ap.parse_args()
    sys.path.insert(0, str(args.code))
    if args.runs < 1:
        ap.error("--runs must be at least 1")
    text, what = corpus(args.corpus, args.words)
    work = Path(tempfile.mkdtemp(prefix="lcr-bm25-bench-"))
    src = work / "corpus.txt"
    src.write_text(text)
    runner = Runner(src, work)
    runner.lcr_build()  # warm: imports, the stemmer, the store's writers
    runner.texts = runner.chunk_texts()
    retriever = runner.bm25s_build()
    print(f"corpus: {what}; {len(runner.texts):,} chunks; load {os.getloadavg()[0]:.2f}")
    lcr_t, raw_t, lcr_cpu, raw_cpu = [], [], [], []
    for _ in range(args.runs):
        c0 = time.process_time()
        lcr_t.append(timed(runner.lcr_build, runner.clear))
        c1 = time.process_time()
        raw_t.append(timed(runner.bm25s_build))
        lcr_cpu.append(c1 - c0)
        raw_cpu.append(time.process_time() - c1)
    lcr_ms, raw_ms = median_ms(lcr_t), median_ms(raw_t)
    print(f"build, median of {args.runs} alternated: lcr {lcr_ms:.0f} ms, bm25s {raw_ms:.0f} ms,"
          f" ratio {lcr_ms / raw_ms:.2f}x")  # fmt: skip
    lcr_ms, raw_ms = median_ms(lcr_cpu), median_ms(raw_cpu)
    print(f"build CPU time (this process's, all threads): lcr {lcr_ms:.0f} ms, bm25s"
          f" {raw_ms:.0f} ms, ratio {lcr_ms / raw_ms:.2f}x")  # fmt: skip
    split, whole = stage_split(runner, args.runs)
    print(f"lcr's build by stage, CPU (medians of {args.runs} more builds, {whole * 1000:.0f} ms):")
    rest = ("rest (reading, store, manifest)", whole - sum(s for _, s in split))
    for label, secs in [*split, rest]:
        print(f"  {label:32s} {secs * 1000:6.1f} ms  {100 * secs / whole:5.1f}%")
    if args.profile:
        top_functions(runner, args.profile)
    lcr_mb, raw_mb = peak_mb(runner.lcr_build, runner.clear), peak_mb(runner.bm25s_build)
    print(f"peak memory (tracemalloc): lcr {lcr_mb:.1f} MB, bm25s {raw_mb:.1f} MB,"
          f" ratio {lcr_mb / raw_mb:.2f}x")  # fmt: skip
    retriever = runner.bm25s_build()
    lcr_q, lcr_s, raw_q, worst = queries(runner, retriever)
    print(f"query, median of {3 * len(QUESTIONS)}: lcr retrieve {lcr_q:.2f} ms (scoring alone"
          f" {lcr_s:.2f} ms), bm25s {raw_q:.2f} ms; ratios {lcr_q / raw_q:.1f}x,"
          f" {lcr_s / raw_q:.1f}x")  # fmt: skip
    print(f"largest score difference, lcr's stored index against bm25s: {worst:.3g}")
    tokenise_fit_ab(runner.texts, args.against, 3 * args.runs)
    print(f"load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
