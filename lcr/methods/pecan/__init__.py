"""PECAN: attention-weighted graph of Information Points, LLM-guided dynamic search."""

from lcr.methods.pecan.method import Pecan

__all__ = ["Pecan"]
