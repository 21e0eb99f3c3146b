"""The plugin's own tests, as its author writes them: every check of lcr's method contract,
each a test of its own (lcr.testing.parametrize_with_checks)."""

from __future__ import annotations

from lcr_overlap import Overlap

from lcr.testing import MethodCheck, parametrize_with_checks


@parametrize_with_checks([Overlap])
def test_overlap_follows_the_contract(method: type[Overlap], check: MethodCheck) -> None:
    check(method)
