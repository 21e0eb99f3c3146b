"""The method registry: read once and frozen; a caller that needs another registry
uses its own for a block, never by changing the one every thread reads."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from lcr import methods
from lcr.errors import UsageError
from lcr.methods import BUILT_IN, Registry, current, method_names, registered, using
from lcr.methods.baselines import BM25


class Other(BM25):
    name = "other"


def _seen_from_another_thread() -> list[str]:
    seen: list[str] = []
    worker = threading.Thread(target=lambda: seen.extend(method_names()))
    worker.start()
    worker.join()
    return seen


def test_the_installed_registry_is_one_frozen_snapshot() -> None:
    first = current()
    assert current() is first  # read once
    with pytest.raises(TypeError):
        first.methods["other"] = first.methods["bm25"]  # type: ignore[index]
    assert list(first.methods)[: len(BUILT_IN)] == list(BUILT_IN)


def test_a_block_of_its_own_changes_nothing_other_threads_read() -> None:
    """``registered`` hands the block a registry of its own: another thread (``lcr
    serve``'s workers) reads the installed snapshot all along, and after the block the
    method is gone."""
    installed = current()
    with registered(Other) as name:
        assert name == "other" and "other" in method_names()
        assert "other" not in _seen_from_another_thread()
        assert current() is not installed and "other" not in installed.methods
    assert current() is installed and "other" not in method_names()
    assert methods._loaded is installed


def test_a_name_taken_is_refused() -> None:
    with pytest.raises(UsageError, match="a method named 'bm25' is registered already"):
        current().plus(BM25)


@pytest.fixture
def builtin_only() -> Iterator[Registry]:
    """lcr's own methods, whatever is installed: a registry handed to the test."""
    with using(Registry.builtin()) as registry:
        yield registry


def test_a_fixture_hands_a_test_its_own_registry(builtin_only: Registry) -> None:
    assert method_names() == list(BUILT_IN)
    assert current() is builtin_only


def test_a_run_resolves_its_methods_name_once() -> None:
    """Issue 71: ``--set`` resolves the method it names, and the plan carries that one
    object (a registry look-up and an instance per run, not one per step)."""
    from lcr.pipeline.plans import parse_sets, plan_query

    sets = parse_sets(("mixpr.top_k=3", "mixpr.alpha_local=0.5"))
    plan = plan_query("mixpr", sets, mode="local")
    assert plan.method is sets.resolved["mixpr"]
    assert plan.settings.top_k == 3 and plan.settings.mode == "local"
