"""The answer phase of a query: a retrieval's evidence through the method's declared
answer step (:mod:`lcr.answer.step`), measured, cited and recorded on its
:class:`~lcr.result.Result`. ``lcr ask`` and ``lcr eval``'s gold-evidence reading
both answer here."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from lcr.answer.before import decide_before_reading
from lcr.answer.decide import decide
from lcr.answer.needs import require_answer
from lcr.answer.selection import sentence_scorer
from lcr.answer.shared import AnswerResult, AnswerSettings, AnswerStream
from lcr.answer.step import AnswerContext, AnswerStep
from lcr.config import Settings
from lcr.evidence import rank_order
from lcr.models.backends import describe_configuration, llm_configuration
from lcr.models.base import Role
from lcr.pipeline.accounting import spending
from lcr.pipeline.plans import QueryPlan, require
from lcr.result import Citable, Result, cite, cite_quotes
from lcr.text.citation import heading_lines

if TYPE_CHECKING:
    from lcr.models.container import Models

# an LLM loaded faster than this was as good as loaded: no llm_load_s is recorded
_LOAD_WORTH_RECORDING_S = 0.05


class AnswerSource(Citable, Protocol):
    """What answering reads of an index: its text besides its documents (an
    :class:`~lcr.store.Index`, or the pooled text of several: lcr.pipeline.many)."""

    @property
    def source(self) -> str: ...


@dataclass(frozen=True)
class AnswerPlan:
    """An ask worked out once, before any retrieval: the method's answer step, the
    query with the answer settings it runs with, the deeper pool the shared step
    selects from (None: the query's own evidence) and the models bound for all of it."""

    step: AnswerStep[Any, Any]
    query: QueryPlan
    pool: QueryPlan | None
    models: Models


def plan_answer(
    query: QueryPlan, models: Models, note: Callable[[str], None] | None = None
) -> AnswerPlan:
    """What answering with ``query`` needs, checked once (the support check's scoring
    call dropped, with a note, where a server returns no log-probabilities), and the
    pool to select from:
    ``answer.pool`` items when the shared step selects and ``-k`` was not given."""
    method = query.method
    step = method.answer_step(query.settings)
    needs = query.needs | method.answer_needs(query.settings)
    purpose = f"answering with {method.name}"
    bound, answer = require_answer(
        models, needs, query.answer, step.shared_settings, purpose, require, note
    )
    query = dataclasses.replace(query, answer=answer)
    deeper = answer.select != "off" and step.shared_settings and not query.k_given
    pool = query.with_k(answer.pool) if deeper and answer.pool > 0 else None
    return AnswerPlan(step, query, pool, bound)


def answer_evidence(
    index: AnswerSource,
    retrieved: Result,
    step: AnswerStep[Any, Any],
    settings: Settings,
    answer: AnswerSettings,
    models: Models,
    *,
    stream: AnswerStream | None = None,
    note: Callable[[str], None] | None = None,
) -> Result:
    """Answer ``retrieved``'s question from its evidence with ``step`` (the method's
    query ``settings``, the shared step's ``answer`` settings), and record on it the
    answer, what was read, what the step did, cost and took, and the LLM: a new
    :class:`~lcr.result.Result` from the retrieval's, made once.

    The chain's first and last stages (:data:`lcr.answer.shared.STAGES`) run here, around
    the method's step: ``stream`` watches the reply; ``note`` hears of evidence that did
    not fit the window. The evidence's kept state is let go once answered."""
    started = time.perf_counter()
    unasked = decide_before_reading(retrieved.question, answer, index.source)
    if unasked is not None:  # the document never writes a term of the question: no call
        return _unasked(retrieved, unasked, step, answer, models, time.perf_counter() - started)
    with spending(models) as loading:
        llm = models.llm
    scorer = None
    if answer.select != "off":
        scorer = sentence_scorer(answer.select, lambda: models.embedder, lambda: llm)
    ctx = AnswerContext(llm, settings, answer, index.source, index.documents, scorer, stream)
    evidence = retrieved.evidence
    with spending(models) as answering:
        out = step.answer(ctx, retrieved.question, evidence, step.state_of(evidence))
        headings = heading_lines(index.documents, index.layouts, index.source)
        out = decide(retrieved.question, out, answer, index.source, headings=headings)
        if out.dropped and note is not None:
            note(dropped_warning(len(evidence.items), out, llm.context_window))
        # read as set, shown by rank; the answer step made new items (passages, cuts)
        read = cite(index, rank_order(out.used))
    shown = out.quote_check is not None or out.quotes
    quotes = {"quotes": cite_quotes(index, out.quotes)} if shown else {}
    load = {"llm_load_s": loading.seconds} if loading.seconds > _LOAD_WORTH_RECORDING_S else {}
    return dataclasses.replace(
        retrieved,
        evidence=evidence.finished(evidence.items, evidence.usage),  # a KV cache goes now
        answer=out.text,
        read=read,
        answer_info={**out.info, **({"dropped": out.dropped} if out.dropped else {})},
        support={**out.support_json(), **quotes},
        answer_settings={**answer.to_json(), "step": out.step or step.name},
        usage=retrieved.usage.merged(answering.usage),
        timings={**retrieved.timings, "answer_s": answering.seconds, **load},
        models={
            **retrieved.models,
            "llm": llm.model_id,
            "backend": str(llm.backend),
            "llm_run": describe_configuration(llm_configuration(llm)),
        },
    )


def _unasked(
    retrieved: Result,
    out: AnswerResult,
    step: AnswerStep[Any, Any],
    answer: AnswerSettings,
    models: Models,
    seconds: float,
) -> Result:
    """``retrieved`` answered "not found" before any model was loaded or asked: nothing
    read, nothing spent; the record names the LLM that would have answered."""
    planned = models.configuration(Role.LLM)
    backend = models.backend_of(Role.LLM)
    return dataclasses.replace(
        retrieved,
        evidence=retrieved.evidence.finished(retrieved.evidence.items, retrieved.evidence.usage),
        answer=out.text,
        read=[],
        answer_info=dict(out.info),
        support=out.support_json(),
        answer_settings={**answer.to_json(), "step": step.name},
        timings={**retrieved.timings, "answer_s": round(seconds, 4)},
        models={
            **retrieved.models,
            "llm": models.llm_id(),
            **({"backend": backend} if backend is not None else {}),
            **({"llm_run": describe_configuration(planned)} if planned is not None else {}),
        },
    )


def dropped_warning(found: int, out: AnswerResult, window: int) -> str:
    """Evidence that did not fit the LLM's window was never read: say so, every time."""
    read = len(out.used)
    if read:
        return (
            f"warning: {out.dropped} of {found} evidence items did not fit the LLM's "
            f"window ({window} tokens, --context-window); the answer read {read}"
        )
    then = (
        "the LLM was not asked (answer.not_found=abstain)"
        if out.usage.calls == 0
        else "the LLM answered without evidence (answer.not_found=guess)"
    )
    return (
        f"warning: none of the {found} evidence items fit the LLM's window ({window} "
        f"tokens, --context-window); {then}"
    )
