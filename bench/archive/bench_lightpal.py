"""LightPAL benchmark: pairs scored per second, build-time estimates, the query-time walk.

Passages: ODSum Story sections (../shared/data/odsum/story_docs_dev.jsonl, the
paper's Story passages, ~3.2k characters) or ~1k-character passages of the same
stories (``--passages chars``, the paper's Meeting shape). For ``--prefixes`` of
them, ``--candidates`` real candidates each (their dense top-k' by the embedder)
are scored three ways in the same run:

- batched: ``LLM.continuation_logprobs`` (d_i encoded once, candidates batched
  from the expanded prefix cache), as ``lcr index --method lightpal`` does;
- one pair at a time: ``LLM.continuation_logprob(d_i, d_j)``, a full pass per pair
  (each pair cut to 1,024 scorer tokens first, as the build does; llama.cpp's
  prompt cache is emptied before each, or it would encode d_i once anyway);
- batched with ``lightpal.continuation_tokens=N`` (only d_j's first tokens).

From the measured rates: the scoring time of a full build of the corpus at
k' = 100 and at the faster setting. ``--walk`` times the context-passage step
(personalised PageRank + fill) on a random 5-out-edge graph of 10k passages.

    .venv/bin/python bench/archive/bench_lightpal.py --scorer smollm2-135m
    .venv/bin/python bench/archive/bench_lightpal.py --scorer qwen2.5-coder-0.5b --prefixes 2
    .venv/bin/python bench/archive/bench_lightpal.py --walk-only

``--odsum INDEX`` indexes the 25 ODSum Story dev stories (one corpus, sections
as passages), builds lightpal with ``--set`` settings, then for ``--limit``
queries reports Precision@k and Recall@k (k = 5, 10, 20) of the gold story's
passages for the initial ranking alone (bm25, dense: the same passages with
``initial_share=1``) and with LightPAL's context passages under both restart
sets (``lightpal.restart=d_init`` and ``ranking``, same graph), with 95% normal
intervals over queries and paired bootstrap tests (each LightPAL run against
its initial retriever, and the two restart sets against each other):

    .venv/bin/python bench/archive/bench_lightpal.py --odsum /tmp/odsum.idx --limit 125 \
        --set lightpal.scorer=smollm2-135m --set lightpal.candidates=10 \
        --set lightpal.continuation_tokens=32 --set lightpal.max_tokens=256

``--stories N`` makes the corpus the first N stories and keeps only their queries
(a cheaper build on a loaded machine; fewer distractors than the full corpus).

``--per-query FILE`` writes every query's figures; ``--against FILE`` (another
graph's, e.g. k' = 10 against k' = 100) adds paired tests of each LightPAL row
against the same row on that graph:

    python bench/archive/bench_lightpal.py --odsum /tmp/odsum10f.idx ... --per-query k10.json
    python bench/archive/bench_lightpal.py --odsum /tmp/odsum100f.idx ... --against k10.json

``--unscored`` (with ``--odsum``) builds with k' = k (``lightpal.candidates`` =
``lightpal.edges``): every candidate becomes an edge whatever its score, and the
walk weighs edges uniformly, so the walk, and every figure of the run, is exactly
that of a build scored by any LLM; the scorer is skipped (edge scores stored as
0, ``pairs_scored`` 0). For measuring the query-time walk (the restart sets) on a
CPU that cannot afford the scoring:

    .venv/bin/python bench/archive/bench_lightpal.py --odsum /tmp/odsum-k5.idx --unscored \
        --set lightpal.candidates=5 --set lightpal.edges=5
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from lcr.methods.lightpal.graph import Walk, context_passages, dense_candidates, edge_matrix
from lcr.methods.lightpal.passages import cut_passages, head_of
from lcr.models.loading import load_embedder, load_llm
from lcr.models.spec import ModelSpec
from lcr.progress import NULL_PROGRESS

SHARED = Path(
    os.environ.get("LCR_SHARED_DATA", Path(__file__).resolve().parents[3] / "shared" / "data")
)
DATA = SHARED / "odsum" / "story_docs_dev.jsonl"


def odsum_passages(shape: str) -> list[str]:
    texts: list[str] = []
    with DATA.open(encoding="utf-8") as fh:
        for line in fh:
            sections = [s.strip() for s in json.loads(line)["divided_document"] if s.strip()]
            if shape == "sections":
                texts.extend(sections)
            else:
                doc = "\n\n".join(sections)
                texts.extend(p.text for p in cut_passages([(0, 0, doc)], "chars", 1000))
    return texts


def cut_pair(llm: Any, context: str, cont: str, budget: int) -> tuple[str, str]:
    """The pair as the build scores it: d_i's end and d_j's start within ``budget`` tokens."""
    from lcr.models.base import split_token_budget

    a, b = llm.encode(context), llm.encode(cont)
    n_a, n_b = split_token_budget(len(a), len(b), budget)
    return llm.tokenizer.decode(a[-n_a:]), llm.tokenizer.decode(b[:n_b])


def bench_scoring(args: argparse.Namespace) -> dict[str, Any]:
    texts = odsum_passages(args.passages)
    embedder = load_embedder(ModelSpec(device="cpu"), NULL_PROGRESS)
    picks = list(range(0, len(texts), max(1, len(texts) // args.prefixes)))[: args.prefixes]
    emb = embedder.encode(texts)
    cands = dense_candidates(np.asarray(emb), args.candidates)
    llm: Any = load_llm(ModelSpec(llm=args.scorer, device="cpu"), NULL_PROGRESS)
    out: dict[str, Any] = {
        "scorer": args.scorer,
        "passages": args.passages,
        "corpus_passages": len(texts),
        "mean_chars": round(float(np.mean([len(t) for t in texts])), 1),
        "prefixes": len(picks),
        "candidates": args.candidates,
    }
    pairs = len(picks) * args.candidates
    timings: dict[str, float] = {}
    cpu: dict[str, float] = {}  # process CPU seconds: steadier than wall time on a busy machine
    batched: list[float] = []
    c = time.process_time()
    t = time.perf_counter()
    for i in picks:
        got = llm.continuation_logprobs(texts[i], [texts[j] for j in cands[i]], max_tokens=1024)
        batched.extend(s.mean for s in got)
    timings["batched"] = time.perf_counter() - t
    cpu["batched"] = time.process_time() - c
    single: list[float] = []
    forget = getattr(llm, "reset_cache", None)  # llama.cpp would reuse d_i from its cache
    c = time.process_time()
    t = time.perf_counter()
    for i in picks:
        for j in cands[i]:
            ctx, cont = cut_pair(llm, texts[i], texts[j], 1024)
            if forget is not None:
                forget()
            single.append(llm.continuation_logprob(ctx, cont) / max(len(llm.encode(cont)), 1))
    timings["one_at_a_time"] = time.perf_counter() - t
    cpu["one_at_a_time"] = time.process_time() - c
    c = time.process_time()
    t = time.perf_counter()
    for i in picks:
        heads = [head_of(texts[j], args.head_tokens) for j in cands[i]]
        llm.continuation_logprobs(texts[i], heads, max_tokens=1024)
    timings[f"batched_first_{args.head_tokens}_tokens"] = time.perf_counter() - t
    cpu[f"batched_first_{args.head_tokens}_tokens"] = time.process_time() - c
    out["pairs"] = pairs
    out["seconds"] = {k: round(v, 2) for k, v in timings.items()}
    out["pairs_per_s"] = {k: round(pairs / v, 3) for k, v in timings.items()}
    out["cpu_seconds"] = {k: round(v, 2) for k, v in cpu.items()}
    out["speedup_batched"] = round(timings["one_at_a_time"] / timings["batched"], 2)
    # the two ways agree (decoding the cut pair may shift a token at the cut)
    out["max_abs_diff_mean_logprob"] = round(
        float(np.max(np.abs(np.array(batched) - np.array(single)))), 4
    )
    n = len(texts)
    for k_prime, key in (
        (100, "batched"),
        (args.fast_candidates, f"batched_first_{args.head_tokens}_tokens"),
    ):
        total = n * min(k_prime, n - 1)
        out[f"estimate_h_k{k_prime}_{key}"] = round(total / (pairs / timings[key]) / 3600, 2)
    return out


def bench_walk(n: int = 10_000, questions: int = 50) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    targets = [rng.choice(n, size=5, replace=False) for _ in range(n)]
    t = time.perf_counter()
    walk = Walk.from_edges(edge_matrix(n, targets, [np.ones(5)] * n))
    prepare = time.perf_counter() - t
    times = []
    for _ in range(questions):
        ranking = rng.permutation(n)[:20].tolist()
        t = time.perf_counter()
        context_passages(walk, ranking, 10, initial_share=0.6, restart_top=20, alpha=0.2)
        times.append(time.perf_counter() - t)
    ms = np.array(times) * 1000
    return {
        "passages": n,
        "edges": 5 * n,
        "prepare_ms_once_per_index": round(prepare * 1000, 1),
        "context_ms_median": round(float(np.median(ms)), 2),
        "context_ms_max": round(float(ms.max()), 2),
    }


def bench_odsum(args: argparse.Namespace) -> dict[str, Any]:
    import hashlib
    import resource

    from lcr import api
    from lcr.eval.convert import odsum
    from lcr.models.container import Models
    from lcr.store import Document, Index

    if args.unscored:
        _skip_scorer(args.set)
    questions = odsum(DATA.parent)
    docs = questions[0].documents
    if args.stories:  # a corpus of the first N stories, and only their queries
        docs = docs[: args.stories]
        kept = {d.id for d in docs}
        questions = [q for q in questions if q.evidence[0].doc in kept]
    path = Path(args.odsum)
    sets = [*args.set, "lightpal.passages=sections"]
    if (path / "manifest.json").exists():
        index = Index.open(path)
    else:
        inputs = [
            Document(
                d.id, d.text, hashlib.sha256(d.text.encode()).hexdigest(), len(d.text.encode())
            )
            for d in docs
        ]
        index = Index.create(path, inputs)
    models = Models(spec=ModelSpec(device="cpu"))
    t = time.perf_counter()
    api.plan_and_build(index, ["lightpal"], models, sets, warn=print)
    build_s = time.perf_counter() - t
    entry = index.methods["lightpal"]
    nodes = index.reader("lightpal").nodes()
    per_doc = np.bincount([n.doc for n in nodes], minlength=len(docs))
    doc_of = {d.id: i for i, d in enumerate(docs)}
    runs: dict[str, list[str]] = {}
    for base in ("bm25", "dense"):
        runs[base] = [f"lightpal.initial={base}", "lightpal.initial_share=1"]
        for restart in RESTARTS:
            runs[f"lightpal on {base}, restart={restart}"] = [
                f"lightpal.initial={base}",
                f"lightpal.restart={restart}",
                *args.query_set,
            ]
    ks = (5, 10, 20)
    table: dict[str, dict[str, list[float]]] = {r: {} for r in runs}
    chosen = questions[: args.limit]
    for q in chosen:
        gold = doc_of[q.evidence[0].doc or ""]
        for run, qsets in runs.items():
            for k in ks:
                res = api.plan_and_retrieve(index, "lightpal", q.question, models, qsets, k=k)
                hits = sum(1 for it in res.evidence.items if it.doc == gold)
                table[run].setdefault(f"P@{k}", []).append(hits / k)
                table[run].setdefault(f"R@{k}", []).append(hits / int(per_doc[gold]))
    summary = {
        run: {
            m: [
                round(float(np.mean(v)), 4),
                round(1.96 * float(np.std(v, ddof=1)) / len(v) ** 0.5, 4),
            ]
            for m, v in metrics.items()
        }
        for run, metrics in table.items()
        if metrics
    }
    paired = paired_tests(table)
    # what the graph links: edges inside a story, and how many go to a few hubs
    edges = index.reader("lightpal").csr("edges").tocoo()
    story = np.array([n.doc for n in nodes])
    in_degree = np.sort(np.bincount(edges.col, minlength=len(nodes)))[::-1]
    graph = {
        "edges": int(edges.nnz),
        "same_story_share": round(float((story[edges.row] == story[edges.col]).mean()), 3),
        "top10_in_degree_share": round(float(in_degree[:10].sum() / max(edges.nnz, 1)), 3),
        "max_in_degree": int(in_degree[0]) if len(in_degree) else 0,
        "passages_without_in_edges": int((in_degree == 0).sum()),
    }
    if args.per_query:
        Path(args.per_query).write_text(json.dumps(table))
    if args.against:
        paired.update(against(table, json.loads(Path(args.against).read_text())))
    return {
        "query_settings": args.query_set,
        "stories": len(docs),
        "queries": len(chosen),
        "passages": len(nodes),
        "gold_passages_mean": round(
            float(np.mean([per_doc[doc_of[q.evidence[0].doc or ""]] for q in chosen])), 2
        ),
        "build": {
            "settings": entry.settings,
            "stats": {k: v for k, v in entry.stats.items() if k != "seconds"},
            "build_s_this_run": round(build_s, 1),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        },
        "graph": graph,
        "metrics_mean_and_95pct_halfwidth": summary,
        "paired_bootstrap_diff_low_high_p": paired,
    }


def _skip_scorer(sets: list[str]) -> None:
    """--unscored: no scorer model, every pair scored 0 (k' = k keeps every candidate)."""
    import lcr.models.loading as loading
    from lcr.methods.lightpal.scoring import PairScorer
    from lcr.models.container import Models

    values = dict(s.split("=", 1) for s in sets)
    if values.get("lightpal.candidates") != values.get("lightpal.edges"):
        raise SystemExit("--unscored needs lightpal.candidates = lightpal.edges (k' = k)")

    class NoScorer:
        model_id = "unscored"
        backend = "none"

    def score_all(self: Any, texts: Any, conts: Any, candidates: Any, task_of: Any) -> Any:
        return [np.zeros(len(c)) for c in candidates]

    loading.check_available = lambda *args, **kwargs: None  # no scorer model to look for
    Models.scorer = property(lambda self: NoScorer())  # type: ignore[assignment,method-assign]
    PairScorer.score_all = score_all  # type: ignore[method-assign]


RESTARTS = ("d_init", "ranking")  # lightpal.restart: the two readings of section 5.1


def paired_tests(table: dict[str, dict[str, list[float]]]) -> dict[str, dict[str, list[float]]]:
    """Per metric, the paired bootstrap of each LightPAL run against its initial retriever
    and of the two restart readings against each other (same queries, lcr.eval.stats)."""
    from lcr.eval.stats import paired_bootstrap

    pairs: list[tuple[str, str]] = []
    for base in ("bm25", "dense"):
        d_init, ranking = (f"lightpal on {base}, restart={r}" for r in RESTARTS)
        pairs += [(d_init, base), (ranking, base), (d_init, ranking)]
    out: dict[str, dict[str, list[float]]] = {}
    for a, b in pairs:
        if not table[a]:
            continue
        out[f"{a} - {b}"] = {
            m: [
                round(t.diff, 4),
                round(t.low, 4),
                round(t.high, 4),
                round(t.p_value, 4),
            ]
            for m in table[a]
            for t in [paired_bootstrap(table[a][m], table[b][m])]
        }
    return out


def against(
    table: dict[str, dict[str, list[float]]], other: dict[str, dict[str, list[float]]]
) -> dict[str, dict[str, list[float]]]:
    """Each LightPAL row of this run against the same row of another graph's run
    (``--per-query`` of it: the same queries in the same order), paired per query."""
    from lcr.eval.stats import paired_bootstrap

    out: dict[str, dict[str, list[float]]] = {}
    for run, metrics in table.items():
        if not run.startswith("lightpal") or run not in other:
            continue
        tests = {m: paired_bootstrap(v, other[run][m]) for m, v in metrics.items()}
        out[f"{run}: this graph - the other"] = {
            m: [round(t.diff, 4), round(t.low, 4), round(t.high, 4), round(t.p_value, 4)]
            for m, t in tests.items()
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scorer", default="smollm2-135m")
    ap.add_argument("--passages", choices=("sections", "chars"), default="sections")
    ap.add_argument("--prefixes", type=int, default=2)
    ap.add_argument("--candidates", type=int, default=8)
    ap.add_argument("--head-tokens", type=int, default=32)
    ap.add_argument("--fast-candidates", type=int, default=20)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--walk-only", action="store_true")
    ap.add_argument("--odsum", metavar="INDEX", help="ODSum Story retrieval run (see above)")
    ap.add_argument("--set", action="append", default=[], help="lightpal build setting")
    ap.add_argument(
        "--query-set", action="append", default=[], help="lightpal query setting (--odsum runs)"
    )
    ap.add_argument("--limit", type=int, default=125)
    ap.add_argument(
        "--stories", type=int, default=0, help="--odsum on the first N stories only (0: all 25)"
    )
    ap.add_argument("--unscored", action="store_true", help="k' = k: skip the scorer (see above)")
    ap.add_argument("--per-query", metavar="JSON", help="write every query's P@k and R@k here")
    ap.add_argument(
        "--against", metavar="JSON", help="paired tests against another graph's --per-query"
    )
    args = ap.parse_args()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    if args.odsum:
        print(json.dumps({"odsum": bench_odsum(args)}))
        return
    print(json.dumps({"walk": bench_walk()}))
    if not args.walk_only:
        print(json.dumps({"scoring": bench_scoring(args)}))


if __name__ == "__main__":
    main()
