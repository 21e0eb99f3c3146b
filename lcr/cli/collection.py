"""``lcr remove`` and what ``lcr index --add`` and ``lcr info`` print about a collection
that grows and shrinks (the work itself is :mod:`lcr.pipeline.collection`'s)."""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING, Any

import click

from lcr.cli.models import command_models, model_options, pop_model_spec
from lcr.cli.output import WIDTH, NonEmptyPath, UnprintedReports, counted, visible
from lcr.cli.output import err as _err
from lcr.cli.output import human as _human
from lcr.cli.output import say as _say

if TYPE_CHECKING:
    from lcr.pipeline import BuildReport
    from lcr.store import Index


@click.command("remove")
@click.argument("index_path", metavar="INDEX", type=NonEmptyPath())
@click.argument("names", metavar="NAME...", nargs=-1, required=True)
@model_options
@click.option("--quiet", "-q", is_flag=True, help="No progress bars or lines.")
def remove_cmd(index_path: str, names: tuple[str, ...], quiet: bool, **model: Any) -> None:
    """Remove the documents NAME... (as `lcr info` lists them) from INDEX.

    Every method is rebuilt beside the index, with the settings and models it
    was built with, through the index's LLM cache, and swapped in at the end
    (interrupted, the index stays as it was); what each method paid is
    printed, and `lcr info` shows it.
    """
    from lcr.pipeline.collection import remove_documents
    from lcr.progress import progress_for, progress_mode

    unprinted = UnprintedReports()
    with progress_for(progress_mode(quiet)) as progress:
        models = command_models(pop_model_spec(model), progress)
        remove_documents(
            index_path,
            list(names),
            models,
            progress=progress,
            warn=lambda message: _err(f"warning: {message}"),
            on_report=lambda r: report_build(unprinted, index_path, r, quiet=quiet),
            note=_err,
            tell=_say,
        )
    unprinted.warn()


def report_build(
    unprinted: UnprintedReports, target: str, r: BuildReport, *, quiet: bool = False
) -> None:
    """``book.idx: bm25 built in 0.1s (12 nodes)``, as ``lcr index`` prints it (nothing
    with ``--quiet``: ``lcr info`` shows the same)."""
    if quiet:
        return
    what = f"built in {r.seconds:.1f}s" if r.built else "up to date"
    if r.note:
        what += f" ({r.note})"
    counts = ", ".join(counted(v, k) for k, v in r.counts.items())
    name = visible(str(target))
    unprinted.echo(f"{name}: {r.method} {what} ({counts})", name, r.method)


def print_sources(index: Index) -> None:
    """Each source (format, size, checksum, extractor, when it was added), then the last
    change and what each method paid for it."""
    from lcr.pipeline.collection import describe_change

    m = index.manifest
    for d in index.documents:
        pages = f", {d.pages} pages" if d.pages else ""
        made_by = f"{d.extractor} {d.extractor_version}".strip()
        added = (d.added or m.created).replace("T", " ").removesuffix("Z")
        line = (
            f"- {d.name}  {d.format}{pages}, {d.end - d.start:,} chars  {_human(d.size)}  "
            f"sha256 {d.sha256[:12]}  by {made_by}  added {added}"
        )
        _say(textwrap.fill(line, WIDTH, initial_indent="  ", subsequent_indent="      "))
    if m.last_change:
        first, *methods = describe_change(m.last_change)
        _say(textwrap.fill(first, WIDTH, initial_indent="  changed   ", subsequent_indent=" " * 12))
        for line in methods:
            _say(textwrap.fill(line, WIDTH, initial_indent=" " * 12, subsequent_indent=" " * 14))
