"""What one PECAN build batch costs at its real length, against what the estimate prices.

PECAN's build sends batches of up to ``s`` (8,192) tokens through transformers'
``generate_with_attention``; the estimate prices them from lcr's short rate probe
(``measure_rates``: prompts of ~50-400 tokens). This loads the model on
transformers, measures lcr's probe once and the estimate's probe at the longest
length (``measure_attention_cost``), then times, in alternating rounds, one
``generate_with_attention`` of a real build prompt (SQuALITY dev text cut into
300-token chunks, ``build_prompt`` with its spans) at each prompt length, writing
``--new`` tokens: its prefill apart (``prefill_seconds``), and its decoding as the
rest of the call. Beside each, what ``llm_seconds`` prices for the same call with
lcr's short probe alone (the estimate before issue 55's fix) and with the probe at
the batch's length as well (the estimate now).

    PYTHONPATH=. nice python bench/pecan_batch_cost.py --lengths 1000,2000,4000,7500
    PYTHONPATH=. nice python bench/pecan_batch_cost.py --lengths 7500 --new 512 --rounds 1
    PYTHONPATH=. python bench/pecan_batch_cost.py --reprice book.txt OLD.json NEW.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

SHARED = Path(
    os.environ.get("LCR_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")
)


def _load(name: str) -> Any:
    from lcr.models.loading import load_llm
    from lcr.models.spec import ModelSpec
    from lcr.progress import NULL_PROGRESS

    return load_llm(ModelSpec(llm=name, device="cpu", backend="transformers"), NULL_PROGRESS)


def _prompts(llm: Any, lengths: list[int]) -> dict[int, Any]:
    """A build prompt of about each length: the build's 300-token chunks of SQuALITY dev."""
    from lcr.methods.pecan.prompts import build_prompt
    from lcr.text.chunking import token_windows

    stories = []
    with (SHARED / "squality" / "dev.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            stories.append(json.loads(line)["document"])
            if sum(len(s) for s in stories) > 4 * 4 * max(lengths):
                break
    chunks = [c.text for c in token_windows("\n\n".join(stories), 300, count=llm.count_tokens)]
    out = {}
    for n in lengths:
        taken: list[str] = []
        prompt = build_prompt(llm, taken)
        while len(prompt.ids) < n:
            taken.append(chunks[len(taken)])
            prompt = build_prompt(llm, taken)
        out[n] = prompt
    return out


def _call(llm: Any, prompt: Any, new: int) -> tuple[float, float, int]:
    """Seconds of the whole call, of its prefill alone, and the tokens it wrote."""
    started = time.perf_counter()
    gen = llm.generate_with_attention(prompt.ids, spans=prompt.spans, max_new_tokens=new)
    return time.perf_counter() - started, gen.prefill_seconds, gen.completion_tokens


def _priced(rates: Any, long: Any, prompt: int, reply: int) -> float:
    from lcr.estimate.calls import one_attention_call
    from lcr.pipeline.estimate import llm_seconds

    return llm_seconds(one_attention_call(prompt, reply), rates, long).expected


def reprice(text: str, rates_file: str, long_file: str, llm: str) -> None:
    """PECAN's estimate of ``text`` priced before and after the fix, from stored rates:
    lcr's probe (the ``smollm2|transformers`` entry of a ``throughput.json``) and the
    probe at the batches' length (an ``attention@`` entry), scaled to the first's load,
    as the estimate scales cached rates. Loads the tokenizer only."""
    from lcr.estimate.throughput import LongAttention, Rates
    from lcr.models.container import Models
    from lcr.models.spec import ModelSpec
    from lcr.pipeline.estimate import estimate_index, llm_seconds
    from lcr.text.inputs import expand_inputs

    def entry(path: str, long: bool) -> dict[str, Any]:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        (found,) = [
            v
            for k, v in data.items()
            if f"|{llm}|transformers|" in k and ("|attention@" in k) == long
        ]
        return dict(found)

    short = entry(rates_file, False)
    rates = Rates(**{k: v for k, v in short.items() if k in Rates.__dataclass_fields__})
    long = LongAttention(**entry(long_file, True)).at_load(rates.load_avg)
    models = Models(spec=ModelSpec(llm=llm))
    _, (bill,) = estimate_index(
        expand_inputs([Path(text)]), "/nonexistent.idx", ["pecan"], models, timed=False
    )
    work = bill.work.llm
    before, after = llm_seconds(work, rates), llm_seconds(work, rates, long)
    print(
        json.dumps(
            {
                "calls": work.calls.to_json(),
                "prompt_tokens": work.prompt_tokens.to_json(),
                "probe_length": work.probe_length,
                "rates_load": rates.load_avg,
                "long": long.to_json(),
                "llm_seconds_before": before.to_json(),
                "llm_seconds_after": after.to_json(),
                "per_call_before": round(before.expected / work.calls.expected, 1),
                "per_call_after": round(after.expected / work.calls.expected, 1),
            }
        )
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "--reprice",
        nargs=3,
        metavar=("TEXT", "RATES_JSON", "LONG_JSON"),
        help="price PECAN's estimate of TEXT before and after, from stored rates",
    )
    ap.add_argument("--llm", default="smollm2-135m")
    ap.add_argument("--lengths", default="1000,2000,4000,7500")
    ap.add_argument("--new", type=int, default=17, help="reply tokens of each call")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument(
        "--probe-at",
        type=int,
        default=0,
        help="the estimate's probe length "
        "(default: the longest prompt, as PECAN's estimate probes its batches')",
    )
    args = ap.parse_args()
    if args.reprice:
        reprice(*args.reprice, llm=args.llm)
        return
    from lcr.estimate import throughput

    lengths = [int(x) for x in args.lengths.split(",")]
    llm = _load(args.llm)
    prompts = _prompts(llm, lengths)
    started = time.perf_counter()
    rates = throughput.measure_rates(llm, 0.0)
    print(f"lcr's probe: {time.perf_counter() - started:.0f} s, load {os.getloadavg()[0]:.1f}")
    print(json.dumps(rates.to_json()))
    at = args.probe_at or max(len(p.ids) for p in prompts.values())
    started = time.perf_counter()
    long = throughput.measure_attention_cost(llm, throughput.probe_length(at, llm.context_window))
    print(
        f"the probe at {long.length}: {time.perf_counter() - started:.0f} s, "
        f"{json.dumps(long.to_json())}",
        flush=True,
    )
    times: dict[int, list[tuple[float, float, int, float]]] = {n: [] for n in lengths}
    for r in range(args.rounds):
        order = lengths if r % 2 == 0 else lengths[::-1]
        for n in order:
            load = os.getloadavg()[0]
            whole, prefill, written = _call(llm, prompts[n], args.new)
            times[n].append((whole, prefill, written, load))
            print(
                f"round {r} n={len(prompts[n].ids)}: {whole:.1f} s, prefill {prefill:.1f} s, "
                f"{written} tokens, load {load:.1f}",
                flush=True,
            )
    print(
        "| prompt tokens | load (1-min) | prefill s | decode tokens/s | call s (median) | "
        "estimate before, s | estimate now, s |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|")
    for n in lengths:
        p = len(prompts[n].ids)
        whole = statistics.median(t[0] for t in times[n])
        prefill = statistics.median(t[1] for t in times[n])
        written = statistics.median(t[2] for t in times[n])
        decode = statistics.median(t[2] / max(t[0] - t[1], 1e-6) for t in times[n])
        loads = [t[3] for t in times[n]]
        reply = int(written)
        print(
            f"| {p:,} | {min(loads):.1f}-{max(loads):.1f} | {prefill:.1f} | {decode:.1f} | "
            f"{whole:.1f} | {_priced(rates, None, p, reply):.1f} | "
            f"{_priced(rates, long, p, reply):.1f} |"
        )


if __name__ == "__main__":
    main()
