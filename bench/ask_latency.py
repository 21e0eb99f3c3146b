"""What a person at a terminal waits for: a whole ``lcr ask`` process, timed (issue #40).

    python bench/ask_latency.py INDEX "question" ... [--cwd CHECKOUT] [-- extra lcr args]

Each question runs ``python -m lcr ask INDEX QUESTION`` (from ``--cwd``: another
checkout's lcr, for a before-and-after) in a pseudo-terminal, as a person runs it,
and times from the start of the process, imports and model load included:

- ``reading_s``: when ``reading N tokens of evidence`` appears (absent before #40);
- ``first_word_s``: when the first character of the answer (after ``A:``) appears:
  with streaming the model's first word, before it the whole answer;
- ``exit_s``: when the process ends (the evidence listed).

``stream_latency.py`` times the answer step inside one process; this times what
the screen shows. Prints one JSON line per question, with the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

ANSWER = re.compile(rb"A: ?(\S)")
READING = re.compile(rb"reading [\d,]+ tokens")
ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")


def timed_run(argv: list[str], cwd: Path, timeout: float) -> dict[str, object]:
    """Run ``argv`` on a fresh pseudo-terminal; when each milestone first appears."""
    main, child = pty.openpty()
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, stdin=child, stdout=child, stderr=child)
    os.close(child)
    seen = b""
    marks: dict[str, float] = {}
    while True:
        ready, _, _ = select.select([main], [], [], 0.05)
        if ready:
            try:
                data = os.read(main, 4096)
            except OSError:  # the child closed the terminal
                data = b""
            if not data and proc.poll() is not None:
                break
            seen += data
            plain = ANSI.sub(b"", seen)
            now = time.perf_counter() - start
            if "reading_s" not in marks and READING.search(plain):
                marks["reading_s"] = now
            if "first_word_s" not in marks and ANSWER.search(plain):
                marks["first_word_s"] = now
        elif proc.poll() is not None:
            break
        if time.perf_counter() - start > timeout:
            proc.kill()
            break
    proc.wait()
    os.close(main)
    plain = ANSI.sub(b"", seen).decode("utf-8", errors="replace")
    answer = re.search(r"A: ?(.*)", plain)
    return {
        **{k: round(v, 2) for k, v in marks.items()},
        "exit_s": round(time.perf_counter() - start, 2),
        "returncode": proc.returncode,
        "answer": answer.group(1).strip() if answer else None,
        **({"output_tail": plain[-300:]} if proc.returncode else {}),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("index", type=Path)
    ap.add_argument("questions", nargs="+")
    ap.add_argument("--cwd", type=Path, default=Path.cwd(), help="the checkout whose lcr runs")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--timeout", type=float, default=900.0)
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    args, extra = ap.parse_args(argv[:cut]), argv[cut + 1 :]
    for question in args.questions:
        argv = [args.python, "-m", "lcr", "ask", str(args.index.resolve()), question, *extra]
        load = os.getloadavg()[0]
        row = {"question": question, "cwd": str(args.cwd), "load": round(load, 2)}
        row.update(timed_run(argv, args.cwd, args.timeout))
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
