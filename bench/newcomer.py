"""The README's first hour, as a newcomer meets it: clone, set up, then the tour line by line,
with each step's time and output.

    python3 bench/newcomer.py                          # fresh clone, the README's set-up
    python3 bench/newcomer.py --venv /path/to/.venv    # reuse an installed environment

The commands are read from README.md itself (the Set-up block and every block of "A
five-minute tour"), so the run follows the README as it is. With ``--venv`` the
set-up's install is skipped: the clone's ``.venv`` is a link to that environment, and
``PYTHONPATH`` puts the clone's code before whatever the environment installed. Each
step runs in bash from the clone's root with ``.venv`` active, as the tour says.
Nothing is timed in CI: run it by hand (bench/README.md).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def blocks(readme: str, section: str) -> list[str]:
    """The ```sh blocks of one ``## section`` of the README."""
    match = re.search(rf"^## {re.escape(section)}\n(.*?)(?=^## |\Z)", readme, re.M | re.S)
    if match is None:
        raise SystemExit(f"README.md has no '## {section}' section")
    return re.findall(r"```sh\n(.*?)```", match.group(1), re.S)


def commands(block: str) -> list[str]:
    """A block's commands: a line ending in ``|`` or ``\\`` goes on, a loop runs to ``done``."""
    out: list[str] = []
    current: list[str] = []
    depth = 0
    for line in block.splitlines():
        if not line.strip() and not current:
            continue
        current.append(line)
        words = re.sub(r"#.*", "", line).split()
        depth += sum(w in ("for", "while", "if") for w in words[:1]) - ("done" in words[:1])
        if depth > 0 or line.rstrip().endswith(("|", "\\")):
            continue
        out.append("\n".join(current))
        current = []
    if current:
        out.append("\n".join(current))
    return out


def run_step(
    command: str, cwd: Path, env: dict[str, str], timeout: float
) -> tuple[int, float, str]:
    start = time.monotonic()
    try:
        done = subprocess.run(
            ["bash", "-c", f"test ! -e .venv/bin/activate || . .venv/bin/activate; {command}"],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        code, output = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as exc:
        code, output = 124, f"(stopped after {timeout:.0f} s) {exc.stdout or ''}{exc.stderr or ''}"
    return code, time.monotonic() - start, output


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--venv", type=Path, help="use this installed environment")
    parser.add_argument("--repo", default=str(REPO), help="what to clone (default: this one)")
    parser.add_argument("--workdir", type=Path, help="where to clone (default: a temp folder)")
    parser.add_argument(
        "--extra-path", help="also on PYTHONPATH: packages installed apart (pip --target)"
    )
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds a step may take")
    parser.add_argument("--lines", type=int, default=12, help="output lines shown per step")
    args = parser.parse_args(argv)

    work = args.workdir or Path(tempfile.mkdtemp(prefix="lcr-newcomer-"))
    clone = work / "lcr"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LCR_")}
    steps: list[str] = []
    subprocess.run(["git", "clone", "-q", args.repo, str(clone)], check=True)
    readme = (clone / "README.md").read_text(encoding="utf-8")
    setup = " && ".join(commands(blocks(readme, "Set-up")[0]))
    if args.venv is not None:
        (clone / ".venv").symlink_to(args.venv.resolve())
        env["PYTHONPATH"] = str(clone)
        # the install is done: keep what the set-up runs after it, lcr called as it says
        setup = " && ".join(p for p in setup.split(" && ") if p.startswith(".venv/bin/lcr "))
        steps.append(setup)
    else:
        steps.append(setup)
    if args.extra_path:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [env.get("PYTHONPATH"), args.extra_path]))
    for block in blocks(readme, "A five-minute tour"):
        steps += commands(block)
    steps.append("man lcr | head -5")

    load = os.getloadavg()
    print(f"# newcomer run: {clone}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"# load at start {load[0]:.1f} (1 min), {os.cpu_count()} cores")
    failed = 0
    for n, step in enumerate(steps, 1):
        code, seconds, output = run_step(step, clone, env, args.timeout)
        failed += code != 0
        print(f"\n## step {n}: {seconds:.1f} s, exit {code}")
        print("$ " + step.replace("\n", "\n  "))
        lines = output.rstrip().splitlines()
        for line in lines[: args.lines]:
            print(f"  | {line}")
        if len(lines) > args.lines:
            print(f"  | ... ({len(lines) - args.lines} more lines)")
    print(f"\n# {len(steps)} steps, {failed} failed; load at end {os.getloadavg()[0]:.1f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
