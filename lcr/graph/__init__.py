"""Sparse similarity graphs and (personalised) PageRank: pure NumPy/SciPy, no models.

Shared by the graph-based methods (MixPR now; LightPAL's PPR can reuse
:func:`power_iteration` / :func:`pagerank`).
"""

from lcr.graph.pagerank import (
    PAPER_MAX_ITER,
    GraphOperator,
    PageRankResult,
    QueryGraph,
    StoredGraph,
    graph_pagerank,
    pagerank,
    power_iteration,
    transition_matrix,
)
from lcr.graph.similarity import GraphStats, GraphTooLarge, column_sums, similarity_graph

__all__ = [
    "PAPER_MAX_ITER",
    "GraphOperator",
    "GraphStats",
    "GraphTooLarge",
    "PageRankResult",
    "QueryGraph",
    "StoredGraph",
    "column_sums",
    "graph_pagerank",
    "pagerank",
    "power_iteration",
    "similarity_graph",
    "transition_matrix",
]
