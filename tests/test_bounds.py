"""Bounded resources: memory on repetitive text, settings that would make work
endless, and the smallest documents a user can give (issue 37)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from click.testing import CliRunner

from lcr.cli.main import cli
from lcr.graph.similarity import similarity_graph
from tests.conftest import REPO

WORDS = [
    "key",
    "lamp",
    "rope",
    "boat",
    "tide",
    "gull",
    "rock",
    "door",
    "salt",
    "wind",
    "map",
    "oar",
    "fog",
    "bell",
    "net",
]


def run(args: list[str]) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, args, prog_name="lcr")
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception  # a bug escaped the CLI's error handling
    return result.exit_code, result.stdout, result.stderr


def low_vocabulary_text(words: int, seed: int = 0) -> str:
    """The 15 words in random order: every chunk is like every other one, so the
    exact graph has an entry for nearly every pair of chunks."""
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(words)) + "\n"


def _vm_peak_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmPeak:"):
            return int(line.split()[1])
    raise AssertionError("no VmPeak in /proc/self/status")


@pytest.mark.slow  # 14.5 s of CPU alone on an AVX2 EPYC, 24 s beside CI's other worker
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux's /proc")
def test_mixpr_guard_bounds_memory_on_low_vocabulary_text(tmp_path: Path) -> None:
    """About 6.3k chunks that are all alike hold ~39M graph entries (over 1.5 GB to
    assemble); the guard counts them as they come, so a build under a smaller
    ``max_edges`` (within the 2x past which it is refused) fits in an address space
    only ~1 GB above a tiny build's."""
    tiny = tmp_path / "tiny.txt"
    tiny.write_text(low_vocabulary_text(2000), encoding="utf-8")
    big = tmp_path / "big.txt"
    big.write_text(low_vocabulary_text(200_000), encoding="utf-8")  # ~1 MB
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    probe = (
        "import resource, runpy, sys\n"
        "limit = int(sys.argv.pop(1))\n"
        "if limit: resource.setrlimit(resource.RLIMIT_AS, (limit, limit))\n"
        "sys.argv[0] = 'lcr'\n"
        "try:\n"
        "    runpy.run_module('lcr', run_name='__main__')\n"
        "finally:\n"
        "    print([l for l in open('/proc/self/status') if l.startswith('VmPeak')][0],"
        " file=sys.stderr)\n"
    )

    def index(path: Path, limit: int, *extra: str) -> subprocess.CompletedProcess[str]:
        args = [sys.executable, "-c", probe, str(limit), "index", str(path), "-m", "mixpr"]
        return subprocess.run(
            [*args, "-q", *extra], capture_output=True, text=True, env=env, timeout=300
        )

    small = index(tiny, 0)
    assert small.returncode == 0, small.stderr
    base_kb = int(small.stderr.strip().splitlines()[-1].split()[1])
    limit = (base_kb + 1_000_000) * 1024
    done = index(big, limit, "--set", "mixpr.max_edges=20000000")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "keeps its" in done.stderr  # the guard engaged, and said so
    _, out, _ = run(["info", str(big.with_suffix(".idx")), "--json"])
    stats = json.loads(out)["methods"]["mixpr"]["stats"]
    assert stats["degree_cap_auto"] and stats["nnz"] <= 20_000_000
    assert stats["chunks"] > 6_000


def test_mixpr_refuses_a_graph_far_over_max_edges_before_building_it(tmp_path: Path) -> None:
    """625 chunks of 15 words are nearly all alike (~390k graph entries): far over
    2 x max_edges, the build is refused in one line naming the setting, with exit 2,
    instead of computing every entry for the cap to drop (quadratic on such text:
    2 MB took 119 s, 20 MB did not end in 17 min); the index keeps no mixpr."""
    doc = tmp_path / "low.txt"
    doc.write_text(low_vocabulary_text(20_000), encoding="utf-8")
    code, _, err = run(["index", str(doc), "-m", "mixpr", "--set", "mixpr.max_edges=20000"])
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1
    assert "mixpr.max_edges" in err and "-m bm25" in err
    need = int(err.split("mixpr.max_edges=")[1].split()[0])
    assert 390_000 // 2 <= need <= 392_000 // 2 + 1  # 625 x 625 entries, counted exactly
    # a max_edges the refusal names builds the (capped) graph
    code, _, err = run(["index", str(doc), "-m", "mixpr", "--set", f"mixpr.max_edges={need}"])
    assert code == 0, err
    _, out, _ = run(["info", str(doc.with_suffix(".idx")), "--json"])
    stats = json.loads(out)["methods"]["mixpr"]["stats"]
    assert stats["degree_cap_auto"] and stats["nnz"] <= need


def _unit_rows(vocab: int, per_row: int, n: int = 3000) -> sp.csr_array:
    rng = np.random.default_rng(3)
    cols = rng.integers(0, vocab, size=(n, per_row))
    rows = np.repeat(np.arange(n), per_row)
    counts = sp.csr_array((np.ones(n * per_row), (rows, cols.ravel())), shape=(n, vocab))
    norms = np.sqrt(np.asarray(counts.multiply(counts).sum(axis=1)).ravel())
    return sp.csr_array(sp.diags_array(1 / norms) @ counts, dtype=np.float32)


@pytest.mark.parametrize(("vocab", "alike"), [(400, False), (15, True)])
def test_the_entry_estimate_and_the_refusal(vocab: int, alike: bool) -> None:
    """The sampled estimate is close to the exact count, on rows with few pairs alike
    (as prose) and rows of a few shared terms (nearly all alike). Far over max_edges,
    the alike rows are refused before any block runs; the others are capped."""
    from lcr.graph.similarity import ALIKE_SHARE, GraphTooLarge, estimate_entries

    emb = _unit_rows(vocab, 8)
    n = emb.shape[0]
    exact, _ = similarity_graph(emb, 0.27)
    sampled, share = estimate_entries(emb, 0.27, n, sample=200_000)
    assert abs(sampled - exact.nnz) <= 0.1 * exact.nnz + 2000, (sampled, exact.nnz)
    assert (share >= ALIKE_SHARE) == alike
    counted, _ = estimate_entries(emb, 0.27, n, sample=n * n)  # every pair: exact
    assert abs(counted - exact.nnz) <= 0.001 * exact.nnz  # float rounding at 0.27 only
    budget = exact.nnz // 6
    if alike:
        with pytest.raises(GraphTooLarge) as refused:
            similarity_graph(emb, 0.27, max_edges=budget)
        assert refused.value.estimate > 2 * budget
    else:
        _, stats = similarity_graph(emb, 0.27, max_edges=budget)  # over 2 x, yet built
        assert stats.auto_capped and stats.estimated_entries > 2 * budget


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("backend", ["numba", "product"])
def test_a_block_handed_back_in_pieces_gives_the_same_graph(
    workers: int, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pieces of a few entries (each block's sweep resumed many times) give the
    graph of one sweep, exact or capped."""
    pytest.importorskip("numba")
    import lcr.graph.similarity as similarity

    rng = np.random.default_rng(5)
    dense = rng.random((400, 15)) * (rng.random((400, 15)) < 0.5)
    dense /= np.maximum(np.linalg.norm(dense, axis=1, keepdims=True), 1e-12)
    emb = sp.csr_array(dense)
    whole, _ = similarity_graph(emb, 0.27, backend=backend, workers=workers)
    capped, cap_stats = similarity_graph(
        emb, 0.27, backend=backend, workers=workers, max_edges=whole.nnz * 2 // 3
    )
    monkeypatch.setattr(similarity, "_TASK_ENTRIES", 5)
    monkeypatch.setattr(similarity, "_BUFFER_ENTRIES", 1)
    pieces, _ = similarity_graph(emb, 0.27, backend=backend, workers=workers)
    assert (pieces != whole).nnz == 0
    capped_pieces, stats = similarity_graph(
        emb, 0.27, backend=backend, workers=workers, max_edges=whole.nnz * 2 // 3
    )
    assert stats.auto_capped and stats.max_degree == cap_stats.max_degree
    assert (capped_pieces != capped).nnz == 0


@pytest.fixture()
def indexed(tmp_path: Path) -> Path:
    doc = tmp_path / "doc.txt"
    doc.write_text(low_vocabulary_text(300), encoding="utf-8")
    code, _, err = run(["index", str(doc), "-m", "mixpr", "-q"])
    assert code == 0, err
    return doc.with_suffix(".idx")


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("mixpr.max_iter", "1000000000"),
        ("graphreader.max_calls", "1000000000"),
        ("graphreader.agent_max_new_tokens", "1000000000"),
        ("raptor.reduction_dim", "1000000000"),
    ],
)
def test_settings_that_would_make_work_endless_are_refused(
    indexed: Path, key: str, value: str
) -> None:
    """``--set mixpr.max_iter=1000000000`` with a walk that never converged ran for ever:
    now exit 2, one line naming the setting and its range."""
    method = key.split(".")[0]
    command = "index" if method in ("raptor", "pecan") else "retrieve"
    target = [str(indexed.parent / "doc.txt")] if command == "index" else [str(indexed), "key"]
    args = [command, *target, "-m", method, "--set", f"{key}={value}"]
    code, _, err = run(args)
    assert code == 2, err
    assert key in err and ("at most" in err or "between" in err)
    assert len(err.strip().splitlines()) == 1


def test_the_largest_iteration_cap_still_ends(indexed: Path) -> None:
    code, out, err = run(
        ["retrieve", str(indexed), "key lamp", "-m", "mixpr", "--json",
         "--set", "mixpr.max_iter=10000"]
    )  # fmt: skip
    assert code == 0, err
    info = json.loads(out)["info"]
    assert info["iterations"] <= 10000


@pytest.mark.parametrize("text", ["x", "I", "the and of", "  a\n", "!"])
@pytest.mark.parametrize(
    "method",
    [
        "bm25",
        "tfidf",
        "mixpr",
        pytest.param("dense", marks=pytest.mark.slow),  # they load the embedder
        pytest.param("hybrid", marks=pytest.mark.slow),
    ],
)
def test_a_one_character_or_stopword_document_builds_and_retrieves(
    tmp_path: Path, text: str, method: str
) -> None:
    """A one-character document is a document: it builds, and a question gets its
    evidence (or none, said in words), never an internal error."""
    doc = tmp_path / "tiny.txt"
    doc.write_text(text, encoding="utf-8")
    code, _, err = run(["index", str(doc), "-m", method, "-q"])
    assert code == 0, err
    idx = str(doc.with_suffix(".idx"))
    for question in ("x", "what is it?", "the"):
        code, out, err = run(["retrieve", idx, question, "-m", method, "--json"])
        assert code == 0, err
        evidence = json.loads(out)["evidence"]
        source = (doc.with_suffix(".idx") / "source.txt").read_text(encoding="utf-8")
        for item in evidence:
            ((s, e),) = item["spans"]
            assert source[s:e] == item["text"]
        code, out, err = run(["retrieve", idx, question, "-m", method])
        assert code == 0, err
        assert "Evidence" in out
        if method in ("bm25", "tfidf") and "[1]" not in out:  # none found: said in words
            assert "no chunk shares a word with the question" in out
