"""``lcr index ... --estimate``: the options and the printing (the figures live in
:mod:`lcr.pipeline.estimate`)."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from lcr.cli.output import WIDTH
from lcr.cli.output import echo as _echo
from lcr.cli.output import human as _human
from lcr.cli.output import say as _say
from lcr.errors import UsageError

if TYPE_CHECKING:
    from lcr.estimate.figures import Range
    from lcr.models.spec import ModelSpec
    from lcr.pipeline.estimate import MethodBill, Price
    from lcr.pipeline.plans import ParsedSets
    from lcr.text.inputs import InputFile

ESTIMATE_OPTIONS = ("estimate", "as_json", "price_per_mtok")


def estimate_options(f: Any) -> Any:
    f = click.option(
        "--price-per-mtok",
        "price_per_mtok",
        envvar="LCR_PRICE_PER_MTOK",
        metavar="IN[/OUT]",
        default=None,
        help="With --estimate: the price of 1M prompt tokens (and of 1M reply tokens after a "
        "slash), to show the bill in money. [env: LCR_PRICE_PER_MTOK]",
    )(f)
    f = click.option(
        "--json", "as_json", is_flag=True, help="With --estimate: one JSON object per method."
    )(f)
    f = click.option(
        "--estimate",
        is_flag=True,
        help="Print what building would cost (LLM calls, tokens, time, disk, memory, money) "
        "and build nothing: no LLM call, nothing written to the index.",
    )(f)
    return f


def pop_estimate(options: dict[str, Any]) -> tuple[bool, bool, Price | None]:
    """Take ``--estimate``, ``--json`` and ``--price-per-mtok`` out of a command's options,
    checked: the last two only go with the first."""
    from lcr.pipeline.estimate import Price

    estimate, as_json, price = (options.pop(name) for name in ESTIMATE_OPTIONS)
    if as_json and not estimate:
        raise UsageError("--json goes with --estimate (a build prints its own lines)")
    parsed = Price.parse(price) if price is not None else None
    return bool(estimate), bool(as_json), parsed


def run_estimate(
    jobs: Sequence[tuple[list[InputFile], Path, bool]],
    methods: Sequence[str],
    spec: ModelSpec,
    sets: ParsedSets,
    *,
    as_json: bool,
    price: Price | None,
    warn: Callable[[str], None],
    doc_format: str,
    password: str | None,
    force: bool = False,
    quiet: bool = False,
    workers: int | None = None,
) -> None:
    """Estimate each index ``lcr index`` would build (``jobs``) and print the bills;
    ``workers``: then the run's time on that many workers (:mod:`lcr.estimate.workers`)."""
    from lcr.cli.output import err
    from lcr.models.container import Models
    from lcr.pipeline.estimate import estimate_index
    from lcr.text.formats import ExtractOptions

    models = Models(spec=spec)
    extract = ExtractOptions(
        format=None if doc_format == "auto" else doc_format, password=password, warn=warn
    )
    times: list[Range | None] = []
    for files, target, _walked in jobs:
        summary, bills = estimate_index(
            files,
            target,
            methods,
            models,
            sets,
            price=price,
            warn=warn,
            note=None if quiet else err,
            extract=extract,
            force=force,
        )
        if as_json:
            for bill in bills:
                _echo(json.dumps({**summary, **bill.to_json()}, ensure_ascii=False))
        else:
            print_bills(summary, bills)
        times.append(_index_time(bills))
    if workers is not None:
        print_workers(times, workers, as_json)


def _index_time(bills: Sequence[MethodBill]) -> Range | None:
    """One index's build time, every method it builds (None: a method's time unknown)."""
    from lcr.estimate.figures import ZERO

    total = ZERO
    for bill in bills:
        if bill.up_to_date:
            continue
        if bill.seconds is None:
            return None
        total = total + bill.seconds
    return total


def print_workers(times: Sequence[Range | None], workers: int, as_json: bool) -> None:
    """The run's time on ``workers`` workers, each index one worker's task, longest first."""
    from lcr.estimate.workers import spread

    known = [t for t in times if t is not None]
    if len(known) < len(times):
        _say(f"on {workers} workers: time unknown (a method's time is not known, above)")
        return
    run = spread(known, workers)
    if as_json:
        _echo(json.dumps(run.to_json()))
        return
    one = "index" if len(known) == 1 else "indexes"
    _say(
        textwrap.fill(
            f"on {workers} worker{'s' * (workers != 1)}: {_duration(run.seconds.expected)} "
            f"expected, at most {_duration(run.seconds.high)}; "
            f"one worker: {_duration(run.serial.expected)} expected; {len(known)} {one}, the "
            f"longest {_duration(run.longest.expected)} expected (no number of workers "
            "makes the run shorter)",
            WIDTH,
            subsequent_indent="  ",
        )
    )


def _n(value: float) -> str:
    return f"{value:,.0f}"


def _range(r: Range, unit: str, fmt: Callable[[float], str] = _n) -> str:
    if r.is_exact:
        return f"{fmt(r.expected)}{unit} (exact)"
    likely = "" if r.likely is None else f" (likely {fmt(r.likely[0])}-{fmt(r.likely[1])})"
    return f"{fmt(r.expected)}{unit} expected{likely}, at most {fmt(r.high)}{unit}"


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def _money(value: float) -> str:
    return f"{value:,.4f}" if value < 1 else f"{value:,.2f}"


def _line(label: str, text: str) -> None:
    _say(textwrap.fill(text, WIDTH, initial_indent=f"  {label:9} ", subsequent_indent=" " * 12))


def print_bills(summary: dict[str, Any], bills: Sequence[MethodBill]) -> None:
    head = (
        f"estimate for {summary['index']}: {summary['documents']} document(s), "
        f"{summary['characters']:,} characters, ~{summary['tokens']:,} tokens"
    )
    lines = textwrap.wrap(
        head, WIDTH, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False
    )
    _say("\n".join(lines))  # a long index path wraps (issue 54)
    for bill in bills:
        work = bill.work
        if bill.up_to_date:
            _say(f"{bill.method}: up to date in the index, nothing to pay")
            continue
        llm = work.llm
        who = f"{llm.role} {llm.model} ({bill.backend})" if llm else "no LLM"
        _say(f"{bill.method}: {who}")
        if llm is not None:
            _line("calls", _range(llm.calls, ""))
            _line("prompt", _range(llm.prompt_tokens, " tokens"))
            _line("replies", _range(llm.completion_tokens, " tokens"))
        if work.embedder_texts.high > 0:
            _line("embedder", _range(work.embedder_texts, " texts"))
        if bill.seconds is not None:
            _line("time", _range(bill.seconds, "", _duration))
        memory = _human(bill.memory_bytes) if bill.memory_bytes is not None else "unknown"
        _line("disk", f"{_range(bill.disk_bytes, '', _human)}; peak memory {memory}")
        if bill.cost is not None:
            _line("cost", _range(bill.cost, "", _money))
        for key, text in {**work.basis, **bill.sources}.items():
            _line("how" if key == next(iter(work.basis), key) else "", f"{key}: {text}")


def info_estimate_option(f: Any) -> Any:
    return click.option(
        "--estimate",
        is_flag=True,
        help="Also estimate rebuilding each method from scratch (its settings and models; "
        "a tokenizer is read, no LLM called), beside what its last build paid.",
    )(f)


def rebuild_figures(index: Any, as_json: bool, out: dict[str, Any] | None = None) -> None:
    """``lcr info --estimate``: into ``out`` (``--json``: each method's ``rebuild``), else
    printed, one block a method."""
    from lcr.cli.output import err
    from lcr.pipeline.estimate import estimate_rebuilds

    rebuilds = estimate_rebuilds(index, note=err)
    if as_json and out is not None:
        for name, rebuild in rebuilds.items():
            out.setdefault("methods", {}).setdefault(name, {})["rebuild"] = rebuild.to_json()
        return
    for name, rebuild in rebuilds.items():
        work = rebuild.bill.work
        usage = rebuild.last_usage
        _say(f"rebuild {name} from scratch (estimate)")
        if work.llm is not None:
            _line("calls", _range(work.llm.calls, ""))
            tokens = work.llm.prompt_tokens + work.llm.completion_tokens
            _line("tokens", _range(tokens, ""))
        if rebuild.bill.seconds is not None:
            _line("time", _range(rebuild.bill.seconds, "", _duration))
        paid = (
            f"{usage.get('calls', 0):,} calls, "
            f"{usage.get('prompt_tokens', 0) + usage.get('completion_tokens', 0):,} tokens"
            if usage
            else "no LLM"
        )
        _line("last", f"{paid} in {_duration(rebuild.last_seconds)} ({rebuild.built_at})")
