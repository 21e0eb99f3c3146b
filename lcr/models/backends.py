"""Which LLM backend runs the model, and whether it can do what a method needs.

A backend is named by ``--backend`` (``LCR_BACKEND``): ``transformers`` (in
process, every capability), ``llamacpp`` (in process through llama-cpp-python,
quantised GGUF, fast on a CPU, no attention weights), ``xllamacpp`` (the same GGUF
files through xllamacpp's prebuilt llama.cpp server, in process: generation and
yes/no scores, no continuation scores) or ``openai`` (any OpenAI-compatible server).
``auto`` picks ``openai`` when ``--base-url`` is given, else the fastest
installed backend that has every capability the command needs and can load the
model (see :func:`auto_choice`: llama.cpp for GGUF presets and ``.gguf`` files,
llama-cpp-python before xllamacpp, on the GPU where its build offloads;
transformers for attention and 4-/8-bit).
The check runs before any model loads or any work starts.

Each backend's capabilities are declared once, on its LLM class
(``capabilities``); the registry reads them from there, importing the class's
module (never the library behind it) only when a choice is made.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from lcr.errors import CapabilityError, LcrError, NoLogprobsError
from lcr.models import machine
from lcr.models.base import (
    Capability,
    Configuration,
    configuration,
    cpu_configuration,
    describe_capabilities,
    describe_configuration,
    llm_configuration,
)
from lcr.models.spec import ModelSpec

BACKEND_CHOICES = ("auto", "transformers", "llamacpp", "xllamacpp", "openai")


@dataclass(frozen=True)
class Backend:
    name: str
    modules: tuple[str, ...]  # imports that must be findable for the backend to be usable
    install_hint: str

    @property
    def capabilities(self) -> frozenset[Capability]:
        """What the backend's LLM class declares (read from the class, declared nowhere else)."""
        return llm_class_capabilities(self.name)

    def installed(self) -> bool:
        try:
            return all(importlib.util.find_spec(m) is not None for m in self.modules)
        except (ImportError, ValueError):
            return False


BACKENDS: dict[str, Backend] = {
    b.name: b
    for b in (
        Backend("transformers", ("transformers", "lcr.models.transformers_llm"), "pip install lcr"),
        Backend(
            "llamacpp", ("llama_cpp", "lcr.models.llamacpp_llm"), "pip install 'lcr[llamacpp]'"
        ),
        Backend("xllamacpp", ("xllamacpp", "lcr.models.xllamacpp_llm"), "pip install 'lcr[local]'"),
        Backend(
            "openai", ("lcr.models.openai_llm",), "--base-url URL of an OpenAI-compatible server"
        ),
    )
}


def llm_class_capabilities(name: str) -> frozenset[Capability]:
    """The ``capabilities`` of backend ``name``'s LLM class (its module imports no library)."""
    if name == "transformers":
        from lcr.models.transformers_llm import TransformersLLM

        return TransformersLLM.capabilities
    if name == "llamacpp":
        from lcr.models.llamacpp_llm import LlamaCppLLM

        return LlamaCppLLM.capabilities
    if name == "xllamacpp":
        from lcr.models.xllamacpp_llm import XLlamaCppLLM

        return XLlamaCppLLM.capabilities
    if name == "openai":
        from lcr.models.openai_llm import OpenAILLM

        return OpenAILLM.capabilities
    raise CapabilityError(f"unknown backend {name!r}; choose one of {', '.join(BACKEND_CHOICES)}")


def get_backend(name: str) -> Backend:
    backend = BACKENDS.get(name)
    if backend is None:
        raise CapabilityError(
            f"unknown backend {name!r}; choose one of {', '.join(BACKEND_CHOICES)}"
        )
    return backend


def choose_backend(
    requested: str,
    needs: frozenset[Capability],
    purpose: str,
    spec: ModelSpec | None = None,
) -> str:
    """The backend to load for ``purpose`` (e.g. "pecan retrieval"), or a one-line error.

    ``auto``: ``openai`` when ``spec.base_url`` is set, else the first installed
    backend (llamacpp, then transformers) that has ``needs`` and can load ``spec``'s model.
    A named backend that lacks a capability is refused, naming one that has it.
    """
    if requested == "auto" and spec is not None and spec.base_url:
        requested = "openai"
    if requested == "auto":
        return auto_choice(needs, purpose, spec).backend
    backend = get_backend(requested)
    missing = needs - backend.capabilities
    if missing:
        able = [b.name for b in BACKENDS.values() if needs <= b.capabilities]
        hint = f"; use --backend {able[0]}" if able else ""
        if requested == "xllamacpp" and "llamacpp" in able:
            hint = f"; use --backend llamacpp ({BACKENDS['llamacpp'].install_hint}) or transformers"
        raise CapabilityError(
            f"{purpose} needs {describe_capabilities(missing)}, which --backend "
            f"{requested} does not provide{hint}"
        )
    if not backend.installed():
        raise CapabilityError(f"--backend {requested} is not installed: {backend.install_hint}")
    if requested == "openai" and spec is not None:
        _check_server(spec, needs, purpose)
    return requested


@dataclass(frozen=True)
class AutoChoice:
    """What ``--backend auto`` picks for one need, where it runs, and why."""

    backend: str
    device: str  # cpu or cuda
    dtype: str  # gguf (the file's own quantisation), float32, bfloat16, float16, 4bit, 8bit
    reason: str


def auto_choice(
    needs: frozenset[Capability], purpose: str, spec: ModelSpec | None = None
) -> AutoChoice:
    """``auto``'s pick, read from :func:`lcr.models.machine.current`:

    llama.cpp (every layer on the GPU where its build can offload) when it is
    installed, has ``needs``, loads ``spec``'s model as a GGUF, and no 4-/8-bit
    loading is asked for: llama-cpp-python first, else xllamacpp's prebuilt engine
    (CPU); transformers otherwise, and also when a GPU is usable by torch but no
    installed llama.cpp can offload to it. A run that only llama-cpp-python could
    serve among the GGUF engines, with xllamacpp the one installed, is refused in one
    line naming the ``llamacpp`` extra (transformers would dequantize the GGUF).
    """
    m = machine.current()
    trans = BACKENDS["transformers"]
    device = spec.device if spec is not None else "auto"
    why_not = _gguf_why_not("llamacpp", needs, purpose, spec, m.llamacpp_gpu)
    if not why_not:
        gpu = m.llamacpp_gpu and device != "cpu"
        return AutoChoice("llamacpp", "cuda" if gpu else "cpu", "gguf", _gguf_why(gpu, device))
    x_why_not = _gguf_why_not("xllamacpp", needs, purpose, spec, False)
    if not x_why_not:
        return AutoChoice("xllamacpp", "cpu", "gguf", _gguf_why(False, device))
    x_lacks = needs - BACKENDS["xllamacpp"].capabilities
    if (
        BACKENDS["xllamacpp"].installed()
        and not BACKENDS["llamacpp"].installed()
        and x_lacks
        and needs <= BACKENDS["llamacpp"].capabilities
        and _gguf_why_not("llamacpp", frozenset(), purpose, spec, False, installed=True) == ""
    ):
        raise CapabilityError(
            f"{purpose} needs {describe_capabilities(x_lacks)}, which the prebuilt llama.cpp "
            f"engine (xllamacpp) does not provide; install llama-cpp-python: "
            f"{BACKENDS['llamacpp'].install_hint} (or use --backend transformers)"
        )
    if not trans.installed() or not needs <= trans.capabilities:
        raise CapabilityError(f"no installed LLM backend can do {purpose}")
    on_gpu = m.gpu and device != "cpu"
    if spec is not None and spec.quantize is not None:
        dtype = spec.quantize
    else:
        dtype = m.gpu_dtype if on_gpu else "float32"
    return AutoChoice("transformers", "cuda" if on_gpu else "cpu", dtype, why_not)


def _gguf_why(gpu: bool, device: str) -> str:
    """Why a llama.cpp engine runs the model (``lcr doctor``'s line)."""
    if gpu:
        return "a GGUF model, every layer offloaded to the GPU"
    if device == "cpu":
        return "a GGUF model, --device cpu"
    if not machine.current().gpu_present:
        return "a GGUF model, the fastest backend on a CPU (no GPU found)"
    return "a GGUF model; neither torch nor this llama.cpp build can use the GPU"


def _gguf_why_not(
    name: str,
    needs: frozenset[Capability],
    purpose: str,
    spec: ModelSpec | None,
    offload: bool,
    *,
    installed: bool = False,
) -> str:
    """Why the llama.cpp engine ``name`` (llamacpp or xllamacpp) cannot run this, or "".

    ``offload``: the engine can put layers on a GPU that is present; ``installed``:
    judge as if it were installed (what installing it would give)."""
    m = machine.current()
    engine = BACKENDS[name]
    label = "llama.cpp" if name == "llamacpp" else "xllamacpp"
    device = spec.device if spec is not None else "auto"
    if not installed and not engine.installed():
        return f"{label} is not installed"
    if not needs <= engine.capabilities:
        return f"{purpose} needs {describe_capabilities(needs - engine.capabilities)}"
    if spec is not None and spec.quantize is not None:
        return f"--quantize {spec.quantize} is bitsandbytes (transformers)"
    if not _loads_as_gguf(spec):
        return _not_gguf_reason(spec)
    if device.startswith("cuda") and not offload:
        return f"--device cuda and this {label} build has no GPU offload"
    if device == "auto" and m.gpu and not offload:
        return f"torch has a GPU and this {label} build has no GPU offload"
    return ""


def _not_gguf_reason(spec: ModelSpec | None) -> str:
    """Why llama.cpp cannot load the model: a preset not installed yet is no reason to
    say it is not a GGUF (lcr doctor said so of the default LLM before its install)."""
    from lcr.models.presets import PRESETS

    preset = PRESETS.get(spec.llm) if spec is not None else None
    if preset is not None and preset.parts and not preset.installed():
        return f"{preset.name} is not installed yet"
    return "the model is not a GGUF preset or .gguf file"


def _loads_as_gguf(spec: ModelSpec | None) -> bool:
    if spec is None:
        return True
    from lcr.models.loading import gguf_source

    try:
        return gguf_source(spec.llm) is not None
    except LcrError:  # not installed, not found: the transformers path says why
        return False


def _check_server(spec: ModelSpec, needs: frozenset[Capability], purpose: str) -> None:
    """The server must be named, and return log-probabilities if yes/no is needed."""
    if not spec.base_url:
        raise CapabilityError(
            "--backend openai needs --base-url URL (or LCR_BASE_URL) of an OpenAI-compatible "
            "server, e.g. http://localhost:8000/v1"
        )
    if Capability.CHOICE_PROBABILITY in needs:
        from lcr.models.openai_llm import server_returns_logprobs

        if not server_returns_logprobs(spec):
            raise NoLogprobsError(
                f"{purpose} needs choice_probability, but the server at {spec.base_url} "
                "returns no log-probabilities; use --backend llamacpp or transformers"
            )


# ------------------------------------------------------------ configurations

__all__ = [
    "Configuration",
    "cpu_configuration",
    "describe_configuration",
    "llm_configuration",
    "planned_configuration",
]


def planned_configuration(backend: str, spec: ModelSpec) -> Configuration:
    """The configuration ``backend`` will load ``spec`` with (read before loading)."""
    m = machine.current()
    if backend == "llamacpp":
        gpu = spec.device.startswith("cuda") or (spec.device == "auto" and m.llamacpp_gpu)
        return configuration("llamacpp", "cuda" if gpu else "cpu", "gguf", None)
    if backend == "xllamacpp":
        return configuration(
            "xllamacpp", "cuda" if spec.device.startswith("cuda") else "cpu", "gguf", None
        )
    if backend == "transformers":
        gpu = spec.device.startswith("cuda") or (spec.device == "auto" and m.gpu)
        dtype = m.gpu_dtype if gpu else "float32"
        return configuration("transformers", "cuda" if gpu else "cpu", dtype, spec.quantize)
    return cpu_configuration(backend)
