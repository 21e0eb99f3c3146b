"""The on-disk index: manifest, source text, per-method builds, LLM cache."""

from lcr.store.cache import LLMCache, MemoryCache, cache_key
from lcr.store.index import Index, MethodReader, MethodWriter, SourceDoc
from lcr.store.nodes import Node
from lcr.text.document import Document

__all__ = [
    "Document",
    "Index",
    "LLMCache",
    "MemoryCache",
    "MethodReader",
    "MethodWriter",
    "Node",
    "SourceDoc",
    "cache_key",
]
