"""The load ``lcr serve`` saves: a later question's time to first token through the
server against a fresh ``lcr ask`` process, same question, index and model (issue #57).

    python bench/archive/serve_latency.py INDEX "question" ... [--llm MODEL] [-m METHOD] [-k K]

For each question, in this order:

- ``cli``: a fresh ``python -m lcr ask INDEX QUESTION`` on a pseudo-terminal (as a
  person runs it, imports and model loads included), timed by ``ask_latency.py``'s
  ``timed_run``: ``first_word_s`` (the answer's first character on screen) and
  ``exit_s``;
- ``server``: the same question through one ``lcr serve`` (stdio) started once for
  the run, with the SDK's client: ``first_piece_s`` (the first progress notification
  carrying answer text, from sending the call) and ``whole_s`` (the result). The
  first question also loads the server's models; the later ones are what an agent
  waits for.

Prints one JSON line per measurement (with the load average), then a summary line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: ask_latency
from ask_latency import timed_run


async def through_server(
    index: Path, questions: list[str], extra: list[str], arguments: dict[str, Any]
) -> list[dict[str, Any]]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "lcr", "serve", str(index), *extra],
        env=dict(os.environ),
    )
    rows = []
    started = time.perf_counter()
    async with Client(params, read_timeout_seconds=1800) as client:
        connected = time.perf_counter() - started
        for n, question in enumerate(questions):
            first: list[float] = []
            sent = time.perf_counter()

            async def progressed(
                done: float,
                total: float | None,
                message: str | None,
                first: list[float] = first,
                sent: float = sent,
            ) -> None:
                if message and not first:
                    first.append(time.perf_counter() - sent)

            load = os.getloadavg()[0]
            result = await client.call_tool(
                "ask", {"index": index.name, "question": question, **arguments},
                progress_callback=progressed,
            )  # fmt: skip
            whole = time.perf_counter() - sent
            answer = (result.structured_content or {}).get("answer")
            rows.append(
                {
                    "how": "server",
                    "question": question,
                    "nth_call": n + 1,
                    "server_start_s": round(connected, 2) if n == 0 else None,
                    "first_piece_s": round(first[0], 2) if first else None,
                    "whole_s": round(whole, 2),
                    "error": result.is_error,
                    "answer": answer,
                    "load": round(load, 2),
                }
            )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("index", type=Path)
    ap.add_argument("questions", nargs="+")
    ap.add_argument("--llm", default="qwen2.5-coder-1.5b")
    ap.add_argument("-m", "--method", default="bm25")
    ap.add_argument("-k", type=int, default=None)
    ap.add_argument("--timeout", type=float, default=1800.0)
    args = ap.parse_args()
    index = args.index.resolve()
    model = ["--llm", args.llm]
    query = ["-m", args.method, *(["-k", str(args.k)] if args.k else [])]
    rows = []
    for question in args.questions:
        argv = [sys.executable, "-m", "lcr", "ask", str(index), question, *query, *model]
        load = os.getloadavg()[0]
        row = {"how": "cli", "question": question, "load": round(load, 2)}
        row.update(timed_run(argv, Path.cwd(), args.timeout))
        print(json.dumps(row), flush=True)
        rows.append(row)
    arguments: dict[str, Any] = {"method": args.method}
    if args.k:
        arguments["k"] = args.k
    served = anyio.run(through_server, index, args.questions, model, arguments)
    for row in served:
        print(json.dumps(row), flush=True)
    later = [r["first_piece_s"] for r in served[1:] if r["first_piece_s"] is not None]
    cli = [r["first_word_s"] for r in rows if r.get("first_word_s") is not None]
    if later and cli:
        summary = {
            "summary": "median time to first token",
            "cli_fresh_process_s": round(statistics.median(cli), 2),
            "server_later_question_s": round(statistics.median(later), 2),
            "server_first_question_s": served[0]["first_piece_s"],
            "llm": args.llm,
            "method": args.method,
        }
        print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
