"""The capability check: a method's needs against what an LLM backend provides."""

from __future__ import annotations

import pytest

from lcr.errors import CapabilityError
from lcr.models.backends import BACKENDS, choose_backend
from lcr.models.base import Capability, Models, ModelSpec, split_token_budget
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
    from lcr.errors import ModelError
    from lcr.models.llamacpp_threads import busy_cores_elsewhere, default_threads

    monkeypatch.setenv("LCR_THREADS", "3")
    assert default_threads() == 3
    monkeypatch.setenv("LCR_THREADS", "zero")
    with pytest.raises(ModelError, match="LCR_THREADS"):
        default_threads()
    assert busy_cores_elsewhere(0.05) >= 0.0
