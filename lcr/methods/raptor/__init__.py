"""RAPTOR (Sarthi et al., ICLR 2024): a tree of recursive cluster summaries.

``method`` holds the :class:`Raptor` method (build and retrieve, the LLM and I/O
parts); ``clustering`` and ``tree`` hold the pure algorithms.
"""

from lcr.methods.raptor.method import Raptor

__all__ = ["Raptor"]
