"""What a ``--force`` rebuild pays after a one-word edit (issue 37, row 4).

The first SQuALITY dev story of about 6.5k tokens (``$LCR_SHARED_DATA/squality/dev.jsonl``,
a Project Gutenberg text) is copied to a temporary folder and indexed with RAPTOR and
GraphReader through the CLI; then one word in the middle of the story is changed and
the index rebuilt with ``--force``; then ``--force`` again with the same text. Each
step's LLM calls paid and served from the index's cache are read from the manifest
(``lcr info --json``: ``stats.llm_calls`` and ``stats.llm_cached``).

    .venv/bin/python bench/archive/bench_force_cache.py --llm smollm2-135m
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("LCR_SHARED_DATA", REPO.parent / "shared" / "data"))


def lcr(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "lcr", *args], cwd=cwd, env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        sys.exit(f"lcr {' '.join(args)} failed: {done.stderr.strip()}")
    return done


def story() -> str:
    with (DATA / "squality" / "dev.jsonl").open(encoding="utf-8") as fh:
        return str(json.loads(fh.readline())["document"])


def one_word_changed(text: str) -> tuple[str, str]:
    """The text with the first word of 6+ letters after its middle replaced."""
    middle = len(text) // 2
    start = middle + text[middle:].index(" ") + 1
    end = text.index(" ", start)
    word = text[start:end]
    while not (word.isalpha() and len(word) >= 6):
        start = end + 1
        end = text.index(" ", start)
        word = text[start:end]
    return text[:start] + "zeppelin" + text[end:], word


def stats(folder: Path, methods: list[str]) -> dict[str, dict[str, Any]]:
    manifest = json.loads(lcr("info", "s.idx", "--json", cwd=folder).stdout)
    return {
        m: {k: manifest["methods"][m]["stats"].get(k) for k in ("llm_calls", "llm_cached")}
        for m in methods
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llm", default="smollm2-135m")
    parser.add_argument("--method", action="append", default=None)
    args = parser.parse_args()
    methods = args.method or ["raptor", "graphreader"]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        text = story()
        (folder / "s.txt").write_text(text, encoding="utf-8")
        build = ["index", "s.txt", "-o", "s.idx", "--llm", args.llm, "-q"]
        build += [f"--method={m}" for m in methods]
        rows = []
        for step in ("first build", "one word edited, --force", "same text, --force"):
            if step.startswith("one word"):
                edited, word = one_word_changed(text)
                (folder / "s.txt").write_text(edited, encoding="utf-8")
                step += f" ({word!r} -> 'zeppelin')"
            started = time.perf_counter()
            lcr(*build, *([] if step == "first build" else ["--force"]), cwd=folder)
            rows.append((step, time.perf_counter() - started, stats(folder, methods)))
        from lcr.text.tokens import count_tokens

        print(f"story: {count_tokens(text)} tokens; --llm {args.llm}")
        for step, seconds, found in rows:
            paid = ", ".join(
                f"{m} {s['llm_calls']} paid / {s['llm_cached']} cached" for m, s in found.items()
            )
            print(f"{step}: {paid} ({seconds:.0f} s)")


if __name__ == "__main__":
    main()
