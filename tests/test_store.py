"""The index directory: round trips, atomic commits, damage and version checks."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from lcr.errors import (
    IndexDamagedError,
    IndexNotFoundError,
    InputError,
    MethodNotBuiltError,
    SchemaMismatchError,
    SourceMismatchError,
)
from lcr.store import Document, Index, LLMCache, Node, cache_key


def doc(name: str, text: str) -> Document:
    data = text.encode()
    return Document(name, text, hashlib.sha256(data).hexdigest(), len(data))


A = doc("a.txt", "Alpha went home. Beta stayed.")
B = doc("b.txt", "Gamma arrived late.\nDelta left early.")


def build_demo(index: Index, method: str = "demo", marker: str = "x") -> None:
    with index.building(method, settings={"marker": marker}, models={}) as out:
        out.write_nodes(
            [
                Node("n0", 0, index.source[0:5], [(0, 5)], 0),
                Node("n1", 1, "summary " + marker, [(0, 5), (6, 10)], 0, children=["n0"]),
            ]
        )
        out.write_array("emb", np.arange(6, dtype=np.float32).reshape(2, 3))
        out.write_csr("graph", sp.csr_array(np.array([[0, 1.5], [0.25, 0]], dtype=np.float32)))
        out.write_json("meta", {"marker": marker})
        out.stats["nnz"] = 2


def test_round_trip(tmp_path: Path) -> None:
    index = Index.create(tmp_path / "x.idx", [A, B])
    assert index.source == A.text + "\n\n" + B.text
    d1 = index.documents[1]
    assert index.source[d1.start : d1.end] == B.text
    build_demo(index)
    again = Index.open(tmp_path / "x.idx")
    r = again.reader("demo")
    nodes = r.nodes()
    assert [n.id for n in nodes] == ["n0", "n1"]
    assert nodes[1].children == ["n0"] and nodes[1].spans == [(0, 5), (6, 10)]
    assert np.array_equal(r.array("emb"), np.arange(6, dtype=np.float32).reshape(2, 3))
    g = r.csr("graph")
    assert g.shape == (2, 2) and g[0, 1] == pytest.approx(1.5) and g.nnz == 2
    assert r.json("meta") == {"marker": "x"}
    entry = again.methods["demo"]
    assert entry.settings == {"marker": "x"} and entry.counts == {"nodes": 2}
    assert entry.stats == {"nnz": 2}
    assert index.doc_at(d1.start) == 1 and index.doc_at(0) == 0
    assert not list((tmp_path / "x.idx").glob("*.pkl"))


def test_rebuild_replaces_and_sweeps_old_build(tmp_path: Path) -> None:
    index = Index.create(tmp_path / "x.idx", [A])
    build_demo(index, marker="one")
    first_dir = index.methods["demo"].dir
    build_demo(index, marker="two")
    assert not (tmp_path / "x.idx" / first_dir).exists()
    assert Index.open(tmp_path / "x.idx").reader("demo").json("meta") == {"marker": "two"}


def test_failed_build_keeps_previous(tmp_path: Path) -> None:
    index = Index.create(tmp_path / "x.idx", [A])
    build_demo(index, marker="good")
    with pytest.raises(RuntimeError), index.building("demo", settings={}, models={}) as out:
        out.write_nodes([Node("bad", 0, "bad", [(0, 3)], 0)])
        raise RuntimeError("boom")
    reopened = Index.open(tmp_path / "x.idx")
    assert reopened.reader("demo").json("meta") == {"marker": "good"}
    assert not [p for p in (tmp_path / "x.idx").iterdir() if p.name.startswith(".tmp-")]


CRASH_SCRIPT = """
import hashlib, os, sys
from lcr.store import Document, Index, Node
index = Index.open(sys.argv[1])
with index.building("demo", settings={"marker": "new"}, models={}) as out:
    out.write_nodes([Node("n0", 0, "new", [(0, 3)], 0)])
    os.kill(os.getpid(), 9)  # killed mid-build, before the commit
"""


def test_kill_mid_build_leaves_previous_index(tmp_path: Path) -> None:
    index = Index.create(tmp_path / "x.idx", [A])
    build_demo(index, marker="old")
    proc = subprocess.run([sys.executable, "-c", CRASH_SCRIPT, str(tmp_path / "x.idx")])
    assert proc.returncode == -9
    reopened = Index.open(tmp_path / "x.idx")
    assert reopened.reader("demo").json("meta") == {"marker": "old"}
    # the next build sweeps the debris the killed one left behind
    build_demo(reopened, marker="newer")
    leftovers = [p.name for p in (tmp_path / "x.idx").iterdir() if p.name.startswith(".tmp-")]
    assert leftovers == []


def test_same_source_reuses_other_source_refuses(tmp_path: Path) -> None:
    index = Index.create(tmp_path / "x.idx", [A])
    build_demo(index)
    same = Index.create(tmp_path / "x.idx", [A])
    assert "demo" in same.methods
    with pytest.raises(SourceMismatchError, match="--force"):
        Index.create(tmp_path / "x.idx", [B])
    replaced = Index.create(tmp_path / "x.idx", [B], force=True)
    assert replaced.source == B.text and "demo" not in replaced.methods


def test_commit_returns_the_index_in_place_and_leaves_the_staged_handle_as_it_was(
    tmp_path: Path,
) -> None:
    """Issue 52: a staged replacement is a value; committing gives a new handle."""
    build_demo(Index.create(tmp_path / "x.idx", [A]))
    staged = Index.create(tmp_path / "x.idx", [B], force=True)
    before = (staged.path, staged.target)
    committed = staged.commit()
    assert (staged.path, staged.target) == before and staged.path != committed.path
    assert committed.path == tmp_path / "x.idx" and committed.target is None
    assert committed.source == B.text == Index.open(tmp_path / "x.idx").source
    assert committed.commit() is committed  # in place already: nothing to swap


def test_refuses_to_overwrite_non_index(tmp_path: Path) -> None:
    target = tmp_path / "notes"
    target.mkdir()
    (target / "precious.txt").write_text("keep me")
    with pytest.raises(InputError, match="not an lcr index"):
        Index.create(target, [A], force=True)
    assert (target / "precious.txt").read_text() == "keep me"


def test_open_errors(tmp_path: Path) -> None:
    with pytest.raises(IndexNotFoundError, match="no index"):
        Index.open(tmp_path / "missing.idx")
    (tmp_path / "plain").mkdir()
    with pytest.raises(IndexNotFoundError, match="not an lcr index"):
        Index.open(tmp_path / "plain")
    index = Index.create(tmp_path / "x.idx", [A])
    build_demo(index)
    with pytest.raises(MethodNotBuiltError, match=r"lcr index a\.txt -o .* --method raptor"):
        index.reader("raptor")


def test_schema_mismatch(tmp_path: Path) -> None:
    Index.create(tmp_path / "x.idx", [A])
    mpath = tmp_path / "x.idx" / "manifest.json"
    m = json.loads(mpath.read_text())
    m["schema_version"] = 99
    mpath.write_text(json.dumps(m))
    with pytest.raises(SchemaMismatchError, match="schema 99"):
        Index.open(tmp_path / "x.idx")


def test_damaged_files(tmp_path: Path) -> None:
    index = Index.create(tmp_path / "x.idx", [A])
    build_demo(index)
    mdir = tmp_path / "x.idx" / index.methods["demo"].dir
    nodes = mdir / "nodes.jsonl"
    nodes.write_bytes(nodes.read_bytes()[:-10])  # truncated
    # the index opens; the damaged method is marked and refuses to be read
    assert "wrong size" in Index.open(tmp_path / "x.idx").damaged["demo"]
    with pytest.raises(IndexDamagedError, match="wrong size"):
        Index.open(tmp_path / "x.idx").reader("demo")
    nodes.unlink()
    with pytest.raises(IndexDamagedError, match=r"demo/nodes\.jsonl is missing"):
        Index.open(tmp_path / "x.idx").reader("demo")
    (tmp_path / "x.idx" / "manifest.json").write_text("{not json")
    with pytest.raises(IndexDamagedError, match="not valid JSON"):
        Index.open(tmp_path / "x.idx")


def test_damaged_node_line_is_a_clear_error(tmp_path: Path) -> None:
    index = Index.create(tmp_path / "x.idx", [A])
    build_demo(index)
    mdir = tmp_path / "x.idx" / index.methods["demo"].dir
    nodes = mdir / "nodes.jsonl"
    raw = nodes.read_bytes()
    nodes.write_bytes(b"[" + raw[1:])  # same size, broken JSON on line 1
    with pytest.raises(IndexDamagedError, match=r"demo/nodes\.jsonl does not match its checksum"):
        Index.open(tmp_path / "x.idx").reader("demo").nodes()
    # a build recorded without checksums (older lcr) still names the broken line
    mpath = tmp_path / "x.idx" / "manifest.json"
    m = json.loads(mpath.read_text())
    del m["methods"]["demo"]["sha256"]
    mpath.write_text(json.dumps(m))
    with pytest.raises(IndexDamagedError, match=r"demo/nodes\.jsonl line 1: not a JSON record"):
        Index.open(tmp_path / "x.idx").reader("demo").nodes()


def test_llm_cache_survives_torn_line(tmp_path: Path) -> None:
    cache = LLMCache(tmp_path / "c.jsonl")
    k1, k2 = cache_key("p", 1), cache_key("p", 2)
    cache.put(k1, {"text": "one"})
    with (tmp_path / "c.jsonl").open("a") as fh:
        fh.write('{"key": "torn", "val')  # a crash mid-write
    again = LLMCache(tmp_path / "c.jsonl")
    assert again.get(k1) == {"text": "one"} and again.get("torn") is None
    again.put(k2, "two")
    third = LLMCache(tmp_path / "c.jsonl")
    assert third.get(k2) == "two" and len(third) == 2
    assert os.path.getsize(tmp_path / "c.jsonl") > 0
