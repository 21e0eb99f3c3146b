"""Every registered method passes lcr.testing's checks (after scikit-learn's check_estimator).

Nothing here names a method: the registry lists them, and what each declares
(``k_option``, ``quick_build_settings``, ``tested_with_real_llm``, its needs) says
which checks apply. Two tiers:

- quick: lcr's hashing embedder, a scripted LLM, every method a scripted LLM can
  exercise;
- slow: the real default embedder, and a real small model (smollm2-135m) for the
  methods that read attention or a KV cache.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lcr.methods import get_method, method_names
from lcr.testing import MethodChecks, applicable_checks

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _cases(*, real_llm: bool | None) -> list[tuple[str, str]]:
    """(method, check) pairs; ``real_llm`` keeps only methods that do (True) or do
    not (False) need a real LLM to be tested, None keeps all."""
    cases = []
    for name in method_names():
        method = get_method(name)
        if real_llm is None or method.tested_with_real_llm == real_llm:
            cases += [(name, check) for check in applicable_checks(method)]
    return cases


@pytest.fixture(scope="module")
def quick_checks(tmp_path_factory: pytest.TempPathFactory, cinderella: Path) -> Iterator[Any]:
    """One MethodChecks per method on the hashing embedder, so checks share a build."""
    made: dict[str, MethodChecks] = {}

    def get(name: str) -> MethodChecks:
        if name not in made:
            folder = tmp_path_factory.mktemp(f"quick-{name}")
            made[name] = MethodChecks(name, text=cinderella, workdir=folder)
        return made[name]

    yield get
    for checks in made.values():
        checks.close()


@pytest.fixture(scope="module")
def real_checks(
    tmp_path_factory: pytest.TempPathFactory, cinderella: Path, embedder: Any
) -> Iterator[Any]:
    """One MethodChecks per method on the real embedder (and smollm2 where declared)."""
    made: dict[str, MethodChecks] = {}

    loaded: dict[str, Any] = {}  # smollm2, once a test that needs it has loaded it

    def get(name: str, request: pytest.FixtureRequest) -> MethodChecks:
        if get_method(name).tested_with_real_llm and "smollm" not in loaded:
            loaded["smollm"] = request.getfixturevalue("smollm")
        if name not in made:
            folder = tmp_path_factory.mktemp(f"real-{name}")
            made[name] = MethodChecks(
                name,
                text=cinderella,
                workdir=folder,
                embedder=embedder,
                real_llm=lambda: loaded["smollm"],
            )
        return made[name]

    yield get
    for checks in made.values():
        checks.close()


@pytest.mark.parametrize(("method", "check"), _cases(real_llm=False))
def test_method_quick(method: str, check: str, quick_checks: Any) -> None:
    quick_checks(method).run(check)


@pytest.mark.slow
@pytest.mark.parametrize(("method", "check"), _cases(real_llm=None))
def test_method_real_models(
    method: str, check: str, real_checks: Any, request: pytest.FixtureRequest
) -> None:
    real_checks(method, request).run(check)


def test_every_method_is_checked_in_some_tier() -> None:
    """A method the quick tier cannot run (it needs a real LLM) is in the slow one,
    and every check that applies runs for every method."""
    quick = set(_cases(real_llm=False))
    for name in method_names():
        method = get_method(name)
        expected = {(name, c) for c in applicable_checks(method)}
        assert expected <= set(_cases(real_llm=None))
        assert method.tested_with_real_llm or expected <= quick
