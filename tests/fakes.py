"""Scripted LLMs for control-flow tests. Real-model tests cover the same paths.

:class:`ScriptedLLM` lives in :mod:`lcr.testing` (method authors test with it too).
"""

from __future__ import annotations

from lcr.models.base import ContinuationScore, Generation
from lcr.testing import ScriptedLLM

__all__ = ["ForbiddenLLM", "ScriptedLLM"]


class ForbiddenLLM(ScriptedLLM):
    """Fails the test if anything touches it: proves a path needs no LLM."""

    def generate(self, *args: object, **kwargs: object) -> Generation:  # type: ignore[override]
        raise AssertionError("the LLM was used")

    def choice_probability(self, *args: object, **kwargs: object) -> float:  # type: ignore[override]
        raise AssertionError("the LLM was used")

    def continuation_logprob(self, *args: object, **kwargs: object) -> float:  # type: ignore[override]
        raise AssertionError("the LLM was used")

    def continuation_logprobs(self, *args: object, **kwargs: object) -> list[ContinuationScore]:  # type: ignore[override]
        raise AssertionError("the LLM was used")
