"""Every registered method passes lcr.testing's checks (after scikit-learn's
``parametrize_with_checks``: one test per method and check).

Nothing here names a method: the registry lists them, and what each declares
(``k_option``, ``quick_build_settings``, ``tested_with_real_llm``, its needs) says which
checks apply. Two tiers:

- quick: lcr's hashing embedder, a scripted LLM, every method a scripted LLM can
  exercise;
- slow: the real default embedder, and a real small model (smollm2-135m) for the
  methods that read attention or a KV cache.
"""

from __future__ import annotations

import pytest

from lcr.methods import get_method, method_names
from lcr.testing import MethodCheck, applicable_checks, parametrize_with_checks
from tests.conftest import FIXTURES, real_embedder, real_smollm

pytestmark = pytest.mark.usefixtures("one_torch_thread")

CINDERELLA = FIXTURES / "cinderella.txt"
SCRIPTED = [n for n in method_names() if not get_method(n).tested_with_real_llm]


@parametrize_with_checks(SCRIPTED, text=CINDERELLA)
def test_method_quick(method: str, check: MethodCheck) -> None:
    check(method)


@pytest.mark.slow
@parametrize_with_checks(
    method_names(), text=CINDERELLA, embedder=real_embedder, real_llm=real_smollm
)
def test_method_real_models(method: str, check: MethodCheck) -> None:
    check(method)


def test_every_method_is_checked_in_some_tier() -> None:
    """A method the quick tier cannot run (it needs a real LLM) is in the slow one, and
    every check that applies is a test of its own, id ``METHOD-CHECK``."""
    quick = {p.id for p in parametrize_with_checks(SCRIPTED).args[1]}
    real = {p.id for p in parametrize_with_checks(method_names(), real_llm=real_smollm).args[1]}
    for name in method_names():
        method = get_method(name)
        expected = {f"{name}-{c}" for c in applicable_checks(method)}
        assert "check_declarations" in applicable_checks(method)
        assert expected <= real
        assert method.tested_with_real_llm or expected <= quick
