"""Each answer a function of its question alone, not of the questions asked before it."""

from __future__ import annotations

from lcr.models.container import Models


def forget_prompts(models: Models) -> None:
    """Forget the prompts the LLM keeps in its cache (llama.cpp's prefix reuse), so
    what it answers next does not depend on what it was asked before: llama.cpp
    computes a prompt found partly in its cache with other rounding than a whole one,
    and now and then that changes a word of a greedy answer. Called before each
    question of ``lcr eval`` and ``lcr ask -``, so a resumed run, one with
    ``--limit`` or one on a cluster (each worker asked other questions before)
    answers each question as a whole serial run does. The cost: the instructions
    every prompt shares are read again, some 50 tokens a question."""
    if not models.llm_loaded:
        return
    reset = getattr(models.llm, "reset_cache", None)
    if callable(reset):
        reset()
