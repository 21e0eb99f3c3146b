"""What a collection that grows and shrinks pays (issue 43, item 2).

For each method: an index of N SQuALITY dev stories (``$LCR_SHARED_DATA/squality/
dev.jsonl``, Project Gutenberg texts, each cut to ``--doc-chars``) is built through
the CLI; the longest of the other stories (38,795 characters, about 9.7k tokens; cut
to ``--added-chars``) is indexed alone, for what it needs by itself; then it is added to a
copy of the N-story index with ``lcr index NEW -o grown.idx --add``, and finally the
first story is removed with ``lcr remove``. What each step paid is read from the
manifest: LLM calls made (``llm_usage.calls``) and served from the cache
(``llm_cached``), and for LightPAL the pairs scored and read back. Ratio: what
the add paid over what the story alone needs (target at most 1.5 for GraphReader
and LightPAL).

    .venv/bin/python bench/bench_collections.py --llm smollm2-135m --docs 20 \\
        --doc-chars 4000 --added-chars 40000 -m graphreader -m lightpal -m raptor

``--scripted`` counts at full size (every story whole) with a scripted LLM and the
real embedder, handed to the CLI through its seam (``lcr.cli.main.main(argv,
models=...)``): a command that never asks the seam, or a build whose manifest names
another LLM, stops the run with one line rather than measure lcr's own models.
Settings given with ``--set`` apply to every build (e.g. a smaller extraction budget
to keep GraphReader feasible on a loaded CPU); each result is printed as one JSON
line as soon as its method is done, so a partial run still reports.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("LCR_SHARED_DATA", REPO.parent / "shared" / "data"))


# --scripted: the CLI with a scripted LLM and the real embedder, through the CLI's seam
SCRIPTED_LLM = "scripted-test-llm"  # lcr.testing.ScriptedLLM's model_id, as manifests record it
SCRIPTED = (
    f"import sys; sys.path.insert(0, {str(Path(__file__).resolve().parent)!r}); "
    "from bench_collections import scripted_lcr; scripted_lcr(sys.argv[1:])"
)


def scripted_lcr(argv: list[str], entry: Callable[..., object] | None = None) -> NoReturn:
    """``lcr ARGV`` in this process with a scripted LLM, handed in through the CLI's seam
    (``lcr.cli.main.main(argv, models=...)``); exits with lcr's code. A run that never
    asked the seam for its models fails loudly: it would have measured lcr's own models
    (a patch of a name the CLI no longer reads once did that silently). ``entry``:
    what runs the CLI (tests pass one that ignores the seam, to see it fail)."""
    from lcr.cli.main import main
    from lcr.models.container import Models
    from lcr.testing import ScriptedLLM

    asked: list[object] = []

    def models(spec: Any, progress: Any) -> Models:
        asked.append(spec)
        return Models.with_objects(llm=ScriptedLLM(words=40, after="possible: "), spec=spec)

    try:
        (entry or main)(argv, models=models)
        code: object = 0
    except SystemExit as done:
        code = done.code
    if code in (0, None) and not asked:
        sys.exit(
            f"bench: --scripted: `lcr {' '.join(argv)}` never asked the seam for its models: "
            "it ran lcr's own, which this benchmark must not measure"
        )
    sys.exit(code)


def check_scripted(entry: dict[str, Any], method: str) -> None:
    """Under --scripted, a build whose manifest names another LLM was measured on the wrong
    model: stop, loudly."""
    llm = entry.get("models", {}).get("llm")
    if COMMAND[1:2] == ["-c"] and llm not in (None, SCRIPTED_LLM):
        sys.exit(f"bench: --scripted, yet {method} was built with the LLM {llm!r}")


COMMAND = [sys.executable, "-m", "lcr"]


def lcr(*args: str, cwd: Path, models: bool = True) -> subprocess.CompletedProcess[str]:
    """``lcr ARGS``; ``models=False`` for a command that loads none (``info``): it runs
    as plain ``lcr`` even under --scripted."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = COMMAND if models else [sys.executable, "-m", "lcr"]
    done = subprocess.run([*command, *args], cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"lcr {' '.join(args)} failed: {done.stderr.strip()}")
    return done


def stories(count: int) -> list[str]:
    """``count`` distinct stories in the file's order, then the longest of the rest
    (SQuALITY's longest dev story is 38,795 characters, about 9.7k tokens): the
    document added."""
    distinct: list[str] = []
    with (DATA / "squality" / "dev.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            text = str(json.loads(line)["document"])
            if text not in distinct:
                distinct.append(text)
    longest = max(distinct, key=len)
    return [*[t for t in distinct if t is not longest][:count], longest]


def cut(text: str, chars: int) -> str:
    """The text up to ``chars``, ended at a paragraph (or a line) break."""
    if len(text) <= chars:
        return text
    head = text[:chars]
    end = max(head.rfind("\n\n"), head.rfind("\n"))
    return head[:end] if end > chars // 2 else head


def costs(folder: Path, index: str, method: str) -> dict[str, Any]:
    """What the last build of ``method`` in ``index`` paid."""
    manifest = json.loads(lcr("info", index, "--json", cwd=folder, models=False).stdout)
    entry = manifest["methods"][method]
    check_scripted(entry, method)
    stats = entry["stats"]
    usage = stats.get("llm_usage") or {}
    out = {
        "llm_calls": usage.get("calls", stats.get("llm_calls", 0)),
        "llm_cached": stats.get("llm_cached", 0),
        "prompt_tokens": usage.get("prompt_tokens", 0),
        "seconds": entry["build_seconds"],
        "nodes": entry["counts"].get("nodes"),
    }
    for key in ("pairs_scored", "pairs_cached"):
        if key in stats:
            out[key] = stats[key]
    return out


def paid(cost: dict[str, Any], method: str) -> int:
    return int(cost["pairs_scored"] if method == "lightpal" else cost["llm_calls"])


def measure(
    folder: Path, method: str, names: list[str], model: list[str], sets: list[str]
) -> dict[str, Any]:
    build = ["-m", method, *model, *sets, "-q"]
    row: dict[str, Any] = {"method": method, "documents": len(names) - 1}
    started = time.time()
    lcr("index", *names[:-1], "-o", "base.idx", *build, cwd=folder)
    row["base"] = costs(folder, "base.idx", method)
    lcr("index", names[-1], "-o", "alone.idx", *build, cwd=folder)
    row["alone"] = costs(folder, "alone.idx", method)
    shutil.copytree(folder / "base.idx", folder / "grown.idx")
    lcr("index", names[-1], "-o", "grown.idx", "--add", *model, "-q", cwd=folder)
    row["add"] = costs(folder, "grown.idx", method)
    lcr("info", "grown.idx", "--verify", cwd=folder, models=False)
    lcr("remove", "grown.idx", names[0], *model, "-q", cwd=folder)
    row["remove"] = costs(folder, "grown.idx", method)
    lcr("info", "grown.idx", "--verify", cwd=folder, models=False)
    alone = paid(row["alone"], method)
    row["add_over_alone"] = round(paid(row["add"], method) / alone, 3) if alone else None
    row["wall_s"] = round(time.time() - started, 1)
    row["load"] = os.getloadavg()[0]
    for name in ("base.idx", "alone.idx", "grown.idx"):
        shutil.rmtree(folder / name)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llm", default="smollm2-135m")
    parser.add_argument("--docs", type=int, default=20)
    parser.add_argument("--doc-chars", type=int, default=4000)
    parser.add_argument("--added-chars", type=int, default=40000)
    parser.add_argument("-m", "--method", action="append", default=None)
    parser.add_argument("--set", action="append", default=[], dest="sets")
    parser.add_argument(
        "--scripted",
        action="store_true",
        help="a scripted LLM instead of --llm: counts at full size in minutes (which "
        "pairs LightPAL scores and which chunks GraphReader extracts do not depend on "
        "the LLM's replies; RAPTOR's layers above the first do)",
    )
    args = parser.parse_args()
    if args.scripted:
        COMMAND[1:] = ["-c", SCRIPTED]
    methods = args.method or ["graphreader", "lightpal", "raptor"]
    texts = stories(args.docs)
    model = ["--llm", args.llm]
    sets = [w for s in args.sets for w in ("--set", s)]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        names = []
        for i, text in enumerate(texts):
            name = f"story{i:02d}.txt"
            chars = args.added_chars if i == args.docs else args.doc_chars
            (folder / name).write_text(cut(text, chars), encoding="utf-8")
            names.append(name)
        added = len((folder / names[-1]).read_text(encoding="utf-8"))
        print(json.dumps({"setting": vars(args), "added_chars": added}), flush=True)
        for method in methods:
            print(json.dumps(measure(folder, method, names, model, sets)), flush=True)


if __name__ == "__main__":
    main()
