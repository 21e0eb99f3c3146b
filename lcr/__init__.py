"""lcr: long-context retrieval over an on-disk index, five published methods and baselines.

The Python API (:mod:`lcr.api`) is loaded on first use, so ``lcr --help`` stays fast::

    import lcr
    book = lcr.index("book.txt")
    print(lcr.retrieve(book, "Who hid the key?", method="mixpr").evidence.items[0].text)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lcr._version import __version__

_API = {
    "index": "lcr.api",
    "open_index": "lcr.api",
    "retrieve": "lcr.api",
    "ask": "lcr.api",
    "use_models": "lcr.api",
    "Index": "lcr.store",
    "Models": "lcr.models.container",
    "Result": "lcr.pipeline",
    "LcrError": "lcr.errors",
}
__all__ = [
    "Index",
    "LcrError",
    "Models",
    "Result",
    "__version__",
    "ask",
    "index",
    "open_index",
    "retrieve",
    "use_models",
]

if TYPE_CHECKING:
    from lcr.api import ask, index, open_index, retrieve, use_models
    from lcr.errors import LcrError
    from lcr.models.container import Models
    from lcr.pipeline import Result
    from lcr.store import Index


def __getattr__(name: str) -> Any:
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'lcr' has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(module), name)
