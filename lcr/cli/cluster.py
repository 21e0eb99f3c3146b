"""``--ray ADDRESS`` and ``--workers N`` on ``lcr eval`` and ``lcr ask INDEX -``
(docs/cluster.md): the options, what each command refuses before any work, and the
hand-over to :mod:`lcr.cluster.questions`, the one place these commands reach Ray."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from lcr.errors import UsageError

if TYPE_CHECKING:
    from lcr.cli.answer import ResultOutput
    from lcr.eval.runner import Execute
    from lcr.models.spec import ModelSpec
    from lcr.pipeline.plans import QueryPlan


def ray_options(what: str) -> Callable[[Any], Any]:
    """``--ray`` (``LCR_RAY_ADDRESS``) and ``--workers``; ``what`` says what the cluster does."""

    def add(f: Any) -> Any:
        f = click.option(
            "--workers",
            type=click.IntRange(min=1),
            default=None,
            help="With --ray: this many workers, sharing the cluster's CPUs (default: one "
            "per CPU, one per GPU where it has GPUs when a local model answers).",
        )(f)
        return click.option(
            "--ray",
            "ray_address",
            envvar="LCR_RAY_ADDRESS",
            default=None,
            metavar="ADDRESS",
            help=f"{what} on a Ray cluster: auto (the running one), local (one started "
            "here) or HOST:PORT of its head; needs the ray extra (docs/cluster.md). "
            "[env: LCR_RAY_ADDRESS]",
        )(f)

    return add


def _no_workers_alone(address: str | None, workers: int | None) -> None:
    if address is None and workers is not None:
        raise UsageError("--workers says how many Ray workers: give --ray ADDRESS too")


def eval_execute(
    address: str | None, workers: int | None, spec: ModelSpec, note: Callable[[str], None]
) -> Execute:
    """How ``lcr eval`` does its work: here, or on the cluster ``--ray`` names."""
    from lcr.eval.runner import execute_here

    _no_workers_alone(address, workers)
    if address is None:
        return execute_here
    from lcr.cluster.questions import eval_executor

    _reachable(address)
    return eval_executor(address, workers, spec, note=note)


def _reachable(address: str) -> None:
    """A wrong address, a head not answering or the extra missing: refused before any
    question is read or result written (the cluster itself is joined once work is due)."""
    from lcr.cluster.connect import check_reachable, import_ray, parse_address

    parsed = parse_address(address)
    if parsed.kind == "head":
        check_reachable(parsed)
    import_ray()


def ask_address(
    address: str | None,
    workers: int | None,
    question: str,
    indexes: Sequence[str],
    each: bool,
) -> str | None:
    """The cluster ``lcr ask`` answers on, or None: here. A cluster answers the questions
    of stdin (``-``) from one index; ``LCR_RAY_ADDRESS`` leaves any other ask here, while
    ``--ray`` given for one is refused."""
    _no_workers_alone(address, workers)
    first = Path(indexes[0])  # a folder of indexes is several
    folder = first.is_dir() and not (first / "manifest.json").exists()
    several = each or len(indexes) > 1 or folder
    if address is None or (question == "-" and not several):
        return address
    source = click.get_current_context().get_parameter_source("ray_address")
    if source is click.core.ParameterSource.ENVIRONMENT and workers is None:
        return None
    raise UsageError(
        "--ray answers the questions of stdin (QUESTION '-') from one index; "
        "ask one question, or several indexes, without it"
    )


def ask_with_ray(
    address: str,
    workers: int | None,
    index: str,
    plan: QueryPlan,
    questions: Iterable[str],
    output: ResultOutput,
    spec: ModelSpec,
    note: Callable[[str], None],
) -> int:
    """``lcr ask INDEX - --ray``: every question read (and checked) first, then answered
    on the cluster, each printed in the input's order; the exit code."""
    from lcr.cluster.questions import ask_on_cluster
    from lcr.progress import progress_for, progress_mode

    _reachable(address)
    asked = list(questions)
    with progress_for(progress_mode(output.quiet)) as progress:
        ask_on_cluster(
            address,
            workers,
            spec,
            index,
            plan,
            asked,
            show=lambda result: output.show(result, True, None),
            note=note,
            progress=progress,
        )
    return 0
