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
real embedder. Settings given with ``--set`` apply to every build (e.g. a smaller extraction budget
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
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("LCR_SHARED_DATA", REPO.parent / "shared" / "data"))


# --scripted: the CLI with a scripted LLM (tests/fakes.py) and the real embedder
SCRIPTED = """
import sys
import lcr.cli.main, lcr.cli.collection
from lcr.models.container import Models
from tests.fakes import ScriptedLLM
def models(spec, progress):
    return Models.with_objects(llm=ScriptedLLM(words=40, after="possible: "), spec=spec)
lcr.cli.main._models = lcr.cli.collection._models = models
lcr.cli.main.main(sys.argv[1:])
"""
COMMAND = [sys.executable, "-m", "lcr"]


def lcr(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([*COMMAND, *args], cwd=cwd, env=env, capture_output=True, text=True)
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
    manifest = json.loads(lcr("info", index, "--json", cwd=folder).stdout)
    entry = manifest["methods"][method]
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
    lcr("info", "grown.idx", "--verify", cwd=folder)
    lcr("remove", "grown.idx", names[0], *model, "-q", cwd=folder)
    row["remove"] = costs(folder, "grown.idx", method)
    lcr("info", "grown.idx", "--verify", cwd=folder)
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
