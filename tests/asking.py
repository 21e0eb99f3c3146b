"""Asking through the pipeline with an answer stage's constants changed: the tests'
way past ``--set``, which reaches only the answer step's settings (issue 71)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from lcr import pipeline
from lcr.models.container import Models
from lcr.pipeline.plans import parse_sets
from lcr.result import Result
from lcr.store import Index


def ask_with(
    index: Index,
    method: str,
    question: str,
    models: Models,
    sets: Sequence[str] = (),
    *,
    k: int | None = None,
    max_new_tokens: int = 256,
    note: Callable[[str], None] | None = None,
    **constants: Any,
) -> Result:
    """``lcr ask`` with ``sets`` (``--set`` text) and the answer settings' ``constants``
    replaced (``unquoted="show"``, ``located_floor=0.0``)."""
    plan = pipeline.plan_query(method, parse_sets(sets), k=k, max_new_tokens=max_new_tokens)
    plan = dataclasses.replace(plan, answer=plan.answer.replace(**constants))
    asked = pipeline.checked_question(question)
    return pipeline.ask_query(index, plan, asked, models, note=note)
