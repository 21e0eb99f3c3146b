"""lcr: long-context retrieval over an on-disk index, five published methods and baselines."""

from importlib.metadata import PackageNotFoundError, version

try:  # the version is declared once, in pyproject.toml
    __version__ = version("lcr")
except PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0+unknown"
