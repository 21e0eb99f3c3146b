"""The package's tests: lcr's method contract, one test per check."""

from __future__ import annotations

from lcr_paragraphs import Paragraphs

from lcr.testing import MethodCheck, parametrize_with_checks


@parametrize_with_checks([Paragraphs])
def test_paragraphs_follows_the_contract(method: type[Paragraphs], check: MethodCheck) -> None:
    check(method)
