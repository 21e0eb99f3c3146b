"""Chunker speed on real text repeated to a size (run by hand; no asserts on time).

.venv/bin/python bench/archive/bench_chunkers.py --mb 4
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from lcr.text.chunking import sentence_word_chunks, split_sentences, token_windows

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"


def corpus(megabytes: float) -> str:
    base = [(DATA / "stories" / "cinderella.txt").read_text()]
    for line in (DATA / "squality" / "dev.jsonl").read_text().splitlines():
        base.append(json.loads(line)["document"])
    text = "\n\n".join(base)
    reps = max(1, int(megabytes * 1_000_000 // len(text)) + 1)
    return ("\n\n".join([text] * reps))[: int(megabytes * 1_000_000)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=4.0)
    text = corpus(ap.parse_args().mb)
    for name, fn in [
        ("split_sentences", lambda: split_sentences(text)),
        ("sentence_word_chunks", lambda: sentence_word_chunks(text)),
        ("token_windows(100)", lambda: token_windows(text, 100)),
    ]:
        t0 = time.perf_counter()
        out = fn()
        print(f"{name:24} {time.perf_counter() - t0:6.2f} s  {len(out):,} chunks")


if __name__ == "__main__":
    main()
