"""lcr: long-context retrieval over an on-disk index, five published methods and baselines."""

__version__ = "0.1.0"
