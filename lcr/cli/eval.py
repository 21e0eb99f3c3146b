"""``lcr eval``: run methods on a dataset, or prepare/generate datasets.

``lcr eval DATA.jsonl --method M`` and ``lcr eval prepare|generate ...`` share
one name: :class:`DefaultGroup` sends anything that is not a subcommand to the
hidden ``run`` command. The lead attaches it with ``cli.add_command(eval_group, "eval")``.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from lcr.cli.cluster import eval_execute, ray_options
from lcr.cli.models import command_models, model_options, pop_model_spec
from lcr.cli.output import NonEmptyPath, check_stdout, err, note
from lcr.errors import OutOfMemoryError, OutputError

FORMAT_HELP = """\b
Dataset format (JSONL, one question a line):
  {"id": "q1", "question": "...", "answers": ["...", "..."],
   "documents": [{"id": "d1", "title": "...", "text": "..."}],
   "evidence": [{"doc": "d1", "start": 10, "end": 42},
                {"doc": "d1", "text": "exact words"}]}

A document is inline {id, title, text}, {"id": ...} for one given inline on an
earlier line, or a path relative to the data file, inside its folder (or inside
--documents-root DIR). Evidence is optional: spans
into the document's own text, exact strings, or {"doc": id} for document-level
gold. Questions over the same documents share one index."""


class DefaultGroup(click.Group):
    """A group whose unknown first word (a data file, an option) goes to ``run``."""

    default_command = "run"

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = [self.default_command, *args]
        return super().parse_args(ctx, args)

    def format_usage(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        formatter.write_usage(
            ctx.command_path,
            "DATA.jsonl --method M [--method M2 ...] [OPTIONS]\n"
            f"{' ' * (len(ctx.command_path) + 7)}| prepare KIND SOURCE -o OUT | generate KIND "
            "--length N -o OUT\n"
            f"{' ' * (len(ctx.command_path) + 7)}| report RESULTS.jsonl... -o PAGE.html",
        )


@click.group(
    "eval",
    cls=DefaultGroup,
    epilog=FORMAT_HELP,
    context_settings={"help_option_names": ["-h", "--help"]},
)
def eval_group() -> None:
    """Measure methods side by side on real and generated long-context tasks.

    `lcr eval DATA.jsonl --method bm25 --method mixpr` runs every method on every
    question (see `lcr eval run --help`); `prepare` converts SQuALITY, QMSum,
    ODSum and BABILong; `generate` writes RULER and Hash-Hop tasks; `report`
    writes results as one HTML page that opens offline.
    """


def _note(message: str, quiet: bool) -> None:
    if not quiet:
        note(message)


@eval_group.command("run", hidden=True, epilog=FORMAT_HELP)
@click.argument("data", type=NonEmptyPath(path_type=Path))
@click.option(
    "--method",
    "-m",
    "methods",
    multiple=True,
    help="Method to evaluate (repeat for several; 'all' for every method; 'gold' answers "
    "from each question's gold evidence alone, the ceiling to measure against).",
)
@click.option(
    "-k", "k", type=int, default=None, help="Evidence items per question (method default)."
)
@click.option("--limit", type=int, default=None, help="Only the first N questions.")
@click.option(
    "--retrieval-only",
    is_flag=True,
    help="Score retrieval only: no answer step, so no LLM for methods that retrieve without one.",
)
@click.option(
    "--out",
    "out",
    type=NonEmptyPath(path_type=Path),
    default=None,
    help="Results JSONL (appended; default DATA.results.jsonl). A rerun skips questions "
    "already done with the same method, settings and models.",
)
@click.option(
    "--index-dir",
    type=NonEmptyPath(path_type=Path),
    default=None,
    help="Where the shared indexes are cached (default DATA.indexes/ beside the data, or "
    "beside the --out file when the data's folder cannot be written).",
)
@click.option(
    "--documents-root",
    type=NonEmptyPath(path_type=Path),
    default=None,
    metavar="DIR",
    help="The folder the data file's document paths may point into (default: the data "
    "file's own folder; a path outside it is refused).",
)
@click.option(
    "--max-new-tokens", type=int, default=256, show_default=True, help="Answer length cap."
)
@model_options
@click.option(
    "--set",
    "sets",
    multiple=True,
    metavar="METHOD.KEY=VALUE",
    help="Override a setting (build, query, or the answer step's answer.KEY=VALUE).",
)
@click.option(
    "--report",
    "report_path",
    type=NonEmptyPath(dir_okay=False, path_type=Path),
    default=None,
    metavar="PAGE.html",
    help="Also write the run's report, one HTML page that opens offline (as `lcr eval "
    "report`: quality against cost, paired differences, found or not, by question type, "
    "builds, the questions the methods disagree on).",
)
@click.option(
    "--figures",
    "figures_dir",
    type=NonEmptyPath(file_okay=False, path_type=Path),
    default=None,
    metavar="DIR",
    help="Also save the report's charts as PNG and SVG files in DIR, for a paper.",
)
@ray_options("Build the indexes and answer the questions")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option("--quiet", "-q", is_flag=True, help="No progress or notes on stderr.")
def run_command(
    data: Path,
    methods: tuple[str, ...],
    k: int | None,
    limit: int | None,
    retrieval_only: bool,
    out: Path | None,
    index_dir: Path | None,
    documents_root: Path | None,
    max_new_tokens: int,
    sets: tuple[str, ...],
    report_path: Path | None,
    figures_dir: Path | None,
    as_json: bool,
    quiet: bool,
    ray_address: str | None,
    workers: int | None,
    **model: Any,
) -> None:
    """Run every --method on every question of DATA.jsonl and print the summary table.

    Per question it records the answer (unless --retrieval-only), the evidence,
    EM / F1 (SQuAD normalisation), ROUGE-L, RULER string match (all / part),
    evidence recall, evidence tokens, LLM tokens in and out, LLM calls, wall
    time and FLOPs (lcr's estimate, 2 x parameters x tokens: PECAN reports TFLOPs
    but gives no formula). The table shows means with 95% bootstrap intervals
    and, for two methods, a paired bootstrap test of their difference; a second
    table, what building one index cost (seconds; LLM calls and tokens for methods
    that build with an LLM). With answers, EM / F1 / RULER match are also split by
    whether a gold answer was in the evidence the answer step read ("answer
    found"): found but not read.
    """
    from lcr.errors import UsageError
    from lcr.eval import runner, summary
    from lcr.progress import progress_for, progress_mode

    if max_new_tokens < 1:
        raise UsageError("--max-new-tokens must be at least 1")
    if report_path is not None and not report_path.parent.is_dir():  # before hours of run
        raise UsageError(f"--report: no folder {report_path.parent} to write the page in")
    opts = runner.RunOptions(
        methods=list(methods),
        k=k,
        limit=limit,
        retrieval_only=retrieval_only,
        sets=list(sets),
        max_new_tokens=max_new_tokens,
        index_dir=index_dir,
        out=out,
        documents_root=documents_root,
        note=lambda message: _note(message, quiet),
        command=command_line(),
    )
    spec = pop_model_spec(model)
    execute = eval_execute(ray_address, workers, spec, opts.note or note)
    with progress_for(progress_mode(quiet, bars_need_stdout=False)) as progress:
        models = command_models(spec, progress)
        outcome = runner.run(data, models, opts, progress=progress, execute=execute)
    names = [p.name for p in outcome.plans]
    result = summary.summarize(
        outcome.records, names, retrieval_only=retrieval_only, builds=outcome.builds
    )
    if report_path is not None or figures_dir is not None:
        written = write_report(
            outcome.records,
            outcome.builds,
            ReportRequest(report_path, figures_dir, sources=[str(outcome.out)]),
        )
        _note(written, quiet)
    try:
        if as_json:
            payload: dict[str, Any] = {
                "data": str(data),
                "results": str(outcome.out),
                "questions": len(outcome.questions),
                "new": outcome.new,
                "skipped": outcome.skipped,
                "retrieval_only": retrieval_only,
                "summary": result,
            }
            click.echo(json.dumps(payload, ensure_ascii=False))
            return
        _note(
            f"{len(outcome.questions)} questions x {len(names)} methods: {outcome.new} run, "
            f"{outcome.skipped} already in {outcome.out}",
            quiet,
        )
        summary.render(result, table_console())
    except OutputError as exc:  # the results are what a run is for, and they are saved
        raise OutputError(f"{exc}; the results are saved in {outcome.out}") from None


def command_line() -> str | None:
    """The command as typed (``lcr eval ...``), for the records and the report to show;
    None where lcr was not started from its command line (the Python API, tests)."""
    import shlex

    started = Path(sys.argv[0])
    from_lcr = started.name == "lcr" or started.parts[-2:] == ("lcr", "__main__.py")
    if not from_lcr or "eval" not in sys.argv[1:]:  # pytest's own argv, say
        return None
    return shlex.join(["lcr", *sys.argv[1:]])


@dataclass(frozen=True)
class ReportRequest:
    """Where a report goes and what it charts (see ``lcr eval report --help``)."""

    page: Path | None
    figures: Path | None
    options: Any = None  # lcr.eval.report.ReportOptions; None: the defaults
    sources: list[str] = field(default_factory=list)


def write_report(
    records: list[dict[str, Any]], builds: list[dict[str, Any]], request: ReportRequest
) -> str:
    """Build the report, write the page (atomically) and the figures; what was written."""
    from lcr.atomic import atomic_write_bytes, atomic_write_text
    from lcr.errors import UsageError
    from lcr.eval import report

    options = request.options or report.ReportOptions()
    try:
        made = report.build_report(
            records, builds, options, sources=request.sources, made=command_line() or ""
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    wrote = []
    if request.page is not None:
        if request.page.is_dir():
            raise UsageError(f"{request.page} is a folder; give the page's file name")
        if not request.page.parent.is_dir():
            raise UsageError(f"no folder {request.page.parent} to write {request.page.name} in")
        try:
            atomic_write_text(request.page, made.html)
        except OSError as exc:
            raise OutputError(f"cannot write {request.page}: {exc.strerror or exc}") from None
        wrote.append(f"the report {request.page}")
    if request.figures is not None:
        if request.figures.exists() and not request.figures.is_dir():
            raise UsageError(f"--figures {request.figures} is a file; give a folder")
        try:
            request.figures.mkdir(parents=True, exist_ok=True)
            for chart in made.charts:
                for suffix in ("svg", "png"):
                    data = report.figure_bytes(chart, suffix)
                    atomic_write_bytes(request.figures / f"{chart.name}.{suffix}", data)
        except OSError as exc:
            raise OutputError(
                f"cannot write the figures in {request.figures}: {exc.strerror or exc}"
            ) from None
        wrote.append(f"{len(made.charts)} figures (PNG and SVG) in {request.figures}")
    return "wrote " + " and ".join(wrote)


def table_console() -> Any:
    """A rich console for the summary; piped to a file it is 240 columns wide, because
    rich's 80-column default would cut a dozen metric columns down to ellipses."""
    from rich.console import Console

    wide = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 240
    return Console(width=wide)


def _price(value: str | None) -> Any:
    """``--price IN,OUT`` (dollars per million tokens) as a :class:`Price`."""
    from lcr.errors import UsageError
    from lcr.eval.report import Price

    if value is None:
        return None
    parts = value.split(",")
    try:
        prices = [float(p) for p in parts]
    except ValueError:
        prices = []
    if len(prices) != 2 or any(p < 0 or p != p for p in prices):
        raise UsageError(
            f"--price {value!r}: give two numbers, dollars per million tokens in and out "
            "(e.g. --price 0.15,0.60)"
        )
    return Price(prices[0], prices[1])


@eval_group.command("report")
@click.argument("results", nargs=-1, required=True, type=NonEmptyPath(path_type=Path))
@click.option(
    "-o",
    "--out",
    "page",
    type=NonEmptyPath(dir_okay=False, path_type=Path),
    default=None,
    metavar="PAGE.html",
    help="The page to write (default: the first results file's name with .html).",
)
@click.option(
    "--figures",
    "figures_dir",
    type=NonEmptyPath(file_okay=False, path_type=Path),
    default=None,
    metavar="DIR",
    help="Also save every chart as PNG and SVG files in DIR, for a paper.",
)
@click.option(
    "--quality",
    default=None,
    metavar="METRIC",
    help="The quality axis: f1, em, rouge_l, match_all, recall, ... (default: F1 where "
    "the methods answered, else evidence recall).",
)
@click.option(
    "--cost",
    "costs",
    multiple=True,
    type=click.Choice(["prompt_tokens", "evidence_tokens", "wall_s", "llm_calls", "usd"]),
    help="A cost axis to chart quality against (repeat for several; default: every cost "
    "the results spent; usd needs --price).",
)
@click.option(
    "--price",
    default=None,
    metavar="IN,OUT",
    help="US dollars per million LLM tokens in and out, for the usd cost axis.",
)
@click.option(
    "--index-dir",
    "index_dirs",
    multiple=True,
    type=NonEmptyPath(file_okay=False, path_type=Path),
    help="The indexes the results were built into, for the build costs (default: "
    "NAME.indexes/ beside each NAME.results.jsonl or NAME.jsonl, where it exists).",
)
@click.option(
    "--disagreements",
    type=click.IntRange(min=0),
    default=50,
    show_default=True,
    help="At most N questions in the table of those the methods disagree on.",
)
@click.option("--title", default="lcr eval report", show_default=True, help="The page's title.")
@click.option(
    "--note",
    default="",
    metavar="TEXT",
    help="A line under the title: the data set and its licence's attribution, say.",
)
@click.option("--quiet", "-q", is_flag=True, help="No note on stderr.")
def report_command(
    results: tuple[Path, ...],
    page: Path | None,
    figures_dir: Path | None,
    quality: str | None,
    costs: tuple[str, ...],
    price: str | None,
    index_dirs: tuple[Path, ...],
    disagreements: int,
    title: str,
    note: str,
    quiet: bool,
) -> None:
    """Write the results of `lcr eval` runs as one HTML page that opens offline.

    RESULTS are results files (JSONL) of one or more runs over the same questions.
    The page shows where they come from (command, commit, models); quality against
    each cost (LLM tokens in, evidence tokens, seconds, LLM calls, dollars at
    --price), each method a point with 95% bootstrap intervals on both axes; the
    paired differences between every two methods, with p-values (and Holm's
    adjustment); the table `lcr eval` prints; accuracy split by whether a gold
    answer was in the evidence read; the split by the data set's question type
    (HotpotQA's bridge / comparison); what building one index cost; and the
    questions where the methods disagree, each with its evidence a click away.
    Each chart has its numbers in a table beside it. The charts are matplotlib's,
    inlined as SVG: the page loads nothing from anywhere.
    """
    from lcr.errors import InputError
    from lcr.eval import runner
    from lcr.eval.records import read_report_records
    from lcr.eval.report import ReportOptions

    records: list[dict[str, Any]] = []
    for path in results:
        if not path.is_file():
            raise InputError(f"no results file at {path}")
        got = read_report_records(path, lambda line: err(f"warning: {line}"))
        if not got:
            raise InputError(f"{path} holds no `lcr eval` results")
        records.extend(got)
    folders = list(index_dirs) or [
        d for d in (runner.indexes_beside(p) for p in results) if d.is_dir()
    ]  # fmt: skip
    builds = [b for d in folders for b in runner.recorded_build_costs(records, d)]
    options = ReportOptions(quality, costs, _price(price), disagreements, title, note)
    target = page or results[0].with_suffix(".html")
    request = ReportRequest(target, figures_dir, options, [str(p) for p in results])
    _note(write_report(records, builds, request), quiet)


_out_option = click.option(
    "-o",
    "--out",
    "out",
    type=NonEmptyPath(readable=False),
    required=True,
    help="Output JSONL ('-' for stdout).",
)


@eval_group.command("prepare")
@click.argument("kind", type=click.Choice(["squality", "qmsum", "odsum", "babilong"]))
@click.argument("source", type=NonEmptyPath(path_type=Path))
@_out_option
@click.option("--seed", type=int, default=0, show_default=True, help="BABILong sampling seed.")
@click.option("--limit", type=int, default=None, help="At most N questions.")
@click.option(
    "--filler",
    type=NonEmptyPath(path_type=Path),
    default=None,
    help="babilong: the long text the bAbI facts are hidden in (any prose, e.g. a book).",
)
@click.option(
    "--length",
    default="32k",
    show_default=True,
    help="babilong: target length in tokens (approximate counter, see generate --help).",
)
@click.option("--quiet", "-q", is_flag=True, help="No note on stderr.")
def prepare_command(
    kind: str,
    source: Path,
    out: str,
    seed: int,
    limit: int | None,
    filler: Path | None,
    length: str,
    quiet: bool,
) -> None:
    """Convert a real data set, as its authors publish it, to the eval format.

    \b
    squality  SOURCE=dev.jsonl
              SQuALITY (nyu-mll/SQuALITY, data/v1-3/txt/): story
              questions, 4 reference answers each
    qmsum     SOURCE=val.jsonl
              QMSum (Yale-LILY/QMSum, data/ALL/jsonl/): meeting
              queries; gold evidence = relevant_text_span
    odsum     SOURCE=folder
              ODSum Story (yale-nlp/ODSum, data/Story/raw/:
              story_docs_dev.jsonl, story_queries.jsonl): all dev
              stories one corpus; document-level gold
    babilong  SOURCE=qaN_*_test.txt
              bAbI v1.2 (tasks_1-20_v1-2/en) qa1-qa5: facts hidden
              in --filler at --length; supporting facts are gold

    Licences (the authors'): SQuALITY stories Project Gutenberg licence, its
    questions and answers CC BY 4.0; QMSum MIT; ODSum MIT; bAbI CC BY 3.0.
    """
    from lcr.eval import convert, dataset
    from lcr.eval.generate import parse_length

    if out == "-":
        check_stdout()
    try:
        questions = convert.prepare(
            kind, source, seed=seed, limit=limit, filler=filler, length=parse_length(length)
        )
        n = dataset.save(questions, out)
    except MemoryError:
        raise OutOfMemoryError(
            f"out of memory converting {source}: convert fewer questions at a time with "
            "--limit" + (", or a shorter --length" if kind == "babilong" else "")
        ) from None
    _note(f"wrote {n} questions to {out}", quiet or out == "-")


@eval_group.command("generate")
@click.argument(
    "kind",
    type=click.Choice(
        ["niah-single", "niah-multikey", "niah-multivalue", "niah-multiquery", "vt", "hashhop"]
    ),
)
@click.option(
    "--length",
    required=True,
    help="Document length in tokens (4096, 32k, 128k) of the approximate counter.",
)
@_out_option
@click.option(
    "--seed",
    type=int,
    default=0,
    show_default=True,
    help="Random seed: the same seed, length and count give the same file.",
)
@click.option("--count", type=int, default=50, show_default=True, help="Number of questions.")
@click.option("--hops", type=int, default=None, help="vt: chain length (4); hashhop: 1-6 (2).")
@click.option("--quiet", "-q", is_flag=True, help="No note on stderr.")
def generate_command(
    kind: str, length: str, out: str, seed: int, count: int, hops: int | None, quiet: bool
) -> None:
    """Write a synthetic task: RULER NIAH (4 variants), variable tracking, Hash-Hop.

    Each question has its own document of --length tokens and its gold evidence
    (the needles, the assignment chain). Tokens are counted by lcr's approximate
    tokenizer-free counter (lcr.text.tokens: close to Qwen2.5's BPE on prose,
    fewer than BPE on random strings), so the same seed gives the same file
    byte for byte whatever models are installed.
    """
    from lcr.eval import dataset
    from lcr.eval.generate import generate, parse_length

    if out == "-":
        check_stdout()
    tokens = parse_length(length)
    try:
        n = dataset.save(generate(kind, tokens, count, seed, hops=hops), out)
    except MemoryError:
        raise OutOfMemoryError(
            f"out of memory generating {count} documents of {tokens:,} tokens: lower --count "
            "or --length, and write several files with other --seed values"
        ) from None
    _note(f"wrote {n} questions to {out}", quiet or out == "-")
