"""What lcr reads from an index is checked: no content of an index crashes lcr, is
served as false evidence, or is read from outside it (issue 37, rows 7, 13, 14, 15).

Each test tampers with a real index built by the CLI the way a hostile or careless
hand would, refreshing the size and sha256 the manifest records where the point is
that checksums alone cannot see it, then meets it through the CLI.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lcr.cli.main import main

REPO = Path(__file__).resolve().parents[1]
QUESTION = "Where did the bird sit?"


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(args)
    out = capsys.readouterr()
    code = exc.value.code
    return (code if isinstance(code, int) else 1), out.out, out.err


def lcr_run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The CLI in a process of its own: a crash (a signal) cannot take the tests with it."""
    return subprocess.run(
        [sys.executable, "-m", "lcr", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        timeout=300,
    )


def manifest(idx: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((idx / "manifest.json").read_text())
    return loaded


def write_manifest(idx: Path, raw: dict[str, Any]) -> None:
    (idx / "manifest.json").write_text(json.dumps(raw))


def method_dir(idx: Path, method: str) -> Path:
    return idx / manifest(idx)["methods"][method]["dir"]


def refresh(idx: Path, method: str, rel: str) -> None:
    """Record a tampered file's new size and sha256, so checksums pass."""
    raw = manifest(idx)
    entry = raw["methods"][method]
    data = (idx / entry["dir"] / rel).read_bytes()
    entry["files"][rel] = len(data)
    entry["sha256"][rel] = hashlib.sha256(data).hexdigest()
    write_manifest(idx, raw)


def refresh_source(idx: Path) -> None:
    raw = manifest(idx)
    data = (idx / "source.txt").read_bytes()
    raw["source_bytes"] = len(data)
    raw["source_sha256"] = hashlib.sha256(data).hexdigest()
    write_manifest(idx, raw)


def one_line_damage(code: int, err: str, *needles: str) -> None:
    assert code == 1, err
    assert len(err.strip().splitlines()) == 1, err
    assert "internal error" not in err and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, err


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, cinderella: Path) -> Path:
    """bm25, tfidf and mixpr over the story, built once; tests tamper with copies."""
    root = tmp_path_factory.mktemp("built")
    story = root / "cinderella.txt"
    shutil.copy(cinderella, story)
    done = lcr_run("index", str(story), "-q", "-m", "bm25", "-m", "tfidf", "-m", "mixpr")
    assert done.returncode == 0, done.stderr
    return story.with_suffix(".idx")


@pytest.fixture()
def idx(built: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "c.idx"
    shutil.copytree(built, copy)
    return copy


def save_npy(path: Path, array: np.ndarray) -> None:
    with path.open("wb") as fh:
        np.save(fh, array, allow_pickle=False)


# --------------------------------------------------------------- row 7: arrays
def test_an_out_of_bounds_graph_index_never_crashes_retrieval(idx: Path) -> None:
    rel = "graph.csr/indices.npy"
    path = method_dir(idx, "mixpr") / rel
    indices = np.load(path).copy()
    indices[len(indices) // 2] = 10**6
    save_npy(path, indices)
    refresh(idx, "mixpr", rel)

    done = lcr_run("retrieve", str(idx), QUESTION, "-m", "mixpr")
    one_line_damage(done.returncode, done.stderr, "mixpr/graph.csr", "rebuild it alone with")
    done = lcr_run("info", str(idx), "--verify")
    one_line_damage(done.returncode, done.stderr, "mixpr/graph.csr")
    assert "bm25" in done.stdout and "DAMAGED" in done.stdout
    # the other methods keep working
    done = lcr_run("retrieve", str(idx), QUESTION, "-m", "bm25")
    assert done.returncode == 0, done.stderr


CSR_TAMPERS: dict[str, Callable[[Path], str]] = {}


def _tamper(name: str) -> Callable[[Callable[[Path], str]], Callable[[Path], str]]:
    def register(f: Callable[[Path], str]) -> Callable[[Path], str]:
        CSR_TAMPERS[name] = f
        return f

    return register


@_tamper("negative index")
def _negative(mdir: Path) -> str:
    path = mdir / "graph.csr/indices.npy"
    a = np.load(path).copy()
    a[0] = -5
    save_npy(path, a)
    return "graph.csr/indices.npy"


@_tamper("indptr not monotone")
def _indptr(mdir: Path) -> str:
    path = mdir / "graph.csr/indptr.npy"
    a = np.load(path).copy()
    a[1], a[2] = a[2] + 7, a[1]
    save_npy(path, a)
    return "graph.csr/indptr.npy"


@_tamper("float indices")
def _float_indices(mdir: Path) -> str:
    path = mdir / "graph.csr/indices.npy"
    save_npy(path, np.load(path).astype(np.float64) + 0.5)
    return "graph.csr/indices.npy"


@_tamper("tfidf column out of range")
def _tfidf(mdir: Path) -> str:
    path = mdir / "tfidf.csr/indices.npy"
    a = np.load(path).copy()
    a[-1] = 2**31 - 1
    save_npy(path, a)
    return "tfidf.csr/indices.npy"


@_tamper("col_sums too short")
def _col_sums(mdir: Path) -> str:
    path = mdir / "col_sums.npy"
    save_npy(path, np.load(path)[:-1].copy())
    return "col_sums.npy"


@_tamper("pagerank two-dimensional")  # read by global questions only: see below
def _pagerank(mdir: Path) -> str:
    path = mdir / "pagerank.npy"
    a = np.load(path)
    save_npy(path, np.stack([a, a]))
    return "pagerank.npy"


@_tamper("shape.json of strings")
def _shape(mdir: Path) -> str:
    (mdir / "graph.csr/shape.json").write_text('{"shape": ["a", null]}')
    return "graph.csr/shape.json"


@_tamper("offsets reversed")
def _offsets(mdir: Path) -> str:
    path = mdir / "nodes.offsets.npy"
    a = np.load(path).copy()
    a[1:-1] = a[1:-1][::-1]
    save_npy(path, a)
    return "nodes.offsets.npy"


@pytest.mark.parametrize("tamper", sorted(CSR_TAMPERS))
def test_any_mixpr_array_tamper_is_damage_in_retrieve_and_verify(
    idx: Path, tamper: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rel = CSR_TAMPERS[tamper](method_dir(idx, "mixpr"))
    refresh(idx, "mixpr", rel)
    # a local question walks the graph, a global one reads the stored PageRank instead:
    # the mode that reads the tampered file refuses, the other never crashes
    for mode in ("local", "global"):
        done = lcr_run("retrieve", str(idx), QUESTION, "-m", "mixpr", "--mode", mode, "-k", "3")
        if (mode == "global") == (tamper == "pagerank two-dimensional"):
            one_line_damage(done.returncode, done.stderr, "mixpr", "rebuild it alone with")
        else:
            assert done.returncode in (0, 1), done.stderr
            assert "internal error" not in done.stderr, done.stderr
    code, _, err = run(["info", str(idx), "--verify"], capsys)
    one_line_damage(code, err, "mixpr")


# ------------------------------------------------------- row 13: manifest fields
METHOD_FIELDS = ("files", "sha256", "settings", "models", "stats", "counts", "rebuild_args")


@pytest.mark.parametrize("bad", [None, 7, "x", [1]])
@pytest.mark.parametrize("field", METHOD_FIELDS)
def test_a_wrong_method_field_damages_that_method_alone(
    idx: Path, field: str, bad: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = manifest(idx)
    raw["methods"]["bm25"][field] = bad
    write_manifest(idx, raw)
    for args in (
        ["retrieve", str(idx), QUESTION, "-m", "bm25"],
        ["info", str(idx)],
        ["info", str(idx), "--verify", "--json"],
    ):
        code, _, err = run(args, capsys)
        one_line_damage(code, err, f"bm25.{field}")
    code, out, err = run(["retrieve", str(idx), QUESTION, "-m", "tfidf"], capsys)
    assert code == 0 and "Evidence (tfidf" in out, err


@pytest.mark.parametrize(
    "where",
    [
        ("methods", "bm25", "files", "nodes.jsonl"),
        ("methods", "bm25", "sha256", "nodes.jsonl"),
        ("methods", "bm25", "models", "x"),
        ("methods", "bm25", "counts", "nodes"),
    ],
)
def test_a_null_inside_a_method_field_is_damage(
    idx: Path, where: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    raw = manifest(idx)
    target = raw
    for key in where[:-1]:
        target = target[key]
    target[where[-1]] = None
    write_manifest(idx, raw)
    code, _, err = run(["retrieve", str(idx), QUESTION, "-m", "bm25"], capsys)
    one_line_damage(code, err, f"bm25.{where[2]}")
    code, _, err = run(["retrieve", str(idx), QUESTION, "-m", "mixpr", "-k", "2"], capsys)
    assert code == 0, err


@pytest.mark.parametrize(
    "field", ["source_bytes", "source_chars", "lcr_version", "created", "sources", "methods"]
)
def test_a_null_top_level_field_is_one_line_damage_for_every_command(
    idx: Path, field: str, cinderella: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = manifest(idx)
    raw[field] = None
    write_manifest(idx, raw)
    story = idx.parent / "cinderella.txt"
    shutil.copy(cinderella, story)
    for args in (
        ["retrieve", str(idx), QUESTION, "-m", "bm25"],
        ["info", str(idx), "--verify"],
        ["index", str(story), "-o", str(idx), "-m", "bm25", "-q"],
    ):
        code, _, err = run(args, capsys)
        one_line_damage(code, err, field)


@pytest.mark.parametrize("field", ["name", "sha256", "size", "start", "end"])
@pytest.mark.parametrize("bad", [None, [], "12"])
def test_a_wrong_source_field_is_one_line_damage(
    idx: Path, field: str, bad: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = manifest(idx)
    if field in ("name", "sha256") and bad == "12":
        bad = 12  # a number where text belongs
    raw["sources"][0][field] = bad
    write_manifest(idx, raw)
    for args in (["retrieve", str(idx), QUESTION, "-m", "bm25"], ["info", str(idx)]):
        code, _, err = run(args, capsys)
        one_line_damage(code, err, f"sources[0].{field}")


def test_a_source_entry_outside_the_source_text_is_damage(
    idx: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = manifest(idx)
    raw["sources"][0]["end"] = raw["source_chars"] + 10
    write_manifest(idx, raw)
    code, _, err = run(["info", str(idx)], capsys)
    one_line_damage(code, err, "sources[0]")


# ------------------------------------------------------------- row 14: node spans
def _edit_node(idx: Path, method: str, line: int, change: Callable[[dict[str, Any]], None]) -> None:
    path = method_dir(idx, method) / "nodes.jsonl"
    lines = path.read_bytes().split(b"\n")
    record = json.loads(lines[line])
    change(record)
    lines[line] = json.dumps(record, ensure_ascii=False).encode()
    path.write_bytes(b"\n".join(lines))
    refresh(idx, method, "nodes.jsonl")
    if method == "mixpr":  # its offsets locate each line
        ends = np.cumsum([0] + [len(x) + 1 for x in lines[:-1]])
        save_npy(method_dir(idx, method) / "nodes.offsets.npy", ends.astype(np.int64))
        refresh(idx, method, "nodes.offsets.npy")


def _spans(value: list[list[int]]) -> Callable[[dict[str, Any]], None]:
    def change(record: dict[str, Any]) -> None:
        record["spans"] = value

    return change


def _text(record: dict[str, Any]) -> None:
    record["text"] = record["text"].replace("the", "a")


SPAN_TAMPERS: dict[str, Callable[[dict[str, Any]], None]] = {
    "negative": _spans([[-40, 10]]),
    "reversed": _spans([[200, 100]]),
    "out of range": _spans([[10**7, 10**7 + 20]]),
    "text edited": _text,
    "not numbers": _spans([["a", "b"]]),
}


@pytest.mark.parametrize("method", ["bm25", "mixpr"])
@pytest.mark.parametrize("tamper", sorted(SPAN_TAMPERS))
def test_a_tampered_node_is_never_served_and_verify_reports_it(
    idx: Path, method: str, tamper: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # the node every retrieval of this question serves: the best bm25 chunk
    code, out, _ = run(["retrieve", str(idx), QUESTION, "-m", method, "--json", "-k", "20"], capsys)
    assert code == 0
    served = json.loads(out)["evidence"]
    line = next(int(e["id"][1:]) for e in served if "the" in e["text"])
    _edit_node(idx, method, line, SPAN_TAMPERS[tamper])

    code, out, err = run(["retrieve", str(idx), QUESTION, "-m", method, "-k", "20"], capsys)
    one_line_damage(code, err, f"{method}/nodes.jsonl", "rebuild it alone with")
    code, out, err = run(["info", str(idx), "--verify"], capsys)
    one_line_damage(code, err, f"{method}/nodes.jsonl")
    assert "DAMAGED" in out


def test_a_node_record_of_the_wrong_types_is_damage(
    idx: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def change(record: dict[str, Any]) -> None:
        record["level"] = "zero"
        record["doc"] = None

    _edit_node(idx, "bm25", 0, change)
    code, _, err = run(["retrieve", str(idx), QUESTION, "-m", "bm25"], capsys)
    one_line_damage(code, err, "bm25/nodes.jsonl")


# ------------------------------------------------ row 15: more read-side causes
def test_invalid_utf8_in_the_source_is_damage(
    idx: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = idx / "source.txt"
    data = bytearray(src.read_bytes())
    data[100] = 0xFF
    src.write_bytes(bytes(data))
    refresh_source(idx)
    code, _, err = run(["retrieve", str(idx), QUESTION, "-m", "bm25"], capsys)
    one_line_damage(code, err, "source.txt")
    code, _, err = run(["info", str(idx), "--verify"], capsys)
    one_line_damage(code, err, "source.txt", "UTF-8")


@pytest.mark.parametrize(
    ("method", "key", "value"),
    [
        *[("mixpr", "threshold", v) for v in ("0.27", "abc", None, [1], True)],
        ("mixpr", "chunk_words", 3.5),
        ("bm25", "stemmer", "klingon"),  # not one of its choices
        ("bm25", "stopwords", 7),
    ],
)
def test_a_stored_setting_of_the_wrong_type_is_damage(
    idx: Path, method: str, key: str, value: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = manifest(idx)
    raw["methods"][method]["settings"][key] = value
    write_manifest(idx, raw)
    code, _, err = run(["retrieve", str(idx), QUESTION, "-m", method], capsys)
    one_line_damage(code, err, method, key, "rebuild it alone with")
    code, _, err = run(["info", str(idx), "--verify"], capsys)
    one_line_damage(code, err, method, key)
    # building it again with the same settings repairs it: the bad record is not "the same"
    story = idx.parent / "cinderella.txt"
    shutil.copy(REPO / "tests" / "data" / "cinderella.txt", story)
    code, _, err = run(["index", str(story), "-o", str(idx), "-m", method, "-q"], capsys)
    assert code == 0, err
    assert run(["retrieve", str(idx), QUESTION, "-m", method], capsys)[0] == 0


def test_truncated_mixpr_nodes_are_damage(idx: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = method_dir(idx, "mixpr") / "nodes.jsonl"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    refresh(idx, "mixpr", "nodes.jsonl")
    code, _, err = run(["retrieve", str(idx), QUESTION, "-m", "mixpr"], capsys)
    one_line_damage(code, err, "mixpr")
    code, _, err = run(["info", str(idx), "--verify"], capsys)
    one_line_damage(code, err, "mixpr")


VOCABULARIES: dict[str, tuple[str, str, list[Any]]] = {
    "bm25": (
        "bm25",
        "bm25_vocabulary.json",
        [
            "[]",
            "{}",
            '{"vocab": [], "num_docs": 3}',
            '{"vocab": {"a": "x"}, "num_docs": 3}',
            '{"vocab": {"a": 99999}, "num_docs": "3"}',
            "\u00ff garbage",
        ],
    ),
    "tfidf": (
        "tfidf",
        "tfidf_vocabulary.json",
        [
            '{"terms": 5}',
            '{"terms": ["a"], "token_pattern": "("}',
            "null",
            '{"terms": [1, 2], "token_pattern": "x", "sublinear_tf": false, "stop_words": null}',
        ],
    ),
    "mixpr": ("mixpr", "tfidf_vocabulary.json", ['{"terms": null}', '{"terms": [], "x": 1}']),
}


@pytest.mark.parametrize(
    ("method", "content"),
    [(m, c) for m, (_, _, contents) in VOCABULARIES.items() for c in contents],
)
def test_a_garbage_vocabulary_is_damage(
    idx: Path, method: str, content: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _, rel, _ = VOCABULARIES[method]
    (method_dir(idx, method) / rel).write_text(content)
    refresh(idx, method, rel)
    code, _, err = run(["retrieve", str(idx), QUESTION, "-m", method], capsys)
    one_line_damage(code, err, method, "rebuild it alone with")
    code, _, err = run(["info", str(idx), "--verify"], capsys)
    one_line_damage(code, err, method)


@pytest.mark.parametrize("method", ["bm25", "tfidf", "mixpr"])
def test_every_file_flipped_or_truncated_is_damage_never_a_crash(
    idx: Path, method: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every file of a build, truncated or with a byte flipped, checksums refreshed."""
    mdir = method_dir(idx, method)
    files = sorted(manifest(idx)["methods"][method]["files"])
    pristine = {rel: (mdir / rel).read_bytes() for rel in files}
    for rel in files:
        for how in ("truncate", "flip"):
            data = pristine[rel]
            if how == "truncate":
                bad = data[: len(data) // 3]
            else:
                flipped = bytearray(data)
                flipped[len(data) // 2] ^= 0x5A
                bad = bytes(flipped)
            (mdir / rel).write_bytes(bad)
            refresh(idx, method, rel)
            code, _, err = run(["retrieve", str(idx), QUESTION, "-m", method, "-k", "3"], capsys)
            assert code in (0, 1), (rel, how, err)
            assert "internal error" not in err and "Traceback" not in err, (rel, how, err)
            (mdir / rel).write_bytes(data)
            refresh(idx, method, rel)


# ------------------------------------------------------- reading outside the index
def test_a_file_name_leaving_the_build_folder_is_damage(
    idx: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outside = idx.parent / "secret.txt"
    outside.write_text("secret")
    raw = manifest(idx)
    raw["methods"]["bm25"]["files"]["../../secret.txt"] = 6
    raw["methods"]["bm25"]["sha256"]["../../secret.txt"] = "0" * 64
    write_manifest(idx, raw)
    code, _, err = run(["info", str(idx), "--verify"], capsys)
    one_line_damage(code, err, "bm25")


def test_a_symlink_in_a_build_is_damage(idx: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outside = idx.parent / "elsewhere.json"
    mdir = method_dir(idx, "bm25")
    shutil.copy(mdir / "bm25_vocabulary.json", outside)
    (mdir / "bm25_vocabulary.json").unlink()
    (mdir / "bm25_vocabulary.json").symlink_to(outside)
    code, _, err = run(["retrieve", str(idx), QUESTION, "-m", "bm25"], capsys)
    one_line_damage(code, err, "bm25/bm25_vocabulary.json")


# ------------------------------------ found by bench/fault_matrix.py after the merge
def test_a_linked_source_or_build_folder_is_never_read(
    idx: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """source.txt or a whole build folder replaced by a link to a copy outside: the
    copy is never read (the links read elsewhere; lcr writes none)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    mdir = method_dir(idx, "bm25")
    shutil.copytree(mdir, outside / "bm25")
    shutil.rmtree(mdir)
    mdir.symlink_to(outside / "bm25")
    code, _out, err = run(["retrieve", str(idx), QUESTION, "-m", "bm25"], capsys)
    one_line_damage(code, err, "symbolic link")
    shutil.copy(idx / "source.txt", outside / "source.txt")
    (idx / "source.txt").unlink()
    (idx / "source.txt").symlink_to(outside / "source.txt")
    code, _out, err = run(["retrieve", str(idx), QUESTION, "-m", "tfidf"], capsys)
    one_line_damage(code, err, "source.txt is a symbolic link")


def test_a_null_source_checksum_is_repaired_by_force(
    idx: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--force` over the same documents rebuilds an index whose source checksum is
    gone (every index lcr writes records it), so `--verify` passes after."""
    raw = manifest(idx)
    raw["source_sha256"] = None
    write_manifest(idx, raw)
    assert run(["info", str(idx), "--verify"], capsys)[0] == 1
    story = Path(raw["source_paths"][0])
    code, _out, err = run(["index", str(story), "-o", str(idx), "-m", "bm25", "--force"], capsys)
    assert code == 0, err
    code, _out, err = run(["info", str(idx), "--verify"], capsys)
    assert code == 0, err
