"""Sparse retrieval scorers (BM25, TF-IDF): pure scoring over stored arrays, no model."""
