"""The capability check: a method's needs against what an LLM backend provides."""

from __future__ import annotations

import pytest

from lcr.errors import CapabilityError
from lcr.models.backends import BACKENDS, choose_backend
from lcr.models.base import Capability, Role, split_token_budget
from lcr.models.container import Models
from lcr.models.spec import ModelSpec
from tests.fakes import ScriptedLLM

GEN = frozenset({Capability.GENERATE})
ATTN = frozenset({Capability.ATTENTION, Capability.GENERATE})


def test_named_backend_lacking_a_capability_is_refused_naming_one_that_has_it() -> None:
    with pytest.raises(
        CapabilityError, match=r"attention.*--backend openai.*--backend transformers"
    ):
        choose_backend("openai", ATTN, "pecan retrieval")
    assert choose_backend("transformers", ATTN, "pecan retrieval") == "transformers"


def test_auto_never_picks_a_backend_without_the_capability() -> None:
    chosen = choose_backend("auto", ATTN, "pecan retrieval")
    assert Capability.ATTENTION in BACKENDS[chosen].capabilities
    assert chosen != "openai"


def test_unknown_backend() -> None:
    with pytest.raises(CapabilityError, match="unknown backend"):
        choose_backend("vllm-magic", GEN, "answering")


def test_models_require_checks_an_injected_llm() -> None:
    llm = ScriptedLLM()
    llm.capabilities = GEN  # type: ignore[misc]
    models = Models.with_objects(llm=llm)
    assert models.require(GEN, "answering") == "scripted"
    with pytest.raises(CapabilityError, match=r"continuation_logprob.*scripted"):
        models.require(frozenset({Capability.CONTINUATION_LOGPROB}), "building lightpal")


def test_models_require_accumulates_needs_before_loading() -> None:
    models = Models(spec=ModelSpec(backend="openai", base_url="http://127.0.0.1:9/v1"))
    assert models.require(GEN, "answering") == "openai"
    with pytest.raises(CapabilityError, match="continuation_logprob"):
        models.require(frozenset({Capability.CONTINUATION_LOGPROB}), "building lightpal")
    assert not models.llm_loaded  # refused before anything loaded or connected


def test_openai_needs_a_server_url() -> None:
    with pytest.raises(CapabilityError, match="--base-url"):
        choose_backend("openai", GEN, "answering", ModelSpec(backend="openai"))


@pytest.mark.parametrize(
    ("ctx", "cont", "budget", "expected"),
    [
        (10, 10, 40, (10, 10)),  # both fit: nothing cut
        (100, 10, 40, (30, 10)),  # the short side keeps all of itself
        (10, 100, 40, (10, 30)),
        (100, 100, 40, (20, 20)),  # both long: half each
        (100, 100, 41, (20, 21)),
    ],
)
def test_split_token_budget(ctx: int, cont: int, budget: int, expected: tuple[int, int]) -> None:
    kept = split_token_budget(ctx, cont, budget)
    assert kept == expected
    assert sum(kept) <= budget


@pytest.mark.parametrize(
    ("cores", "busy", "threads"),
    [(2, 0.0, 2), (2, 0.4, 2), (2, 0.6, 1), (2, 11.0, 1), (8, 2.2, 6), (1, 0.0, 1)],
)
def test_llamacpp_threads_leave_busy_cores_alone(cores: int, busy: float, threads: int) -> None:
    from lcr.models.llamacpp_threads import threads_for_load

    assert threads_for_load(cores, busy) == threads


def test_llamacpp_threads_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from lcr.errors import UsageError
    from lcr.models.llamacpp_threads import busy_cores_elsewhere, default_threads

    monkeypatch.setenv("LCR_THREADS", "3")
    assert default_threads() == 3
    monkeypatch.setenv("LCR_THREADS", "zero")
    with pytest.raises(UsageError, match="LCR_THREADS"):  # a bad value: exit 2 (issue 54)
        default_threads()
    assert busy_cores_elsewhere(0.05) >= 0.0


# ------------------------------------------------------------- model roles


def test_each_backend_declares_its_capabilities_once_on_its_class() -> None:
    from lcr.models.llamacpp_llm import LlamaCppLLM
    from lcr.models.openai_llm import OpenAILLM
    from lcr.models.transformers_llm import TransformersLLM

    assert BACKENDS["transformers"].capabilities is TransformersLLM.capabilities
    assert BACKENDS["llamacpp"].capabilities is LlamaCppLLM.capabilities
    assert BACKENDS["openai"].capabilities is OpenAILLM.capabilities
    assert Capability.ATTENTION not in LlamaCppLLM.capabilities


def test_the_scorer_is_the_llm_unless_another_model_is_named() -> None:
    llm = ScriptedLLM()
    models = Models.with_objects(llm=llm, spec=ModelSpec(llm="scripted-test-llm"))
    assert models.scorer is llm and models.model_id(Role.SCORER) == "scripted-test-llm"
    models.spec.scorer = "scripted-test-llm"  # the same model by name: still one object
    assert models.scorer is llm
    needs = frozenset({Capability.CONTINUATION_LOGPROB})
    assert models.require_role(Role.SCORER, needs, "scoring") == "scripted"
    assert models.backend_of(Role.SCORER) == "scripted" and models.loaded(Role.SCORER)


def test_a_second_scorer_is_loaded_cached_and_checked_like_the_llm() -> None:
    llm, scorer = ScriptedLLM(), ScriptedLLM()
    scorer.model_id = "small-scorer"  # type: ignore[misc]
    scorer.capabilities = GEN  # type: ignore[misc]
    models = Models.with_objects(llm=llm, scorer=scorer)
    assert models.spec.scorer == "small-scorer"
    assert models.scorer is scorer and models.scorer is scorer  # cached
    assert models.model_id(Role.SCORER) == "small-scorer" and models.loaded(Role.SCORER)
    with pytest.raises(CapabilityError, match=r"continuation_logprob.*scripted"):
        models.require_role(Role.SCORER, frozenset({Capability.CONTINUATION_LOGPROB}), "lightpal")
    assert models.require(frozenset({Capability.CONTINUATION_LOGPROB}), "the llm") == "scripted"


def test_a_scorer_not_loaded_gets_its_own_backend_choice_before_work() -> None:
    spec = ModelSpec(llm="big", scorer="small", backend="openai", base_url="http://127.0.0.1:9/v1")
    models = Models(spec=spec)
    with pytest.raises(CapabilityError, match=r"continuation_logprob.*--backend openai"):
        models.require_role(Role.SCORER, frozenset({Capability.CONTINUATION_LOGPROB}), "lightpal")
    assert models.require(GEN, "answering") == "openai"  # the LLM's needs are its own
    assert not models.loaded(Role.SCORER) and models.backend_of(Role.SCORER) is None
    assert models.model_id(Role.SCORER) == "small"


def test_naming_another_scorer_drops_the_previous_one() -> None:
    scorer = ScriptedLLM()
    scorer.model_id = "first-scorer"  # type: ignore[misc]
    models = Models.with_objects(llm=ScriptedLLM(), scorer=scorer)
    models.spec.scorer = "second-scorer"
    assert not models.loaded(Role.SCORER) and models.model_id(Role.SCORER) == "second-scorer"


def test_the_embedder_role_has_no_llm_capabilities() -> None:
    models = Models.with_objects(llm=ScriptedLLM())
    assert models.require_role(Role.EMBEDDER, frozenset(), "dense retrieval")
    with pytest.raises(CapabilityError, match="embedder"):
        models.require_role(Role.EMBEDDER, GEN, "dense retrieval")
    assert not models.loaded(Role.EMBEDDER) and models.backend_of(Role.EMBEDDER) is None


def test_usage_snapshot_sums_every_loaded_llm_once_with_cached_tokens() -> None:
    llm, scorer = ScriptedLLM(), ScriptedLLM()
    scorer.model_id = "small-scorer"  # type: ignore[misc]
    models = Models.with_objects(llm=llm)
    llm.usage.add(10, 2, cached_tokens=4)
    assert models.usage_snapshot().to_json() == {
        "prompt_tokens": 10,
        "completion_tokens": 2,
        "calls": 1,
        "cached_tokens": 4,
    }
    snapshot = models.usage_snapshot()
    llm.usage.add(1, 1)
    assert snapshot.prompt_tokens == 10  # a copy, not the live counters
    both = Models.with_objects(llm=llm, scorer=scorer)
    scorer.usage.add(5, 0, cached_tokens=3)
    spent = both.usage_snapshot()
    assert (spent.prompt_tokens, spent.cached_tokens, spent.calls) == (16, 7, 3)
