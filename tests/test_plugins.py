"""A method from another package, found through its entry point (group ``lcr.methods``).

Each test installs tests/plugin_pkg/ the way pip leaves a package: a real
``*.dist-info`` folder with ``METADATA`` and ``entry_points.txt``, in a temporary
folder put on ``PYTHONPATH`` of a separate process (importlib.metadata reads
it as it reads any installed package; nothing is mocked, and this process's
registry is left alone).
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]
PLUGIN_SOURCE = REPO / "tests" / "plugin_pkg"
TUTORIAL = REPO / "docs" / "plugin-tutorial"


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
        # its manual, where its checkout has it: where its defaults come from
        shutil.copy(PLUGIN_SOURCE / "README.md", site / "README.md")
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
    assert rows["overlap"]["manual"] == "README.md"
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


def test_verify_says_it_could_not_verify_a_method_whose_plugin_is_gone(
    tmp_path: Path, cinderella: Path
) -> None:
    """Built with the plugin, verified without it: one line saying which method could
    not be verified, exit 1, not "verified"."""
    site = install(tmp_path / "site", "lcr-overlap", {"overlap": "lcr_overlap:Overlap"})
    story = tmp_path / "story.txt"
    story.write_text(cinderella.read_text(encoding="utf-8")[:3000], encoding="utf-8")
    built = lcr(site, "index", str(story), "-m", "overlap", "-m", "bm25", "-q", cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    with_it = lcr(site, "info", "story.idx", "--verify", cwd=tmp_path)
    assert with_it.returncode == 0, with_it.stderr
    gone = tmp_path / "empty"
    gone.mkdir()
    without = lcr(gone, "info", "story.idx", "--verify", cwd=tmp_path)
    assert without.returncode == 1
    assert without.stderr.strip().splitlines() == [
        "lcr: story.idx: could not verify overlap: no method of that name is installed "
        "(install the package that provides it, then run this again)"
    ]
    assert "overlap: " in without.stdout and "NOT VERIFIED" in without.stdout
    assert "bm25: " in without.stdout and "verified" in without.stdout
    as_json = lcr(gone, "info", "story.idx", "--verify", "--json", cwd=tmp_path)
    got = json.loads(as_json.stdout)
    assert as_json.returncode == 1 and got["verified"] is False
    assert list(got["damaged"]) == ["overlap"]


@pytest.mark.slow  # three files of lcr's quick tier, in a process of their own
def test_lcrs_own_tests_pass_with_the_tutorial_plugin_installed(tmp_path: Path) -> None:
    """docs/plugin-tutorial's package installed as pip installs it (its entry point
    visible to importlib.metadata), and lcr's quick tests of its documents, man page
    and settings run beside it: they read lcr's own methods, so they pass."""
    source = tmp_path / "tutorial"
    shutil.copytree(TUTORIAL, source, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    site = tmp_path / "site"
    pip = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation",
         "--no-index", "--quiet", "--target", str(site), str(source)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert pip.returncode == 0, pip.stderr
    listed = lcr(site, "methods", cwd=tmp_path)
    assert listed.returncode == 0 and "paragraphs" in listed.stdout, listed.stderr
    tests = [str(REPO / "tests" / f) for f in ("test_docs.py", "test_manpage.py")]
    tests.append(str(REPO / "tests" / "test_settings.py"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(site)])}
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-m", "not slow",
         *tests],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=1200,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-2000:]


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


@pytest.fixture
def plugin() -> Iterator[ModuleType]:
    """tests/plugin_pkg's package imported in this process, gone again after the test."""
    sys.path.insert(0, str(PLUGIN_SOURCE))
    try:
        yield importlib.import_module("lcr_overlap")
    finally:
        sys.path.remove(str(PLUGIN_SOURCE))
        for name in [m for m in sys.modules if m.split(".")[0] == "lcr_overlap"]:
            del sys.modules[name]


def own_tests(package: Path) -> str:
    """A method package's own test suite, run as its author would run it: pytest in the
    package's folder (its pyproject.toml the configuration), in a process of its own."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider"],
        cwd=package,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(package)])},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    return done.stdout


def test_the_plugins_own_tests_pass_one_test_per_check() -> None:
    """tests/plugin_pkg/tests: each check of lcr.testing.parametrize_with_checks a test."""
    output = own_tests(PLUGIN_SOURCE)
    passed = set(re.findall(r"test_overlap_follows_the_contract\[overlap-(\w+)\] PASSED", output))
    assert {"check_declarations", "check_k_limits", "check_answer_step"} <= passed
    assert len(passed) >= 8, passed


def test_the_tutorial_plugin_passes_its_own_tests() -> None:
    """docs/plugin-tutorial cannot rot: its package passes its tests against this lcr."""
    output = own_tests(TUTORIAL)
    assert "paragraphs-check_k_limits] PASSED" in output
    assert "paragraphs-check_retrieval_needs_no_llm] PASSED" in output


def test_a_plugin_missing_its_declarations_is_refused_in_one_line(
    tmp_path: Path, cinderella: Path, plugin: ModuleType
) -> None:
    """No summary, no paper, a setting declared without setting(): `lcr methods` warns in
    one line naming each (and lists the rest), a command using it fails in that line, and
    check_method fails its first check, check_declarations."""
    site = install(tmp_path / "site", "lcr-draft", {"draft": "lcr_overlap.draft:Draft"})
    listed = lcr(site, "methods", cwd=tmp_path)
    assert listed.returncode == 0 and "bm25" in listed.stdout
    expected = (
        "method 'draft' of the plugin lcr-draft (lcr_overlap.draft:Draft) is refused: "
        'no summary (one line: what it does); no paper (its citation, or "" for a '
        "baseline); DraftQuery.top_k is declared without setting(), so --set cannot reach it"
    )
    assert listed.stderr.strip().splitlines() == [f"lcr: warning: {expected}"]
    story = tmp_path / "story.txt"
    shutil.copy(cinderella, story)
    used = lcr(site, "index", str(story), "-m", "draft", "-q", cwd=tmp_path)
    assert used.returncode == 1 and used.stderr.strip().splitlines() == [f"lcr: {expected}"]

    from lcr.testing import check_method

    with pytest.raises(AssertionError, match=r"^draft: check_declarations: no summary"):
        check_method(importlib.import_module("lcr_overlap.draft").Draft)


def test_a_span_bug_fails_check_method_with_an_assertion_naming_the_check(
    plugin: ModuleType,
) -> None:
    """lcr's own error from inside a check (the store refusing a span) is an AssertionError
    naming the check, as every failure is, with lcr's message on the same line."""
    from lcr.store import Node
    from lcr.testing import check_method

    class ShiftedSpans(plugin.Overlap):  # type: ignore[misc, name-defined]
        name = "shifted"

        def build(self, ctx):  # type: ignore[no-untyped-def]
            end = len(ctx.source)
            ctx.out.write_nodes([Node("s0", 0, ctx.source[:40], [(end - 10, end + 30)], 0)])

    with pytest.raises(AssertionError) as failed:
        check_method(ShiftedSpans)
    message = str(failed.value)
    check = "shifted: check_reopen_gives_same_evidence_with_valid_spans: IndexDamagedError: "
    assert message.startswith(check) and "span" in message and "\n" not in message


def test_check_k_limits_holds_a_method_returning_fewer_than_three(plugin: ModuleType) -> None:
    """A method that returns at most two sentences is held to -k 1 giving one."""
    from lcr.testing import MethodChecks

    class AtMostTwo(plugin.Overlap):  # type: ignore[misc, name-defined]
        name = "atmosttwo"

        def retrieve(self, ctx, question):  # type: ignore[no-untyped-def]
            two = dataclasses.replace(
                ctx, settings=ctx.settings.replace(top_k=min(2, ctx.settings.top_k))
            )
            return super().retrieve(two, question)

    class IgnoresKBelowTwo(AtMostTwo):
        name = "ignoreskbelowtwo"

        def retrieve(self, ctx, question):  # type: ignore[no-untyped-def]
            # reads its default count, not the setting -k overrides
            return super().retrieve(
                dataclasses.replace(ctx, settings=type(ctx.settings)()), question
            )

    with MethodChecks(AtMostTwo) as checks:
        checks.run("check_k_limits")
    with (
        MethodChecks(IgnoresKBelowTwo) as checks,
        pytest.raises(AssertionError, match="check_k_limits: -k 1 gave 2 items"),
    ):
        checks.run("check_k_limits")


def test_an_installed_plugin_leaves_lcrs_man_page_alone(tmp_path: Path) -> None:
    """The generated page describes lcr's own methods whatever is installed beside it."""
    site = install(tmp_path / "site", "lcr-overlap", {"overlap": "lcr_overlap:Overlap"})
    listed = lcr(site, "methods", cwd=tmp_path)
    assert "overlap" in listed.stdout  # installed, and seen
    checked = run(site, "-m", "lcr.cli.manpage", "--check", str(REPO / "man" / "lcr.1"), cwd=REPO)
    assert checked.returncode == 0, checked.stdout + checked.stderr


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


def test_declaration_problems_name_each_gap(plugin: ModuleType) -> None:
    """The registry's reading of a class, one phrase per gap (a pure function)."""
    from dataclasses import dataclass

    from lcr.config import Settings, setting
    from lcr.methods import declaration_problems

    @dataclass(frozen=True)
    class Tagged(Settings):
        tags: tuple[str, ...] = setting((), "tags to keep")

    class Unnamed(plugin.Overlap):  # type: ignore[misc, name-defined]
        name = ""
        summary = "two\nlines"
        query_settings = Tagged

    assert declaration_problems(plugin.Overlap) == []
    assert declaration_problems(Unnamed) == [
        "no name (its name, as --method takes it)",
        "its summary is more than one line",
        "its query_settings: Tagged.tags: unsupported setting type tuple[str, ...]",
    ]
