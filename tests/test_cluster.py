"""``lcr index FILE... --ray`` (lcr.cluster, docs/cluster.md, issue #74): on a local Ray
cluster the indexes are byte-for-byte a serial run's (the manifest's timestamps, build
ids and timings aside, as in tests/test_deterministic_build.py), a worker killed midway
is replaced and its tasks run again, Ctrl-C leaves every index verifying and the same
command finishes it; without the extra, with a bad address or on storage a worker does
not share, one line and exit 2; without --ray, Ray is never imported.

One cluster for the module (``ray.init(num_cpus=2)``): the runs join it in-process.
"""

from __future__ import annotations

import difflib
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from lcr.cli.main import cli
from lcr.cluster.build import cluster_jobs, index_on_cluster
from lcr.cluster.storage import NotSharedError, ProbeReply, ProbeRequest, check_storage, probe_here
from lcr.cluster.worker import BuildRecipe, JobResult
from lcr.models.spec import ModelSpec
from lcr.pipeline.plans import ParsedSets
from tests.conftest import needs
from tests.test_deterministic_build import comparable_manifest, files_by_method
from tests.without_ray import in_process

REPO = Path(__file__).resolve().parents[1]
METHODS = ("bm25", "mixpr")
WORDS = ["alpha", "beta", "gamma", "delta", "river", "mountain", "castle"]
WORDS += ["key", "door", "garden", "queen", "king", "lamp"]
try:
    import ray  # noqa: F401

    HAVE_RAY = True
except ImportError:
    HAVE_RAY = False
needs_ray = pytest.mark.skipif(not HAVE_RAY, reason="needs the ray extra: pip install 'lcr[ray]'")


def write_documents(folder: Path, count: int = 6) -> list[Path]:
    """``count`` small documents, each its own words (a fixed recipe, no randomness)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        paragraphs = [
            " ".join(WORDS[(i * 7 + p * 3 + w * (i + 2)) % len(WORDS)] for w in range(50)) + "."
            for p in range(6)
        ]
        path = folder / f"doc{i}.txt"
        path.write_text("\n\n".join(paragraphs) + "\n", encoding="utf-8")
        paths.append(path)
    return paths


def lcr(*args: str, input: str | None = None) -> Any:
    return CliRunner().invoke(cli, list(args), input=input)


def assert_same_indexes(one: Path, two: Path) -> None:
    names = sorted(p.name for p in one.glob("*.idx"))
    assert names == sorted(p.name for p in two.glob("*.idx")) and len(names) == 6
    for name in names:
        a, b = files_by_method(one / name), files_by_method(two / name)
        assert sorted(a) == sorted(b), name
        assert [rel for rel in a if a[rel] != b[rel]] == [], name
        assert manifest(one, name) == manifest(two, name), name


def manifest(folder: Path, name: str) -> dict[str, Any]:
    """The manifest as tests/test_deterministic_build.py compares it, the sources (which
    it records as absolute paths) relative to their folder."""
    raw = comparable_manifest(folder / name)
    raw["source_paths"] = [os.path.relpath(p, folder) for p in raw["source_paths"]]
    return raw


@pytest.fixture(scope="module")
def serial(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The documents indexed serially, in a process of their own that also shows that
    ``lcr index`` without --ray never imports Ray."""
    folder = tmp_path_factory.mktemp("serial")
    docs = write_documents(folder)
    args = ["index", *map(str, docs), "-q"] + [a for m in METHODS for a in ("-m", m)]
    in_process(args)  # asserts exit 0 and that Ray was never imported
    return folder


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    import ray

    # a GPU declared without hardware: LLM methods' workers claim it (Ray only counts it)
    ray.init(num_cpus=2, num_gpus=1, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def recipe() -> BuildRecipe:
    return BuildRecipe(ModelSpec(), METHODS, ParsedSets())


@needs_ray
@pytest.mark.slow  # starts a Ray cluster
def test_the_cluster_builds_what_a_serial_run_builds(
    serial: Path, cluster: None, tmp_path: Path
) -> None:
    docs = write_documents(tmp_path)
    args = ["index", *map(str, docs), "--ray", "local"]
    done = lcr(*args, *[a for m in METHODS for a in ("-m", m)])
    assert done.exit_code == 0, done.output
    lines = done.stdout.splitlines()  # each build's line, as a serial run prints it
    assert len(lines) == len(docs) * len(METHODS), done.output
    for d in docs:
        for m in METHODS:
            assert any(line.startswith(f"{d.with_suffix('.idx')}: {m} built in") for line in lines)
    assert_same_indexes(serial, tmp_path)
    assert not list(tmp_path.glob(".lcr-probe-*")), "the storage probes are removed"


@needs_ray
@pytest.mark.slow  # starts a Ray cluster
def test_quiet_prints_nothing_as_a_serial_quiet_run(cluster: None, tmp_path: Path) -> None:
    docs = write_documents(tmp_path, 2)
    serial = lcr("index", *map(str, docs), "-m", "bm25", "-q", "--force")
    assert serial.exit_code == 0 and serial.stdout == "", serial.output
    done = lcr("index", *map(str, docs), "-m", "bm25", "-q", "--force", "--ray", "local")
    assert done.exit_code == 0, done.output
    assert done.stdout == ""


@needs_ray
@pytest.mark.slow  # starts a Ray cluster
def test_ctrl_c_leaves_every_index_verifying_and_a_killed_worker_is_retried(
    serial: Path, cluster: None, tmp_path: Path
) -> None:
    from lcr.pipeline.integrity import index_problems
    from lcr.store import Index

    docs = write_documents(tmp_path)
    jobs = cluster_jobs([(str(d), d.with_suffix(".idx"), False) for d in docs])

    def interrupt(_result: JobResult) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        index_on_cluster(jobs, recipe(), address="local", workers=2, on_result=interrupt)
    built = [d.with_suffix(".idx") for d in docs if d.with_suffix(".idx").exists()]
    assert 1 <= len(built) < len(docs)  # interrupted midway
    for path in built:
        assert index_problems(Index.open(path), True) == {}, path

    pids: list[int] = []

    def kill_first(result: JobResult) -> None:  # its worker holds its next task: SIGKILL
        if not pids:
            os.kill(result.worker_pid, signal.SIGKILL)
        pids.append(result.worker_pid)

    results = index_on_cluster(jobs, recipe(), address="local", workers=2, on_result=kill_first)
    assert [r.error for r in results] == [""] * len(docs)
    assert len(set(pids)) == 3, "the killed worker came back as a new process"
    assert_same_indexes(serial, tmp_path)


@needs_ray
@pytest.mark.slow  # starts a Ray cluster
def test_a_document_that_fails_is_named_and_the_others_finish(
    cluster: None, tmp_path: Path
) -> None:
    docs = write_documents(tmp_path, 3)
    docs[1].write_bytes(b"%PDF-1.7 not really a pdf")
    done = lcr("index", *map(str, docs), "--ray", "local", "-m", "bm25", "-q")
    assert done.exit_code == 1, done.output
    errors = [line for line in done.output.splitlines() if " failed: " in line]
    assert errors == [
        f"lcr: {docs[1]} failed: doc1.txt is not a readable PDF (damaged or truncated)"
    ], done.output
    assert done.output.splitlines()[-1] == "lcr: 1 of 3 documents failed (see above)"
    assert (tmp_path / "doc0.idx").is_dir() and (tmp_path / "doc2.idx").is_dir()
    assert not (tmp_path / "doc1.idx").exists()


def test_without_the_extra_one_line_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (doc,) = write_documents(tmp_path, 1)
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails, as uninstalled
    done = lcr("index", str(doc), "--ray", "local")
    assert done.exit_code == 2
    assert done.output == "lcr: --ray needs Ray, an optional extra: pip install 'lcr[ray]'\n"
    assert not (tmp_path / "doc0.idx").exists()


@pytest.mark.parametrize(
    ("address", "says"),
    [
        ("nohost.invalid:6379", "the host nohost.invalid is not known"),
        ("127.0.0.1:1", "no Ray head reachable there"),
        ("garbage", "is not an address"),
    ],
)
def test_a_bad_address_is_one_line_and_exit_2(tmp_path: Path, address: str, says: str) -> None:
    (doc,) = write_documents(tmp_path, 1)
    done = lcr("index", str(doc), "--ray", address)
    assert done.exit_code == 2, done.output
    assert len(done.output.splitlines()) == 1 and says in done.output, done.output
    assert not (tmp_path / "doc0.idx").exists()


def test_the_env_names_the_cluster_and_workers_need_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (doc,) = write_documents(tmp_path, 1)
    monkeypatch.setenv("LCR_RAY_ADDRESS", "garbage")
    assert "is not an address" in lcr("index", str(doc)).output
    done = lcr("index", str(doc), "-o", str(tmp_path / "all.idx"), "-m", "bm25")
    assert done.exit_code == 2 and "is not an address" in done.output  # -o: read there
    here = str(tmp_path / "here.idx")
    done = lcr("index", "-", "-o", here, "-m", "bm25", "-q", input="A text to read.\n")
    assert done.exit_code == 0, done.output  # stdin is not read on a cluster: built here
    assert (tmp_path / "here.idx").is_dir() and not (tmp_path / "all.idx").exists()
    monkeypatch.delenv("LCR_RAY_ADDRESS")
    done = lcr("index", str(doc), "--workers", "2")
    assert done.exit_code == 2 and "give --ray ADDRESS too" in done.output
    done = lcr("index", "-", "-o", str(tmp_path / "all.idx"), "--ray", "local", input="text")
    assert done.exit_code == 2 and "not stdin" in done.output
    done = lcr("index", str(doc), "--add", "--ray", "local")
    assert done.exit_code == 2 and "--add adds to the index given by -o" in done.output
    assert not (tmp_path / "doc0.idx").exists()


def test_a_folder_a_worker_does_not_share_is_refused(tmp_path: Path) -> None:
    """A worker on another node: the same paths on its own disk (a folder named alike,
    empty), so it sees no probe of the driver's and the driver none of its."""
    here, there = tmp_path / "here", tmp_path / "node2"
    (here / "books").mkdir(parents=True)
    source = here / "books" / "a.txt"
    source.write_text("text", encoding="utf-8")

    def other_node(request: ProbeRequest) -> list[ProbeReply]:
        moved = tuple(str(there / Path(f).relative_to("/")) for f in request.folders)
        for folder in moved:
            Path(folder).mkdir(parents=True, exist_ok=True)
        return [probe_here(ProbeRequest(request.token, moved), "10.0.0.2")]

    with pytest.raises(NotSharedError, match=r"books is not reachable from a Ray worker on node"):
        check_storage([here / "books"], [source], other_node)
    assert not list((here / "books").glob(".lcr-probe-*"))

    def same_node(request: ProbeRequest) -> list[ProbeReply]:
        return [probe_here(request)]

    check_storage([here / "books"], [source], same_node)  # shared: passes, leaves nothing
    assert sorted(p.name for p in (here / "books").iterdir()) == ["a.txt"]


def test_a_source_a_worker_sees_otherwise_is_refused(tmp_path: Path) -> None:
    """The folder is shared, but the worker's node holds another file under the name."""
    source = tmp_path / "a.txt"
    source.write_text("text", encoding="utf-8")

    def stale(request: ProbeRequest) -> list[ProbeReply]:
        sources = tuple((s, size + 1) for s, size in request.sources)
        return [probe_here(ProbeRequest(request.token, request.folders, sources), "n2")]

    with pytest.raises(
        NotSharedError, match=r"a\.txt is not reachable from a Ray worker on node n2"
    ):
        check_storage([tmp_path], [source], stale)


# ------------------------------------------------ one index over many (-o, --add)
def index_tree(idx: Path) -> dict[str, bytes]:
    """Every file of an index as ``diff -r`` sees it, the method folders named by their
    method (their suffix is random), the manifest without its times, and no LLM cache
    (each index signs its lines with a secret of its own)."""
    raw = json.loads((idx / "manifest.json").read_text(encoding="utf-8"))
    folders = {entry["dir"]: name for name, entry in raw["methods"].items()}
    out = {}
    for path in sorted(idx.rglob("*")):
        rel = path.relative_to(idx).as_posix()
        if path.is_file() and rel != "manifest.json" and not rel.startswith("cache/"):
            first, _, rest = rel.partition("/")
            out[f"{folders.get(first, first)}/{rest}" if rest else first] = path.read_bytes()
    out["manifest.json"] = json.dumps(timeless(raw), sort_keys=True, indent=1).encode()
    return out


def timeless(value: Any) -> Any:
    """A manifest without what differs between two runs of one build: when, how long,
    the random suffix of a method's folder."""
    if isinstance(value, dict):
        drop = {"created", "at", "built_at", "added", "build_seconds", "seconds", "dir"}
        return {k: timeless(v) for k, v in value.items() if k not in drop and not k.endswith("_s")}
    if isinstance(value, list):
        return [timeless(v) for v in value]
    return value


PAID = {"llm_usage", "llm_cached", "llm_calls", "llm_prompt_tokens", "llm_completion_tokens"}
PAID |= {"llm_batches", "llm_seconds"}  # what a build paid, and how long it took


def assert_same_tree(one: Path, two: Path, *, paid: bool = True) -> None:
    """``paid=False``: the builds' accounting aside (a resumed build paid less)."""
    a, b = index_tree(one), index_tree(two)
    assert sorted(a) == sorted(b)
    if not paid:
        for tree in (a, b):
            raw = json.loads(tree["manifest.json"])
            for entry in raw["methods"].values():
                entry["stats"] = {k: v for k, v in entry["stats"].items() if k not in PAID}
            tree["manifest.json"] = json.dumps(raw, sort_keys=True, indent=1).encode()
    differ = [rel for rel in a if a[rel] != b[rel]]
    assert differ == [], "\n".join(
        difflib.unified_diff(a[differ[0]].decode().splitlines(), b[differ[0]].decode().splitlines())
    )


@needs_ray
@pytest.mark.slow  # starts a Ray cluster
def test_one_index_over_many_is_read_on_the_cluster_and_is_a_serial_runs(
    cluster: None, tmp_path: Path
) -> None:
    docs = write_documents(tmp_path / "books", 5)
    methods = [a for m in METHODS for a in ("-m", m)]
    first, later = [str(tmp_path / "books" / "doc0.txt"), str(tmp_path / "books")], docs[3:]
    serial, ray_built = str(tmp_path / "serial.idx"), str(tmp_path / "ray.idx")
    walk = ["--exclude", "doc3.txt", "--exclude", "doc4.txt"]  # a file and a folder, named
    assert lcr("index", *first, *walk, "-o", serial, *methods, "-q").exit_code == 0
    done = lcr("index", *first, *walk, "-o", ray_built, "--ray", "local", *methods, "-q")
    assert done.exit_code == 0, done.output
    assert_same_tree(Path(serial), Path(ray_built))
    sources = json.loads((Path(ray_built) / "manifest.json").read_text())["sources"]
    assert len(sources) == 3, sources

    for target in (serial, ray_built):  # a collection that grows, read on the cluster
        ray_args = ["--ray", "local", "--workers", "2"] if target == ray_built else []
        done = lcr("index", *map(str, later), "-o", target, "--add", *ray_args)
        assert done.exit_code == 0, done.output
        assert "added doc3.txt, doc4.txt" in done.output, done.output
    assert_same_tree(Path(serial), Path(ray_built))
    assert not list((tmp_path / "books").glob(".lcr-probe-*")), "the storage probes are removed"

    (tmp_path / "books" / "bad.pdf").write_bytes(b"%PDF-1.7 not really a pdf")
    named = lcr("index", str(docs[0]), str(tmp_path / "books" / "bad.pdf"), "-o",
                str(tmp_path / "none.idx"), "--ray", "local", "-q")  # fmt: skip
    assert named.exit_code != 0 and "bad.pdf is not a readable PDF" in named.output
    assert len(named.output.splitlines()) == 1, named.output
    assert not (tmp_path / "none.idx").exists()  # nothing written: as serially


def test_workers_are_planned_from_what_the_cluster_offers() -> None:
    from lcr.cluster.pool import WorkerPlan, plan_workers
    from lcr.errors import UsageError

    def plan(cpus: int, gpus: int, node: int = 8, **kw: Any) -> WorkerPlan:
        return plan_workers(cpus, gpus, node, **{"asked": None, "tasks": 100, "llm": False, **kw})

    assert plan(8, 0) == WorkerPlan(8, 1, 0, 1)  # one per CPU
    assert plan(8, 2) == WorkerPlan(8, 1, 0, 1)
    assert plan(8, 2, llm=True) == WorkerPlan(2, 1, 1, 1)  # one per GPU
    assert plan(8, 0, llm=True) == WorkerPlan(8, 1, 0, 1)  # no GPU: as the others
    assert plan(8, 2, asked=1, llm=True) == WorkerPlan(1, 1, 1, 1)
    assert plan(8, 4, tasks=3, llm=True) == WorkerPlan(3, 1, 1, 1)
    assert plan(2, 0, 2, tasks=0) == WorkerPlan(1, 2, 0, 2)
    # fewer workers than CPUs: each an equal share, and as many threads, within a node
    assert plan(2, 0, 2, asked=1) == WorkerPlan(1, 2, 0, 2)
    assert plan(8, 0, 8, asked=3) == WorkerPlan(3, 2, 0, 2)
    assert plan(16, 0, 4, asked=2) == WorkerPlan(2, 4, 0, 4)  # two nodes of 4 (and 12)
    assert plan(8, 0, 8, tasks=2) == WorkerPlan(2, 4, 0, 4)
    # the driver's LCR_THREADS: each worker claims and runs that many
    assert plan(8, 0, threads=3) == WorkerPlan(2, 3, 0, 3)
    assert plan(8, 0, threads=2, asked=1) == WorkerPlan(1, 2, 0, 2)
    assert plan(8, 2, threads=2, llm=True) == WorkerPlan(2, 2, 1, 2)
    with pytest.raises(UsageError, match=r"^--workers 3: the cluster offers 2 GPUs, one for"):
        plan(8, 2, asked=3, llm=True)
    with pytest.raises(UsageError, match=r"^--workers 9: the cluster offers 8 CPUs, one for each"):
        plan(8, 0, asked=9)
    with pytest.raises(UsageError, match=r"^--workers 3: the cluster offers 8 CPUs, 3 for each "):
        plan(8, 0, asked=3, threads=3)
    with pytest.raises(UsageError, match=r"^LCR_THREADS=5: no node of the cluster has that many"):
        plan(16, 0, 4, threads=5)
    with pytest.raises(UsageError, match=r"^--ray x: the cluster offers no CPU"):
        plan(0, 0, address="x")


@needs_ray
@pytest.mark.slow  # starts a Ray cluster
def test_llm_workers_claim_the_gpu_and_others_a_cpu(cluster: None, tmp_path: Path) -> None:
    """The module's cluster declares one GPU (no hardware): a worker of an LLM method gets
    it, a bm25 worker a CPU; what Ray assigned, asked of the workers themselves."""
    import ray

    from lcr.cluster.build import run_on_cluster

    docs = write_documents(tmp_path, 3)
    jobs = cluster_jobs([(str(d), d.with_suffix(".idx"), False) for d in docs])
    seen = {
        llm: run_on_cluster("claims", jobs, recipe(), address="local", workers=None, llm=llm)
        for llm in (True, False)
    }
    assert ray.cluster_resources().get("GPU") == 1
    assert len({c.pop("pid") for c in seen[True]}) == 1  # one worker per GPU
    assert len({c.pop("pid") for c in seen[False]}) == 2  # one per CPU
    assert seen[True] == [{"CPU": 1.0, "GPU": 1.0, "threads": "1"}] * 3
    assert seen[False] == [{"CPU": 1.0, "threads": "1"}] * 3
    with pytest.raises(Exception, match=r"--workers 2: the cluster offers 1 GPU, one for each"):
        run_on_cluster("claims", jobs, recipe(), address="local", workers=2, llm=True)


@needs_ray
@pytest.mark.slow  # starts a Ray cluster
def test_each_worker_runs_as_many_threads_as_it_claims_cpus(
    cluster: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One worker on the module's two CPUs claims both and runs two threads, as an idle
    serial run would; two claim one each. The driver's LCR_THREADS reaches every worker
    (set after the cluster started: no worker could inherit it from its environment)."""
    from lcr.cluster.build import run_on_cluster

    docs = write_documents(tmp_path, 4)  # two tasks held by each of two workers
    jobs = cluster_jobs([(str(d), d.with_suffix(".idx"), False) for d in docs])

    def claims(workers: int | None) -> list[tuple[float, str]]:
        seen = run_on_cluster("claims", jobs, recipe(), address="local", workers=workers)
        return sorted({(c["CPU"], c["threads"], c["pid"]) for c in seen})

    monkeypatch.delenv("LCR_THREADS", raising=False)
    assert [c[:2] for c in claims(1)] == [(2.0, "2")]
    assert [c[:2] for c in claims(2)] == [(1.0, "1"), (1.0, "1")]
    monkeypatch.setenv("LCR_THREADS", "2")
    assert [c[:2] for c in claims(None)] == [(2.0, "2")]  # two threads each: one worker
    monkeypatch.setenv("LCR_THREADS", "1")
    assert [c[:2] for c in claims(1)] == [(1.0, "1")]
    done = lcr("index", *map(str, docs), "--ray", "local", "--workers", "2", "-q")
    assert done.exit_code == 0, done.output
    monkeypatch.setenv("LCR_THREADS", "2")
    done = lcr("index", *map(str, docs), "--ray", "local", "--workers", "2", "-q")
    assert done.exit_code == 2, done.output
    assert done.output == (
        "lcr: --workers 2: the cluster offers 2 CPUs, 2 for each worker (LCR_THREADS=2)\n"
    )


@needs_ray
@needs("smollm2-135m", "llamacpp")
@pytest.mark.slow  # starts a Ray cluster, answers with smollm2
def test_eval_and_ask_workers_claim_the_gpu_when_they_answer_with_a_local_llm(
    cluster: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The module's cluster declares one GPU: a worker answering with a local model holds
    it (so two are refused), one that only retrieves (eval --retrieval-only) does not."""
    import ray

    from lcr.cluster.questions import ask_on_cluster
    from lcr.pipeline.plans import plan_query
    from tests.conftest import FIXTURES

    monkeypatch.setenv("LCR_THREADS", "1")
    tale = FIXTURES / "cinderella.txt"
    index = tmp_path / "tale.idx"
    assert lcr("index", str(tale), "-o", str(index), "-m", "bm25", "-q").exit_code == 0
    model = ["--llm", "smollm2-135m", "--max-new-tokens", "4", "-m", "bm25"]
    done = lcr("ask", str(index), "-", *model, "--ray", "local", "--workers", "2", input="Who?\n")
    assert done.exit_code == 2, done.output
    assert done.output == (
        "lcr: --workers 2: the cluster offers 1 GPU, one for each worker running a local LLM\n"
    )
    data = tmp_path / "qa.jsonl"
    rows = [{"id": f"q{n}", "question": q, "answers": ["x"], "documents": [{"id": "tale"}]}
            for n, q in enumerate(["Who fell sick?", "Where did she sleep?"])]  # fmt: skip
    rows[0]["documents"][0]["text"] = tale.read_text(encoding="utf-8")
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = ["--out", str(tmp_path / "r.jsonl"), "--ray", "local", "--workers", "2", "-q"]
    done = lcr("eval", str(data), *model, *out)
    assert done.exit_code == 2 and "offers 1 GPU, one for each worker" in done.output
    done = lcr("eval", str(data), *model, *out, "--retrieval-only")
    assert done.exit_code == 0, done.output  # two workers: no GPU claimed

    free: list[float] = []

    def gpus_free(_done: object) -> None:
        free.append(ray.available_resources().get("GPU", 0))

    ask_on_cluster("local", None, ModelSpec(llm="smollm2-135m"), str(index),
                   plan_query("bm25", max_new_tokens=4), ["Who?", "Where?"],
                   show=lambda r: None, observe=gpus_free)  # fmt: skip
    assert free and set(free) == {0}, free  # the worker holds the one GPU while it answers


RAPTOR = ["-m", "raptor", "--llm", "smollm2-135m", "--set", "raptor.chunk_tokens=25",
          "--set", "raptor.summary_max_new_tokens=24", "-q"]  # fmt: skip


@needs_ray
@needs("smollm2-135m", "llamacpp")
@pytest.mark.slow  # starts a Ray cluster, builds RAPTOR twice with smollm2 (minutes)
def test_a_worker_killed_mid_build_pays_no_llm_call_twice(
    cluster: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """RAPTOR's summaries are cached as each is written: the worker is killed (SIGKILL)
    once the first is in the index's LLM cache, a fresh worker takes its place, the build
    starts over and reads that summary from the cache. The calls paid after the kill and the calls
    read from the cache add up to a serial build's calls, and the index is the serial's."""
    import psutil

    # the serial build and the worker run one llama.cpp thread each: their sums round alike
    monkeypatch.setenv("LCR_THREADS", "1")
    (doc,) = write_documents(tmp_path, 1)
    serial = tmp_path / "serial.idx"
    done = lcr("index", str(doc), "-o", str(serial), *RAPTOR)
    assert done.exit_code == 0, done.output
    paid = json.loads((serial / "manifest.json").read_text())["methods"]["raptor"]["stats"]
    assert paid["llm_usage"]["calls"] >= 2 and paid["llm_cached"] == 0, paid

    cache = doc.with_suffix(".idx") / "cache" / "raptor.jsonl"
    killed: list[int] = []
    stop = threading.Event()

    def kill_after_the_first_summary() -> None:
        while not stop.is_set() and not killed:
            if cache.is_file() and cache.read_text(encoding="utf-8").count("\n") >= 1:
                for proc in psutil.process_iter(["cmdline"]):
                    if "ray::BuildWorker" in " ".join(proc.info["cmdline"] or []):
                        proc.kill()
                        killed.append(proc.pid)
            time.sleep(0.05)

    watcher = threading.Thread(target=kill_after_the_first_summary, daemon=True)
    watcher.start()
    try:
        done = lcr("index", str(doc), "--ray", "local", *RAPTOR)
    finally:
        stop.set()
        watcher.join()
    assert done.exit_code == 0, done.output
    assert killed, "the worker was killed mid-build"
    after = json.loads((doc.with_suffix(".idx") / "manifest.json").read_text())
    stats = after["methods"]["raptor"]["stats"]
    assert stats["llm_cached"] >= 1, stats  # what the killed worker paid was not paid again
    assert stats["llm_usage"]["calls"] + stats["llm_cached"] == paid["llm_usage"]["calls"]
    assert_same_tree(serial, doc.with_suffix(".idx"), paid=False)


class Recorded:
    """A progress that keeps what the cluster run told its one bar."""

    def __init__(self) -> None:
        self.bars: list[str] = []
        self.done = 0.0

    def task(self, description: str, total: float | None = None) -> Recorded:
        self.bars.append(f"{description} /{total:g}")
        return self

    def advance(self, n: float = 1) -> None:
        self.done += n

    def update(self, *, total: float | None = None, description: str | None = None) -> None:
        if description is not None:
            self.bars.append(description)

    def log(self, message: str) -> None:
        return None


@needs_ray
@pytest.mark.slow  # starts a Ray cluster
def test_one_bar_counts_the_documents_and_the_workers_alive(cluster: None, tmp_path: Path) -> None:
    from lcr.cluster.build import run_on_cluster

    docs = write_documents(tmp_path, 4)
    jobs = cluster_jobs([(str(d), d.with_suffix(".idx"), False) for d in docs])
    bar = Recorded()
    run_on_cluster("claims", jobs, recipe(), address="local", workers=2, progress=bar)
    assert bar.bars == ["documents built /4", "documents built (2 of 2 workers alive)"]
    assert bar.done == 4


def test_estimate_prices_n_workers_longest_document_first(tmp_path: Path) -> None:
    from lcr.estimate.figures import Range
    from lcr.estimate.workers import longest_first, spread

    assert longest_first([5, 4, 3, 3, 3], 1) == 18
    assert longest_first([5, 4, 3, 3, 3], 2) == 10  # 5+3 | 4+3+3, longest first
    assert longest_first([5, 4, 3, 3, 3], 10) == 5  # the longest bounds it
    assert longest_first([], 3) == 0
    run = spread([Range(5, 8), Range(4, 4), Range(3, 6)], 2)
    assert (run.seconds, run.serial, run.longest) == (Range(7, 10), Range(12, 18), Range(5, 8))

    docs = write_documents(tmp_path, 3)
    for extra in ([], ["--ray", "nohost.invalid:1"]):  # priced with --ray too, none joined
        done = lcr("index", *map(str, docs), "--estimate", "--workers", "2", "-m", "bm25",
                   *extra)  # fmt: skip
        assert done.exit_code == 0, done.output
        last = " ".join(done.output.split("estimate for")[-1].split())
        assert "on 2 workers: " in last and "3 indexes, the longest" in last, done.output
    done = lcr("index", *map(str, docs), "--estimate", "--json", "--workers", "3", "-m", "bm25")
    assert done.exit_code == 0, done.output
    priced = json.loads(done.output.splitlines()[-1])
    assert priced["workers"] == 3 and priced["seconds"] == priced["longest_seconds"]
    assert not list(tmp_path.glob("*.idx"))
