"""``lcr eval --ray`` and ``lcr ask INDEX - --ray`` (lcr.cluster.questions, docs/cluster.md,
issue #74): on a local Ray cluster a 20-question eval with smollm2-135m (bm25 and mixpr)
writes the records of the serial run, in its order (timings and ``made_by`` aside, as
bench/eval_identity.py compares them), also when a worker is killed midway; ``ask -``
prints the serial answers in the input's order; the refusals are one line and exit 2;
without --ray, Ray is never imported.

One cluster for the module (``ray.init(num_cpus=2)``): the runs join it in-process.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from bench.eval_identity import stable
from lcr.cli.eval import eval_group
from lcr.cli.main import cli
from tests.conftest import FIXTURES
from tests.without_ray import in_process

REPO = Path(__file__).resolve().parents[1]
try:
    import ray  # noqa: F401

    HAVE_RAY = True
except ImportError:
    HAVE_RAY = False
needs_ray = pytest.mark.skipif(not HAVE_RAY, reason="needs the ray extra: pip install 'lcr[ray]'")

CINDERELLA = [
    ("Who fell sick at the start of the story?", "the wife of a rich man"),
    ("What did the mother ask her daughter to be?", "good and pious"),
    ("Where did the maiden go every day?", "her mother's grave"),
    ("What spread a white sheet over the grave?", "the snow"),
    ("How many daughters did the new wife bring?", "two"),
    ("What did the sisters put on her?", "an old grey bedgown"),
    ("What shoes was she given?", "wooden shoes"),
    ("Where did she have to sleep?", "by the hearth in the cinders"),
    ("What did the sisters empty into the ashes?", "peas and lentils"),
    ("Where was the father going?", "to the fair"),
    ("What did the first step-daughter ask for?", "beautiful dresses"),
    ("What did the second step-daughter ask for?", "pearls and jewels"),
    ("What did cinderella ask her father for?", "the first branch which knocks against your hat"),
    ("What brushed against the father in the thicket?", "a hazel twig"),
    ("Where did cinderella plant the branch?", "on her mother's grave"),
    ("What watered the branch?", "her tears"),
]
METHODS = ["-m", "bm25", "-m", "mixpr"]
MODEL = ["--llm", "smollm2-135m", "--device", "cpu", "--max-new-tokens", "12", "-k", "2"]


def write_questions(folder: Path) -> Path:
    """20 questions over real texts: 16 on a fairy tale (one index), and the SQuALITY
    and QMSum fixtures' own (two indexes), as `lcr eval prepare` converts them."""
    data = folder / "qa.jsonl"
    lines = []
    tale = (FIXTURES / "cinderella.txt").read_text(encoding="utf-8")
    for n, (question, answer) in enumerate(CINDERELLA):
        doc: dict[str, str] = {"id": "cinderella"}
        if n == 0:
            doc.update(title="Cinderella", text=tale)
        lines.append({"id": f"c{n}", "question": question, "answers": [answer], "documents": [doc]})
    for kind in ("squality", "qmsum"):
        out = folder / f"{kind}.jsonl"
        done = CliRunner().invoke(
            eval_group, ["prepare", kind, str(FIXTURES / f"{kind}.jsonl"), "-o", str(out), "-q"]
        )
        assert done.exit_code == 0, done.output
        lines += [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    data.write_text("".join(json.dumps(q) + "\n" for q in lines), encoding="utf-8")
    assert len(lines) == 20
    return data


def stable_lines(path: Path, ids: set[str] | None = None) -> list[str]:
    """Each record as bench/eval_identity.py compares it, in the file's order (those of
    the questions ``ids`` names)."""
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        record = stable(json.loads(line))
        if ids is None or record["id"] in ids:
            lines.append(json.dumps(record, sort_keys=True))
    return lines


def eval_args(data: Path, out: Path) -> list[str]:
    folder = out.with_suffix(".indexes")
    return ["eval", str(data), *METHODS, *MODEL, "--out", str(out), "--index-dir", str(folder)]


@pytest.fixture(scope="module", autouse=True)
def one_thread() -> Iterator[None]:
    """llama.cpp's sums round by thread count, and its thread governor picks the count
    from the machine's load: the serial run and the workers (Ray gives each one CPU)
    must use the same count to answer alike, so both are fixed at one."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LCR_THREADS", "1")
        yield


@pytest.fixture(scope="module")
def serial(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The serial run's results, made without --ray (and without importing Ray)."""
    folder = tmp_path_factory.mktemp("serial")
    data = write_questions(folder)
    in_process([*eval_args(data, folder / "serial.jsonl"), "-q", "--json"])
    return folder


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def lcr(*args: str, stdin: str | None = None) -> Any:
    return CliRunner().invoke(cli, list(args), input=stdin)


@needs_ray
@pytest.mark.slow  # a Ray cluster and smollm2 answers
def test_eval_on_the_cluster_resumed_with_a_worker_killed_writes_the_serial_records(
    serial: Path, cluster: None, tmp_path: Path
) -> None:
    """One pass over the 20 questions (CI's time is short): the first 6 by the command,
    the other 14 resumed through the API with a worker killed midway; the file is the
    serial run's, record for record and in its order."""
    from lcr.cluster.questions import Done, eval_executor
    from lcr.eval import runner
    from lcr.models.container import Models
    from lcr.models.spec import ModelSpec

    data = write_questions(tmp_path)
    out = tmp_path / "ray.jsonl"
    report = tmp_path / "ray.html"
    done = lcr(*eval_args(data, out), "--ray", "local", "--workers", "2", "-q",
               "--limit", "6", "--report", str(report))  # fmt: skip
    assert done.exit_code == 0, done.output
    assert report.is_file()
    want = stable_lines(serial / "serial.jsonl")
    assert len(want) == 40 and stable_lines(out) == want[:12]

    pids: list[int] = []
    killed: list[int] = []

    def kill_first(done: Done) -> None:  # its worker holds its next batch: SIGKILL
        if done.values and not killed:
            os.kill(done.worker_pid, signal.SIGKILL)
            killed.append(done.worker_pid)
        pids.append(done.worker_pid)

    spec = ModelSpec(llm="smollm2-135m", device="cpu")
    opts = runner.RunOptions(
        methods=["bm25", "mixpr"], k=2, max_new_tokens=12, out=out,
        index_dir=out.with_suffix(".indexes"),
    )  # fmt: skip
    execute = eval_executor("local", 2, spec, observe=kill_first)
    outcome = runner.run(data, Models(spec=spec), opts, execute=execute)
    assert (outcome.new, outcome.skipped) == (28, 12)
    assert len(set(pids)) == 3, "the killed worker's place taken by a new process"
    assert stable_lines(out) == want

    again = lcr(*eval_args(data, out), "--ray", "local", "-q", "--json")
    assert again.exit_code == 0, again.output  # a rerun skips every question
    assert json.loads(again.output.splitlines()[-1])["skipped"] == 40
    assert stable_lines(out) == want


@needs_ray
@pytest.mark.slow  # a Ray cluster and smollm2 answers
def test_ask_stdin_on_the_cluster_prints_the_serial_answers_in_order(
    serial: Path, cluster: None
) -> None:
    index = next((serial / "serial.indexes").glob("cinderella-*.idx"))
    asked = "".join(q + "\n" for q, _ in CINDERELLA[:5])
    args = ["ask", str(index), "-", "-m", "bm25", *MODEL, "-q", "--answer-only"]
    here, _ = in_process(args, stdin=asked)
    assert here.strip()
    done = lcr(*args, "--ray", "local", "--workers", "2", stdin=asked)
    assert done.exit_code == 0, done.output
    assert done.output == here


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--ray", "garbage"], "is not an address"),
        (["--ray", "127.0.0.1:1"], "no Ray head reachable there"),
        (["--workers", "2"], "give --ray ADDRESS too"),
    ],
)
def test_eval_refusals_are_one_line_and_exit_2(tmp_path: Path, args: list[str], says: str) -> None:
    data = write_questions(tmp_path)
    out = tmp_path / "r.jsonl"
    done = lcr(*eval_args(data, out), *args, "-q")
    assert done.exit_code == 2, done.output
    assert len(done.output.splitlines()) == 1 and says in done.output, done.output
    assert not out.exists()


def test_ask_refusals_are_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = tmp_path / "tale.idx"
    built = lcr("index", str(FIXTURES / "cinderella.txt"), "-o", str(index), "-m", "bm25", "-q")
    assert built.exit_code == 0, built.output
    question = ["ask", str(index), "Who?", "--answer-only"]
    done = lcr(*question, "--ray", "local")
    assert done.exit_code == 2 and "questions of stdin" in done.output, done.output
    done = lcr("ask", str(index), "-", "--ray", "nohost.invalid:6379", stdin="Who?\n")
    assert done.exit_code == 2, done.output
    assert done.output == "lcr: --ray nohost.invalid:6379: no Ray head reachable there " \
        "(the host nohost.invalid is not known)\n"  # fmt: skip
    done = lcr("ask", str(index), "-", "--workers", "2", stdin="Who?\n")
    assert done.exit_code == 2 and "give --ray ADDRESS too" in done.output
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails, as uninstalled
    done = lcr("ask", str(index), "-", "--ray", "local", stdin="Who?\n")
    assert done.exit_code == 2
    assert done.output == "lcr: --ray needs Ray, an optional extra: pip install 'lcr[ray]'\n"
    data = write_questions(tmp_path)
    done = lcr(*eval_args(data, tmp_path / "r.jsonl"), "--ray", "local", "-q")
    assert done.exit_code == 2
    assert done.output == "lcr: --ray needs Ray, an optional extra: pip install 'lcr[ray]'\n"


class _Died(Exception):
    """Ray's ``RayActorError`` in :class:`_FakeRay`: the actor's process is gone."""


class _FakeRay:
    """Just enough of Ray for :class:`lcr.cluster.pool.Pool`'s control flow: each call
    runs when it is waited for, the newest worker's first (so tasks finish out of their
    order), each worker's in the order they were sent, and an actor whose ``dead`` is
    set fails every call as a dead worker's would."""

    class exceptions:  # as Ray names it
        RayError = RuntimeError
        RayActorError = _Died

    def __init__(self) -> None:
        self.calls: list[tuple[int, str, tuple[Any, ...]]] = []
        self.killed: list[Any] = []

    def wait(
        self, refs: list[Any], num_returns: int, timeout: float | None = None
    ) -> tuple[list[Any], list[Any]]:
        first = next(r for r in refs if r[0] is refs[-1][0])
        return [first], [r for r in refs if r is not first]

    def get(self, ref: Any) -> Any:
        actor, method, args = ref
        if actor.dead:
            raise _Died(method)
        self.calls.append((actor.number, method, args))
        return (method, *args)

    def kill(self, actor: Any, no_restart: bool = True) -> None:
        actor.dead = True
        self.killed.append(actor)


class _FakeActor:
    made = 0

    def __init__(self) -> None:
        self.number = _FakeActor.made
        _FakeActor.made += 1
        self.dead = False

    def __getattr__(self, method: str) -> Any:
        actor = self

        class Call:
            @staticmethod
            def remote(*args: Any) -> Any:
                return (actor, method, args)

        return Call


def test_the_pool_keeps_each_batch_after_its_build_and_retries_a_dead_workers_tasks() -> None:
    from lcr.cluster.pool import RETRIES, Pool, Task, TaskFailed

    fake = _FakeRay()
    pool = Pool(fake, _FakeActor, 2)
    tasks = [Task(0, "build", ("a",), "a"), Task(1, "build", ("b",), "b")]
    tasks += [Task(2 + n, "answer", (n,), f"batch {n}", after=n % 2) for n in range(4)]
    seen: list[Any] = []

    def on_done(task: Task, value: Any) -> None:
        seen.append(value)
        if value == ("answer", 0):  # the worker that answered it dies with its next task
            for actor in pool.actors:
                actor.dead = actor.dead or actor.number == fake.calls[-1][0]

    pool.run(tasks, on_done)
    assert sorted(seen) == sorted((t.method, *t.args) for t in tasks)  # each once
    for n in range(4):  # no batch before its index's build
        build = next(i for i, v in enumerate(seen) if v == ("build", "ab"[n % 2]))
        assert seen.index(("answer", n)) > build
    assert pool.replaced == 1 and len(fake.killed) == 1
    assert fake.calls[-1][0] == _FakeActor.made - 1, "the rest ran on the fresh worker"

    doomed = Pool(fake, _FakeActor, 1)
    for actor in doomed.actors:
        actor.dead = True
    real_make = doomed.make

    def make_dead() -> Any:
        actor = real_make()
        actor.dead = True
        return actor

    doomed.make = make_dead
    with pytest.raises(TaskFailed, match=rf"^only: its worker died {RETRIES + 1} times"):
        doomed.run([Task(0, "answer", (), "only")], lambda task, value: None)


def test_with_on_failed_a_task_failed_for_good_is_told_and_the_others_finish() -> None:
    """As ``lcr index --ray`` runs its builds: a document whose every worker dies under
    it is reported, the others are built."""
    from lcr.cluster.pool import RETRIES, Pool, Task

    fake = _FakeRay()
    real_wait = fake.wait

    def wait(refs: list[Any], num_returns: int, timeout: float | None = None) -> Any:
        for ref in refs:  # "poison" runs (its worker's oldest) and takes the worker down
            if ref[2] == ("poison",) and ref is next(r for r in refs if r[0] is ref[0]):
                ref[0].dead = True
        dead = [r for r in refs if r[0].dead]  # a dead worker's calls fail in any order
        if dead:
            return [dead[-1]], [r for r in refs if r is not dead[-1]]
        return real_wait(refs, num_returns)

    fake.wait = wait  # type: ignore[method-assign]
    pool = Pool(fake, _FakeActor, 2)
    # "a" waits behind "poison" on its worker, dies with it, and is not charged for it
    tasks = [Task(n, "build", (name,), name) for n, name in enumerate(["poison", "a", "b", "c"])]
    done: list[Any] = []
    failed: list[tuple[str, str]] = []
    pool.run(
        tasks, lambda t, v: done.append(v), on_failed=lambda t, why: failed.append((t.label, why))
    )
    assert sorted(done) == [("build", "a"), ("build", "b"), ("build", "c")]
    assert failed == [("poison", f"its worker died {RETRIES + 1} times (_Died)")]
    assert pool.replaced == RETRIES + 1
    assert [t.deaths for t in tasks] == [RETRIES + 1, 0, 0, 0]  # "a" died with it, uncharged


def test_each_question_is_answered_with_the_prompt_cache_forgotten(tmp_path: Path) -> None:
    """A record is its question's alone: asked after another question (whose prompt
    starts as its own) or in a process of its own, the same record. llama.cpp would
    otherwise reuse the shared start from its cache, computed with other rounding,
    and answer this question otherwise (smollm2 did, before lcr forgot the cache), so
    a cluster's worker, a resumed run and a whole serial run would differ."""
    from bench.eval_identity import stable
    from lcr.eval import runner
    from lcr.models.container import Models
    from lcr.models.spec import ModelSpec
    from tests.conftest import require

    require("smollm2-135m")
    tale = (FIXTURES / "cinderella.txt").read_text(encoding="utf-8")
    doc = {"id": "cinderella", "title": "Cinderella", "text": tale}
    both = tmp_path / "both.jsonl"
    lines = [
        {"id": f"c{n}", "question": CINDERELLA[n][0], "answers": [CINDERELLA[n][1]],
         "documents": [doc if n == 5 else {"id": "cinderella"}]}
        for n in (5, 6)
    ]  # fmt: skip
    both.write_text("".join(json.dumps(q) + "\n" for q in lines), encoding="utf-8")
    alone = tmp_path / "alone.jsonl"
    alone.write_text(json.dumps({**lines[1], "documents": [doc]}) + "\n", encoding="utf-8")
    records = {}
    for data in (both, alone):
        opts = runner.RunOptions(
            methods=["bm25", "mixpr"], k=2, max_new_tokens=12, out=data.with_suffix(".out")
        )
        spec = ModelSpec(llm="smollm2-135m", device="cpu")
        got = runner.run(data, Models(spec=spec), opts).records  # a fresh model each
        records[data.stem] = [stable(r) for r in got if r["id"] == "c6"]
    assert records["both"] == records["alone"]
    assert [r["usage"]["cached_tokens"] for r in records["both"]] == [0, 0]


def test_the_workers_alive_are_counted_once_a_second_not_once_a_task() -> None:
    """Counting them asks Ray's control store of every worker: on short tasks, once a
    task would cost the driver more than the tasks."""
    from lcr.cluster.pool import ALIVE_S, Pool, Task
    from tests.test_cluster import Recorded

    class Counted(Pool):
        asked = 0

        def _count_alive(self) -> int:
            Counted.asked += 1
            return len(self.actors)

    waits: list[float | None] = []
    fake = _FakeRay()
    real_wait = fake.wait

    def wait(refs: list[Any], num_returns: int, timeout: float | None = None) -> Any:
        waits.append(timeout)
        return real_wait(refs, num_returns)

    fake.wait = wait  # type: ignore[method-assign]
    bar = Recorded()
    pool = Counted(fake, _FakeActor, 2)
    pool.run([Task(n, "answer", (n,)) for n in range(200)], lambda t, v: bar.advance(),
             bar=bar, noun="questions answered")  # fmt: skip
    assert Counted.asked == 1  # 200 tasks well within a second
    assert bar.bars == ["questions answered (2 of 2 workers alive)"] and bar.done == 200
    assert all(w is not None and 0 <= w <= ALIVE_S for w in waits)  # a wait ends for the next


@needs_ray
@pytest.mark.slow  # a Ray cluster and smollm2 answers
def test_eval_and_ask_show_one_bar_of_questions_answered_and_workers_alive(
    serial: Path, cluster: None, tmp_path: Path
) -> None:
    """As a serial eval's bar, eval's counts the records written; ask -'s the answers
    shown; each says the workers alive, as lcr index --ray's does."""
    from lcr.cluster.questions import ask_on_cluster, eval_executor
    from lcr.eval import runner
    from lcr.models.container import Models
    from lcr.models.spec import ModelSpec
    from lcr.pipeline.plans import plan_query
    from tests.test_cluster import Recorded

    data = write_questions(tmp_path)
    spec = ModelSpec(llm="smollm2-135m", device="cpu")
    opts = runner.RunOptions(methods=["bm25", "mixpr"], retrieval_only=True, limit=4,
                             out=tmp_path / "r.jsonl", index_dir=tmp_path / "indexes")  # fmt: skip
    bar = Recorded()
    execute = eval_executor("local", 2, spec)
    runner.run(data, Models(spec=spec), opts, progress=bar, execute=execute)
    assert bar.bars == ["eval /8", "questions answered (2 of 2 workers alive)"]
    assert bar.done == 8

    index = next((serial / "serial.indexes").glob("cinderella-*.idx"))
    bar = Recorded()
    shown: list[Any] = []
    ask_on_cluster("local", 1, spec, str(index), plan_query("bm25", max_new_tokens=4),
                   ["Who?", "Where?", "When?"], show=shown.append, progress=bar)  # fmt: skip
    assert len(shown) == 3 and bar.done == 3
    assert bar.bars == ["questions answered /3", "questions answered (1 of 1 workers alive)"]
