"""The layout docs/architecture.md draws, held against the code's imports.

Every module of ``lcr`` sits on one floor; an import may run down or sideways,
never up. The floors are listed here once, and docs/architecture.md draws the same.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "lcr"

# bottom first: a module may import its own floor and those below it
FLOORS: list[tuple[str, list[str]]] = [
    ("foundations", ["lcr._version", "lcr.errors", "lcr.atomic", "lcr.config", "lcr.progress"]),
    ("text and evidence", ["lcr.text", "lcr.evidence"]),
    (
        "store, models, scorers",
        ["lcr.store", "lcr.models", "lcr.scoring", "lcr.graph", "lcr.estimate"],
    ),
    ("the answer step", ["lcr.answer"]),
    ("methods", ["lcr.methods"]),
    ("the pipeline", ["lcr.result", "lcr.pipeline"]),
    ("evaluation", ["lcr.eval"]),
    ("the server", ["lcr.serve"]),
    ("the cluster", ["lcr.cluster"]),
    ("entry points", ["lcr.api", "lcr.cli", "lcr.testing", "lcr", "lcr.__main__"]),
]


def floor_of(module: str) -> int:
    """The floor of ``module``: the longest listed prefix that contains it."""
    best, found = -1, -1
    for level, (_, prefixes) in enumerate(FLOORS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, found = len(prefix), level
    if found < 0:
        raise AssertionError(f"{module} is on no floor: add it to FLOORS and docs/architecture.md")
    return found


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> list[tuple[int, str]]:
    """Every ``lcr`` module ``path`` imports, at any depth (lazy imports too)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "lcr"]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] != "lcr":
                continue
            # `from lcr import pipeline` imports the submodule; `from lcr import ask`, the root
            for alias in node.names:
                target = f"{node.module}.{alias.name}"
                stem = PACKAGE.parent / target.replace(".", "/")
                if stem.is_dir() or stem.with_suffix(".py").exists():
                    found.append((node.lineno, target))
                else:
                    found.append((node.lineno, node.module))
    return found


def all_modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_every_module_is_on_a_floor() -> None:
    for path in all_modules():
        floor_of(module_name(path))


def test_no_import_runs_up_a_floor() -> None:
    upward = []
    for path in all_modules():
        here = module_name(path)
        for line, target in imports_of(path):
            if target == "lcr" and here != "lcr":
                upward.append(f"{path.relative_to(ROOT)}:{line} imports the package root")
                continue
            if floor_of(target) > floor_of(here):
                upward.append(
                    f"{path.relative_to(ROOT)}:{line} imports {target} "
                    f"({FLOORS[floor_of(here)][0]} -> {FLOORS[floor_of(target)][0]})"
                )
    assert not upward, "\n".join(upward)


def test_the_check_sees_an_upward_import(tmp_path: Path) -> None:
    """The walk finds lazy imports inside functions: the check could fail."""
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from lcr.pipeline import build\n    return build\n")
    assert (2, "lcr.pipeline") in imports_of(source)
    assert floor_of("lcr.pipeline") > floor_of("lcr.methods.mixpr")


def test_the_top_level_holds_entry_points_and_shared_types() -> None:
    allowed = {
        "__init__",
        "__main__",
        "_version",
        "api",
        "testing",
        "errors",
        "config",
        "evidence",
        "result",
        "progress",
        "atomic",
    }
    top = {p.stem for p in PACKAGE.glob("*.py")}
    assert top <= allowed, f"modules that belong in a package: {sorted(top - allowed)}"


@pytest.mark.parametrize("doc", ["docs/architecture.md"])
def test_the_docs_draw_the_same_floors(doc: str) -> None:
    text = (ROOT / doc).read_text(encoding="utf-8")
    for name, prefixes in FLOORS:
        assert name in text, f"{doc} does not name the floor {name!r}"
        for prefix in prefixes:
            if prefix in ("lcr", "lcr.__main__"):
                continue
            shown = prefix.removeprefix("lcr.").replace(".", "/")
            assert re.search(rf"\b{re.escape(shown)}\b", text), f"{doc} does not place {prefix}"


def test_the_store_keys_its_cache_without_the_model_layer() -> None:
    """Issue 71: the store reads and writes what it is handed (a model id and its
    configuration for a cache key), never importing lcr.models to work them out."""
    for path in sorted((PACKAGE / "store").rglob("*.py")):
        for line, name in imports_of(path):
            assert name.split(".")[:2] != ["lcr", "models"], f"{path.name}:{line} imports {name}"


def test_one_document_record_under_one_name() -> None:
    """Issue 71: a document is one record (lcr.text.document.Document) from reading the
    file to the index, under one name: the store takes and gives that class, no alias."""
    import lcr.store
    import lcr.store.documents
    from lcr.text.document import Document

    assert lcr.store.Document is Document
    for module in (lcr.store, lcr.store.documents):
        aliases = [n for n, v in vars(module).items() if v is Document and n != "Document"]
        assert aliases == [], f"{module.__name__} names the document record {aliases}"
