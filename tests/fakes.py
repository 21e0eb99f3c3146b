"""Scripted LLMs for control-flow tests. Real-model tests cover the same paths.

:class:`ScriptedLLM` lives in :mod:`lcr.testing` (method authors test with it too).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lcr.models.base import ContinuationScore, Generation, Message
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


class Replying(ScriptedLLM):
    """Writes one fixed reply, whatever it is asked (the control flow of the checks)."""

    def __init__(self, reply: str) -> None:
        super().__init__()
        self.reply = reply

    def generate(self, messages: Sequence[Message], **kw: Any) -> Generation:
        self.prompts.append(list(messages))
        self.usage.add(10, 5)
        return Generation(self.reply, 10, 5)
