"""The ``lcr`` command line: a thin click layer over :mod:`lcr.pipeline`.

Plain text for people, ``--json`` (one object per line) for scripts. Heavy
imports happen inside commands so ``lcr --help`` answers at once.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from lcr._version import __version__
from lcr.cli import estimate as est
from lcr.cli.answer import ResultOutput, answer_only_option, evidence_option, verbose_option
from lcr.cli.cluster import ask_address, ask_with_ray, ray_options
from lcr.cli.errors import (
    flush_stdout,
    one_line,
    print_traceback,
    terminations_reported,
    usage_line,
)
from lcr.cli.errors import report as report_error
from lcr.cli.info import print_info
from lcr.cli.methods import DerivedHelpOption, k_help, mode_help, trace_help
from lcr.cli.models import (
    ModelsFactory,
    Seams,
    command_models,
    model_options,
    models_group,
    pop_model_spec,
)
from lcr.cli.output import (
    NonEmptyPath,
    UnprintedReports,
    check_stdout,
    guarded_stdout,
)
from lcr.cli.output import err as _err
from lcr.cli.output import say as _say
from lcr.errors import (
    IndexDamagedError,
    InputError,
    LostRaceError,
    UsageError,
)

if TYPE_CHECKING:
    from lcr.text.inputs import InputFile


# ------------------------------------------------------------------ options
def set_option(f: Any) -> Any:
    return click.option(
        "--set",
        "sets",
        multiple=True,
        metavar="METHOD.KEY=VALUE",
        help="Override a method setting, or the answer step's (answer.KEY=VALUE; repeatable); "
        "`lcr methods --settings` lists them.",
    )(f)


def quiet_option(f: Any) -> Any:
    return click.option("--quiet", "-q", is_flag=True, help="No progress bars or lines.")(f)


def _debug_wanted(ctx: click.Context | None = None) -> bool:
    root = ctx.find_root() if ctx is not None else None
    return bool(root is not None and root.meta.get("lcr.debug")) or (
        os.environ.get("LCR_DEBUG") == "1"
    )


class LcrGroup(click.Group):
    """The one place an error becomes what the user sees: one line on stderr and an exit
    code (0 success, 1 an error, 2 bad usage, 130 interrupted), ``--debug`` included.

    Here rather than only in :func:`main`, so click's ``CliRunner`` (the tests) sees
    exactly what a user sees.
    """

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        argv = list(sys.argv[1:] if args is None else args)
        try:
            returned = super().main(
                argv,
                prog_name,
                complete_var,
                standalone_mode=False,
                windows_expand_args=windows_expand_args,
                **extra,
            )
            code = returned if isinstance(returned, int) else 0  # ctx.exit(code) after an error
        except click.UsageError as exc:
            _err(usage_line(exc))
            code = 2
        except click.ClickException as exc:
            _err(one_line(exc.format_message()))
            code = exc.exit_code
        except click.exceptions.Abort:
            _err("interrupted")
            code = 130
        except (Exception, KeyboardInterrupt) as exc:  # raised outside a command
            if "--debug" in argv or _debug_wanted():
                print_traceback(exc)
            code = report_error(exc)
        code = flush_stdout(code)
        if standalone_mode:
            sys.exit(code)
        return code

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.exceptions.Abort):
            raise
        except (Exception, KeyboardInterrupt) as exc:
            if _debug_wanted(ctx):
                print_traceback(exc)
            ctx.exit(report_error(exc))


def _remember_debug(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    ctx.meta["lcr.debug"] = value


@click.group(cls=LcrGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="lcr")
@click.option(
    "--debug",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_remember_debug,
    help="Show tracebacks for errors. [env: LCR_DEBUG=1]",
)
def cli() -> None:
    """Answer questions about long documents from an on-disk index.

    \b
      lcr index book.txt                      # book.idx/ with the cheap methods
      lcr ask book.idx "Who hid the key?" --method mixpr
      lcr retrieve book.idx "Who hid the key?" --method bm25 --json
      lcr info book.idx
    """


# -------------------------------------------------------------------- index
@cli.command("index")
@click.argument("files", nargs=-1, required=True, type=NonEmptyPath(readable=False))
@click.option(
    "-o",
    "--output",
    "out",
    type=NonEmptyPath(),
    default=None,
    help="Index directory. With several FILES or a folder: one index over all of them.",
)
@click.option(
    "--format",
    "doc_format",
    type=click.Choice(["auto", "text", "markdown", "html", "pdf", "epub", "docx"]),
    default="auto",
    show_default=True,
    help="Read every FILE as this format instead of by its content and name.",
)
@click.option(
    "--glob",
    "globs",
    multiple=True,
    metavar="PATTERN",
    help="In a folder, index only files matching PATTERN (e.g. '*.pdf'; repeatable).",
)
@click.option(
    "--exclude",
    "excludes",
    multiple=True,
    metavar="PATTERN",
    help="In a folder, skip files and folders matching PATTERN (repeatable).",
)
@click.option(
    "--password",
    envvar="LCR_PDF_PASSWORD",
    default=None,
    help="Password of encrypted PDFs. [env: LCR_PDF_PASSWORD]",
)
@click.option(
    "--method",
    "-m",
    "methods",
    multiple=True,
    help="Method to build (repeatable; 'all' for every one). "
    "Default: the methods that need no LLM.",
)
@click.option(
    "--force",
    is_flag=True,
    help="Replace an index of other documents, or rebuild methods already built.",
)
@click.option(
    "--add",
    is_flag=True,
    help="Add FILE... to the index -o names; its methods are rebuilt with their settings "
    "and models through the LLM cache, paying only for what changed (`lcr remove` takes "
    "documents out).",
)
@click.option(
    "--ray",
    "ray_address",
    envvar="LCR_RAY_ADDRESS",
    default=None,
    metavar="ADDRESS",
    help="Build the files' indexes (one beside each) on a Ray cluster, or with -o read the "
    "files there for one index built here: auto (the running one), local (one started "
    "here) or HOST:PORT of its head; needs the ray extra (docs/cluster.md). "
    "[env: LCR_RAY_ADDRESS]",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=None,
    help="With --ray: this many workers, sharing the cluster's CPUs (default: one per CPU, "
    "one per GPU for LLM methods where it has GPUs). With --estimate: the time on N workers.",
)
@set_option
@model_options
@est.estimate_options
@quiet_option
def index_cmd(
    files: tuple[str, ...],
    out: str | None,
    methods: tuple[str, ...],
    force: bool,
    add: bool,
    sets: tuple[str, ...],
    quiet: bool,
    doc_format: str,
    globs: tuple[str, ...],
    excludes: tuple[str, ...],
    password: str | None,
    ray_address: str | None,
    workers: int | None,
    **model: Any,
) -> None:
    """Build or extend the index of FILE... (`-` reads stdin; a folder is walked).

    Plain text, Markdown, HTML, PDF, EPUB and DOCX (gzipped too) are read, chosen by
    content and then by name (--format to force one); pages and headings are kept.
    """
    from lcr.cli.collection import report_build
    from lcr.pipeline import default_index_path, index_files
    from lcr.pipeline.plans import expand_methods, parse_sets, plan_builds
    from lcr.progress import progress_for, progress_mode
    from lcr.text.formats import ExtractOptions
    from lcr.text.inputs import alone, expand_inputs, path_not_text

    if out is not None and (why := path_not_text(out)) is not None:
        raise UsageError(f"-o {why}; choose another")
    if files.count("-") > 1:
        raise UsageError("stdin ('-') can be given only once")
    if (globs or excludes) and not any(Path(f).is_dir() for f in files if f != "-"):
        raise UsageError("--glob and --exclude choose files in a folder; no folder was given")

    def warn(message: str) -> None:
        _err(f"warning: {message}")

    parsed = parse_sets(sets)  # every --set read once, before any file is
    found = expand_inputs(files, globs=globs, excludes=excludes, warn=warn)  # once
    jobs: list[tuple[list[InputFile], Path, bool]]  # files, index, found in a folder
    if out is not None:
        jobs = [(found, Path(out), False)]
    else:
        jobs = [([alone(f)], default_index_path(f.path), f.found) for f in found]
        _refuse_shared_targets(jobs)
    estimate, as_json, price = est.pop_estimate(model)
    if estimate:  # the bill before paying: nothing built, written or called, no cluster
        est.run_estimate(jobs, methods, pop_model_spec(model), parsed, as_json=as_json,
                         price=price, warn=warn, doc_format=doc_format, password=password,
                         force=force, quiet=quiet, workers=workers)  # fmt: skip
        return
    if add and (out is None or force):
        raise UsageError("--add adds to the index given by -o (and takes no --force)")
    unprinted = UnprintedReports()
    done, loaded = _index_on_cluster(ray_address, workers, jobs, methods, parsed, model,
                                     unprinted, warn=warn, quiet=quiet, force=force, out=out,
                                     stdin="-" in files, doc_format=doc_format,
                                     password=password)  # fmt: skip
    if done:
        return
    if "-" in files and out is None and not quiet:  # no file beside: say where it goes
        _err(f"indexing stdin into {default_index_path('-')} (-o OUT names another)")
    build: Callable[..., object] = functools.partial(index_files, force=force, loaded=loaded)
    if add:  # a collection that grows: lcr.pipeline.collection
        from lcr.pipeline.collection import add_files

        build = functools.partial(add_files, tell=_say, loaded=loaded)
    with progress_for(progress_mode(quiet)) as progress:
        extract = ExtractOptions(
            format=None if doc_format == "auto" else doc_format,
            password=password,
            progress=progress,
            warn=warn,
        )
        models = command_models(pop_model_spec(model), progress)
        if add:  # the index decides what is rebuilt: the names and settings as given
            build = functools.partial(build, methods=list(methods), sets=parsed)
        else:  # every build's needs checked once, for every job
            build = functools.partial(
                build, plans=plan_builds(expand_methods(methods), models, parsed)
            )
        for job_files, target, walked in jobs:
            report = functools.partial(report_build, unprinted, str(target), quiet=quiet)
            try:
                build(
                    job_files,
                    target,
                    models=models,
                    progress=progress,
                    warn=warn,
                    on_report=report,
                    note=_err,
                    extract=extract,
                )
            except InputError as exc:
                if not walked:  # a file named on the command line stops the run
                    raise
                warn(f"skipped: {exc}")
    unprinted.warn()


def _index_on_cluster(
    ray_address: str | None,
    workers: int | None,
    jobs: list[tuple[list[InputFile], Path, bool]],
    methods: tuple[str, ...],
    parsed: Any,
    model: dict[str, Any],
    unprinted: UnprintedReports,
    **options: Any,
) -> tuple[bool, list[Any] | None]:
    """``lcr index --ray`` (:mod:`lcr.cluster`, the one place Ray is imported): each
    index beside its file built on the cluster, its reports printed as a local build's
    are (True); or, for one index over many (``-o``, ``--add``), the documents read on
    the cluster, for this process to build as the index's one writer (False, them).
    (False, None): the run is this machine's (no ``--ray``, or ``LCR_RAY_ADDRESS`` set
    for stdin, which a cluster does not read)."""
    from lcr.cli.collection import report_build

    if ray_address is not None and options["stdin"]:
        source = click.get_current_context().get_parameter_source("ray_address")
        if source is click.core.ParameterSource.ENVIRONMENT:
            ray_address = None  # LCR_RAY_ADDRESS: what a cluster builds; stdin is read here
    if ray_address is None and workers is None:
        return False, None
    from lcr.cluster import command

    out = options.pop("out")
    if out is not None:
        ((files, _target, _walked),) = jobs
        keep = ("quiet", "stdin", "doc_format", "password")
        return False, command.read_with_ray(
            ray_address, workers, files, pop_model_spec(dict(model)), warn=options["warn"],
            **{k: options[k] for k in keep},
        )  # fmt: skip
    command.index_with_ray(
        ray_address, workers, jobs, methods, parsed, pop_model_spec(model),
        on_report=lambda target, r: report_build(unprinted, target, r, quiet=options["quiet"]),
        note=_err, **options,
    )  # fmt: skip
    unprinted.warn()
    return True, None


def _refuse_shared_targets(jobs: list[tuple[list[InputFile], Path, bool]]) -> None:
    """``lcr index x.txt x.md`` would put both into ``x.idx`` (the second refused, or
    with --force replacing the first): refused before any work, naming both."""
    first: dict[str, str] = {}
    for (file,), target, _walked in jobs:
        source = file.path
        key = os.path.realpath(target)
        if key in first:
            raise UsageError(
                f"{first[key]} and {source} would both be indexed into {target}: "
                f"give each its own index with -o (lcr index {source} -o OTHER.idx), "
                "or make one index over both with -o"
            )
        first[key] = source


# ----------------------------------------------------------- ask / retrieve
def _questions(question: str) -> Iterator[str]:
    """Each question checked once: QUESTION itself before any work, or each line of
    stdin (``-``) as it is read."""
    from lcr.pipeline.plans import checked_question

    if question != "-":
        asked = checked_question(question)  # fails before an index opens or a model loads
        yield asked
        return
    for line in sys.stdin:
        if line.strip():
            yield checked_question(line)


def query_options(f: Any) -> Any:
    """The arguments and options of ``ask`` and ``retrieve``: ``INDEX... QUESTION``."""
    f = quiet_option(f)
    f = verbose_option(f)
    f = model_options(f)
    f = set_option(f)
    f = click.option("--json", "as_json", is_flag=True, help="One JSON object per question.")(f)
    f = evidence_option(f)
    f = click.option("--trace", is_flag=True, cls=DerivedHelpOption, derive_help=trace_help)(f)
    f = click.option("--mode", default=None, cls=DerivedHelpOption, derive_help=mode_help)(f)
    f = click.option(
        "-k",
        "k",
        type=click.IntRange(min=1),
        default=None,
        cls=DerivedHelpOption,
        derive_help=k_help,
    )(f)
    f = click.option(
        "--method",
        "-m",
        "method",
        default="bm25",
        show_default=True,
        envvar="LCR_METHOD",
        help="Retrieval method. [env: LCR_METHOD]",
    )(f)
    f = click.argument("question")(f)
    paths = click.argument(
        "index_paths", metavar="INDEX...", nargs=-1, required=True, type=NonEmptyPath()
    )
    return paths(f)


def _run_queries(
    index_path: str,
    question: str,
    method: str,
    k: int | None,
    mode: str | None,
    as_json: bool,
    sets: tuple[str, ...],
    quiet: bool,
    trace: bool = False,
    *,
    answer: bool,
    verbose: bool = False,
    evidence: int | None,
    answer_only: bool = False,
    max_new_tokens: int = 256,
    indexes: Sequence[Path] = (),
    each: bool = False,
    ray: tuple[str, int | None] | None = None,
    **model: Any,
) -> int:
    """Shared body of ``ask`` and ``retrieve``: one result per question (and index,
    with several ``indexes``: lcr.cli.many); the exit code."""
    from lcr import pipeline
    from lcr.pipeline.fresh import forget_prompts
    from lcr.pipeline.plans import parse_sets
    from lcr.progress import progress_for, progress_mode
    from lcr.store import Index

    check_stdout()  # the answers are the whole product: none are paid for if unprintable
    output = ResultOutput(as_json, answer_only, evidence, trace, quiet, verbose)
    # -k, every --set and the question are checked once, before any work
    plan = pipeline.plan_query(
        method, parse_sets(sets), k=k, mode=mode, max_new_tokens=max_new_tokens
    )
    questions = _questions(question)
    if question != "-":
        questions = iter([next(questions)])  # QUESTION checked now, before any work
    if indexes:
        from lcr.cli.many import ask_many

        return ask_many(
            indexes, plan, questions, output, quiet, each=each, model=model, answer=answer
        )
    index = Index.open(index_path)
    index.reader(plan.method.name)  # a missing method fails before any model loads
    if ray is not None:  # lcr ask INDEX - --ray: lcr.cli.cluster
        spec = pop_model_spec(model)
        return ask_with_ray(*ray, index_path, plan, questions, output, spec, _err)
    with progress_for(progress_mode(quiet)) as progress:
        models = command_models(pop_model_spec(model), progress)
        for asked in questions:
            forget_prompts(models)  # each answer the question's alone (lcr.pipeline.fresh)
            with output.screen(asked, answer) as screen:
                if answer:
                    result = pipeline.ask_query(
                        index, plan, asked, models, progress=progress, note=_err, stream=screen
                    )
                else:
                    try:
                        result = pipeline.retrieve_query(
                            index, plan, asked, models, progress=progress, note=_err
                        )
                    except LostRaceError:  # a build committed meanwhile: read the new one, once
                        index = Index.open(index_path)
                        result = pipeline.retrieve_query(
                            index, plan, asked, models, progress=progress, note=_err
                        )
            output.show(result, answer, screen)
    return 0


def _run_many(index_paths: tuple[str, ...], each: bool, answer: bool, **options: Any) -> None:
    """``ask`` or ``retrieve`` of INDEX...: one index as always, else lcr.cli.many; an
    index ``--each`` could not ask ends the command with exit 1."""
    from lcr.pipeline.many import index_paths as found_indexes

    indexes = found_indexes(index_paths)
    if len(indexes) == 1 and not each and Path(index_paths[0]) == indexes[0]:
        code = _run_queries(index_paths[0], **options, answer=answer)  # one index, as always
    else:
        code = _run_queries(index_paths[0], **options, answer=answer, indexes=indexes, each=each)
    if code:
        click.get_current_context().exit(code)


_EACH_HELP = "With several indexes: {} each alone, and say which index {}."


@cli.command("ask")
@query_options
@answer_only_option
@click.option(
    "--max-new-tokens", type=int, default=256, show_default=True, help="Longest answer, in tokens."
)
@click.option("--each", is_flag=True, help=_EACH_HELP.format("answer from", "answered"))
@ray_options("Answer the questions of stdin ('-')")
def ask_cmd(
    index_paths: tuple[str, ...],
    each: bool,
    ray_address: str | None,
    workers: int | None,
    **options: Any,
) -> None:
    """Retrieve evidence for QUESTION from INDEX and answer it with the LLM.

    QUESTION `-` reads one question per line from stdin (models load once). On a
    terminal the answer appears as the model writes it (never in --json or a pipe).

    Several indexes (or a folder of indexes) are asked at once: their evidence is
    pooled and answered once, each piece naming its index; --each answers from each
    index alone; an index that cannot be asked is said in one line, the others
    answered, and the exit code is 1. With --ray, the questions of stdin are answered
    on a Ray cluster and printed in their order.
    """
    ray = ask_address(ray_address, workers, options["question"], index_paths, each)
    _run_many(index_paths, each, True, **options, **({"ray": (ray, workers)} if ray else {}))


@cli.command("retrieve")
@query_options
@click.option("--each", is_flag=True, help=_EACH_HELP.format("retrieve from", "it came from"))
def retrieve_cmd(index_paths: tuple[str, ...], each: bool, **options: Any) -> None:
    """Retrieve evidence for QUESTION from INDEX, without answering.

    Loads no LLM unless the method's retrieval needs one. Several indexes (or a
    folder of indexes) are retrieved from at once: their evidence is pooled and
    ranked again together, each piece naming its index; --each lists each
    index's own.
    """
    _run_many(index_paths, each, False, **options)


# --------------------------------------------------------------------- info
@cli.command("info")
@click.argument("index_path", metavar="INDEX", type=NonEmptyPath())
@click.option("--json", "as_json", is_flag=True, help="The manifest with sizes, as JSON.")
@click.option(
    "--verify",
    is_flag=True,
    help="Also check every file against its sha256 and for its structure: node spans, arrays "
    "(reads the whole index).",
)
@est.info_estimate_option
def info_cmd(index_path: str, as_json: bool, verify: bool, estimate: bool) -> None:
    """Sources, methods built, their settings, models, counts and sizes.

    A damaged method is reported (with how to rebuild it alone) and the exit
    code is 1; the other methods stay usable.
    """
    from lcr.pipeline.integrity import index_problems, info_json
    from lcr.store import Index

    index = Index.open(index_path)
    if as_json:
        out = info_json(index, verify=verify)
        problems = out["damaged"]
        if estimate:
            est.rebuild_figures(index, True, out)
        click.echo(json.dumps(out, ensure_ascii=False))
    else:
        problems = index_problems(index, verify)
        print_info(index, {name: [line] for name, line in problems.items()}, verified=verify)
        if estimate:
            est.rebuild_figures(index, False)
    if problems:
        raise IndexDamagedError(
            next(iter(problems.values()))
            if len(problems) == 1
            else f"{index.path} is damaged: {', '.join(problems)} (see above)"
        )


def _attach_eval() -> None:
    from lcr.cli.collection import remove_cmd
    from lcr.cli.doctor import doctor_cmd
    from lcr.cli.eval import eval_group
    from lcr.cli.methods import methods_cmd
    from lcr.cli.serve import serve_cmd

    cli.add_command(models_group, "models")
    cli.add_command(eval_group, "eval")
    cli.add_command(doctor_cmd, "doctor")
    cli.add_command(remove_cmd, "remove")
    cli.add_command(serve_cmd, "serve")
    cli.add_command(methods_cmd, "methods")


_attach_eval()


# --------------------------------------------------------------------- main
def main(argv: Sequence[str] | None = None, *, models: ModelsFactory | None = None) -> NoReturn:
    """``lcr`` as a process: its standard streams guarded for the run (a closed or full
    stdout is one line, see :func:`lcr.cli.output.guarded_stdout`), then the exit code.
    ``models`` makes each command's models from its model options (:class:`Seams`)."""
    with guarded_stdout(), terminations_reported():
        code = cli.main(args=argv, prog_name="lcr", standalone_mode=False, obj=Seams(models))
    if argv is None and code in _STOPPED:
        _exit_now(code)
    sys.exit(code)


# exit codes of a run stopped by Ctrl-C, SIGTERM or SIGHUP (lcr.cli.errors.report)
_STOPPED = frozenset({130, 128 + 15, 128 + 1})


def _exit_now(code: int) -> NoReturn:
    """End a stopped process at once (#72 row 13). Everything a stop must keep is kept
    before this point: a build's temporary folder removed and its lock let go on the
    way out of the command, each paid LLM reply fsynced into the index's cache as it
    came, the one line said. What is left is the interpreter's own teardown: collecting
    a loaded model's objects and joining threads still blocked on a server that does
    not answer, which took seconds. Only for a real process (``argv`` None); a caller
    that passes arguments (the tests) gets ``SystemExit`` as before."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            if stream is not None:
                stream.flush()
    os._exit(code)
