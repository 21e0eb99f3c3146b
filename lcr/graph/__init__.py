"""Sparse similarity graphs (:mod:`~lcr.graph.similarity`) and (personalised) PageRank
(:mod:`~lcr.graph.pagerank`): pure NumPy/SciPy, no models."""
