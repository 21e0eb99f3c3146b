"""Which LLM backend runs the model, and whether it can do what a method needs.

A backend is named by ``--backend`` (``LCR_BACKEND``): ``transformers`` (in
process, every capability), ``llamacpp`` (in process, quantised GGUF, fast on a
CPU, no attention weights) or ``openai`` (any OpenAI-compatible server).
``auto`` picks the fastest installed backend that has every capability the
command needs. The check runs before any model loads or any work starts.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from lcr.errors import CapabilityError
from lcr.models.base import ALL_CAPABILITIES, Capability, describe_capabilities

BACKEND_CHOICES = ("auto", "transformers", "llamacpp", "openai")


@dataclass(frozen=True)
class Backend:
    name: str
    capabilities: frozenset[Capability]
    modules: tuple[str, ...]  # imports that must be findable for the backend to be usable
    install_hint: str

    def installed(self) -> bool:
        try:
            return all(importlib.util.find_spec(m) is not None for m in self.modules)
        except (ImportError, ValueError):
            return False


BACKENDS: dict[str, Backend] = {
    b.name: b
    for b in (
        Backend(
            "transformers",
            ALL_CAPABILITIES,
            ("transformers", "lcr.models.transformers_llm"),
            "pip install lcr",
        ),
        Backend(
            "llamacpp",
            ALL_CAPABILITIES - {Capability.ATTENTION},
            ("llama_cpp", "lcr.models.llamacpp_llm"),
            "pip install 'lcr[llamacpp]'",
        ),
        Backend(
            "openai",
            frozenset({Capability.GENERATE}),
            ("lcr.models.openai_llm",),
            "--base-url URL of an OpenAI-compatible server",
        ),
    )
}

# auto tries these in order; openai is never chosen by auto (it needs --base-url)
AUTO_ORDER = ("llamacpp", "transformers")


def get_backend(name: str) -> Backend:
    backend = BACKENDS.get(name)
    if backend is None:
        raise CapabilityError(
            f"unknown backend {name!r}; choose one of {', '.join(BACKEND_CHOICES)}"
        )
    return backend


def choose_backend(requested: str, needs: frozenset[Capability], purpose: str) -> str:
    """The backend to load for ``purpose`` (e.g. "pecan retrieval"), or a one-line error.

    ``auto``: the first installed backend of :data:`AUTO_ORDER` that has ``needs``.
    A named backend that lacks a capability is refused, naming one that has it.
    """
    if requested == "auto":
        for name in AUTO_ORDER:
            backend = BACKENDS[name]
            if backend.installed() and needs <= backend.capabilities:
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
    return requested
