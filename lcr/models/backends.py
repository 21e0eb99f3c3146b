"""Which LLM backend runs the model, and whether it can do what a method needs.

A backend is named by ``--backend`` (``LCR_BACKEND``): ``transformers`` (in
process, every capability), ``llamacpp`` (in process, quantised GGUF, fast on a
CPU, no attention weights) or ``openai`` (any OpenAI-compatible server).
``auto`` picks ``openai`` when ``--base-url`` is given, else the fastest
installed backend that has every capability the command needs and can load the
model (llama.cpp loads GGUF presets and ``.gguf`` files on the CPU). The check
runs before any model loads or any work starts.

Each backend's capabilities are declared once, on its LLM class
(``capabilities``); the registry reads them from there, importing the class's
module (never the library behind it) only when a choice is made.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

from lcr.errors import CapabilityError, LcrError
from lcr.models.base import Capability, describe_capabilities
from lcr.models.spec import ModelSpec

BACKEND_CHOICES = ("auto", "transformers", "llamacpp", "openai")


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
    if name == "openai":
        from lcr.models.openai_llm import OpenAILLM

        return OpenAILLM.capabilities
    raise CapabilityError(f"unknown backend {name!r}; choose one of {', '.join(BACKEND_CHOICES)}")


# auto tries these in order; openai is never chosen by auto (it needs --base-url)
AUTO_ORDER = ("llamacpp", "transformers")


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
    backend of :data:`AUTO_ORDER` that has ``needs`` and can load ``spec``'s model.
    A named backend that lacks a capability is refused, naming one that has it.
    """
    if requested == "auto" and spec is not None and spec.base_url:
        requested = "openai"
    if requested == "auto":
        for name in AUTO_ORDER:
            backend = BACKENDS[name]
            if backend.installed() and needs <= backend.capabilities and _can_load(name, spec):
                return name
        raise CapabilityError(f"no installed LLM backend can do {purpose}")
    backend = get_backend(requested)
    missing = needs - backend.capabilities
    if missing:
        able = [b.name for b in BACKENDS.values() if needs <= b.capabilities]
        hint = f"; use --backend {able[0]}" if able else ""
        raise CapabilityError(
            f"{purpose} needs {describe_capabilities(missing)}, which --backend "
            f"{requested} does not provide{hint}"
        )
    if not backend.installed():
        raise CapabilityError(f"--backend {requested} is not installed: {backend.install_hint}")
    if requested == "openai" and spec is not None:
        _check_server(spec, needs, purpose)
    return requested


def _can_load(name: str, spec: ModelSpec | None) -> bool:
    """Whether ``auto`` may use backend ``name`` for the model and device asked for."""
    if name != "llamacpp" or spec is None:
        return True
    if spec.quantize is not None or spec.device.startswith("cuda"):
        return False  # bitsandbytes and CUDA: the transformers path
    if spec.device == "auto" and gpu_visible():
        return False
    from lcr.models.loading import gguf_source

    try:
        return gguf_source(spec.llm) is not None
    except LcrError:  # not installed, not found: the transformers path says why
        return False


def gpu_visible() -> bool:
    """An NVIDIA driver is loaded (checked without importing torch)."""
    return Path("/proc/driver/nvidia/version").exists()


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
            raise CapabilityError(
                f"{purpose} needs choice_probability, but the server at {spec.base_url} "
                "returns no log-probabilities; use --backend llamacpp or transformers"
            )
