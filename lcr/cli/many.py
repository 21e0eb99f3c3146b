"""``lcr ask A.idx B.idx ... QUESTION`` (and ``lcr retrieve``): one question of many
indexes, answered once from their pooled evidence (:mod:`lcr.pipeline.many`), or with
``--each`` from each index alone, each answer headed by the index it came from.

With ``--each`` an index that cannot be asked (damaged, of another schema version, not
an index, without the method) is one ``lcr:`` line on stderr, the others are answered,
and the command ends with exit 1."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lcr.cli.models import command_models, pop_model_spec
from lcr.cli.output import echo, err, printable, say
from lcr.errors import (
    FileAccessError,
    IndexDamagedError,
    IndexNotFoundError,
    LostRaceError,
    MethodNotBuiltError,
    SchemaMismatchError,
)

if TYPE_CHECKING:
    from lcr.cli.answer import ResultOutput
    from lcr.pipeline.plans import QueryPlan
    from lcr.store import Index

# what is wrong with one index, not with the question, the settings or the models: with
# --each the other indexes are still asked
ONE_INDEX_FAULTS = (
    IndexNotFoundError,
    IndexDamagedError,
    SchemaMismatchError,
    MethodNotBuiltError,
    FileAccessError,
    LostRaceError,
)


def _opened(paths: Sequence[Path], method: str, each: bool) -> tuple[list[Index], int]:
    """Every index opened and checked for ``method`` before any model loads; with
    ``each``, one that fails is said in one line and left out (and counted)."""
    from lcr.store import Index

    indexes, failed = [], 0
    for p in paths:
        try:
            index = Index.open(p)
            index.reader(method)  # a missing method fails before any model loads
        except ONE_INDEX_FAULTS as exc:
            if not each:
                raise
            err(str(exc))
            failed += 1
            continue
        indexes.append(index)
    return indexes, failed


def ask_many(
    paths: Sequence[Path],
    plan: QueryPlan,
    questions: Iterable[str],
    output: ResultOutput,
    quiet: bool,
    *,
    each: bool,
    model: dict[str, Any],
    answer: bool = True,
) -> int:
    """Per question one pooled answer (or, ``answer`` False, one pooled list of
    evidence), or (``each``) one per index. Returns the exit code: 1 when an index
    could not be asked (each), else 0."""
    from lcr import pipeline
    from lcr.pipeline.many import ask_pooled, check_poolable, retrieve_pooled
    from lcr.progress import progress_for, progress_mode

    if not each and answer:
        check_poolable(plan, "add --each to answer from each index")
    indexes, failed = _opened(paths, plan.method.name, each)
    if not indexes:
        return 1  # each one said why
    with progress_for(progress_mode(quiet)) as progress:
        models = command_models(pop_model_spec(model), progress)
        for asked in questions:  # each checked once, as it was read
            if not each:
                with output.screen(asked, answer) as screen:
                    if answer:
                        result = ask_pooled(
                            indexes, plan, asked, models, progress=progress, note=err, stream=screen
                        )
                    else:
                        result = retrieve_pooled(
                            indexes, plan, asked, models, progress=progress, note=err
                        )
                output.show(result, answer, screen)
                continue
            for index in indexes:
                if not (output.as_json or output.answer_only):
                    say(f"== {index.path}")
                try:
                    with output.screen(asked, answer) as screen:
                        if answer:
                            result = pipeline.ask_query(
                                index, plan, asked, models, progress=progress, note=err,
                                stream=screen,
                            )  # fmt: skip
                        else:
                            result = pipeline.retrieve_query(
                                index, plan, asked, models, progress=progress, note=err
                            )
                except ONE_INDEX_FAULTS as exc:  # found on reading it: the others go on
                    err(str(exc))
                    failed += 1
                    continue
                if output.answer_only:  # the index, a tab, the answer: a line per index
                    text = " ".join((result.answer or "").split())
                    echo(f"{printable(str(index.path))}\t{printable(text)}")
                    continue
                output.show(result, answer, screen)
    return 1 if failed else 0
