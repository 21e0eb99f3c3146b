"""``LCR_ATTENTION_CAPTURE=after`` (issue 55): PECAN's attention read after the backend's
own decoding wrote the reply equals the rows captured while decoding, for one prompt and
a left-padded batch, with the dynamic and the static KV cache, read back in pieces; a
prompt near the context window falls back to the capture loop; a bad value is refused.

The model is the real SmolLM2-135M in fp32 on the CPU (mechanics, not quality).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from lcr import api
from lcr.errors import UsageError
from lcr.models import transformers_attend as attend
from lcr.models import transformers_decode as decoding
from lcr.models.container import Models
from tests.conftest import needs
from tests.test_pecan_batches import ATOL, BUILD_SETS, _index, _prompts, _same

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _captured(llm: Any, monkeypatch: pytest.MonkeyPatch, mode: str, **kw: Any) -> Any:
    monkeypatch.setenv("LCR_ATTENTION_CAPTURE", mode)
    prompts, spans = _prompts(llm)
    singles = [
        llm.generate_with_attention(p, spans=s, **kw) for p, s in zip(prompts, spans, strict=True)
    ]
    batch = llm.generate_with_attention_batch(prompts, spans=spans, **kw)
    return singles, batch


@pytest.mark.parametrize("static_cache", ["off", "on"])
def test_rows_read_after_writing_equal_the_rows_captured_while_decoding(
    smollm: Any, monkeypatch: pytest.MonkeyPatch, static_cache: str
) -> None:
    monkeypatch.setenv("LCR_STATIC_CACHE", static_cache)
    plans: list[bool] = []
    real_settings = decoding.plan_settings

    def record(plan: Any, *args: Any) -> Any:
        plans.append(plan.static_cache)
        return real_settings(plan, *args)

    monkeypatch.setattr(decoding, "plan_settings", record)
    monkeypatch.setattr(attend, "READ_CHUNK_TOKENS", 5)  # 24 tokens read in 5 passes
    during_one, during_batch = _captured(smollm, monkeypatch, "during", max_new_tokens=24)
    assert plans == []  # the capture loop does not call generate
    before = smollm.usage.to_json()
    after_one, after_batch = _captured(smollm, monkeypatch, "after", max_new_tokens=24)
    spent = smollm.usage.to_json()
    # written by generate with the plan asked for: 3 single calls and one batch of 3
    assert plans == [static_cache == "on"] * 4
    assert during_one[0].completion_tokens == len(during_one[0].tokens) + 1 < 24  # ended
    assert during_one[1].completion_tokens == 24  # ran to the budget
    for want, got in zip(during_one, after_one, strict=True):
        _same(want, got)
    for want, got in zip(during_one, after_batch, strict=True):
        _same(want, got)
    for want, got in zip(during_batch, after_batch, strict=True):
        _same(want, got)
    # counted as the capture loop counts: each prompt and each reply once per call
    paid = 2 * sum(g.completion_tokens for g in during_one)
    assert spent["completion_tokens"] - before["completion_tokens"] == paid
    assert spent["prompt_tokens"] - before["prompt_tokens"] == 2 * sum(
        g.prompt_tokens for g in during_one
    )


def test_a_prompt_near_the_context_window_is_captured_while_decoding(
    smollm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``generate`` gives a batch one budget; a prompt whose window leaves fewer new tokens
    than asked is decoded by the capture loop, which gives each row its own."""
    prompts, spans = _prompts(smollm)
    monkeypatch.setattr(smollm, "_context_window", len(prompts[2]) + 10)
    wrote: list[int] = []
    real = type(smollm).greedy_token_replies

    def count(self: Any, batch: Any, new: int) -> Any:
        wrote.append(len(batch))
        return real(self, batch, new)

    monkeypatch.setattr(type(smollm), "greedy_token_replies", count)
    monkeypatch.setenv("LCR_ATTENTION_CAPTURE", "during")
    want = smollm.generate_with_attention_batch(prompts, spans=spans, max_new_tokens=24)
    monkeypatch.setenv("LCR_ATTENTION_CAPTURE", "after")
    got = smollm.generate_with_attention_batch(prompts, spans=spans, max_new_tokens=24)
    assert wrote == []  # the longest prompt leaves 9 new tokens of the 24: not written first
    assert want[2].completion_tokens == 9
    for a, b in zip(want, got, strict=True):
        _same(a, b)
    fits = smollm.generate_with_attention_batch(prompts[:1], spans=spans[:1], max_new_tokens=8)
    assert wrote == [1] and fits[0].tokens == want[0].tokens[:8]


def test_a_pecan_index_built_either_way_is_the_same(
    tmp_path: Path, smollm: Any, embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    models = Models.with_objects(llm=smollm, embedder=embedder)
    built = {}
    for mode in ("during", "after"):
        monkeypatch.setenv("LCR_ATTENTION_CAPTURE", mode)
        built[mode] = _index(tmp_path / f"{mode}.idx")
        api.plan_and_build(built[mode], ["pecan"], models, [*BUILD_SETS, "pecan.llm_batch=2"])
    one, other = built["during"].reader("pecan"), built["after"].reader("pecan")
    assert one.stats["llm_batches"] >= 2 and other.stats["llm_batches"] == one.stats["llm_batches"]
    assert [n.to_json() for n in other.nodes()] == [n.to_json() for n in one.nodes()]
    a, b = one.csr("edges"), other.csr("edges")
    assert np.array_equal(a.indptr, b.indptr) and np.array_equal(a.indices, b.indices)
    assert np.allclose(a.data, b.data, rtol=0, atol=ATOL)


@needs("smollm2-135m")  # the index command checks the setting once the model is found
def test_a_bad_capture_setting_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from lcr.cli.main import main

    monkeypatch.setenv("LCR_ATTENTION_CAPTURE", "Later")
    with pytest.raises(UsageError, match="LCR_ATTENTION_CAPTURE must be one of during, after"):
        attend.capture_setting()
    monkeypatch.setenv("LCR_ATTENTION_CAPTURE", " AFTER ")
    assert attend.capture_setting() == "after"
    monkeypatch.setenv("LCR_ATTENTION_CAPTURE", "sometimes")
    text = tmp_path / "t.txt"
    text.write_text("A cat sat on the mat. The dog slept by the door.", encoding="utf-8")
    with pytest.raises(SystemExit) as ex:
        main(["index", str(text), "-m", "pecan", "--llm", "smollm2-135m", "-q"])
    assert ex.value.code == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and "LCR_ATTENTION_CAPTURE" in lines[0], lines
    assert not (tmp_path / "t.idx" / "pecan").exists()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_rows_read_after_equal_the_captured(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same on CUDA, the model cast to fp32 (in bf16 two decodings may part): tokens
    and counts equal, attention within 1e-4 (CUDA's kernels for one query at a time and
    for many are not the same sums). The dynamic cache: a compile would take most of a
    minute."""
    from lcr.models.loading import load_llm
    from lcr.models.spec import ModelSpec
    from lcr.progress import NULL_PROGRESS

    monkeypatch.setenv("LCR_STATIC_CACHE", "off")
    gpu: Any = load_llm(
        ModelSpec(llm="smollm2-135m", device="cuda", backend="transformers"), NULL_PROGRESS
    )
    gpu.model.float()
    during_one, during_batch = _captured(gpu, monkeypatch, "during", max_new_tokens=24)
    after_one, after_batch = _captured(gpu, monkeypatch, "after", max_new_tokens=24)
    for want, got in zip(during_one + during_batch, after_one + after_batch, strict=True):
        assert got.tokens == want.tokens and got.completion_tokens == want.completion_tokens
        assert np.allclose(got.attention.numpy(), want.attention.numpy(), rtol=0, atol=1e-4)


def test_the_estimate_probes_rows_read_after_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    """Read after, a batch costs another prompt pass: the probe measured the other way is
    not reused (a probe is keyed by model, backend, device, machine, length and now this)."""
    from lcr.estimate import throughput
    from lcr.models.base import Role
    from lcr.models.spec import ModelSpec
    from lcr.pipeline.estimate import Estimator

    keys: list[str] = []

    def cached(key: str) -> throughput.LongAttention:
        keys.append(key)
        return throughput.LongAttention(length=7168, prefill=50.0, decode=2.0, context=7200.0)

    monkeypatch.setattr(throughput, "cached_long_attention", cached)
    estimator = Estimator(Models(spec=ModelSpec(llm="smollm2-135m")))
    for mode, backend in [("during", "transformers"), ("after", "transformers"), ("after", "x")]:
        monkeypatch.setenv("LCR_ATTENTION_CAPTURE", mode)
        assert estimator.long_attention(Role.LLM, backend, 7000) is not None
    during, after, other = keys
    assert after == during + "|read after" and during.endswith("|attention@7168")
    assert other.endswith("|attention@7168")  # a backend without the setting: unchanged
