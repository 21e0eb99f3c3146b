"""PECAN's batches decoded together (issue 55): the batched attention-capturing call
equals one call per prompt, the build's index does not depend on ``pecan.llm_batch``,
and ``llm_batch=0`` sizes a GPU batch by the free memory the device reports.

The model is the real SmolLM2-135M in fp32 on the CPU (mechanics, not quality).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from lcr import api, pipeline
from lcr.errors import SettingError
from lcr.methods import get_method
from lcr.models import base
from lcr.models import transformers_decode as decoding
from lcr.models.container import Models
from lcr.models.transformers_attend import span_mean_matrix
from lcr.pipeline.plans import parse_sets
from lcr.store import Document, Index
from tests.conftest import FIXTURES

pytestmark = pytest.mark.usefixtures("one_torch_thread")

BUILD_SETS = ["pecan.chunk_tokens=60", "pecan.s=140", "pecan.points_max_new_tokens=16"]
# fp32 attention rows are means of softmax weights in [0, 1]; batching changes only the
# order of float32 sums (padded keys add exact zeros, the projections run as one matrix
# product over the rows instead of one per prompt): measured differences are 3e-8 to
# 1.5e-7, so 1e-6 is ten float32 ulps at 1.0 and fails on any real change of a row
ATOL = 1e-6

QUESTIONS = [
    "What is 2 + 2? Answer with a number only.",  # ends after a few tokens
    "Count from 1 to 20, separated by commas.",  # runs to the budget
    "Write a short paragraph about lighthouses on rocky coasts, the keepers who lived "
    "in them, and why they mattered to ships at night.",  # the longest prompt
]


def _prompts(llm: Any) -> tuple[list[list[int]], list[list[tuple[int, int]]]]:
    prompts = [llm.render([{"role": "user", "content": q}]) for q in QUESTIONS]
    spans = [[(0, 3), (3, len(p) - 4), (len(p) - 4, len(p))] for p in prompts]
    return prompts, spans


def _same(one: Any, many: Any) -> None:
    assert many.tokens == one.tokens and many.text == one.text
    assert many.prompt_tokens == one.prompt_tokens
    assert many.completion_tokens == one.completion_tokens
    assert many.attention.shape == one.attention.shape
    assert np.allclose(many.attention.numpy(), one.attention.numpy(), rtol=0, atol=ATOL)


def test_a_batch_of_prompts_equals_one_call_per_prompt(smollm: Any) -> None:
    prompts, spans = _prompts(smollm)
    assert len({len(p) for p in prompts}) == 3  # three lengths: two rows are padded
    singles = [
        smollm.generate_with_attention(p, spans=s, max_new_tokens=24)
        for p, s in zip(prompts, spans, strict=True)
    ]
    assert singles[0].completion_tokens == len(singles[0].tokens) + 1 < 24  # ended early
    assert singles[1].completion_tokens == 24  # ran to the budget
    before = smollm.usage.to_json()
    batch = smollm.generate_with_attention_batch(prompts, spans=spans, max_new_tokens=24)
    after = smollm.usage.to_json()
    assert after["prompt_tokens"] - before["prompt_tokens"] == sum(len(p) for p in prompts)
    assert after["completion_tokens"] - before["completion_tokens"] == sum(
        g.completion_tokens for g in singles
    )
    for one, many in zip(singles, batch, strict=True):
        _same(one, many)
    # as on a GPU: tokens read back every 8 steps, so a finished row leaves the batch later
    for one, many in zip(
        singles,
        smollm.generate_with_attention_batch(
            prompts, spans=spans, max_new_tokens=24, every_steps=8
        ),
        strict=True,
    ):
        _same(one, many)
    # without spans: each row over its own prompt's tokens only, the padding left out
    whole = smollm.generate_with_attention_batch(prompts, max_new_tokens=24)
    for p, s, one, many in zip(prompts, spans, singles, whole, strict=True):
        assert many.attention.shape == (len(one.tokens), len(p))
        by_span = many.attention @ span_mean_matrix(s, len(p))
        assert np.allclose(by_span.numpy(), one.attention.numpy(), rtol=0, atol=ATOL)


def test_a_batch_of_one_and_the_default_loop_equal_the_one_prompt_call(smollm: Any) -> None:
    prompts, spans = _prompts(smollm)
    one = smollm.generate_with_attention(prompts[2], spans=spans[2], max_new_tokens=12)
    [alone] = smollm.generate_with_attention_batch(
        [prompts[2]], spans=[spans[2]], max_new_tokens=12
    )
    assert alone.tokens == one.tokens and torch.equal(alone.attention, one.attention)
    assert alone.completion_tokens == one.completion_tokens

    class OnePromptOnly:  # a backend with only the one-prompt call: the real model behind it
        def generate_with_attention(self, prompt: Any, **kw: Any) -> Any:
            return smollm.generate_with_attention(prompt, **kw)

    looped = base.generate_with_attention_batch(
        OnePromptOnly(),
        prompts[:2],
        spans=spans[:2],
        max_new_tokens=12,  # type: ignore[arg-type]
    )
    for p, s, got in zip(prompts[:2], spans[:2], looped, strict=True):
        want = smollm.generate_with_attention(p, spans=s, max_new_tokens=12)
        assert got.tokens == want.tokens and torch.equal(got.attention, want.attention)
    assert base.attention_batch_rows(OnePromptOnly(), [10, 20], 12) == 1  # type: ignore[arg-type]


def test_gpu_attention_batches_follow_free_memory(
    smollm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``torch.cuda.mem_get_info`` faked: ``llm_batch=0`` takes more prompts as more memory
    is free, 1 where none is known, and 1 on the CPU."""
    assert smollm.attention_batch_rows([7500, 7500, 7500], 512) == 1  # a CPU: one at a time
    free = [2**30]
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda *_: (free[0], 80 * 2**30))
    monkeypatch.setattr(smollm, "device", "cuda")
    need = decoding.attention_row_bytes(smollm.model, smollm.kv_bytes_per_token(), 7500, 512)
    assert need > decoding.row_bytes(smollm.model, smollm.kv_bytes_per_token(), 7500, 512)
    lengths = [7500] * 40
    rows_1gb = smollm.attention_batch_rows(lengths, 512)
    free[0] = 16 * 2**30
    rows_16gb = smollm.attention_batch_rows(lengths, 512)
    assert rows_16gb == min(40, (16 * 2**30 // 2) // need) and rows_16gb > rows_1gb >= 1
    assert smollm.attention_batch_rows([7500, 7500], 512) == 2  # never more than prompts
    assert smollm.attention_batch_rows([1000] * 40, 512) > rows_16gb  # shorter prompts: more

    def unreadable(*_: Any) -> Any:
        raise RuntimeError("CUDA driver initialization failed")

    monkeypatch.setattr(torch.cuda, "mem_get_info", unreadable)
    assert smollm.attention_batch_rows(lengths, 512) == 1
    assert decoding.attention_batch_rows(None, need, 40) == 1
    assert decoding.attention_batch_rows(10 * 2**20, 2**20, 40) == 5  # half the free memory


# ------------------------------------------------------------------ the build
def _index(path: Path) -> Index:
    text = (FIXTURES / "cinderella.txt").read_text(encoding="utf-8")[:1800]
    raw = text.encode("utf-8")
    return Index.create(path, [Document("c.txt", text, hashlib.sha256(raw).hexdigest(), len(raw))])


def test_the_index_does_not_depend_on_llm_batch(tmp_path: Path, smollm: Any, embedder: Any) -> None:
    models = Models.with_objects(llm=smollm, embedder=embedder)
    built: dict[int, Index] = {}
    for batch in (1, 2, 3):
        built[batch] = _index(tmp_path / f"b{batch}.idx")
        api.plan_and_build(
            built[batch], ["pecan"], models, [*BUILD_SETS, f"pecan.llm_batch={batch}"]
        )
    stats = built[1].reader("pecan").stats
    assert stats["levels"][1] >= 1 and stats["llm_batches"] >= 4  # 3+ batches on level 1
    assert stats["llm_batch_size"] == 1
    assert built[3].reader("pecan").stats["llm_batch_size"] == 3
    one = built[1].reader("pecan")
    for batch in (2, 3):
        other = built[batch].reader("pecan")
        assert [n.to_json() for n in other.nodes()] == [n.to_json() for n in one.nodes()]
        a, b = one.csr("edges"), other.csr("edges")
        assert np.array_equal(a.indptr, b.indptr) and np.array_equal(a.indices, b.indices)
        assert np.allclose(a.data, b.data, rtol=0, atol=ATOL)
        assert np.array_equal(one.array("levels"), other.array("levels"))
        assert other.stats["llm_batches"] == stats["llm_batches"]


def test_llm_batch_stays_out_of_the_cache_key_and_a_resume_pays_no_finished_group(
    tmp_path: Path, smollm: Any, embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    models = Models.with_objects(llm=smollm, embedder=embedder)
    index = _index(tmp_path / "r.idx")
    calls: list[int] = []
    real = type(smollm).generate_with_attention_batch

    def second_group_fails(self: Any, prompts: Any, **kw: Any) -> Any:
        calls.append(len(prompts))
        if len(calls) == 2:
            raise KeyboardInterrupt  # killed while the second group is decoded
        return real(self, prompts, **kw)

    monkeypatch.setattr(type(smollm), "generate_with_attention_batch", second_group_fails)
    with pytest.raises(KeyboardInterrupt):
        api.plan_and_build(index, ["pecan"], models, [*BUILD_SETS, "pecan.llm_batch=2"])
    assert calls == [2, 2] and len(index.llm_cache("pecan")) == 2  # the first group kept
    monkeypatch.setattr(type(smollm), "generate_with_attention_batch", real)
    index = Index.open(index.path)
    api.plan_and_build(index, ["pecan"], models, [*BUILD_SETS, "pecan.llm_batch=2"])
    stats = index.reader("pecan").stats
    assert stats["llm_cached"] == 2 and stats["llm_batches"] >= 2
    total = stats["llm_cached"] + stats["llm_batches"]
    # another llm_batch: every reply comes from the cache, none is generated again
    api.plan_and_build(index, ["pecan"], models, [*BUILD_SETS, "pecan.llm_batch=3"])
    again = index.reader("pecan").stats
    assert again["llm_cached"] == total and again["llm_batches"] == 0


@pytest.mark.parametrize("value", ["-1", "65", "two"])
def test_a_bad_llm_batch_is_one_line_and_exit_2(
    value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from lcr.cli.main import main

    with pytest.raises(SettingError) as err:
        pipeline.build_settings(get_method("pecan"), parse_sets([f"pecan.llm_batch={value}"]))
    assert "llm_batch" in str(err.value) and "\n" not in str(err.value)
    text = tmp_path / "t.txt"
    text.write_text("A cat sat on the mat.", encoding="utf-8")
    with pytest.raises(SystemExit) as ex:
        main(["index", str(text), "-m", "pecan", "--set", f"pecan.llm_batch={value}", "-q"])
    assert ex.value.code == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and "llm_batch" in lines[0]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_batch_equals_one_call_per_prompt() -> None:
    """The same on CUDA, the model cast to fp32 (in bf16 a batch rounds differently and
    greedy replies may part): tokens and counts equal, attention within 1e-4 (CUDA's
    kernels for a padded batch are not the one-prompt call's)."""
    from lcr.models.loading import load_llm
    from lcr.models.spec import ModelSpec
    from lcr.progress import NULL_PROGRESS

    gpu = load_llm(
        ModelSpec(llm="smollm2-135m", device="cuda", backend="transformers"), NULL_PROGRESS
    )
    gpu.model.float()
    prompts, spans = _prompts(gpu)
    singles = [
        gpu.generate_with_attention(p, spans=s, max_new_tokens=24)
        for p, s in zip(prompts, spans, strict=True)
    ]
    batch = gpu.generate_with_attention_batch(prompts, spans=spans, max_new_tokens=24)
    for one, many in zip(singles, batch, strict=True):
        assert many.tokens == one.tokens and many.completion_tokens == one.completion_tokens
        assert np.allclose(many.attention.numpy(), one.attention.numpy(), rtol=0, atol=1e-4)
    assert gpu.attention_batch_rows([len(p) for p in prompts], 24) == 3  # free memory: all


def test_a_repeated_batch_is_paid_for_once(smollm: Any) -> None:
    """Two batches of the same nodes (a text given twice) are one call, as when each
    batch was looked up in the cache just before it was generated."""
    from lcr.methods.pecan.build import Graph, _level_points
    from lcr.methods.pecan.settings import PecanBuild
    from lcr.methods.toolkit import LLMCalls
    from lcr.progress import NULL_PROGRESS
    from lcr.store import MemoryCache

    one = ["Cinderella lost a glass slipper.", "The prince searched the kingdom."]
    two = ["The stepsisters tried the slipper.", "It fitted Cinderella alone."]
    calls, graph = LLMCalls(MemoryCache()), Graph()
    params = PecanBuild(points_max_new_tokens=12, llm_batch=3)
    task = NULL_PROGRESS.task("level", total=3)
    replies = _level_points(smollm, [one, two, one], params, calls, graph, task)
    assert calls.calls == 2 and calls.cached == 1 and graph.llm_batch == 2
    assert replies[0] == replies[2] and replies[0][0]
