"""``lcr eval --ray`` and ``lcr ask INDEX - --ray``: batches of questions answered by
Ray actors that load their models once, the results put back in the order a serial
run makes them.

``lcr eval``: each index the run needs is one task first (its build, every method,
as :func:`lcr.eval.runner.build_group` makes it serially), then its questions go out
in batches (:func:`lcr.eval.runner.answer_group` on the worker). The records come
back per batch and are written in the serial order, each as soon as every one before
it is written. ``lcr ask -``: the questions of stdin in batches against one index,
each answer printed in the input's order.

Faults (:mod:`lcr.cluster.pool`): a dead worker's tasks run again on a fresh worker;
a task that fails for good (an LLM error, a missing model) stops the run with its
one line, as a serial run stops, after the records of every batch that finished are
written; Ctrl-C ends every worker. Ray is imported only through
:func:`lcr.cluster.connect.connect`.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lcr.cluster.pool import IN_FLIGHT, Task, pool_on
from lcr.cluster.worker import Worker
from lcr.errors import LcrError
from lcr.models.spec import ModelSpec
from lcr.progress import NULL_PROGRESS, Progress

if TYPE_CHECKING:
    from lcr.eval.dataset import Question
    from lcr.eval.runner import EvalWork, Execute, MethodPlan
    from lcr.pipeline import Result
    from lcr.pipeline.plans import QueryPlan

MAX_BATCH = 8  # questions in one task at most: a dead worker loses this much work


class TaskError(LcrError):
    """A task's own failure, said on the worker: its message and exit code as they were."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass
class Done:
    """What a task returns: its values (records, results), the notes it said, and the
    worker's process (a test kills it); ``error``/``exit_code`` when it failed."""

    worker_pid: int
    values: list[Any] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: str = ""
    exit_code: int = 0


def batch_size(questions: int, workers: int) -> int:
    """Questions per task: every worker kept busy, none holding more than MAX_BATCH."""
    return max(1, min(MAX_BATCH, math.ceil(questions / (IN_FLIGHT * max(1, workers)))))


def _task(work: Callable[[list[str]], list[Any]]) -> Done:
    """A task run on a worker, its failure as a value, in one line, never a traceback."""
    notes: list[str] = []
    try:
        return Done(os.getpid(), work(notes), notes)
    except LcrError as exc:
        return Done(os.getpid(), [], notes, " ".join(str(exc).split()), exc.exit_code)
    except Exception as exc:  # a bug: still one line
        return Done(os.getpid(), [], notes, f"{type(exc).__name__}: {exc}", 1)


# ------------------------------------------------------------------------ lcr eval
@dataclass(frozen=True)
class EvalRecipe:
    """What every eval worker plans its run from, as the driver planned it."""

    spec: ModelSpec
    methods: tuple[str, ...]
    k: int | None
    retrieval_only: bool
    sets: tuple[str, ...]
    max_new_tokens: int
    command: str | None
    index_dir: str
    building: tuple[str, ...]  # the methods the run builds (their binding is the run's)
    keys: tuple[str, ...]  # the run keys the driver planned: each planned alike here


class EvalWorker(Worker):
    """One eval worker: the run planned and the models bound on its first task, kept
    (loaded once) for every later one."""

    def __init__(self, threads: int, recipe: EvalRecipe) -> None:
        super().__init__(threads)
        self.recipe = recipe
        self._work: EvalWork | None = None
        self._plans: dict[str, MethodPlan] = {}
        self._notes: list[str] = []

    def _ready(self) -> EvalWork:
        if self._work is None:
            from lcr.eval.runner import EvalWork, RunOptions, plan_methods, plan_run_builds
            from lcr.models.container import Models

            r = self.recipe
            opts = RunOptions(
                methods=list(r.methods),
                k=r.k,
                retrieval_only=r.retrieval_only,
                sets=list(r.sets),
                max_new_tokens=r.max_new_tokens,
                index_dir=Path(r.index_dir),
                note=self._notes.append,
                command=r.command,
            )
            models = Models(spec=r.spec)
            plans = plan_methods(opts.methods, models, opts)
            if not set(r.keys) <= {p.key for p in plans}:
                raise LcrError(
                    "a Ray worker plans this run otherwise than this machine: every node "
                    "needs the same lcr, extras and models"
                )
            builds, models = plan_run_builds(plans, r.building, models)
            self._plans = {p.key: p for p in plans}
            self._work = EvalWork([], set(), builds, models, Path(r.index_dir), opts)
        return self._work

    def build(self, group: list[Question], keys: tuple[str, ...]) -> Done:
        """The group's index created, and built with the plans ``keys`` name."""
        from lcr.eval.runner import build_group

        def work(notes: list[str]) -> list[Any]:
            run = self._ready()
            build_group(group, [self._plans[k] for k in keys], run)
            return []

        return _task(work)

    def answer(
        self,
        group: list[Question],
        positions: list[int],
        todo: list[tuple[str, str]],
        keys: tuple[str, ...],
    ) -> Done:
        """The records of the group's questions at ``positions`` x the plans ``keys``
        name, for the (question, run) pairs in ``todo``, in the serial order."""
        from lcr.eval.runner import answer_group, open_index

        def work(notes: list[str]) -> list[Any]:
            run = dataclasses.replace(self._ready(), todo=set(todo))
            index = open_index(group[0], run.index_dir)
            asked = [group[i] for i in positions]
            records = list(answer_group(index, asked, [self._plans[k] for k in keys], run))
            notes += self._notes
            self._notes.clear()
            return records

        return _task(work)


def eval_executor(
    address: str,
    workers: int | None,
    spec: ModelSpec,
    *,
    note: Callable[[str], None] = lambda message: None,
    observe: Callable[[Done], None] | None = None,
) -> Execute:
    """An executor for :func:`lcr.eval.runner.run` that does the work on the cluster
    ``address`` names; ``observe`` hears of each task's result (a test kills a worker)."""

    def execute(work: EvalWork, write: Callable[[dict[str, Any]], None]) -> None:
        _eval(address, workers, spec, work, write, note, observe)

    return execute


def _eval_tasks(work: EvalWork, workers: int, put: Callable[[Any], Any]) -> list[Task]:
    """One build per group, then its batches, numbered in the serial order."""
    from lcr.eval.runner import index_path

    builds: list[Task] = []
    batches: list[Task] = []
    pending = sum(
        1 for g, plans in work.groups for q in g if any((q.id, p.key) in work.todo for p in plans)
    )
    size = batch_size(pending, workers)
    for number, (group, plans) in enumerate(work.groups):
        shared = put(group)  # sent to the cluster once, read by each task of the group
        keys = tuple(p.key for p in plans)
        name = index_path(group[0], work.index_dir).name
        builds.append(Task(number, "build", (shared, keys), f"the index {name}"))
        asked = [i for i, q in enumerate(group) if any((q.id, p.key) in work.todo for p in plans)]
        for start in range(0, len(asked), size):
            positions = asked[start : start + size]
            todo = [
                (group[i].id, k) for i in positions for k in keys if (group[i].id, k) in work.todo
            ]
            first, last = group[positions[0]].id, group[positions[-1]].id
            label = (
                f"questions {first}..{last} on {name}"
                if first != last
                else f"question {first} on {name}"
            )
            batches.append(Task(0, "answer", (shared, positions, todo, keys), label, number))
    for n, task in enumerate(batches):
        task.number = len(builds) + n
    return builds + batches


def _eval(
    address: str,
    workers: int | None,
    spec: ModelSpec,
    work: EvalWork,
    write: Callable[[dict[str, Any]], None],
    note: Callable[[str], None],
    observe: Callable[[Done], None] | None,
) -> None:
    finished: dict[int, list[dict[str, Any]]] = {}  # batch number -> its records
    written = [len(work.groups)]  # the batches written so far: every one numbered below
    said: set[str] = set()
    asked = sum(len(g) for g, _ in work.groups)
    llm = not spec.base_url and any("llm" in p.models for _, plans in work.groups for p in plans)
    work.index_dir.mkdir(parents=True, exist_ok=True)

    def on_done(task: Task, done: Done) -> None:
        _relay(done, said, note, observe)
        if task.method == "build":
            return
        finished[task.number] = done.values
        while written[0] in finished:  # every record as soon as all before it are
            for rec in finished.pop(written[0]):
                write(rec)
            written[0] += 1

    try:
        with pool_on(address, workers, EvalWorker, (_eval_recipe(spec, work),), tasks=asked,
                     llm=llm, folders=[work.index_dir]) as pool:  # fmt: skip
            tasks = _eval_tasks(work, len(pool.actors), pool.ray.put)
            pool.run(tasks, on_done, bar=work.bar, noun="questions answered")
    except BaseException:
        for number in sorted(finished):  # what finished is kept: a rerun skips it
            for rec in finished[number]:
                write(rec)
        raise


def _eval_recipe(spec: ModelSpec, work: EvalWork) -> EvalRecipe:
    opts = work.opts
    keys = tuple(dict.fromkeys(p.key for _, plans in work.groups for p in plans))
    return EvalRecipe(
        spec,
        tuple(opts.methods),
        opts.k,
        opts.retrieval_only,
        tuple(opts.sets),
        opts.max_new_tokens,
        opts.command,
        str(Path(os.path.abspath(work.index_dir))),
        tuple(work.builds),
        keys,
    )


# ------------------------------------------------------------------- lcr ask -
def _lines(start: int, size: int, total: int) -> str:
    last = min(start + size, total)
    return f"question {last}" if last == start + 1 else f"questions {start + 1}-{last}"


class AskWorker(Worker):
    """One ``ask`` worker: the index opened and the models loaded on its first batch."""

    def __init__(self, threads: int, spec: ModelSpec, index: str, plan: QueryPlan) -> None:
        super().__init__(threads)
        self.spec = spec
        self.index_path = index
        self.plan = plan
        self._state: tuple[Any, Any] | None = None

    def ask(self, questions: list[str]) -> Done:
        from lcr import pipeline
        from lcr.pipeline.fresh import forget_prompts

        def work(notes: list[str]) -> list[Any]:
            if self._state is None:
                from lcr.models.container import Models
                from lcr.store import Index

                index = Index.open(self.index_path)
                index.reader(self.plan.method.name)
                self._state = (index, Models(spec=self.spec))
            index, models = self._state
            results = []
            for question in questions:
                forget_prompts(models)  # as a serial ask - does: lcr.pipeline.fresh
                asked = pipeline.ask_query(index, self.plan, question, models, note=notes.append)
                results.append(asked)
            return results

        return _task(work)


def ask_on_cluster(
    address: str,
    workers: int | None,
    spec: ModelSpec,
    index: str,
    plan: QueryPlan,
    questions: Sequence[str],
    *,
    show: Callable[[Result], None],
    note: Callable[[str], None] = lambda message: None,
    progress: Progress = NULL_PROGRESS,
    observe: Callable[[Done], None] | None = None,
) -> None:
    """Each of ``questions`` asked of ``index`` on the cluster, ``show`` told of each
    result in the questions' order, as soon as every one before it is shown."""
    if not questions:
        return
    finished: dict[int, list[Result]] = {}
    shown = [0]
    said: set[str] = set()
    noun = "questions answered"
    bar = progress.task(noun, total=len(questions))

    def on_done(task: Task, done: Done) -> None:
        _relay(done, said, note, observe)
        finished[task.number] = done.values
        while shown[0] in finished:
            for result in finished.pop(shown[0]):
                show(result)
                bar.advance()
            shown[0] += 1

    path = os.path.abspath(index)
    manifest = [Path(path) / "manifest.json"]
    with pool_on(address, workers, AskWorker, (spec, path, plan), tasks=len(questions),
                 llm=not spec.base_url, sources=manifest) as pool:  # fmt: skip
        size = batch_size(len(questions), len(pool.actors))
        tasks = [
            Task(n, "ask", (list(questions[s : s + size]),), _lines(s, size, len(questions)))
            for n, s in enumerate(range(0, len(questions), size))
        ]
        pool.run(tasks, on_done, bar=bar, noun=noun)


def _relay(
    done: Done,
    said: set[str],
    note: Callable[[str], None],
    observe: Callable[[Done], None] | None,
) -> None:
    """A finished task's notes said once each, shown to ``observe``; its error raised."""
    for message in done.notes:
        if message not in said:
            said.add(message)
            note(message)
    if observe is not None:
        observe(done)
    if done.error:
        raise TaskError(done.error, done.exit_code)
