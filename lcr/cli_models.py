"""The model options every command that may load a model shares (``lcr`` and ``lcr eval``).

One home, so ``index``, ``ask``, ``retrieve`` and ``eval`` accept the same
options with the same environment fallbacks, and turn them into one
:class:`~lcr.models.spec.ModelSpec` the same way.
"""

from __future__ import annotations

from typing import Any

import click

from lcr.models.backends import BACKEND_CHOICES
from lcr.models.spec import DEFAULT_CONCURRENCY, DEFAULT_EMBEDDER, DEFAULT_LLM, ModelSpec

MODEL_OPTION_NAMES = (
    "llm",
    "embedder",
    "device",
    "quantize",
    "backend",
    "base_url",
    "concurrency",
    "context_window",
)


def _check_base_url(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    from lcr.models.openai_llm import check_base_url

    return None if value is None else check_base_url(value)


def model_options(f: Any) -> Any:
    """Add ``--llm --embedder --device --quantize --backend --base-url --concurrency
    --context-window`` (each with its ``LCR_*`` variable) to a command."""
    f = click.option(
        "--context-window",
        type=click.IntRange(min=256),
        default=None,
        envvar="LCR_CONTEXT_WINDOW",
        help="Tokens the LLM may read at once (default: the backend's own; llama.cpp 16384, "
        "a server what it reports or 8192). [env: LCR_CONTEXT_WINDOW]",
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
        "needs nothing it lacks, else transformers (`lcr doctor` shows the picks). "
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
        default=DEFAULT_EMBEDDER,
        show_default=True,
        envvar="LCR_EMBEDDER",
        help="Embedder preset, local path or hub id. [env: LCR_EMBEDDER]",
    )(f)
    f = click.option(
        "--llm",
        default=DEFAULT_LLM,
        show_default=True,
        envvar="LCR_LLM",
        help="LLM preset (see `lcr models`), local path, .gguf file, hub id, or the model "
        "name a server serves. [env: LCR_LLM]",
    )(f)
    return f


def pop_model_spec(options: dict[str, Any]) -> ModelSpec:
    """Take the model options out of a command's keyword arguments as a ModelSpec."""
    values = {name: options.pop(name) for name in MODEL_OPTION_NAMES}
    return ModelSpec(**values)
