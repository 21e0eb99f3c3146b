"""GraphReader (Li et al., EMNLP Findings 2024): a graph of key elements and atomic facts,
explored by an LLM agent that keeps a notebook.

``prompts`` holds the paper's prompts (and the one output-format adaptation),
``extraction`` reads the extraction replies, ``keys`` normalises and merges key
elements, ``graph`` builds the nodes and links, ``agent`` explores them, and
``method`` holds the :class:`GraphReader` method (build, retrieve, answer: the
LLM and I/O parts).
"""

from lcr.methods.graphreader.method import GraphReader

__all__ = ["GraphReader"]
