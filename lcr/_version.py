"""lcr's version, read from the installed package's metadata: pyproject.toml declares it
once. A leaf module, so anything may import it without importing the package's API."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("lcr")
except PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0+unknown"


def source_commit() -> str | None:
    """The git commit lcr runs from (``abc1234``, ``+dirty`` with uncommitted changes), or
    None for an installed copy: results and reports name the code that made them."""
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    if not (root / ".git").exists():
        return None
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout.strip()  # fmt: skip
        changed = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no", "lcr"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{head}+dirty" if changed else head or None
