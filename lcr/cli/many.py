"""``lcr ask A.idx B.idx ... QUESTION``: one question of many indexes, answered once
from their pooled evidence (:mod:`lcr.pipeline.many`), or with ``--each`` from each
index alone, each answer headed by the index it came from."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lcr.cli.models import command_models, pop_model_spec
from lcr.cli.output import echo, err, printable, say

if TYPE_CHECKING:
    from lcr.cli.answer import ResultOutput
    from lcr.pipeline.plans import QueryPlan


def ask_many(
    paths: Sequence[Path],
    plan: QueryPlan,
    questions: Iterable[str],
    output: ResultOutput,
    quiet: bool,
    *,
    each: bool,
    model: dict[str, Any],
) -> None:
    """Every index opened and checked for the method before any model loads; then per
    question one pooled answer, or (``each``) one answer per index."""
    from lcr import pipeline
    from lcr.pipeline.many import ask_pooled, check_poolable
    from lcr.progress import progress_for, progress_mode
    from lcr.store import Index

    if not each:
        check_poolable(plan, "add --each to answer from each index")
    indexes = [Index.open(p) for p in paths]
    for index in indexes:
        index.reader(plan.method.name)  # a missing method fails before any model loads
    with progress_for(progress_mode(quiet)) as progress:
        models = command_models(pop_model_spec(model), progress)
        for asked in questions:  # each checked once, as it was read
            if not each:
                with output.screen(asked, True) as screen:
                    result = ask_pooled(
                        indexes, plan, asked, models, progress=progress, note=err, stream=screen
                    )
                output.show(result, True, screen)
                continue
            for index in indexes:
                if not (output.as_json or output.answer_only):
                    say(f"== {index.path}")
                with output.screen(asked, True) as screen:
                    result = pipeline.ask_query(
                        index, plan, asked, models, progress=progress, note=err, stream=screen
                    )
                if output.answer_only:  # the index, a tab, the answer: a line per index
                    answer = " ".join((result.answer or "").split())
                    echo(f"{printable(str(index.path))}\t{printable(answer)}")
                    continue
                output.show(result, True, screen)
