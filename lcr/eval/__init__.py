"""``lcr eval``: datasets, metrics and the runner that compares methods.

Submodules: :mod:`dataset` (the JSONL format), :mod:`convert` (real sets),
:mod:`generate` (RULER, Hash-Hop), :mod:`metrics`, :mod:`stats` (bootstrap),
:mod:`runner`, :mod:`summary`, :mod:`cli` (the ``eval_group`` click group).
"""
