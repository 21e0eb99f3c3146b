"""LightPAL (Enomoto et al., NEC, 2025): a passage graph scored by an LLM, walked at query time.

``method`` holds the :class:`LightPAL` method (build and retrieve, the I/O
parts); ``passages``, ``graph`` and ``scoring`` hold the pure algorithms and
the scorer loop.
"""

from lcr.methods.lightpal.method import LightPAL

__all__ = ["LightPAL"]
