"""Models: the LLM and embedder interfaces, offline presets, the cache and the loaders.

Importing this package does not import torch or transformers (``lcr --help``
stays fast): the heavy libraries load on the first model load.
"""

from lcr.models.base import (
    DEFAULT_EMBEDDER,
    DEFAULT_LLM,
    LLM,
    Embedder,
    Generation,
    Message,
    Models,
    ModelSpec,
)
from lcr.models.cache import cache_dir
from lcr.models.embedder import SentenceTransformerEmbedder
from lcr.models.loading import load_embedder, load_llm, resolve
from lcr.models.presets import (
    PRESETS,
    Preset,
    PresetStatus,
    get_preset,
    install_preset,
    list_presets,
)
from lcr.models.transformers_llm import AttentionPass, PrefixCache, TransformersLLM

__all__ = [
    "DEFAULT_EMBEDDER",
    "DEFAULT_LLM",
    "LLM",
    "PRESETS",
    "AttentionPass",
    "Embedder",
    "Generation",
    "Message",
    "ModelSpec",
    "Models",
    "PrefixCache",
    "Preset",
    "PresetStatus",
    "SentenceTransformerEmbedder",
    "TransformersLLM",
    "cache_dir",
    "get_preset",
    "install_preset",
    "list_presets",
    "load_embedder",
    "load_llm",
    "resolve",
]
