"""lcr's build backend: setuptools' own, with the man page kept in an editable install.

``pip install -e .`` (the README's install) builds an editable wheel, and setuptools
leaves ``[tool.setuptools.data-files]`` out of it: its editable_wheel asks the
distribution ``has_data()``, a method that does not exist (it is ``has_data_files``),
so ``share/man/man1/lcr.1`` was never installed and ``man lcr`` found nothing.
Giving the distribution that method makes setuptools install the data files into
the environment as it does for a regular wheel. Everything else is setuptools'.
"""

from __future__ import annotations

from typing import Any

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F403  (the whole PEP 517 interface)
from setuptools.dist import Distribution


def build_editable(
    wheel_directory: str,
    config_settings: dict[str, Any] | None = None,
    metadata_directory: str | None = None,
) -> str:
    if not hasattr(Distribution, "has_data"):
        Distribution.has_data = Distribution.has_data_files  # type: ignore[attr-defined]
    return _setuptools.build_editable(wheel_directory, config_settings, metadata_directory)
