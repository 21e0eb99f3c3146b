"""The answer step a method declares (lcr.answer.step), the accounting around a query's
phases (lcr.pipeline.accounting) and what a Result's evidence means."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import pytest

from lcr import api
from lcr.answer.shared import AnswerResult
from lcr.evidence import AnswerState, Evidence
from lcr.methods import registered
from lcr.methods.base import AnswerContext, AnswerStep, QueryContext
from lcr.models.container import Models
from lcr.pipeline.accounting import spending
from lcr.store import Index
from lcr.testing import check_method
from tests.fakes import ForbiddenLLM, ScriptedLLM
from tests.plugin_pkg.lcr_overlap import Overlap, OverlapBuild, OverlapQuery

QUESTION = "What did the bird throw down to Cinderella?"


@pytest.fixture(scope="module")
def story(cinderella: Path, tmp_path_factory: pytest.TempPathFactory) -> Index:
    out = tmp_path_factory.mktemp("step") / "story.idx"
    index, _ = api.plan_and_index(
        [cinderella], out, ["bm25"], Models.with_objects(llm=ForbiddenLLM())
    )
    return index


# ------------------------------------------------------------------ accounting
def test_spending_measures_what_the_block_spent_even_when_it_fails() -> None:
    llm = ScriptedLLM(words=3)
    models = Models.with_objects(llm=llm)
    llm.generate([{"role": "user", "content": "spent before the block"}])
    with spending(models) as spent:
        llm.generate([{"role": "user", "content": "one two three four"}])
    assert spent.usage.calls == 1 and spent.usage.completion_tokens == 3
    assert spent.usage.prompt_tokens == 4 and spent.seconds > 0
    with pytest.raises(RuntimeError), spending(models) as failed:
        llm.generate([{"role": "user", "content": "paid, then the phase fails"}])
        raise RuntimeError("boom")
    assert failed.usage.calls == 1  # what a failed phase paid is still counted


def test_a_query_records_what_each_phase_spent(story: Index) -> None:
    llm = ScriptedLLM(words=5)
    result = api.plan_and_ask(story, "bm25", QUESTION, Models.with_objects(llm=llm))
    assert result.evidence.usage.calls == 0  # bm25 retrieves without an LLM
    assert result.usage.to_json() == llm.usage.to_json()  # the answer and its support check
    assert set(result.timings) >= {"retrieve_s", "answer_s"}


# ----------------------------------------------------- what a result's evidence is
def test_ask_keeps_what_was_retrieved_and_what_was_read_apart(story: Index) -> None:
    """``Result.evidence`` is what the method retrieved, for ask as for retrieve;
    ``Result.read`` what the answer step read; --json prints the read items as ever."""
    models = Models.with_objects(llm=ScriptedLLM(words=5))
    found = api.plan_and_retrieve(story, "bm25", QUESTION, models)
    sets = ["answer.passages=merged", "answer.select=off"]  # bm25's chunks, read whole
    asked = api.plan_and_ask(story, "bm25", QUESTION, models, sets)
    assert [it.id for it in asked.evidence.items] == [it.id for it in found.evidence.items]
    assert asked.read is not None and any("merged" in it.extra for it in asked.read)
    assert asked.basis() is asked.read and found.basis() == found.evidence.items
    shown = asked.to_json()
    assert shown["evidence"] == [it.to_json() for it in asked.read]
    assert shown["info"] == {**asked.evidence.info, **asked.answer_info}
    assert isinstance(shown["quotes"], list) and "quotes" not in found.to_json()  # asked only
    assert found.read is None and found.to_json()["evidence"] == [
        it.to_json() for it in found.evidence.items
    ]


# ------------------------------------------------- a method's own step, checked
@dataclass
class Marked(AnswerState):
    """The state a retrieval keeps for MarkedAnswer: the question's longest word."""

    word: str


class MarkedAnswer(AnswerStep[OverlapQuery, Marked]):
    name = "marked"
    state_type = Marked

    def answer(
        self, ctx: AnswerContext[OverlapQuery], question: str, evidence: Evidence, state: Marked
    ) -> AnswerResult:
        gen = ctx.llm.generate(
            [{"role": "user", "content": f"{state.word}: {evidence.items[0].text}"}],
            max_new_tokens=ctx.answer.max_new_tokens,
        )
        return AnswerResult(gen.text, evidence.items[:1], 0)


class Marking(Overlap):
    """Overlap whose own answer step reads the state its retrieval keeps."""

    name = "marking"

    def retrieve(self, ctx: QueryContext[OverlapBuild, OverlapQuery], question: str) -> Evidence:
        evidence = super().retrieve(ctx, question)
        return dataclasses.replace(evidence, state=Marked(max(question.split(), key=len)))

    def answer_step(self, settings: OverlapQuery) -> MarkedAnswer:
        return MarkedAnswer()


class Forgetting(Overlap):
    """Declares a step with state, but its retrieval keeps none."""

    name = "forgetting"

    def answer_step(self, settings: OverlapQuery) -> MarkedAnswer:
        return MarkedAnswer()


def test_a_method_with_its_own_step_passes_the_checks_and_is_answered_by_it(
    cinderella: Path, story: Index
) -> None:
    check_method(Marking, text=cinderella)
    llm = ScriptedLLM(words=2)
    with registered(Marking):
        api.plan_and_build(story, ["marking"], Models.with_objects())
        result = api.plan_and_ask(story, "marking", QUESTION, Models.with_objects(llm=llm))
    assert result.answer_settings is not None and result.answer_settings["step"] == "marked"
    assert result.answer is not None and result.answer.startswith("Cinderella?: ")  # the state
    assert len(llm.prompts) == 1
    assert result.read == result.evidence.items[:1] and result.usage.calls == 1


def test_the_checks_catch_a_step_whose_state_the_retrieval_does_not_keep(
    cinderella: Path,
) -> None:
    with pytest.raises(AssertionError, match="check_answer_step: the retrieval kept the wrong"):
        check_method(Forgetting, text=cinderella)
