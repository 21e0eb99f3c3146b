"""The registry of methods. Adding a method is one line here; nothing else changes.

Modules are imported lazily so ``lcr --help`` and ``lcr methods`` stay fast.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

from lcr.errors import UsageError

if TYPE_CHECKING:
    from lcr.methods.base import Method

_REGISTRY: dict[str, str] = {
    "bm25": "lcr.methods.baselines:BM25",
    "tfidf": "lcr.methods.baselines:TfIdf",
    "dense": "lcr.methods.baselines:Dense",
    "hybrid": "lcr.methods.baselines:Hybrid",
    "full": "lcr.methods.baselines:FullText",
    "mixpr": "lcr.methods.mixpr:MixPR",
    "raptor": "lcr.methods.raptor:Raptor",
    "pecan": "lcr.methods.pecan:Pecan",
    "graphreader": "lcr.methods.graphreader:GraphReader",
    "lightpal": "lcr.methods.lightpal:LightPAL",
}


def method_names() -> list[str]:
    return list(_REGISTRY)


def get_method(name: str) -> Method:
    target = _REGISTRY.get(name)
    if target is None:
        raise UsageError(f"unknown method {name!r}; known: {', '.join(_REGISTRY)}")
    module, _, cls = target.partition(":")
    method: Method = getattr(import_module(module), cls)()
    return method


def default_build_methods() -> list[str]:
    return [n for n in _REGISTRY if get_method(n).built_by_default]
