"""Decode speed of two llama.cpp bindings on the same GGUF: llama-cpp-python (what lcr's
llama.cpp backend runs on) and xllamacpp (prebuilt wheels, llama.cpp's server API only).

Each binding runs in its own interpreter (they are installed in separate venvs), the two
alternating round by round so that both see the same load; each run loads the model,
warms up, then times one greedy completion of the same prompt with the end token
ignored, so both decode exactly ``--new-tokens`` tokens. Prompt and decode rates are
llama.cpp's own timings; the run's process CPU seconds are printed beside them, a figure
the load of other jobs moves less than wall time. The load average is printed per run.

    python bench/bench_bindings.py MODEL.gguf \\
        --llama-cpp-python .venv/bin/python --xllamacpp /path/to/xll/bin/python \\
        --rounds 3 --threads 2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# One run, given the GGUF, the prompt file, the threads and the new tokens as argv.
LLAMA_CPP_PYTHON = r"""
import json, os, sys, time
import llama_cpp
gguf, prompt, threads, n = sys.argv[1], open(sys.argv[2]).read(), int(sys.argv[3]), int(sys.argv[4])
llm = llama_cpp.Llama(gguf, n_ctx=2048, n_batch=512, n_ubatch=256, n_threads=threads,
                      n_threads_batch=threads, verbose=False)
llm.create_completion("Hello", max_tokens=4, temperature=0)
llm.reset()
llama_cpp.llama_perf_context_reset(llm._ctx.ctx)
c0, t0 = os.times(), time.perf_counter()
r = llm.create_completion(prompt, max_tokens=n, temperature=0, top_k=1,
                          logit_bias={llm.token_eos(): -1e9}, seed=0)
wall, c1 = time.perf_counter() - t0, os.times()
perf = llama_cpp.llama_perf_context(llm._ctx.ctx)
print(json.dumps({"prompt_n": perf.n_p_eval, "prompt_tps": perf.n_p_eval / perf.t_p_eval_ms * 1e3,
    "decode_n": r["usage"]["completion_tokens"], "decode_tps": perf.n_eval / perf.t_eval_ms * 1e3,
    "wall_s": wall, "cpu_s": (c1.user - c0.user) + (c1.system - c0.system),
    "text": r["choices"][0]["text"]}))
"""

XLLAMACPP = r"""
import json, os, sys, time
import xllamacpp as xlc
gguf, prompt, threads, n = sys.argv[1], open(sys.argv[2]).read(), int(sys.argv[3]), int(sys.argv[4])
p = xlc.CommonParams()
p.model.path = gguf
p.n_ctx, p.n_batch, p.n_ubatch, p.n_parallel = 2048, 512, 256, 1
p.cpuparams.n_threads = threads
p.cpuparams_batch.n_threads = threads
p.verbosity = 0
s = xlc.Server(p)
s.handle_completions({"prompt": "Hello", "max_tokens": 4, "temperature": 0, "cache_prompt": False})
c0, t0 = os.times(), time.perf_counter()
r = s.handle_completions({"prompt": prompt, "max_tokens": n, "temperature": 0, "top_k": 1,
                          "ignore_eos": True, "cache_prompt": False, "seed": 0})
wall, c1 = time.perf_counter() - t0, os.times()
t = r["timings"]
print(json.dumps({"prompt_n": t["prompt_n"], "prompt_tps": t["prompt_per_second"],
    "decode_n": t["predicted_n"], "decode_tps": t["predicted_per_second"],
    "wall_s": wall, "cpu_s": (c1.user - c0.user) + (c1.system - c0.system),
    "text": r["choices"][0]["text"]}))
"""


def _prompt(path: Path) -> Path:
    """The first 300 words of the sample story and a question: about 370 tokens."""
    words = (REPO / "examples" / "lighthouse.txt").read_text(encoding="utf-8").split()
    path.write_text(" ".join(words[:300]) + "\n\nQuestion: What happened next? Answer:")
    return path


def _run(python: str, code: str, args: list[str]) -> dict[str, object]:
    done = subprocess.run(
        [python, "-c", code, *args], capture_output=True, text=True, timeout=1800, check=False
    )
    if done.returncode != 0:
        sys.exit(f"{python} failed: {done.stderr.strip()[-400:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("gguf", type=Path)
    ap.add_argument("--llama-cpp-python", required=True, help="a python with llama_cpp")
    ap.add_argument("--xllamacpp", required=True, help="a python with xllamacpp")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--new-tokens", type=int, default=128)
    args = ap.parse_args()
    prompt = _prompt(Path(os.environ.get("TMPDIR", "/tmp")) / "lcr_bench_bindings_prompt.txt")
    argv = [str(args.gguf), str(prompt), str(args.threads), str(args.new_tokens)]
    runs: dict[str, list[dict[str, object]]] = {"xllamacpp": [], "llama-cpp-python": []}
    for rnd in range(1, args.rounds + 1):
        for name, python, code in (
            ("xllamacpp", args.xllamacpp, XLLAMACPP),
            ("llama-cpp-python", args.llama_cpp_python, LLAMA_CPP_PYTHON),
        ):
            load = os.getloadavg()[0]
            got = _run(python, code, argv)
            got.update(binding=name, round=rnd, load1_before=load, load1_after=os.getloadavg()[0])
            runs[name].append(got)
            print(
                json.dumps(
                    {
                        k: round(v, 2) if isinstance(v, float) else v
                        for k, v in got.items()
                        if k != "text"
                    }
                ),
                flush=True,
            )
    texts = {str(r["text"]) for rs in runs.values() for r in rs}
    print(f"same greedy text from every run: {len(texts) == 1}")
    for name, rs in runs.items():
        med = {
            k: statistics.median(float(str(r[k])) for r in rs)
            for k in ("decode_tps", "prompt_tps", "cpu_s")
        }
        print(
            f"{name}: median decode {med['decode_tps']:.1f} tok/s, prompt "
            f"{med['prompt_tps']:.1f} tok/s, {med['cpu_s']:.2f} CPU s per run "
            f"({len(rs)} runs, threads={args.threads})"
        )


if __name__ == "__main__":
    main()
