"""Would PECAN's build be faster if llama.cpp wrote the points and transformers read the
reply back for the attention? (issue 55; measured, not built: docs/speed.md).

PECAN's build decodes each batch's Information Points on transformers while it captures
each generated token's attention to the batch's nodes (``generate_with_attention``). The
same rows can be had after the fact: run the prompt, then feed the reply's tokens on its
cache with weights; causal attention gives each reply position the row it had when its
token was fed back while decoding. So a faster decoder could write the reply and
transformers read it once. This times, on one batch of the build's own prompt (Table A1
over the text's first ``--s`` tokens of 300-token chunks):

- ``capture``: lcr's build call, decode and capture in one;
- ``write``: the same GGUF on llama.cpp, greedy, from the same token ids;
- ``read``: transformers' one pass over the prompt and then the written reply;

and checks that the read-back rows equal the captured ones for the same tokens
(``--check``: the captured reply read back, the largest difference printed).

    PYTHONPATH=. nice python bench/archive/pecan_read_after.py --llm qwen2.5-coder-1.5b \\
        --text book.txt --s 8192 --new 512
    PYTHONPATH=. python bench/archive/pecan_read_after.py --llm smollm2-135m --s 7500 \\
        --new 128 --check
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def read_back(llm: Any, prompt: list[int], spans: Any, reply: list[int]) -> tuple[Any, float]:
    """Each reply token's attention to the prompt's spans, read in one pass after the
    prompt's own (mean over layers and heads, as the build's capture); the prompt's
    seconds."""
    import torch

    from lcr.models.transformers_attend import attention_weights, span_mean_matrix

    started = time.perf_counter()
    with torch.no_grad():
        out = llm.model(input_ids=torch.tensor([prompt]), use_cache=True, logits_to_keep=1)
    prefill = time.perf_counter() - started
    modules = llm.attention_modules()
    total: list[Any] = []

    def hook(_module: Any, _args: Any, output: Any) -> None:
        rows = attention_weights(output, llm.model_id)[0, :, :, : len(prompt)].float().sum(0)
        if total:
            total[0] += rows
        else:
            total.append(rows)

    handles = [m.register_forward_hook(hook) for m in modules]
    try:
        with torch.no_grad(), llm.weights_attention():
            llm.model(input_ids=torch.tensor([reply]), cache=out.cache, use_cache=True)
    finally:
        for h in handles:
            h.remove()
    heads = int(llm.model.config.num_attention_heads)
    mean = total[0] / (len(modules) * heads)
    return mean @ span_mean_matrix(spans, len(prompt)), prefill


def write(writer: Any, prompt: list[int], new: int) -> tuple[list[int], float]:
    """llama.cpp's greedy reply to the token ids (no end token); the prompt's seconds."""
    started = time.perf_counter()
    logits, _ = writer._extend_seq0(list(prompt))
    prefill = time.perf_counter() - started
    reply: list[int] = []
    while len(reply) < new:
        token = int(logits.argmax())
        if writer._is_end(token):
            break
        reply.append(token)
        if len(reply) < new:
            logits = writer._decode_one(token)
    return reply, prefill


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--llm", default="smollm2-135m")
    ap.add_argument("--text", default=str(REPO / "examples" / "lighthouse.txt"))
    ap.add_argument("--s", type=int, default=7500, help="the batch's node tokens (pecan.s)")
    ap.add_argument("--new", type=int, default=128, help="pecan.points_max_new_tokens")
    ap.add_argument("--check", action="store_true", help="read the captured reply back too")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    from lcr.methods.pecan.build import leaf_nodes
    from lcr.methods.pecan.graph import batch_nodes
    from lcr.methods.pecan.prompts import build_prompt
    from lcr.models.loading import load_llm
    from lcr.models.spec import ModelSpec
    from lcr.progress import NULL_PROGRESS

    spec = ModelSpec(llm=args.llm, device="cpu")
    llm = load_llm(spec, NULL_PROGRESS, backend="transformers")
    text = Path(args.text).read_text(encoding="utf-8")
    text = "\n\n".join([text] * (1 + 2 * args.s // max(1, llm.count_tokens(text))))
    leaves = leaf_nodes([(0, 0, text)], llm.count_tokens, 300)
    batch = batch_nodes([int(n.meta["tokens"]) for n in leaves], args.s)[0]
    prompt = build_prompt(llm, [leaves[j].text for j in batch])
    ids = list(prompt.ids)
    result: dict[str, Any] = {"llm": args.llm, "prompt_tokens": len(ids), "new": args.new}
    result["load_before"] = round(os.getloadavg()[0], 2)
    started = time.perf_counter()
    got = llm.generate_with_attention(ids, spans=prompt.spans, max_new_tokens=args.new)
    result["capture_s"] = round(time.perf_counter() - started, 1)
    result["capture_prefill_s"] = round(got.prefill_seconds, 1)
    result["capture_reply_tokens"] = len(got.tokens)
    print(json.dumps(result), flush=True)
    if args.check:
        rows, _ = read_back(llm, ids, prompt.spans, got.tokens)
        result["read_back_max_difference"] = float((rows - got.attention).abs().max())
    writer = load_llm(spec, NULL_PROGRESS, backend="llamacpp")
    started = time.perf_counter()
    reply, prefill = write(writer, ids, args.new)
    result["write_s"] = round(time.perf_counter() - started, 1)
    result["write_prefill_s"] = round(prefill, 1)
    result["write_reply_tokens"] = len(reply)
    started = time.perf_counter()
    _, prefill = read_back(llm, ids, prompt.spans, reply)
    result["read_s"] = round(time.perf_counter() - started, 1)
    result["read_prefill_s"] = round(prefill, 1)
    result["write_and_read_s"] = round(result["write_s"] + result["read_s"], 1)
    result["speedup"] = round(result["capture_s"] / result["write_and_read_s"], 2)
    same = next(
        (i for i, (a, b) in enumerate(zip(got.tokens, reply, strict=False)) if a != b), None
    )
    result["replies_agree_for_tokens"] = (
        same if same is not None else min(len(reply), len(got.tokens))
    )
    result["load_after"] = round(os.getloadavg()[0], 2)
    print(json.dumps(result), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
