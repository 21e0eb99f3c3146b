"""Index safety: concurrent creators, damage kept to one method, checksums, modes, locks."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from lcr.cli.main import main
from lcr.errors import (
    DiskFullError,
    FileAccessError,
    IndexDamagedError,
    InputError,
    LostRaceError,
    SchemaMismatchError,
    from_os_error,
)
from lcr.store import Document, Index, Node

REPO = Path(__file__).resolve().parents[1]


def doc(name: str, text: str) -> Document:
    data = text.encode()
    return Document(name, text, hashlib.sha256(data).hexdigest(), len(data))


A = doc("a.txt", "Alpha went home. Beta stayed.")


def build_demo(index: Index, method: str = "demo") -> None:
    with index.building(method, settings={}, models={}) as out:
        out.write_nodes([Node("n0", 0, index.source[0:5], [(0, 5)], 0)])
        out.write_array("emb", np.arange(6, dtype=np.float32).reshape(2, 3))
        out.write_json("meta", {"marker": method})


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(args)
    out = capsys.readouterr()
    code = exc.value.code
    return (code if isinstance(code, int) else 1), out.out, out.err


def lcr_process(*args: str, **kwargs: object) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-m", "lcr", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        **kwargs,  # type: ignore[call-overload]
    )


@pytest.fixture()
def story(tmp_path: Path, cinderella: Path) -> Path:
    target = tmp_path / "cinderella.txt"
    shutil.copy(cinderella, target)
    return target


# ------------------------------------------------------------------ creation races
CREATOR = """
import hashlib, os, sys, time
from pathlib import Path
from lcr.store import Document, Index, Node
target, start, i = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
text = "Alpha went home. Beta stayed."
d = Document("a.txt", text, hashlib.sha256(text.encode()).hexdigest(), len(text))
while not start.exists():
    time.sleep(0.001)
index = Index.create(target, [d])
with index.building(f"m{i}", settings={}, models={}) as out:
    out.write_nodes([Node("n0", 0, "Alpha", [(0, 5)], 0)])
print("created" if index.created else "reused")
"""


def test_many_concurrent_creators_of_one_new_index_all_succeed(tmp_path: Path) -> None:
    target, start, n = tmp_path / "x.idx", tmp_path / "go", 8
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CREATOR, str(target), str(start), str(i)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for i in range(n)
    ]
    time.sleep(1.0)  # let every process import and wait at the start line
    start.touch()
    results = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * n, [err for _, err in results]
    assert sorted(out.strip() for out, _ in results).count("created") == 1
    index = Index.open(target)
    assert sorted(index.methods) == sorted(f"m{i}" for i in range(n))  # no build was lost
    assert all(index.reader(f"m{i}").nodes()[0].text == "Alpha" for i in range(n))
    leftovers = [p.name for p in tmp_path.iterdir() if p.name not in {"x.idx", "go"}]
    assert leftovers == []


def test_concurrent_lcr_index_runs_in_real_processes(story: Path) -> None:
    target = story.parent / "shared.idx"
    procs = [lcr_process("index", str(story), "-o", str(target), "-m", "bm25") for _ in range(3)]
    results = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [err for _, err in results]
    outs = [out for out, _ in results]
    assert all("bm25 built in" in out or "bm25 up to date" in out for out in outs), outs
    assert any("bm25 built in" in out for out in outs)
    assert "internal error" not in "".join(err for _, err in results)
    assert "bm25" in Index.open(target).methods


def test_the_rebuild_hint_repeats_the_builds_settings(
    story: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Following the hint of a damaged build rebuilds it as it was, not with defaults."""
    idx = story.with_suffix(".idx")
    args = ["index", str(story), "-q", "-m", "bm25", "--set", "bm25.chunk_tokens=64"]
    assert run([*args, "--set", "bm25.k1=1.2"], capsys)[0] == 0
    recorded = Index.open(idx).methods["bm25"].settings
    (idx / Index.open(idx).methods["bm25"].dir / "nodes.jsonl").unlink()
    code, _, err = run(["retrieve", str(idx), "Where did the bird sit?"], capsys)
    assert code == 1 and len(err.strip().splitlines()) == 1
    hint = err.split("rebuild it alone with: ", 1)[1].strip()
    end = "--method bm25 --set bm25.chunk_tokens=64 --set bm25.k1=1.2 --force"
    assert hint.endswith(end), hint
    words = shlex.split(hint)
    assert words[:3] == ["lcr", "index", str(story)]  # outside the current folder: absolute
    assert run(words[1:], capsys)[0] == 0
    assert Index.open(idx).methods["bm25"].settings == recorded


def test_an_empty_folder_is_taken_and_a_full_one_never(tmp_path: Path) -> None:
    (tmp_path / "empty.idx").mkdir()
    assert Index.create(tmp_path / "empty.idx", [A]).created
    (tmp_path / "full.idx").mkdir()
    (tmp_path / "full.idx" / "keep.txt").write_text("mine")
    with pytest.raises(InputError, match="not an lcr index"):
        Index.create(tmp_path / "full.idx", [A])
    assert (tmp_path / "full.idx" / "keep.txt").read_text() == "mine"


# -------------------------------------------------------------- damage is per method
def test_one_damaged_method_does_not_take_down_the_others(
    story: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    idx = story.with_suffix(".idx")
    assert run(["index", str(story), "-q", "-m", "bm25", "-m", "tfidf"], capsys)[0] == 0
    bm25_dir = idx / Index.open(idx).methods["bm25"].dir
    victim = next(p for p in sorted(bm25_dir.rglob("*")) if p.is_file() and p.suffix != ".jsonl")
    victim.unlink()

    code, out, err = run(["info", str(idx)], capsys)
    assert code == 1
    assert "bm25" in out and "DAMAGED" in out and "tfidf" in out
    hint = f"rebuild it alone with: lcr index {story} -o {idx} --method bm25 --force"
    assert hint in err and "is missing" in err and len(err.strip().splitlines()) == 1

    code, out, err = run(["retrieve", str(idx), "Where did the bird sit?", "-m", "tfidf"], capsys)
    assert code == 0 and "Evidence (tfidf" in out, err
    code, _, err = run(["retrieve", str(idx), "Where did the bird sit?", "-m", "bm25"], capsys)
    assert code == 1 and hint in err

    # the hint works as written and rebuilds bm25 alone (without --force too: it is missing)
    tfidf_dir = Index.open(idx).methods["tfidf"].dir
    code, out, _ = run(["index", str(story), "-o", str(idx), "--method", "bm25"], capsys)
    assert code == 0 and "bm25 built" in out
    again = Index.open(idx)
    assert again.damaged == {} and again.methods["tfidf"].dir == tfidf_dir
    assert run(["info", str(idx), "--verify"], capsys)[0] == 0


# ------------------------------------------------------------------------ checksums
def test_every_built_file_has_a_checksum_and_verify_checks_them(tmp_path: Path) -> None:
    index = Index.create(tmp_path / "x.idx", [A])
    build_demo(index)
    entry = index.methods["demo"]
    mdir = index.path / entry.dir
    assert set(entry.sha256) == set(entry.files) and "nodes.jsonl" in entry.sha256
    for rel, digest in entry.sha256.items():
        assert hashlib.sha256((mdir / rel).read_bytes()).hexdigest() == digest
    assert Index.open(index.path).verify() == {}

    # a same-size edit of an array chunk: sizes agree, so only --verify can see it
    chunks = sorted((mdir / "emb.zarr").rglob("*"))
    chunk = next(p for p in chunks if p.is_file() and p.name != "zarr.json")
    raw = bytearray(chunk.read_bytes())
    raw[-1] ^= 0xFF
    chunk.write_bytes(bytes(raw))
    reopened = Index.open(index.path)
    assert reopened.damaged == {}
    rel = str(chunk.relative_to(mdir))
    assert reopened.verify() == {"demo": [f"{rel} does not match its checksum"]}


def test_same_size_edit_of_nodes_is_found_when_read(tmp_path: Path) -> None:
    index = Index.create(tmp_path / "x.idx", [A])
    build_demo(index)
    nodes = index.path / index.methods["demo"].dir / "nodes.jsonl"
    nodes.write_bytes(nodes.read_bytes().replace(b'"Alpha"', b'"Omega"'))
    reader = Index.open(index.path).reader("demo")
    with pytest.raises(IndexDamagedError, match=r"demo/nodes\.jsonl does not match its checksum"):
        reader.nodes()


def test_same_size_edit_of_the_source_is_found_when_read(tmp_path: Path) -> None:
    index = Index.create(tmp_path / "x.idx", [A])
    src = index.path / "source.txt"
    src.write_bytes(src.read_bytes().replace(b"Alpha", b"Omega"))
    reopened = Index.open(index.path)
    with pytest.raises(IndexDamagedError, match=r"source\.txt does not match its checksum"):
        _ = reopened.source
    assert "source" in reopened.verify()


def test_info_verify_reports_a_silent_edit(story: Path, capsys: pytest.CaptureFixture[str]) -> None:
    idx = story.with_suffix(".idx")
    run(["index", str(story), "-q", "-m", "bm25"], capsys)
    code, out, _ = run(["info", str(idx), "--verify"], capsys)
    assert code == 0 and "verified" in out
    nodes = idx / Index.open(idx).methods["bm25"].dir / "nodes.jsonl"
    raw = nodes.read_bytes()
    nodes.write_bytes(raw.replace(b"Cinderella", b"Cinderelle", 1))
    assert run(["info", str(idx)], capsys)[0] == 0  # sizes agree: the cheap check passes
    code, out, err = run(["info", str(idx), "--verify", "--json"], capsys)
    obj = json.loads(out)
    assert code == 1 and obj["verified"] is False
    assert "nodes.jsonl does not match its checksum" in obj["damaged"]["bm25"]
    assert "rebuild it alone with" in err


# ------------------------------------------------------------- modes and permissions
def test_manifest_respects_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        index = Index.create(tmp_path / "a.idx", [A])
        build_demo(index)
        assert (index.path / "manifest.json").stat().st_mode & 0o777 == 0o644
        os.umask(0o077)
        index = Index.create(tmp_path / "b.idx", [A])
        assert (index.path / "manifest.json").stat().st_mode & 0o777 == 0o600
    finally:
        os.umask(old)


def _without_file_override() -> list[str]:
    """A prefix that makes a process meet file permissions even when run as root."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: permissions cannot be enforced")
    caps = "-dac_override,-dac_read_search"
    return [setpriv, f"--inh-caps={caps}", f"--bounding-set={caps}"]


def test_permission_problems_are_reported_as_such(story: Path, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    prefix = _without_file_override()
    lcr = [*prefix, sys.executable, "-m", "lcr"]
    idx = story.with_suffix(".idx")
    assert subprocess.run([*lcr, "index", str(story), "-q", "-m", "bm25"], env=env).returncode == 0
    manifest = idx / "manifest.json"
    manifest.chmod(0o000)
    try:
        proc = subprocess.run([*lcr, "info", str(idx)], env=env, capture_output=True, text=True)
    finally:
        manifest.chmod(0o644)
    assert proc.returncode == 1
    assert proc.stderr == f"lcr: permission denied: cannot read {manifest}\n"
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    proc = subprocess.run(
        [*lcr, "index", str(story), "-o", str(locked / "x.idx"), "-q"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1 and proc.stderr == f"lcr: permission denied: {locked}\n"


def test_a_full_disk_is_a_one_line_error_not_a_bug() -> None:
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [sys.executable, "-m", "lcr", "methods"],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
    assert proc.returncode == 1
    # a read command's stdout is full: not a build's "nothing was committed" (issue 37)
    assert proc.stderr.startswith("lcr: cannot print the output: no space left on the device")
    assert "internal error" not in proc.stderr and len(proc.stderr.splitlines()) == 1


def test_a_file_size_limit_is_a_one_line_error_like_a_full_disk(tmp_path: Path) -> None:
    """``ulimit -f``: writing past the limit fails with EFBIG (Python ignores SIGXFSZ)."""
    import resource

    big = tmp_path / "big.txt"
    big.write_text("The keeper lit the lamp at dusk. " * 40_000)  # 1.3 MB

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "lcr",
            "index",
            str(big),
            "-o",
            str(tmp_path / "fs.idx"),
            "-q",
            "-m",
            "bm25",
        ],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        preexec_fn=limit,
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith("lcr: file too large for this system's file-size limit")
    assert "internal error" not in proc.stderr and len(proc.stderr.splitlines()) == 1
    assert not (tmp_path / "fs.idx").exists()  # nothing half-made is left behind


@pytest.mark.parametrize(
    ("error", "kind", "message"),
    [
        (
            PermissionError(errno.EACCES, "x", "/i/m.json"),
            FileAccessError,
            "permission denied: /i/m.json",
        ),
        (OSError(errno.EROFS, "x", "/i/m.json"), FileAccessError, "read-only file system"),
        (OSError(errno.ENOSPC, "x", "/i/.x.idx.tmp-1f"), DiskFullError, "while writing /i;"),
        (OSError(errno.EDQUOT, "x", "/i/a"), DiskFullError, "disk quota exceeded"),
        (FileNotFoundError(errno.ENOENT, "x", "/i/a"), LostRaceError, "another process removed"),
        (OSError(errno.ENOTEMPTY, "x", "/i/.t", "/i/x.idx"), LostRaceError, "at the same time"),
    ],
)
def test_os_errors_map_to_their_own_messages(error: OSError, kind: type, message: str) -> None:
    mapped = from_os_error(error)
    assert isinstance(mapped, kind) and message in str(mapped) and mapped.exit_code == 1
    assert from_os_error(OSError(errno.EBADF, "bad fd")) is None  # a bug stays a bug


# --------------------------------------------------------------------- odd inputs
def test_string_schema_version_is_named_as_invalid(tmp_path: Path) -> None:
    Index.create(tmp_path / "x.idx", [A])
    mpath = tmp_path / "x.idx" / "manifest.json"
    m = json.loads(mpath.read_text())
    m["schema_version"] = "1"
    mpath.write_text(json.dumps(m))
    with pytest.raises(SchemaMismatchError, match=r'invalid schema_version "1" \(this lcr reads'):
        Index.open(tmp_path / "x.idx")


def test_failed_first_build_removes_the_new_index(
    story: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    idx = story.with_suffix(".idx")
    bad = ["--embedder", str(story.parent / "no-such-embedder")]
    code, _, err = run(["index", str(story), "-q", "-m", "dense", *bad], capsys)
    assert code == 1 and "Traceback" not in err
    assert not idx.exists() and list(story.parent.iterdir()) == [story]
    # an index that already had a method is kept when a later build fails
    assert run(["index", str(story), "-q", "-m", "bm25"], capsys)[0] == 0
    code, _, _ = run(["index", str(story), "-q", "-m", "dense", *bad], capsys)
    assert code == 1 and list(Index.open(idx).methods) == ["bm25"]


def test_same_file_twice_is_indexed_once_with_a_warning(
    story: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_idx = story.parent / "both.idx"
    twice = [str(story), str(story.parent / "." / story.name)]
    code, _, err = run(["index", *twice, "-o", str(out_idx), "-q", "-m", "bm25"], capsys)
    assert code == 0 and "is given more than once; it is indexed once" in err
    assert len(Index.open(out_idx).documents) == 1
    code, out, err = run(["index", *twice, "-m", "bm25"], capsys)
    assert code == 0 and "given more than once" in err and out.count("bm25") == 1


LOCK_HOLDER = """
import fcntl, os, sys
index = os.path.abspath(sys.argv[1])  # the writer lock lives beside the index folder
with open(os.path.join(os.path.dirname(index), "." + os.path.basename(index) + ".lock"), "a") as fh:
    fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
    print("locked", flush=True)
    sys.stdin.readline()  # held until the test says
"""


def test_a_build_waiting_for_the_lock_says_so_and_does_not_count_the_wait(
    story: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The lock is held until the waiting build has said so, then HOLD seconds more, so
    the test does not depend on how fast the machine starts a process."""
    idx = story.with_suffix(".idx")
    assert run(["index", str(story), "-q", "-m", "bm25"], capsys)[0] == 0
    hold = 6.0
    holder = subprocess.Popen(
        [sys.executable, "-c", LOCK_HOLDER, str(idx)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdin is not None
    assert holder.stdout.readline().strip() == "locked"
    builder = lcr_process("index", str(story), "-m", "bm25", "--set", "bm25.k1=1.2")
    assert builder.stderr is not None
    said = ""  # stderr up to the line a waiting build prints, or all of it
    while (line := builder.stderr.readline()) and "waiting for another" not in line:
        said += line
    first = said + line
    time.sleep(hold)
    holder.stdin.write("release\n")
    holder.stdin.flush()
    out, err = builder.communicate(timeout=300)
    holder.wait(timeout=30)
    assert builder.returncode == 0, first + err
    assert f"lcr: waiting for another lcr process writing {idx} to finish\n" in first
    reported = float(out.split("built in ")[1].split("s")[0])
    recorded = Index.open(idx).methods["bm25"].build_seconds
    assert reported == pytest.approx(recorded, abs=0.051)
    assert recorded < hold / 2, (reported, recorded)  # the wait of HOLD seconds is not in it


def _zipf_text(words: int) -> str:
    """Text with a realistic spread of word frequencies (a real vocabulary, no corpus)."""
    import random

    rng = random.Random(7)
    vocab = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9)))
             for _ in range(3000)]  # fmt: skip
    drawn = rng.choices(vocab, weights=[1 / (i + 1) for i in range(len(vocab))], k=words)
    return " ".join(" ".join(drawn[i : i + 12]).capitalize() + "." for i in range(0, words, 12))


def _du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def test_a_full_tmpfs_prints_one_line_and_keeps_the_index(tmp_path: Path) -> None:
    """Issue #31: a full disk during zarr's chunk writes printed the one-line message, then
    hundreds of lines of its pending tasks and tracebacks. Now the one line and nothing else,
    and the build already there is intact."""
    text = tmp_path / "mid.txt"
    text.write_text(_zipf_text(110_000))  # 0.77 MB
    env = {**os.environ, "PYTHONPATH": str(REPO), "ZARR_ASYNC__CONCURRENCY": "1"}
    lcr = [sys.executable, "-m", "lcr"]
    ref = tmp_path / "ref.idx"
    subprocess.run(
        [*lcr, "index", str(text), "-o", str(ref), "-q", "-m", "bm25"], env=env, check=True
    )
    mnt = tmp_path / "small"
    mnt.mkdir()
    size_kb = _du(ref) // 1024 + 300  # room for bm25, not for MixPR's arrays and nodes
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs", str(mnt)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        idx = mnt / "full.idx"
        subprocess.run(
            [*lcr, "index", str(text), "-o", str(idx), "-q", "-m", "bm25"], env=env, check=True
        )
        before = (idx / "manifest.json").read_bytes()
        proc = subprocess.run(
            [*lcr, "index", str(text), "-o", str(idx), "-m", "mixpr"],
            env=env, capture_output=True, text=True,
        )  # fmt: skip
        assert proc.returncode == 1
        assert proc.stderr.startswith("lcr: no space left on the device"), proc.stderr
        assert "nothing was committed" in proc.stderr
        assert len(proc.stderr.splitlines()) == 1, proc.stderr
        assert (idx / "manifest.json").read_bytes() == before
        info = subprocess.run([*lcr, "info", str(idx)], env=env, capture_output=True, text=True)
        assert info.returncode == 0 and "bm25" in info.stdout and "mixpr" not in info.stdout
        assert [p.name for p in idx.iterdir() if ".tmp" in p.name] == []  # no temp left
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


ZARR_FAILS_MIDWAY = """
import errno, sys
import zarr
import zarr.storage._local as local
zarr.config.set({"async.concurrency": 1})  # the other chunk writes wait: some are pending
real, calls = local._put, [0]
def put(path, value, *args, **kwargs):
    calls[0] += 1
    if calls[0] > 3 and path.parent.name == "c":
        raise OSError(errno.ENOSPC, "No space left on device")
    return real(path, value, *args, **kwargs)
local._put = put
import zarr.core.chunk_grids as grids
grids._guess_chunks = lambda shape, *a, **k: tuple(min(64, max(1, n)) for n in shape)
from lcr.cli.main import main
main(sys.argv[1:])
"""


def test_an_os_error_in_a_zarr_write_leaves_nothing_pending(tmp_path: Path, story: Path) -> None:
    """Injected: a chunk write fails while others wait (any OS error during a write)."""
    proc = subprocess.run(
        [sys.executable, "-c", ZARR_FAILS_MIDWAY, "index", str(story), "-m", "bm25"],
        env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 1
    assert proc.stderr.startswith("lcr: no space left on the device"), proc.stderr
    assert len(proc.stderr.splitlines()) == 1, proc.stderr
