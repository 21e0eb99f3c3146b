"""How the transformers backend decodes (lcr.models.transformers_decode): per-step work
that keeps the greedy tokens of the bare library call, the static KV cache, batches
sized by free GPU memory, and the choices made on a faked CUDA machine."""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

import pytest
import torch

from lcr.errors import UsageError
from lcr.models import loading, machine
from lcr.models import transformers_decode as decoding
from lcr.models.text_stream import TextPieces
from lcr.progress import NULL_PROGRESS, TokenMeter
from tests.conftest import needs

pytestmark = pytest.mark.usefixtures("one_torch_thread")

PROMPTS = [
    ("Count from 1 to 20, separated by commas.", ("5",)),  # stops on a stop string
    ("Count from 1 to 20, separated by commas.", ()),
    ("Name three colours.", ("\n",)),
    ("What is the capital of France? Answer in one sentence.", ()),
]

A100 = machine.Machine(
    torch_version="2.5.0+cu124",
    torch_cuda="12.4",
    cuda_usable=True,
    gpu_name="NVIDIA A100",
    compute_capability=(8, 0),
    nvidia_driver=True,
)


def flags(plan: decoding.DecodePlan) -> tuple[bool, bool]:
    return plan.static_cache, plan.compiled


def ask(text: str) -> list[Any]:
    return [{"role": "user", "content": text}]


def bare_tokens(llm: Any, text: str, stop: tuple[str, ...], new: int, **extra: Any) -> list[int]:
    """transformers' own greedy generate, without lcr's hooks, up to an end token."""
    from transformers import GenerationConfig

    ids = llm.render(ask(text))
    config = GenerationConfig(
        max_new_tokens=new,
        do_sample=False,
        temperature=None,
        top_p=None,
        top_k=None,
        pad_token_id=llm._pad_id,
        eos_token_id=sorted(llm.end_ids),
        stop_strings=list(stop) or None,
        **extra,
    )
    with torch.no_grad():
        out = llm.model.generate(
            input_ids=torch.tensor([ids]),
            attention_mask=torch.ones((1, len(ids)), dtype=torch.long),
            generation_config=config,
            tokenizer=llm.tokenizer,
        )
    tokens = [int(t) for t in out[0, len(ids) :].tolist()]
    for i, tok in enumerate(tokens):
        if tok in llm.end_ids:
            return tokens[: i + 1]
    return tokens


@pytest.mark.parametrize(("text", "stop"), PROMPTS)
def test_generate_keeps_the_bare_calls_greedy_tokens(
    smollm: Any, text: str, stop: tuple[str, ...]
) -> None:
    tokens = bare_tokens(smollm, text, stop, 40)
    expected = smollm.tokenizer.decode(
        [t for t in tokens if t not in smollm.end_ids], skip_special_tokens=True
    )
    pieces: list[str] = []
    gen = smollm.generate(ask(text), max_new_tokens=40, stop=stop, on_text=pieces.append)
    assert gen.completion_tokens == len(tokens)
    cut = expected
    for s in stop:
        cut = cut.split(s)[0]
    assert gen.text == cut
    assert "".join(pieces) == gen.text
    if stop == ("5",):
        assert gen.completion_tokens < 40 and "4" in gen.text  # it did stop on the string


def test_static_cache_keeps_the_greedy_tokens(smollm: Any) -> None:
    before = smollm.static_cache
    texts = [text for text, _ in PROMPTS[1:]]
    default = [smollm.generate(ask(t), max_new_tokens=24) for t in texts]
    smollm.batch_on_cpu = True  # the left-padded batch path CUDA takes
    try:
        batched = smollm.generate_batch([ask(t) for t in texts], max_new_tokens=24)
        smollm.static_cache = "on"
        static = [smollm.generate(ask(t), max_new_tokens=24) for t in texts]
        static_batched = smollm.generate_batch([ask(t) for t in texts], max_new_tokens=24)
    finally:
        smollm.static_cache = before
        smollm.batch_on_cpu = False
    assert [g.text for g in static] == [g.text for g in default]
    assert [g.completion_tokens for g in static] == [g.completion_tokens for g in default]
    assert [g.text for g in static_batched] == [g.text for g in batched]
    # and transformers' static cache in the bare call agrees with the dynamic one
    tokens = bare_tokens(smollm, texts[0], (), 24, cache_implementation="static")
    assert tokens == bare_tokens(smollm, texts[0], (), 24)


def test_stream_is_decoded_at_most_once_an_interval(smollm: Any) -> None:
    """A slow clock: the reply is decoded once, then only at the end, and the pieces
    joined are still the reply."""
    ticks = iter(range(1000))
    ids = smollm.render(ask(PROMPTS[1][0]))
    sent: list[str] = []
    meter = TokenMeter(NULL_PROGRESS, "t", 10)
    watch = decoding.StepWatch(
        lambda: None,
        meter,
        1,
        len(ids),
        pieces=TextPieces(sent.append),
        decode=lambda t: smollm.tokenizer.decode(t, skip_special_tokens=True),
        end_ids=frozenset(smollm.end_ids),
        interval=100.0,
        clock=lambda: float(next(ticks)),
    )
    reply = bare_tokens(smollm, PROMPTS[1][0], (), 12)
    for n in range(1, len(reply) + 1):
        row = torch.tensor([ids + reply[:n]])
        assert not bool(watch(row, None).any())  # never stops generation itself
    assert watch.decodes == 1
    watch.flush()
    assert watch.decodes == 2 and watch.tokens == reply
    assert "".join(sent) == smollm.tokenizer.decode(reply, skip_special_tokens=True)


def test_stop_criterion_is_built_once(smollm: Any) -> None:
    first = decoding.stop_criterion(smollm.tokenizer, ["9", ""])
    assert decoding.stop_criterion(smollm.tokenizer, ("9",)) is first
    assert decoding.stop_criterion(smollm.tokenizer, ("8",)) is not first


def test_decode_plan_on_a_faked_cuda_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(machine, "current", lambda: A100)
    monkeypatch.setattr(decoding, "triton_available", lambda: True)
    monkeypatch.delenv("LCR_STATIC_CACHE", raising=False)
    assert decoding.decode_plan("cuda") == decoding.DecodePlan(
        True, True, "static cache, compiled steps"
    )
    assert decoding.decode_plan("cuda:1", "on").compiled
    assert flags(decoding.decode_plan("cuda", quantized=True)) == (False, False)
    assert flags(decoding.decode_plan("cuda", "on", quantized=True)) == (True, False)
    assert flags(decoding.decode_plan("cuda", "off")) == (False, False)
    assert flags(decoding.decode_plan("cpu")) == (False, False)
    assert flags(decoding.decode_plan("cpu", "on")) == (True, False)
    pascal = dataclasses.replace(A100, compute_capability=(6, 1))
    monkeypatch.setattr(machine, "current", lambda: pascal)
    assert flags(decoding.decode_plan("cuda")) == (True, False)
    monkeypatch.setattr(machine, "current", lambda: A100)
    monkeypatch.setattr(decoding, "triton_available", lambda: False)
    plan = decoding.decode_plan("cuda")
    assert flags(plan) == (True, False) and "triton" in plan.why
    monkeypatch.setenv("LCR_STATIC_CACHE", "Off")
    assert flags(decoding.decode_plan("cuda")) == (False, False)
    monkeypatch.setenv("LCR_STATIC_CACHE", "sometimes")
    with pytest.raises(UsageError, match="LCR_STATIC_CACHE must be one of auto, on, off"):
        decoding.decode_plan("cuda")


def test_auto_compiles_once_the_process_has_generated_enough_to_pay(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Measured on an H200: a compile costs about 42 s, so one short ask never pays it."""
    monkeypatch.setattr(machine, "current", lambda: A100)
    monkeypatch.setattr(decoding, "triton_available", lambda: True)
    monkeypatch.delenv("LCR_STATIC_CACHE", raising=False)
    enough = decoding.COMPILE_AFTER_TOKENS
    first = decoding.decode_plan("cuda", generated=0)
    assert flags(first) == (False, False) and str(enough) in first.why
    assert flags(decoding.decode_plan("cuda", generated=enough - 1)) == (False, False)
    assert flags(decoding.decode_plan("cuda", generated=enough)) == (True, True)
    batch = decoding.decode_plan("cuda", rows=8, generated=10 * enough)
    assert flags(batch) == (False, False) and "batch" in batch.why
    # "on" compiles from the first call, batches included; "off" never
    assert flags(decoding.decode_plan("cuda", "on", rows=8, generated=0)) == (True, True)
    assert flags(decoding.decode_plan("cuda", "off", generated=10 * enough)) == (False, False)


def test_the_model_counts_its_one_stream_tokens_for_the_compile_decision(
    smollm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[int, int | None]] = []
    real = decoding.decode_plan

    def spy(device: str, setting: str | None = None, **kw: Any) -> decoding.DecodePlan:
        seen.append((kw["rows"], kw["generated"]))
        return real(device, setting, **kw)

    monkeypatch.setattr(decoding, "decode_plan", spy)
    before = smollm.generated_one_stream
    gen = smollm.generate(ask("Name three colours."), max_new_tokens=8)
    assert smollm.generated_one_stream == before + gen.completion_tokens
    smollm.batch_on_cpu = True
    try:
        smollm.generate_batch([ask("Name a colour."), ask("Name a fruit.")], max_new_tokens=4)
    finally:
        smollm.batch_on_cpu = False
    assert smollm.generated_one_stream == before + gen.completion_tokens  # a batch: not counted
    assert seen == [(1, before), (2, before + gen.completion_tokens)]


def test_plan_settings_size_the_static_cache_in_steps() -> None:
    static = decoding.DecodePlan(True, True, "")
    assert decoding.plan_settings(decoding.DecodePlan(False, False, ""), 900, 8192) == {}
    settings = decoding.plan_settings(static, 900, 8192)
    assert settings == {
        "cache_implementation": "static",
        "max_cache_len": 1024,
        "disable_compile": False,
    }
    assert decoding.plan_settings(static, 1025, 8192)["max_cache_len"] == 2048
    assert decoding.plan_settings(static, 1500, 1600)["max_cache_len"] == 1600  # the window
    assert decoding.static_cache_length(2000, 1600) == 2000  # never below what is needed


@needs("smollm2-135m")
def test_bad_static_cache_setting_is_refused_before_loading(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from lcr.models.spec import ModelSpec

    monkeypatch.setenv("LCR_STATIC_CACHE", "yes")
    with pytest.raises(UsageError, match="LCR_STATIC_CACHE"):
        loading.load_llm(ModelSpec(llm="smollm2-135m", device="cpu"), NULL_PROGRESS)
    assert UsageError.exit_code == 2


def test_gpu_batches_follow_free_memory(smollm: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """``torch.cuda.mem_get_info`` faked: the batch grows with free memory, within 1..64."""
    free = [2**30]
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda *_: (free[0], 80 * 2**30))
    monkeypatch.setattr(smollm, "device", "cuda")
    prompts = [smollm.render(ask(t)) for t, _ in PROMPTS] * 50
    one_gb = smollm.batch_rows(prompts, 256)
    need = decoding.row_bytes(smollm.model, smollm.kv_bytes_per_token(), 54, 256)
    assert need > 0
    free[0] = 4 * 2**30
    four_gb = smollm.batch_rows(prompts, 256)
    assert 1 <= one_gb < four_gb <= decoding.GPU_BATCH_MAX
    assert four_gb == min(decoding.GPU_BATCH_MAX, 4 * one_gb) or four_gb > 2 * one_gb
    free[0] = 10**6  # almost nothing free: one conversation at a time
    assert smollm.batch_rows(prompts, 256) == 1
    free[0] = 80 * 2**30
    assert smollm.batch_rows(prompts, 256) == decoding.GPU_BATCH_MAX
    assert smollm.batch_rows(prompts[:3], 256) == 3  # never more rows than conversations

    def unreadable(*_: Any) -> Any:
        raise RuntimeError("CUDA driver initialization failed")

    monkeypatch.setattr(torch.cuda, "mem_get_info", unreadable)
    assert smollm.batch_rows(prompts, 256) == decoding.GPU_BATCH_FALLBACK
    monkeypatch.setattr(smollm, "device", "cpu")
    assert smollm.batch_rows(prompts, 256) == 1


def test_gpu_batch_rows_arithmetic() -> None:
    assert decoding.gpu_batch_rows(10 * 2**20, 2**20, 100) == 5  # half of the free memory
    assert decoding.gpu_batch_rows(None, 2**20, 100) == decoding.GPU_BATCH_FALLBACK
    assert decoding.gpu_batch_rows(2**40, 1, 100) == decoding.GPU_BATCH_MAX
    assert decoding.gpu_batch_rows(0, 2**20, 100) == 1


def test_a_warning_bitsandbytes_gives_every_layer_is_shown_once() -> None:
    text = "MatMul8bitLt: inputs will be cast from torch.bfloat16 to float16 during quantization"
    with warnings.catch_warnings(record=True) as log:
        warnings.simplefilter("always")  # as when a forward pass resets the registry
        loading.quiet_libraries()
        loading.quiet_libraries()  # wrapped once, not twice
        for _ in range(11):  # one per 8-bit layer
            warnings.warn(text, UserWarning, stacklevel=1)
            warnings.warn("another", UserWarning, stacklevel=1)
    texts = [str(w.message) for w in log]
    assert texts.count(text) == 1 and texts.count("another") == 11


def test_shown_once_passes_other_warnings_on() -> None:
    seen: list[str] = []
    show = loading.shown_once(lambda message, *_: seen.append(str(message)))
    assert loading.shown_once(show) is show
    text = "MatMul8bitLt: inputs will be cast from torch.bfloat16 to float16 during quantization"
    for _ in range(11):
        show(text, UserWarning, "f.py", 1)
        show("another", UserWarning, "f.py", 2)
    assert seen.count(text) == 1 and seen.count("another") == 11


@pytest.mark.parametrize("text", ["What is 2 + 2? Answer with a number only.", PROMPTS[1][0]])
def test_attention_generation_reads_back_every_few_steps_with_the_same_result(
    smollm: Any, text: str
) -> None:
    """PECAN's decode loop on a GPU reads the tokens back every 8 steps: the steps run
    past an end token are dropped, so tokens, attention rows and counts are those of
    reading back after every step (one reply ends early, the other runs to the budget)."""
    prompt = smollm.render(ask(text))
    spans = [(0, 5), (5, len(prompt))]
    assert smollm.end_check_steps == 1  # on a CPU
    every = smollm.generate_with_attention(prompt, spans=spans, max_new_tokens=20)
    assert every.completion_tokens <= 20
    for steps in (3, 8):
        few = smollm.generate_with_attention(
            prompt, spans=spans, max_new_tokens=20, every_steps=steps
        )
        assert few.tokens == every.tokens and few.text == every.text
        assert few.completion_tokens == every.completion_tokens
        assert torch.equal(few.attention, every.attention)
    if text.startswith("What"):
        assert every.completion_tokens == len(every.tokens) + 1 < 20  # it ended on its own
    else:
        assert every.completion_tokens == len(every.tokens) == 20


def test_stream_interval_is_read_when_the_watch_is_made(
    smollm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """STREAM_INTERVAL_S = 0 (bench/gpu_speed.py's "before"): a decode after every step."""
    monkeypatch.setattr(decoding, "STREAM_INTERVAL_S", 0.0)
    ids = smollm.render(ask(PROMPTS[2][0]))
    sent: list[str] = []
    watch = decoding.StepWatch(
        lambda: None,
        TokenMeter(NULL_PROGRESS, "t", 5),
        1,
        len(ids),
        pieces=TextPieces(sent.append),
        decode=lambda t: smollm.tokenizer.decode(t, skip_special_tokens=True),
    )
    reply = smollm.encode(" red, green and blue")
    for n in range(1, len(reply) + 1):
        watch(torch.tensor([ids + reply[:n]]), None)
    assert watch.decodes == len(reply) and "".join(sent) == " red, green and blue"
