"""The commands lcr prints as advice about an index, runnable as printed.

A hint is pasted into a shell in the folder where it was printed, so it names each
source by the path the manifest recorded (absolute), as typed from here, and
carries ``--force`` wherever a damaged build must be replaced rather than kept.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path

from lcr.store.manifest import Manifest, typed_path


def index_command(
    manifest: Manifest, path: Path, methods: Sequence[str], args: Sequence[str] = ()
) -> str:
    """``lcr index`` of the index's sources into ``path``, as typed in the current folder
    (a source indexed before paths were recorded: its name)."""
    paths = list(manifest.source_paths)
    sources = []
    for i, d in enumerate(manifest.sources):
        recorded = paths[i] if i < len(paths) and isinstance(paths[i], str) else ""
        if d.name == "stdin" or recorded == "-":
            sources.append("-")
        else:
            sources.append(shlex.quote(typed_path(recorded) if recorded else d.name))
    chosen = "".join(f" --method {m}" for m in methods)
    extra = "".join(f" {a}" for a in args)
    where = shlex.quote(typed_path(path))
    return f"lcr index {' '.join(sources) or 'SOURCE'} -o {where}{chosen}{extra}"


def rebuild_hint(manifest: Manifest, path: Path, method: str) -> str:
    """Rebuild ``method`` as it was built: its recorded options (non-default settings and
    models) repeated, so the hint neither changes what is built nor pays again for LLM
    calls the cache holds; ``--force``, or a same-settings build is kept as it is."""
    entry = manifest.methods.get(method)
    args = entry.rebuild_args if entry is not None else []
    return f"rebuild it alone with: {index_command(manifest, path, [method], args)} --force"


def repair_hint(manifest: Manifest, path: Path) -> str:
    """Rebuild the whole index (its source text is damaged), every method as built."""
    args: list[str] = []
    for entry in manifest.methods.values():
        args += [a for a in entry.rebuild_args if a not in args]
    command = index_command(manifest, path, list(manifest.methods), args)
    return f"rebuild it with: {command} --force"
