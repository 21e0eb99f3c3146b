"""A method from another package, found through its entry point (group ``lcr.methods``).

Each test installs tests/plugin_pkg/ the way pip leaves a package: a real
``*.dist-info`` folder with ``METADATA`` and ``entry_points.txt``, in a temporary
folder put on ``PYTHONPATH`` of a separate process (importlib.metadata reads
it as it reads any installed package; nothing is mocked, and this process's
registry is left alone).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PLUGIN_SOURCE = REPO / "tests" / "plugin_pkg"


def install(site: Path, dist: str, entry_points: dict[str, str]) -> Path:
    """A dist-info folder for ``dist`` declaring ``entry_points`` (name -> target) in the
    group ``lcr.methods``, with the plugin's package beside it."""
    # as pip names it: the name's dashes as underscores (importlib.metadata reads the name
    # up to the first dash; "lcr-overlap-0.1" would read as lcr, whose egg-info shadows it)
    info = site / f"{dist.replace('-', '_')}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    lines = "".join(f"{name} = {target}\n" for name, target in entry_points.items())
    (info / "entry_points.txt").write_text(f"[lcr.methods]\n{lines}")
    if not (site / "lcr_overlap").exists():
        shutil.copytree(PLUGIN_SOURCE / "lcr_overlap", site / "lcr_overlap")
    return site


def run(site: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(site)])}
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=300
    )


def lcr(site: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run(site, "-m", "lcr", *args, cwd=cwd)


def test_a_plugin_method_is_listed_built_and_retrieved(tmp_path: Path, cinderella: Path) -> None:
    site = install(tmp_path / "site", "lcr-overlap", {"overlap": "lcr_overlap:Overlap"})
    listed = lcr(site, "methods", "--json", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    rows = {r["name"]: r for r in map(json.loads, listed.stdout.splitlines())}
    assert rows["overlap"]["manual"] == "https://example.org/lcr-overlap"
    assert "bm25" in rows and listed.stderr == ""

    story = tmp_path / "story.txt"
    shutil.copy(cinderella, story)
    built = lcr(
        site,
        "index",
        str(story),
        "-m",
        "overlap",
        "--set",
        "overlap.min_words=4",
        "-q",
        cwd=tmp_path,
    )
    assert built.returncode == 0, built.stderr
    got = lcr(
        site,
        "retrieve",
        "story.idx",
        "What were the slippers embroidered with?",
        "-m",
        "overlap",
        "-k",
        "2",
        "--json",
        cwd=tmp_path,
    )
    assert got.returncode == 0, got.stderr
    result = json.loads(got.stdout)
    texts = [item["text"] for item in result["evidence"]]
    assert len(texts) == 2 and "embroidered with silk" in texts[0]

    help_text = lcr(site, "retrieve", "--help", cwd=tmp_path)
    assert help_text.returncode == 0 and "overlap" not in help_text.stdout  # declares no mode

    checked = run(
        site, "-c", "from lcr.testing import check_method; check_method('overlap')", cwd=tmp_path
    )
    assert checked.returncode == 0, checked.stderr


def test_a_plugin_cannot_shadow_a_builtin(tmp_path: Path) -> None:
    site = install(tmp_path / "site", "lcr-evil", {"bm25": "lcr_overlap:Overlap"})
    listed = lcr(site, "methods", "--json", cwd=tmp_path)
    assert listed.returncode == 0
    bm25 = next(r for r in map(json.loads, listed.stdout.splitlines()) if r["name"] == "bm25")
    assert bm25["summary"].startswith("Okapi BM25")  # lcr's own, not the plugin's
    assert listed.stderr.strip().splitlines() == [
        "lcr: warning: method 'bm25' of the plugin lcr-evil (lcr_overlap:Overlap) left out: "
        "lcr already has a method of that name"
    ]


def test_a_broken_plugin_is_named_in_one_line(tmp_path: Path, cinderella: Path) -> None:
    site = install(tmp_path / "site", "lcr-broken", {"broken": "lcr_no_such_module:Method"})
    listed = lcr(site, "methods", cwd=tmp_path)
    assert listed.returncode == 0  # the others are listed
    assert "bm25" in listed.stdout
    lines = listed.stderr.strip().splitlines()
    assert len(lines) == 1 and "lcr-broken" in lines[0] and "'broken'" in lines[0]
    assert "Traceback" not in listed.stderr

    story = tmp_path / "story.txt"
    shutil.copy(cinderella, story)
    used = lcr(site, "index", str(story), "-m", "broken", "-q", cwd=tmp_path)
    assert used.returncode == 1
    assert used.stderr.strip().splitlines() == [
        "lcr: method 'broken' of the plugin lcr-broken cannot be loaded from "
        "lcr_no_such_module:Method: ModuleNotFoundError: No module named 'lcr_no_such_module'"
    ]
    # a method that is fine is not stopped by a broken one beside it
    fine = lcr(site, "index", str(story), "-m", "bm25", "-q", cwd=tmp_path)
    assert fine.returncode == 0, fine.stderr


def test_check_method_takes_a_class_nobody_registered(tmp_path: Path) -> None:
    """A method's own tests run the checks before any entry point exists."""
    sys.path.insert(0, str(PLUGIN_SOURCE))
    try:
        from lcr_overlap import Overlap

        from lcr.methods import method_names
        from lcr.testing import check_method

        check_method(Overlap)
        assert "overlap" not in method_names()  # registered for the checks only
    finally:
        sys.path.remove(str(PLUGIN_SOURCE))
        sys.modules.pop("lcr_overlap", None)


def test_check_method_fails_a_method_that_breaks_the_contract() -> None:
    """The checks can fail: a method whose -k is ignored although it says it counts items."""
    sys.path.insert(0, str(PLUGIN_SOURCE))
    try:
        from lcr_overlap import Overlap

        from lcr.testing import check_method

        class IgnoresK(Overlap):
            name = "ignoresk"

            def retrieve(self, ctx, question):  # type: ignore[no-untyped-def]
                # reads a fixed count, not the setting -k overrides
                fixed = dataclasses.replace(ctx, settings=ctx.settings.replace(top_k=5))
                return super().retrieve(fixed, question)

        with pytest.raises(AssertionError, match="check_k_limits: -k 3 gave 5 items"):
            check_method(IgnoresK)
    finally:
        sys.path.remove(str(PLUGIN_SOURCE))
        sys.modules.pop("lcr_overlap", None)
