"""One route for a query (issue 38): every ``--set`` is parsed once per run, however
many questions; each build's needs are checked once per method; and the models a
phase binds (the index's embedder, a method's scorer) never change the caller's."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from lcr import api, config, pipeline
from lcr.cli.eval import eval_group
from lcr.cli.main import cli
from lcr.cli.models import Seams
from lcr.config import value_text
from lcr.methods import get_method
from lcr.methods.base import Needs
from lcr.models.base import Capability
from lcr.models.container import Models
from lcr.models.hashing import HashingEmbedder
from lcr.models.spec import ModelSpec
from lcr.pipeline.plans import parse_sets
from lcr.store import Index
from lcr.testing import ScriptedLLM, sample_text

QUESTIONS = ["Who found the golden slipper?", "Where was the silver dress?", "Who lost a lentil?"]
SETS = ["--set", "bm25.top_k=2", "--set", "answer.order=document"]  # one a phase, one answer's


def scripted(spec: ModelSpec, progress: Any) -> Models:
    return Models.with_objects(llm=ScriptedLLM(), embedder=HashingEmbedder(64), spec=spec)


def lcr(args: list[str], stdin: str | None = None) -> str:
    result = CliRunner().invoke(cli, args, input=stdin, obj=Seams(scripted))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    assert result.exit_code == 0, result.stderr
    return result.stdout


def count_parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every ``--set`` text read (split into method, key and value), in order."""
    parsed: list[str] = []
    real = config.split_assignment

    def split_assignment(text: str) -> tuple[str, str, str]:
        parsed.append(text)
        return real(text)

    monkeypatch.setattr(config, "split_assignment", split_assignment)
    return parsed


@pytest.fixture()
def text(tmp_path: Path) -> Path:
    path = tmp_path / "tale.txt"
    path.write_text(sample_text(), encoding="utf-8")
    return path


def test_ask_of_several_questions_parses_each_set_once(
    text: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    idx = tmp_path / "tale.idx"
    lcr(["index", str(text), "-o", str(idx), "-q"])
    parsed = count_parses(monkeypatch)
    out = lcr(["ask", str(idx), "-", "--json", *SETS], stdin="\n".join(QUESTIONS) + "\n")
    results = [json.loads(line) for line in out.splitlines()]
    assert [r["question"] for r in results] == QUESTIONS
    # bm25.top_k=2 read (bm25's default selection reads pieces of those 2 chunks: the
    # setting, like -k, wins over answer.pool)
    assert all(len({e["id"].split("[")[0] for e in r["evidence"]}) <= 2 for r in results)
    assert all(r["answer_settings"]["order"] == "document" for r in results)
    assert sorted(parsed) == ["answer.order=document", "bm25.top_k=2"]


def test_an_ask_reads_its_methods_build_once_a_question(
    text: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 71: the method's reader is looked up once a question by the pipeline (for
    the index's embedder and the retrieval alike), besides the command's check before
    any model loads: not once for each."""
    idx = tmp_path / "tale.idx"
    lcr(["index", str(text), "-o", str(idx), "-q"])
    asked: list[str] = []
    real = Index.reader

    def reader(self: Index, name: str) -> Any:
        asked.append(name)
        return real(self, name)

    monkeypatch.setattr(Index, "reader", reader)
    out = lcr(["ask", str(idx), "-", "--json"], stdin="\n".join(QUESTIONS[:2]) + "\n")
    assert len(out.splitlines()) == 2
    assert asked == ["bm25"] * 3  # the command's check, then one a question
    asked.clear()
    lcr(["retrieve", str(idx), QUESTIONS[0], "--json"])
    assert asked == ["bm25"] * 2


def test_eval_of_several_questions_and_methods_parses_each_set_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "niah.jsonl"
    made = CliRunner().invoke(
        eval_group,
        ["generate", "niah-multikey", "--length", "2000", "--count", "3", "-o", str(data)],
    )
    assert made.exit_code == 0, made.output
    parsed = count_parses(monkeypatch)
    args = ["eval", "run", str(data), "-m", "bm25", "-m", "tfidf", "-q", "--json", *SETS]
    lcr([*args, "--out", str(tmp_path / "r.jsonl")])
    records = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert len(records) == 6  # three questions, two methods, each answered
    assert {r["settings"]["query"]["top_k"] for r in records if r["method"] == "bm25"} == {2}
    assert sorted(parsed) == ["answer.order=document", "bm25.top_k=2"]


def test_index_checks_each_methods_needs_once(
    text: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``require`` (the backends can do what a build needs) runs once per method, not
    once in ``index_files`` and twice more in ``build``."""
    purposes: list[str] = []
    real = Models.requiring

    def requiring(self: Models, role: Any, needs: Any, purpose: str) -> Models:
        purposes.append(purpose)
        return real(self, role, needs, purpose)

    monkeypatch.setattr(Models, "requiring", requiring)
    names = ["lightpal", "graphreader"]  # each needs the LLM to build
    quick = [
        f"--set={name}.{key}={value_text(value)}"
        for name in names
        for key, value in get_method(name).quick_build_settings.items()
    ]
    methods = [arg for name in names for arg in ("-m", name)]
    lcr(["index", str(text), "-o", str(tmp_path / "t.idx"), "-q", *methods, *quick])
    assert Counter(purposes) == {"building lightpal": 1, "building graphreader": 1}
    assert set(Index.open(tmp_path / "t.idx").methods) == set(names)


def test_a_query_binds_the_indexs_embedder_without_changing_the_callers(
    text: Path, tmp_path: Path
) -> None:
    idx = tmp_path / "dense.idx"
    lcr(["index", str(text), "-o", str(idx), "-q", "-m", "dense", "--embedder", "hashing-64"])
    models = Models(spec=ModelSpec(embedder="hashing-32"))
    notes: list[str] = []
    for question in QUESTIONS[:2]:
        result = api.plan_and_retrieve(
            Index.open(idx), "dense", question, models, note=notes.append
        )
        assert result.evidence.items
    assert notes == [
        "the index was built with the embedder hashing-64: loading it instead of "
        "--embedder hashing-32"
    ]  # said once: the second question finds it loaded
    assert models.spec.embedder == "hashing-32"  # what the caller asked for, unchanged
    assert models.embedder_id() == "hashing-64" and models.embedder.dim == 64  # loaded once


def test_require_checks_a_scorer_without_pointing_the_callers_models_at_it() -> None:
    models = Models.with_objects(llm=ScriptedLLM())
    needs = Needs(scorer=frozenset({Capability.CONTINUATION_LOGPROB}), scorer_model="other")
    pipeline.require(models, needs, "building a method with a scorer")
    assert models.spec.scorer is None  # the scorer is bound for the phase, not set here
    bound = pipeline.bind(models, needs)
    assert bound.spec.scorer == "other" and bound.llm is models.llm  # one loaded LLM


def test_k_is_the_setting_the_method_names(text: Path, tmp_path: Path) -> None:
    """``-k 2`` and ``--set bm25.top_k=2`` are one retrieval: the plan's settings carry it."""
    idx = tmp_path / "tale.idx"
    lcr(["index", str(text), "-o", str(idx), "-q"])
    plan = pipeline.plan_query("bm25", k=2)
    assert plan.settings.to_json()["top_k"] == 2 and plan.k == 2 and plan.k_given
    by_text = pipeline.plan_query("bm25", parse_sets(["bm25.top_k=2"]))
    assert (by_text.settings, by_text.k_given) == (plan.settings, plan.k_given)  # one plan
    default = pipeline.plan_query("bm25")
    assert default.settings.to_json()["top_k"] != 2 and not default.k_given
    index, models = Index.open(idx), Models.with_objects(llm=ScriptedLLM())
    by_k = api.plan_and_retrieve(index, "bm25", QUESTIONS[0], models, k=2)
    by_set = api.plan_and_retrieve(index, "bm25", QUESTIONS[0], models, ["bm25.top_k=2"])
    assert [it.id for it in by_k.evidence.items] == [it.id for it in by_set.evidence.items]
    assert len(by_k.evidence.items) == 2


def test_adding_documents_rebuilds_with_the_recorded_models_leaving_the_callers(
    text: Path, tmp_path: Path
) -> None:
    from lcr.pipeline.collection import add_files
    from lcr.text.inputs import expand_inputs

    idx = tmp_path / "dense.idx"
    lcr(["index", str(text), "-o", str(idx), "-q", "-m", "dense", "--embedder", "hashing-64"])
    more = tmp_path / "more.txt"
    more.write_text("The pigeon kept the hazel tree in the garden.\n", encoding="utf-8")
    models = Models(spec=ModelSpec(embedder="hashing-32"))
    grown = add_files(expand_inputs([more]), idx, [], models)
    assert grown.methods["dense"].models["embedder"] == "hashing-64"
    assert len(grown.documents) == 2
    assert models.spec.embedder == "hashing-32"  # what the caller asked for, unchanged


def test_every_set_mode_and_k_value_is_parsed_exactly_once_per_run(
    text: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Text becomes typed values once, at the edge: each ``--set`` and ``--mode`` value is
    parsed once for the whole run (three questions), and ``-k`` is click's integer, written
    into the setting it overrides with no text in between."""
    from lcr.config import Setting

    idx = tmp_path / "tale.idx"
    lcr(["index", str(text), "-o", str(idx), "-q"])
    parsed: list[tuple[str, str]] = []
    real = Setting.parse

    def parse(self: Setting, raw: str, label: str | None = None) -> Any:
        parsed.append((label or self.name, raw))
        return real(self, raw, label)

    monkeypatch.setattr(Setting, "parse", parse)
    args = ["ask", str(idx), "-", "-m", "mixpr", "--mode", "local", "-k", "2", "--json"]
    out = lcr([*args, "--set", "answer.order=document"], stdin="\n".join(QUESTIONS) + "\n")
    results = [json.loads(line) for line in out.splitlines()]
    assert len(results) == 3
    assert all(r["evidence"] and len({e["id"].split("[")[0] for e in r["evidence"]}) <= 2
               for r in results)  # fmt: skip
    assert sorted(parsed) == [("answer.order", "document"), ("mixpr.mode", "local")]


def test_the_pipeline_takes_only_plans() -> None:
    """Names and ``--set`` text are planned where they enter (the CLI, ``lcr.api``); the
    pipeline's entry points take typed plans and nothing it could parse again."""
    import inspect

    entries = {
        pipeline.build: {"plans": "Sequence[BuildPlan]"},
        pipeline.index_files: {"files": "Sequence[InputFile]", "plans": "Sequence[BuildPlan]"},
        pipeline.retrieve_query: {"query": "QueryPlan"},
        pipeline.ask_query: {"query": "QueryPlan"},
    }
    for function, typed in entries.items():
        params = inspect.signature(function).parameters
        assert "sets" not in params and "methods" not in params, function.__name__
        for name, annotation in typed.items():
            assert params[name].annotation == annotation, (function.__name__, name)
    assert not hasattr(pipeline, "retrieve") and not hasattr(pipeline, "ask")
    assert not hasattr(config, "parse_sets") and not hasattr(config, "check_targets")


# ------------------------------------------- issue 52 item 3: one frozen binding a run

ATTENTION = frozenset({Capability.ATTENTION})


def test_require_returns_a_bound_copy_and_changes_nothing_it_was_given() -> None:
    """A check is a pure function: the caller's models keep no trace of it, the copy's
    binding is a frozen value, and checking again gives an equal one."""
    import dataclasses

    from lcr.models.base import Role
    from lcr.models.binding import NO_BINDING

    models = Models(spec=ModelSpec(llm="smollm2-135m"))
    needs = Needs(llm=ATTENTION, why="attention")
    bound = pipeline.require(models, needs, "pecan retrieval")
    assert models.binding == NO_BINDING and models.backend_of(Role.LLM) is None
    assert bound.backend_of(Role.LLM) == "transformers"  # only it reads attention
    assert pipeline.require(models, needs, "pecan retrieval").binding == bound.binding
    with pytest.raises(dataclasses.FrozenInstanceError):
        bound.binding.backends = ()  # type: ignore[misc]
    assert pipeline.require(bound, needs, "again") is not models  # never the caller's


def test_the_backend_bound_for_the_runs_needs_is_the_one_that_loads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Loading reads the binding, not shared state: unbound models load for generating
    alone, the bound copy for everything the run needs (here attention)."""
    from lcr.models import loading

    loaded: list[str] = []

    def record(spec: ModelSpec, progress: Any, backend: str = "") -> Any:
        loaded.append(backend)
        return ScriptedLLM()

    monkeypatch.setattr(loading, "load_llm", record)
    models = Models(spec=ModelSpec(llm="smollm2-135m"))
    bound = pipeline.require(models, Needs(llm=ATTENTION), "pecan retrieval")
    bound.llm  # noqa: B018 - loads
    assert loaded == ["transformers"]
    assert models.llm is bound.llm and loaded == ["transformers"]  # one load, shared


def test_a_runs_builds_share_one_binding_able_to_do_all_of_them() -> None:
    """``plan_builds`` works the binding out once for every method of the run: PECAN
    needs attention, RAPTOR only generation; both build on the one backend."""
    from lcr.models.base import Role

    models = Models(spec=ModelSpec(llm="smollm2-135m"))
    plans = pipeline.plan_builds(["raptor", "pecan"], models)
    assert plans[0].binding == plans[1].binding
    bound = Models(spec=models.spec, binding=plans[0].binding)
    assert bound.backend_of(Role.LLM) == "transformers"
    key = (Role.LLM, None)
    assert plans[0].binding.needs_of(key) >= ATTENTION
    alone = pipeline.plan_builds(["raptor"], models)[0].binding
    assert not ATTENTION & alone.needs_of(key) and Capability.GENERATE in alone.needs_of(key)
    assert models.binding == Models().binding  # planning bound nothing of the caller's
