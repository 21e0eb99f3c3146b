"""lcr's version, read from the installed package's metadata: pyproject.toml declares it
once. A leaf module, so anything may import it without importing the package's API."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("lcr")
except PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0+unknown"
