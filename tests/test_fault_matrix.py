"""bench/fault_matrix.py's judgement, on synthetic outcomes (the matrix itself is run by
hand): what one run of the CLI counts as, and what makes an index damaged."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from types import ModuleType

import pytest

from tests.benches import load_bench


@pytest.fixture(scope="module")
def fm() -> ModuleType:
    return load_bench("fault_matrix")


def counters(fm: ModuleType, code: int | None, stderr: str = "", stdout: str = "",
             **expect: object) -> list[str]:  # fmt: skip
    outcome = fm.Outcome("lcr index x", code, stdout, stderr, 1.0, 60.0)
    return [counter for counter, _ in fm.classify(outcome, fm.Expect(**expect))]


def test_a_clean_run_counts_nothing(fm: ModuleType) -> None:
    assert counters(fm, 0, "lcr: warning: x.txt is given more than once") == []
    assert counters(fm, 1, "lcr: no such file: x.txt", codes=(1, 2)) == []


def test_each_failure_lands_in_its_counter(fm: ModuleType) -> None:
    traceback = 'Traceback (most recent call last):\n  File "x", line 1\nKeyError: 3\n'
    assert counters(fm, 1, traceback, codes=(1,)) == ["tracebacks"]
    assert counters(fm, 1, traceback, codes=(1,), traceback_ok=True) == []  # --debug
    internal = "lcr: internal error: ValueError: max() arg is an empty sequence"
    assert counters(fm, 1, internal, codes=(1,)) == ["internal errors"]
    assert counters(fm, 0, "", codes=(1,)) == ["wrong exit codes"]
    assert counters(fm, 139, "", codes=(1,)) == ["wrong exit codes"]  # a segfault
    assert counters(fm, None, "") == ["hangs"]
    assert counters(fm, 0, stdout="... SECRET-1234 ...", secrets=("SECRET-1234",)) == [
        "reads/writes outside"
    ]


def test_an_error_message_is_one_line(fm: ModuleType) -> None:
    usage = "Usage: lcr index [OPTIONS] FILES...\nTry 'lcr index --help' for help.\n\nError: x"
    assert counters(fm, 2, usage, codes=(2,)) == ["multi-line errors"]
    # a library's Python warning (and its source line) is not part of lcr's message
    noisy = (
        "/venv/bm25s/scoring.py:122: RuntimeWarning: invalid value\n"
        "  idf = np.log(...)\n"
        "lcr: x.txt is empty"
    )
    assert counters(fm, 1, noisy, codes=(1,)) == []


def test_a_case_counts_once_per_counter(fm: ModuleType) -> None:
    result = fm.CaseResult("c", "1", [("hangs", "a"), ("hangs", "b"), ("tracebacks", "c")])
    counts = fm.summarise([result, fm.CaseResult("d", "2")])
    assert counts["hangs"] == 1 and counts["tracebacks"] == 1 and counts["internal errors"] == 0
    line = fm.count_line([result])
    assert line.startswith("fault-matrix: 1 cases; tracebacks 1, internal errors 0,")


def _index(root: Path, source: str, nodes: list[dict[str, object]]) -> Path:
    """An index as lcr writes one: manifest, source.txt, one method's nodes.jsonl."""
    idx = root / "x.idx"
    (idx / "bm25.ab12").mkdir(parents=True)
    (idx / "source.txt").write_text(source, encoding="utf-8")
    data = "".join(json.dumps(n) + "\n" for n in nodes).encode()
    (idx / "bm25.ab12" / "nodes.jsonl").write_bytes(data)
    manifest = {
        "format": "lcr-index",
        "schema_version": 1,
        "source_bytes": len(source.encode()),
        "source_sha256": hashlib.sha256(source.encode()).hexdigest(),
        "sources": [{"name": "x.txt", "sha256": "0", "size": 1, "start": 0, "end": len(source)}],
        "methods": {
            "bm25": {
                "dir": "bm25.ab12",
                "files": {"nodes.jsonl": len(data)},
                "sha256": {"nodes.jsonl": hashlib.sha256(data).hexdigest()},
            }
        },
    }
    (idx / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return idx


def test_an_index_is_whole_only_when_its_leaves_are_its_source(
    fm: ModuleType, tmp_path: Path
) -> None:
    source = "The cat sat. The dog ran."
    leaf = {"id": "c0", "level": 0, "doc": 0, "spans": [[0, 12]], "text": "The cat sat."}
    summary = {"id": "s0", "level": 1, "doc": 0, "spans": [[0, 25]], "text": "Animals."}
    assert fm.inspect_index(_index(tmp_path / "a", source, [leaf, summary])) == []
    wrong = dict(leaf, text="The dog sat.")  # checksums refreshed: only the text tells
    assert "leaf text" in fm.inspect_index(_index(tmp_path / "b", source, [wrong]))[0]
    outside = dict(leaf, spans=[[20, 99]])
    assert "not inside" in fm.inspect_index(_index(tmp_path / "c", source, [outside]))[0]
    reversed_span = dict(summary, spans=[[12, 0]])
    assert fm.inspect_index(_index(tmp_path / "d", source, [reversed_span]))


def test_a_method_folder_outside_the_index_is_damage(fm: ModuleType, tmp_path: Path) -> None:
    idx = _index(tmp_path, "Some text.", [])
    manifest = json.loads((idx / "manifest.json").read_text())
    manifest["methods"]["bm25"]["dir"] = "../elsewhere"
    (idx / "manifest.json").write_text(json.dumps(manifest))
    assert "not a folder of the index" in fm.inspect_index(idx)[0]
