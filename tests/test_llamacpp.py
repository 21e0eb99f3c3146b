"""The llama.cpp backend with the real smollm2-135m GGUF (the preset's own file).

Skipped, with the reason, where the ``llamacpp`` extra is not installed
(``pip install -e '.[llamacpp]'``; the README's test command installs it).
Where a figure can be checked against the transformers backend, which runs the
same weights dequantised to fp32, it is: the two must agree to quantisation
error, and llama.cpp must agree with itself across every cached path.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

pytest.importorskip("llama_cpp", reason="the llamacpp extra is not installed")

from lcr.errors import CapabilityError, ModelError
from lcr.models import loading, machine
from lcr.models.backends import choose_backend
from lcr.models.base import LLM, Capability
from lcr.models.container import Models
from lcr.models.llamacpp_llm import LlamaCppLLM
from lcr.models.presets import PRESETS
from lcr.models.spec import ModelSpec
from lcr.progress import NULL_PROGRESS

SMOL = "smollm2-135m"
STORY = (
    "Once upon a time there was a little girl who lived in a village near the forest. "
    "Whenever she went out, the little girl wore a red riding cloak, so everyone in the "
    "village called her Little Red Riding Hood."
)
CONTINUATIONS = [
    " One morning her mother asked her to take a basket of cakes to her grandmother.",
    " Quarterly earnings at the steel company fell by three percent.",
    " She",
    "",
]


def smol_path() -> Path:
    paths = PRESETS[SMOL].part_paths()
    assert paths, "smollm2-135m is not installed (lcr models install smollm2-135m)"
    return paths[0]


@pytest.fixture(scope="module")
def lcpp() -> LlamaCppLLM:
    llm = loading.load_llm(ModelSpec(llm=SMOL, device="cpu"), NULL_PROGRESS, backend="llamacpp")
    assert isinstance(llm, LlamaCppLLM)
    return llm


def fresh(parallel: int = 4) -> LlamaCppLLM:
    """A new model with an empty KV cache: the from-scratch reference."""
    return LlamaCppLLM.load(smol_path(), model_id=SMOL, context_window=4096, parallel=parallel)


def ask(text: str, system: str | None = None) -> list[dict[str, str]]:
    msgs = [{"role": "system", "content": system}] if system else []
    return [*msgs, {"role": "user", "content": text}]


def test_protocol_window_and_capabilities(lcpp: LlamaCppLLM) -> None:
    assert isinstance(lcpp, LLM)
    assert lcpp.backend == "llamacpp"
    assert Capability.ATTENTION not in lcpp.capabilities
    assert Capability.CONTINUATION_LOGPROB in lcpp.capabilities
    assert lcpp.context_window == 8192  # smollm2 was trained on 8k: the window is capped there
    assert lcpp.count_tokens("hello world") == len(lcpp.encode("hello world")) > 0


def test_chat_template_gives_the_same_tokens_as_transformers(lcpp: LlamaCppLLM, smollm) -> None:  # type: ignore[no-untyped-def]
    for messages in (ask("What is the capital of France?"), ask("Hi", system="Be brief.")):
        assert lcpp.render(messages) == smollm.render(messages)
    assert lcpp.encode(STORY) == smollm.encode(STORY)


def test_generate_counts_tokens_and_is_deterministic(lcpp: LlamaCppLLM) -> None:
    before = lcpp.usage.copy()
    messages = ask("Count from 1 to 10, separated by commas.")
    gen = lcpp.generate(messages, max_new_tokens=30)
    assert "3" in gen.text and "4" in gen.text
    assert gen.prompt_tokens == len(lcpp.render(messages))
    assert 0 < gen.completion_tokens <= 30
    spent = lcpp.usage.minus(before)
    assert (spent.calls, spent.prompt_tokens) == (1, gen.prompt_tokens)
    assert spent.completion_tokens == gen.completion_tokens
    again = lcpp.generate(messages, max_new_tokens=30)
    assert again.text == gen.text
    cut = lcpp.generate(messages, max_new_tokens=30, stop=["4"])
    assert "4" not in cut.text and gen.text.startswith(cut.text)
    short = lcpp.generate(messages, max_new_tokens=3)
    assert short.completion_tokens == 3


def test_reused_prefix_gives_what_a_fresh_model_gives(lcpp: LlamaCppLLM) -> None:
    """The second call shares the system prompt and the story with the first: the
    shared tokens come from the cache, and the answer is the from-scratch answer."""
    system = f"You answer questions about this story.\n\n{STORY}"
    lcpp.generate(ask("Where did the girl live?", system=system), max_new_tokens=12)
    before = lcpp.usage.copy()
    second = lcpp.generate(ask("What did the girl wear?", system=system), max_new_tokens=12)
    spent = lcpp.usage.minus(before)
    assert spent.cached_tokens > 40  # the system prompt and story were not encoded again
    assert spent.cached_tokens < spent.prompt_tokens
    reference = fresh().generate(ask("What did the girl wear?", system=system), max_new_tokens=12)
    assert second.text == reference.text


def test_choice_probability_agrees_with_transformers(lcpp: LlamaCppLLM, smollm) -> None:  # type: ignore[no-untyped-def]
    for question in ("Is Paris the capital of France? Answer Yes or No.", "Is ice hot?"):
        p_lcpp = lcpp.choice_probability(ask(question))
        p_tf = smollm.choice_probability(ask(question))
        assert 0.0 < p_lcpp < 1.0
        assert abs(p_lcpp - p_tf) < 0.1, (question, p_lcpp, p_tf)
    # asked twice, the second answer comes from the cached prompt and is the same
    before = lcpp.usage.copy()
    again = lcpp.choice_probability(ask("Is ice hot?"))
    assert again == pytest.approx(p_lcpp, abs=1e-6)
    assert lcpp.usage.minus(before).cached_tokens == len(lcpp.render(ask("Is ice hot?")))


def test_continuation_scores_batched_equal_one_at_a_time(lcpp: LlamaCppLLM) -> None:
    batched = lcpp.continuation_logprobs(STORY, CONTINUATIONS)
    single_lane = fresh(parallel=1)
    one_by_one = [single_lane.continuation_logprob(STORY, c) for c in CONTINUATIONS]
    for got, want in zip(batched, one_by_one, strict=True):
        assert got.logprob == pytest.approx(want, abs=2e-3)
    assert batched[-1].tokens == 0 and batched[-1].logprob == 0.0
    # on real text the true continuation is far likelier, per token, than an unrelated one
    assert batched[0].mean > batched[1].mean + 1.0


def test_continuation_scores_agree_with_transformers(lcpp: LlamaCppLLM, smollm) -> None:  # type: ignore[no-untyped-def]
    ours = lcpp.continuation_logprobs(STORY, CONTINUATIONS[:3], max_tokens=64)
    theirs = smollm.continuation_logprobs(STORY, CONTINUATIONS[:3], max_tokens=64)
    for a, b in zip(ours, theirs, strict=True):
        assert a.tokens == b.tokens
        assert abs(a.mean - b.mean) < 0.15, (a, b)  # Q4_1 kernels against fp32 weights


def test_continuation_usage_counts_the_context_once(lcpp: LlamaCppLLM) -> None:
    context = STORY + " A new sentence so the cache cannot hold it yet."
    n_ctx = lcpp.count_tokens(context)
    before = lcpp.usage.copy()
    scores = lcpp.continuation_logprobs(context, CONTINUATIONS[:3])
    spent = lcpp.usage.minus(before)
    conts = sum(s.tokens for s in scores)
    assert spent.prompt_tokens == 3 * n_ctx + conts - 3
    assert spent.cached_tokens >= 2 * n_ctx  # read from the cache by the 2nd and 3rd
    assert spent.prompt_tokens - spent.cached_tokens <= n_ctx + conts


def test_generate_batch_reports_each_result_as_it_finishes(lcpp: LlamaCppLLM) -> None:
    convs = [
        ask("Name a colour.", system="Answer in one word."),
        ask("Name a fruit.", system="Answer in one word."),
        ask("Name an animal.", system="Answer in one word."),
        ask("Count from 1 to 5.", system="Answer in one word."),
        ask("Name a city.", system="Answer in one word."),
    ]
    seen: list[int] = []
    before = lcpp.usage.copy()
    batch = lcpp.generate_batch(convs, max_new_tokens=10, on_result=lambda i, g: seen.append(i))
    assert sorted(seen) == list(range(5)) and len(batch) == 5
    spent = lcpp.usage.minus(before)
    assert spent.calls == 5
    assert spent.completion_tokens == sum(g.completion_tokens for g in batch)
    assert spent.cached_tokens > 0  # the shared system prompt was encoded once per group
    singles = [lcpp.generate(c, max_new_tokens=10) for c in convs]
    # decoding together changes only the batch shape of the same greedy computation
    agree = sum(b.text == s.text for b, s in zip(batch, singles, strict=True))
    assert agree >= 4, [(b.text, s.text) for b, s in zip(batch, singles, strict=True)]


@pytest.mark.slow
def test_prompt_over_the_window_is_a_clear_error() -> None:
    small = LlamaCppLLM.load(smol_path(), model_id=SMOL, context_window=256)
    with pytest.raises(ModelError, match="does not fit the context window"):
        small.generate(ask("word " * 400), max_new_tokens=4)
    assert small.generate(ask("Say hi."), max_new_tokens=4).completion_tokens > 0


def test_auto_picks_llamacpp_for_a_gguf_preset_and_transformers_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # this machine without its GPU (if any): the choice on a GPU host is in test_gpu.py
    cpu = dataclasses.replace(
        machine.current(), cuda_usable=False, nvidia_driver=False, llamacpp_gpu_offload=False
    )
    monkeypatch.setattr(machine, "current", lambda: cpu)
    gen = frozenset({Capability.GENERATE})
    assert choose_backend("auto", gen, "answering", ModelSpec(llm=SMOL)) == "llamacpp"
    attention = frozenset({Capability.ATTENTION})
    assert choose_backend("auto", attention, "pecan", ModelSpec(llm=SMOL)) == "transformers"
    with pytest.raises(CapabilityError, match="--backend transformers"):
        choose_backend("llamacpp", attention, "pecan retrieval", ModelSpec(llm=SMOL))
    folder = tmp_path / "hf-model"
    folder.mkdir()
    assert choose_backend("auto", gen, "answering", ModelSpec(llm=str(folder))) == "transformers"
    quantised = ModelSpec(llm=SMOL, quantize="4bit")
    assert choose_backend("auto", gen, "answering", quantised) == "transformers"
    with pytest.raises(ModelError, match="GGUF"):
        loading.load_llm(ModelSpec(llm=str(folder)), NULL_PROGRESS, backend="llamacpp")


@pytest.mark.slow
def test_models_load_llamacpp_under_auto() -> None:
    models = Models(spec=ModelSpec(llm=SMOL, device="cpu"))
    assert models.require(frozenset({Capability.GENERATE}), "answering") == "llamacpp"
    assert models.llm.backend == "llamacpp"
    assert math.isfinite(models.llm.continuation_logprob("The cat", " sat on the mat."))


def test_thread_governor_follows_other_work() -> None:
    """Threads drop when another process takes a core and come back when it stops;
    no measurement is taken more often than the interval."""
    from lcr.models.llamacpp_threads import ThreadGovernor

    clock = [0.0]
    # (machine busy s, own s, wall s): we use 2 cores alone, then another job takes one
    samples = iter([(0.0, 0.0, 0.0), (2.0, 2.0, 1.0), (4.0, 3.0, 2.0), (6.0, 5.0, 3.0)])
    calls = []

    def sample() -> tuple[float, float, float]:
        calls.append(clock[0])
        return next(samples)

    gov = ThreadGovernor(2, 2, interval_s=1.0, sample=sample, clock=lambda: clock[0])
    assert gov.check() is None  # the first sample only sets the baseline
    clock[0] = 0.5
    assert gov.check() is None and len(calls) == 1  # not due: no /proc read
    clock[0] = 1.0
    assert gov.check() is None  # other work used 0 cores: still 2
    clock[0] = 2.0
    assert gov.check() == 1 and gov.threads == 1  # 1 core busy elsewhere
    clock[0] = 3.0
    assert gov.check() == 2 and gov.changes == 2  # it stopped


@pytest.mark.slow
def test_thread_change_mid_run_keeps_the_scores() -> None:
    """Changing llama.cpp's thread count between calls changes speed, not results
    (to float rounding: the work is split differently)."""
    from lcr.models.llamacpp_threads import ThreadGovernor

    llm = LlamaCppLLM.load(smol_path(), model_id=SMOL, context_window=2048, threads=2)
    before = llm.continuation_logprob(STORY, CONTINUATIONS[0])
    ticks = iter(range(1000))

    def sample() -> tuple[float, float, float]:  # another job keeps 1 core busy throughout
        i = next(ticks)
        return 1.5 * i, 0.5 * i, float(i)

    llm._governor = ThreadGovernor(2, 2, interval_s=0.0, sample=sample)
    llm.reset_cache()
    after = llm.continuation_logprob(STORY, CONTINUATIONS[0])
    assert llm.threads == 1 and llm._governor.changes >= 1
    assert after == pytest.approx(before, abs=0.05)
    assert llm.generate(ask("Who wore the red cloak?\n\n" + STORY), max_new_tokens=8).text
