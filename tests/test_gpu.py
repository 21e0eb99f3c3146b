"""The GPU paths, tested on a CPU: the machine's facts are faked (lcr.models.machine),
loaders record the arguments they receive, and the choices are asserted (issue #30)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from lcr import api, pipeline
from lcr.errors import ModelError
from lcr.models import backends, loading, machine
from lcr.models.backends import auto_choice, choose_backend, llm_configuration
from lcr.models.base import Capability, Role
from lcr.models.container import Models
from lcr.models.presets import PRESETS
from lcr.models.spec import ModelSpec
from lcr.progress import NULL_PROGRESS
from lcr.store import Index
from lcr.store.cache import UNKEYED, LLMCache
from tests.conftest import needs
from tests.test_raptor import CINDERELLA, HashEmbedder
from tests.test_raptor import ScriptedLLM as SummaryLLM

SMOL = "smollm2-135m"
GEN = frozenset({Capability.GENERATE})
ATTENTION = frozenset({Capability.GENERATE, Capability.ATTENTION})

CPU_ONLY = machine.Machine(torch_version="2.5.0+cpu", llamacpp_version="0.3.36")
# a CPU torch on a host whose NVIDIA driver is loaded (the README's install on a GPU box)
DRIVER_CPU_TORCH = dataclasses.replace(CPU_ONLY, nvidia_driver=True)
A100 = machine.Machine(
    torch_version="2.5.0+cu124",
    torch_cuda="12.4",
    cuda_usable=True,
    gpu_name="NVIDIA A100",
    compute_capability=(8, 0),
    nvidia_driver=True,
    llamacpp_version="0.3.36",
    llamacpp_gpu_offload=True,
    bitsandbytes_version="0.46.1",
)
T4 = dataclasses.replace(A100, gpu_name="Tesla T4", compute_capability=(7, 5))
A100_CPU_LLAMA = dataclasses.replace(A100, llamacpp_gpu_offload=False)


def fake(monkeypatch: pytest.MonkeyPatch, m: machine.Machine) -> None:
    monkeypatch.setattr(machine, "current", lambda: m)


def installed(name: str) -> bool:
    preset = PRESETS[name]
    return preset.installed()


needs_smol = needs(SMOL)
needs_llamacpp = needs("llamacpp")


# ------------------------------------------------------------ one check, auto's choice


@needs_smol
@needs_llamacpp
@pytest.mark.parametrize(
    ("facts", "backend", "device", "dtype"),
    [
        (CPU_ONLY, "llamacpp", "cpu", "gguf"),
        (DRIVER_CPU_TORCH, "llamacpp", "cpu", "gguf"),  # defect 3: not fp32 transformers
        (A100, "llamacpp", "cuda", "gguf"),  # every layer offloaded
        (A100_CPU_LLAMA, "transformers", "cuda", "bfloat16"),
        (
            dataclasses.replace(A100_CPU_LLAMA, compute_capability=(7, 0)),
            "transformers",
            "cuda",
            "float16",
        ),
    ],
)
def test_auto_reads_one_machine(
    monkeypatch: pytest.MonkeyPatch, facts: machine.Machine, backend: str, device: str, dtype: str
) -> None:
    fake(monkeypatch, facts)
    pick = auto_choice(GEN, "answering", ModelSpec(llm=SMOL))
    assert (pick.backend, pick.device, pick.dtype) == (backend, device, dtype)
    assert choose_backend("auto", GEN, "answering", ModelSpec(llm=SMOL)) == backend
    # attention (PECAN) and 4-bit always go to transformers, on the GPU when torch has one
    pecan = auto_choice(ATTENTION, "pecan", ModelSpec(llm=SMOL))
    assert pecan.backend == "transformers"
    assert pecan.device == ("cuda" if facts.gpu else "cpu")
    if facts.gpu:
        quant = auto_choice(GEN, "answering", ModelSpec(llm=SMOL, quantize="4bit"))
        assert (quant.backend, quant.dtype) == ("transformers", "4bit")


def test_resolve_device_uses_the_same_check(monkeypatch: pytest.MonkeyPatch) -> None:
    from lcr.models.transformers_core import resolve_device

    fake(monkeypatch, DRIVER_CPU_TORCH)
    assert resolve_device("auto") == "cpu"
    assert machine.current().gpu_present  # the driver is there ...
    with pytest.raises(ModelError, match=r"CPU build; install a CUDA one: pip install"):
        resolve_device("cuda")  # ... and the error says how torch gets to use it
    fake(monkeypatch, A100)
    assert resolve_device("auto") == "cuda"


def test_hidden_gpu_and_wsl2_are_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """CUDA_VISIBLE_DEVICES="" hides the GPU from llama.cpp too; WSL2's /dev/dxg counts."""
    probes: list[bool] = []
    torch_facts = machine._torch_facts

    def recorded(*, probe_gpu: bool) -> dict[str, object]:
        probes.append(probe_gpu)
        return torch_facts(probe_gpu=probe_gpu)

    monkeypatch.setattr(machine, "_torch_facts", recorded)
    monkeypatch.setattr(machine, "nvidia_driver_present", lambda: True)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    facts = machine.current.__wrapped__()  # type: ignore[attr-defined]
    assert facts.gpu_hidden and not facts.gpu_present and not facts.llamacpp_gpu
    # torch is not asked: CUDA would read the empty list once and hide a real GPU from
    # every later test in this process (seen on an H200)
    assert probes == [False] and not facts.cuda_usable
    monkeypatch.undo()
    monkeypatch.setattr(Path, "exists", lambda self: str(self) == "/dev/dxg")
    assert machine.nvidia_driver_present()  # WSL2 has no /proc/driver/nvidia


# ------------------------------------------------------------------ defect 7: dtype


@pytest.mark.parametrize(
    ("cc", "dtype"),
    [((7, 5), "float16"), ((7, 0), "float16"), ((8, 0), "bfloat16"), ((9, 0), "bfloat16")],
)
def test_pre_ampere_computes_in_fp16(
    monkeypatch: pytest.MonkeyPatch, cc: tuple[int, int], dtype: str
) -> None:
    import torch

    from lcr.models.transformers_core import compute_dtype

    fake(monkeypatch, dataclasses.replace(A100, compute_capability=cc))
    assert compute_dtype("cuda") == getattr(torch, dtype)
    assert compute_dtype("cpu") == torch.float32


# ----------------------------------------------- defect 1: the scorer's own checks


@needs_smol
@needs_llamacpp
def test_scorer_role_gets_the_device_and_quantisation_checks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake(monkeypatch, A100)
    # an installed preset that is not the LLM's name: the scorer is its own role (the LLM,
    # never loaded here, need not be installed)
    other = SMOL
    models = Models(spec=ModelSpec(llm="qwen2.5-coder-1.5b", scorer=other))
    assert models.require_role(Role.SCORER, GEN, "lightpal scoring") == "llamacpp"
    recorded: list[tuple[ModelSpec, str]] = []

    def record(spec: ModelSpec, progress: Any, backend: str = "") -> Any:
        recorded.append((spec, backend))
        return SimpleNamespace(model_id=spec.llm, backend=backend, usage=None)

    monkeypatch.setattr(loading, "load_llm", record)
    models.scorer  # noqa: B018 - loads
    spec, backend = recorded[0]
    assert (spec.llm, backend) == (other, "llamacpp")
    assert loading.llamacpp_device(spec.device) == "cuda"
    quant = Models(spec=ModelSpec(llm=SMOL, scorer=other, quantize="4bit"))
    # before: llama.cpp was picked without the spec, and loading.py refused --quantize
    assert quant.require_role(Role.SCORER, GEN, "lightpal scoring") == "transformers"


# ------------------------------------------------------- defect 4 and 5: llama.cpp


class _Stop(Exception):
    pass


@needs_llamacpp
@needs_smol
@pytest.mark.parametrize(("facts", "layers"), [(A100, -1), (CPU_ONLY, 0)])
def test_backend_llamacpp_offloads_every_layer_under_device_auto(
    monkeypatch: pytest.MonkeyPatch, facts: machine.Machine, layers: int
) -> None:
    import llama_cpp
    from llama_cpp import _internals

    from lcr.models import llamacpp_llm

    fake(monkeypatch, facts)
    monkeypatch.setattr(llama_cpp, "llama_supports_gpu_offload", lambda: True)
    # an AMX build: refused on the CPU, irrelevant with every layer on the GPU
    monkeypatch.setattr(llama_cpp, "llama_print_system_info", lambda: b"AMX_INT8 = 1 |")
    monkeypatch.delenv("LCR_LLAMACPP_AMX", raising=False)
    seen: list[int] = []

    def model(*, path_model: str, params: Any, verbose: bool) -> Any:
        seen.append(params.n_gpu_layers)
        raise ValueError("stop here")

    monkeypatch.setattr(_internals, "LlamaModel", model)
    assert llamacpp_llm.LlamaCppLLM  # loaded
    spec = ModelSpec(llm=SMOL, backend="llamacpp")  # --device auto, the default
    if layers == 0:
        with pytest.raises(ModelError, match=r"AMX kernels.*-mno-amx-int8.*--force-reinstall"):
            loading.load_llm(spec, NULL_PROGRESS, backend="llamacpp")
        monkeypatch.setenv("LCR_LLAMACPP_AMX", "1")
    with pytest.raises(ModelError, match=r"llama\.cpp cannot load"):
        loading.load_llm(spec, NULL_PROGRESS, backend="llamacpp")
    assert seen == [layers]


def test_rebuild_hints_carry_the_amx_and_cuda_flags() -> None:
    gpu = machine.llamacpp_rebuild_command(cuda=True)
    cpu = machine.llamacpp_rebuild_command(cuda=False)
    for cmd in (gpu, cpu):
        assert "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16" in cmd
        assert "--force-reinstall --no-cache-dir" in cmd
        assert "llama-cpp-python==0.3.36" in cmd
    assert "-DGGML_CUDA=on" in gpu and "GGML_CUDA" not in cpu


@needs_llamacpp
@needs_smol
def test_no_gpu_build_hint_keeps_the_amx_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    import llama_cpp

    fake(monkeypatch, A100)
    monkeypatch.setattr(llama_cpp, "llama_supports_gpu_offload", lambda: False)
    spec = ModelSpec(llm=SMOL, device="cuda")
    with pytest.raises(ModelError, match=r"no GPU support.*-DGGML_CUDA=on.*-mno-amx-int8"):
        loading.load_llm(spec, NULL_PROGRESS, backend="llamacpp")


@needs_llamacpp
def test_amx_refusal_on_a_gpu_host_names_the_cuda_build(monkeypatch: pytest.MonkeyPatch) -> None:
    import llama_cpp

    from lcr.models.llamacpp_setup import refuse_amx_build

    fake(monkeypatch, A100_CPU_LLAMA)
    monkeypatch.setattr(llama_cpp, "llama_print_system_info", lambda: b"AMX_INT8 = 1 |")
    monkeypatch.delenv("LCR_LLAMACPP_AMX", raising=False)
    with pytest.raises(ModelError, match=r"-DGGML_CUDA=on.*-mno-amx-int8"):
        refuse_amx_build()


# ------------------------------------------------- defect 2: a .gguf with --quantize


def test_a_gguf_file_with_quantize_goes_through_a_dequantized_copy(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from lcr.models.transformers_llm import TransformersLLM

    fake(monkeypatch, A100)
    monkeypatch.setenv("LCR_CACHE_DIR", str(tmp_path / "cache"))
    gguf = tmp_path / "mine.Q4_K_M.gguf"
    gguf.write_bytes(b"GGUF")
    calls: list[dict[str, Any]] = []

    def load(location: str, **kwargs: Any) -> Any:
        calls.append(dict(kwargs, location=location))
        # transformers refuses gguf_file together with quantization_config
        assert not (kwargs.get("gguf_file") and kwargs.get("quantize"))
        llm = object.__new__(TransformersLLM)
        llm.device, llm.threads = "cuda", None  # a GPU model: no CPU thread governing
        return llm

    def save(self: Any, dest: Path, dtype: str = "float32") -> None:
        (dest / "config.json").write_text("{}")

    monkeypatch.setattr(TransformersLLM, "load", load)
    monkeypatch.setattr(TransformersLLM, "save_dequantized", save)
    spec = ModelSpec(llm=str(gguf), quantize="4bit", backend="transformers")
    loading.load_llm(spec, NULL_PROGRESS, backend="transformers")
    first, second = calls
    assert (first["gguf_file"], first["device"], first["quantize"]) == (gguf.name, "cpu", None)
    assert second["gguf_file"] is None and second["quantize"] == "4bit"
    assert second["device"] == "cuda" and "file-mine.Q4_K_M-" in second["location"]
    loading.load_llm(spec, NULL_PROGRESS, backend="transformers")
    assert len(calls) == 3 and calls[2]["gguf_file"] is None  # dequantized once only


@needs_llamacpp
def test_auto_sends_a_gguf_file_to_llamacpp_on_a_gpu(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    fake(monkeypatch, A100)
    assert auto_choice(GEN, "answering", ModelSpec(llm=str(gguf))).device == "cuda"
    assert choose_backend("auto", GEN, "answering", ModelSpec(llm=str(gguf))) == "llamacpp"


# -------------------------------------------------------------- defect 9: bitsandbytes


def test_old_bitsandbytes_is_refused_before_loading(monkeypatch: pytest.MonkeyPatch) -> None:
    from lcr.models.transformers_core import check_quantize

    fake(monkeypatch, dataclasses.replace(A100, bitsandbytes_version="0.43.3"))
    with pytest.raises(ModelError, match=r"0\.46\.1 or newer \(installed: 0\.43\.3\)"):
        check_quantize("4bit", "cuda")
    fake(monkeypatch, dataclasses.replace(A100, bitsandbytes_version=None))
    with pytest.raises(ModelError, match="needs bitsandbytes"):
        check_quantize("8bit", "cuda")
    fake(monkeypatch, A100)
    check_quantize("4bit", "cuda")
    extra = Path(__file__).parents[1] / "pyproject.toml"
    assert f'"bitsandbytes>={machine.BITSANDBYTES_MIN}"' in extra.read_text()


# ------------------------------------------------------- defect 8: cache configurations


class _Like(SummaryLLM):
    """The scripted summariser, claiming a backend's configuration."""

    def __init__(self, backend: str, dtype: str | None = None, device: str = "cpu") -> None:
        super().__init__()
        self.backend = backend
        self.device = device
        self.model = SimpleNamespace(dtype=dtype)


def _raptor(index: Index, llm: _Like, *, force: bool = True) -> list[pipeline.BuildReport]:
    models = Models.with_objects(llm=llm, embedder=HashEmbedder())
    return api.plan_and_build(index, ["raptor"], models, force=force)


def test_cache_keys_hold_the_configuration(tmp_path: Path) -> None:
    llama, trans = _Like("llamacpp"), _Like("transformers", "torch.float32")
    index, _ = api.plan_and_index(
        [CINDERELLA],
        tmp_path / "b.idx",
        ["raptor"],
        Models.with_objects(llm=llama, embedder=HashEmbedder()),
    )
    assert llama.calls > 0
    _raptor(index, trans)
    assert trans.calls == llama.calls  # nothing of llama.cpp's outputs reused
    again = _Like("llamacpp")
    _raptor(index, again)
    assert again.calls == 0  # both configurations' outputs kept apart, both reusable
    gpu = _Like("transformers", "torch.bfloat16", device="cuda:0")
    _raptor(index, gpu)
    assert gpu.calls == llama.calls
    sidecar = json.loads((index.path / "cache" / "raptor.config.json").read_text())
    assert sidecar == {UNKEYED: None}  # a new cache: every key configured


def test_an_old_cache_is_reused_by_the_configuration_that_made_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # an index built before configurations were recorded: keys hold the model id alone
    with monkeypatch.context() as m:
        m.setattr(LLMCache, "llm_identity", lambda self, model_id, config: model_id)
        old = _Like("llamacpp")
        index, _ = api.plan_and_index(
            [CINDERELLA],
            tmp_path / "b.idx",
            ["raptor"],
            Models.with_objects(llm=old, embedder=HashEmbedder()),
        )
    sidecar = index.path / "cache" / "raptor.config.json"
    sidecar.unlink()  # lcr before this change wrote none
    assert index.methods["raptor"].stats["llm_backend"] == "llamacpp"
    same = _Like("llamacpp")
    _raptor(index, same)
    assert same.calls == 0  # the recorded backend on the CPU: nothing paid twice
    trans = _Like("transformers", "torch.float32")
    _raptor(index, trans)
    assert trans.calls == old.calls  # another configuration never reads them
    # the manifest now says transformers; the old keys still belong to llama.cpp
    assert index.methods["raptor"].stats["llm_backend"] == "transformers"
    back = _Like("llamacpp")
    _raptor(Index.open(index.path), back)
    assert back.calls == 0
    assert json.loads(sidecar.read_text())[UNKEYED]["backend"] == "llamacpp"


def test_up_to_date_says_when_another_configuration_built_it(tmp_path: Path) -> None:
    llama = _Like("llamacpp")
    index, _ = api.plan_and_index(
        [CINDERELLA],
        tmp_path / "b.idx",
        ["raptor"],
        Models.with_objects(llm=llama, embedder=HashEmbedder()),
    )
    assert index.methods["raptor"].stats["llm_configuration"]["backend"] == "llamacpp"
    (report,) = _raptor(index, _Like("llamacpp"), force=False)
    assert not report.built and report.note == ""
    (report,) = _raptor(index, _Like("transformers", "torch.float32"), force=False)
    assert not report.built
    assert report.note == (
        "built with llamacpp/cpu/gguf, not this run's transformers/cpu/float32; --force rebuilds it"
    )


def test_llm_configuration_of_each_backend() -> None:
    assert llm_configuration(SimpleNamespace(backend="llamacpp", device="cuda")) == {
        "backend": "llamacpp",
        "device": "cuda",
        "dtype": "gguf",
        "quantize": None,
    }
    q = SimpleNamespace(
        backend="transformers",
        device="cuda:1",
        quantize="4bit",
        model=SimpleNamespace(dtype="torch.float16"),
    )
    assert backends.describe_configuration(llm_configuration(q)) == "transformers/cuda/float16/4bit"


# ------------------------------------------------------ defect 10: scoring batch memory


def test_scoring_batches_count_the_repeated_prefix_cache() -> None:
    import torch

    from lcr.models import transformers_core as core

    llm = object.__new__(core.TransformersCore)
    # a Llama-2-7B-like scorer in bf16: 32 layers x 32 KV heads x 128 dims x 2 (K, V) x 2 bytes
    config = SimpleNamespace(num_hidden_layers=32, num_attention_heads=32, hidden_size=4096)
    llm.model = SimpleNamespace(config=config, dtype=torch.bfloat16)
    per_token = llm.kv_bytes_per_token()
    assert per_token == 2 * 32 * 32 * 128 * 2
    rows = [(i, [1] * 16) for i in range(8)]
    assert len(core._length_batches(rows, core._SCORE_BATCH_TOKENS)) == 1  # before: 16 GB of KV
    kv_tokens = core._SCORE_BATCH_KV_BYTES // per_token
    batches = core._length_batches(rows, core._SCORE_BATCH_TOKENS, 4096, kv_tokens)
    for batch in batches:
        assert len(batch) * (4096 + 16) * per_token <= core._SCORE_BATCH_KV_BYTES or len(batch) == 1
    assert [len(b) for b in batches] == [1] * 8
    short = core._length_batches(rows, core._SCORE_BATCH_TOKENS, 256, kv_tokens)
    assert [len(b) for b in short] == [8]  # a short prefix still batches everything


# ------------------------------------------------------------------------ lcr doctor


def test_doctor_names_the_fix_for_each_missing_piece(monkeypatch: pytest.MonkeyPatch) -> None:
    from lcr.cli import doctor

    spec = ModelSpec(llm=SMOL)
    fake(monkeypatch, DRIVER_CPU_TORCH)
    assert [f["command"] for f in doctor.fixes(DRIVER_CPU_TORCH, spec)] == [
        machine.cuda_torch_command("2.5.0+cpu"),
        machine.llamacpp_rebuild_command(cuda=True),
    ]
    no_offload = dataclasses.replace(A100_CPU_LLAMA, bitsandbytes_version="0.43.0")
    commands = [f["command"] for f in doctor.fixes(no_offload, spec)]
    assert commands == [machine.llamacpp_rebuild_command(cuda=True), machine.BITSANDBYTES_COMMAND]
    assert doctor.fixes(A100, spec) == []
    assert machine.cuda_torch_command("2.5.0+cpu").startswith(
        "pip install --force-reinstall torch==2.5.0 --index-url"
    )
    amx = dataclasses.replace(CPU_ONLY, llamacpp_amx=True)
    monkeypatch.delenv("LCR_LLAMACPP_AMX", raising=False)
    assert [f["command"] for f in doctor.fixes(amx, spec)] == [
        machine.llamacpp_rebuild_command(cuda=False)
    ]


@needs_smol
@needs_llamacpp
def test_doctor_says_what_auto_picks_for_each_method(monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from lcr.cli.main import cli

    fake(monkeypatch, T4)
    out = CliRunner().invoke(cli, ["doctor", "--json", "--llm", SMOL])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    picks = {row["method"]: row["llm"] for row in data["methods"]}
    assert (picks["pecan"]["backend"], picks["pecan"]["device"]) == ("transformers", "cuda")
    assert picks["pecan"]["dtype"] == "float16"  # a T4: no native bf16
    assert (picks["raptor"]["backend"], picks["raptor"]["device"]) == ("llamacpp", "cuda")
    assert data["machine"]["compute_capability"] == "7.5"
    text = CliRunner().invoke(cli, ["doctor", "--llm", SMOL]).output
    assert "Tesla T4, compute capability 7.5" in text
    assert "  pecan              transformers on cuda (float16): pecan needs attention" in text
    # what is left to fix is LightPAL's scorer, where this machine has not installed it
    scorer_missing = not PRESETS["qwen2.5-coder-0.5b"].installed()
    assert ("nothing to fix" in text) != scorer_missing, text


def test_doctor_lists_every_model_each_method_loads_and_installs_the_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue #41: doctor said "nothing to fix" while LightPAL's default scorer was not
    installed, and called the uninstalled default LLM "not a GGUF preset"."""
    from click.testing import CliRunner

    from lcr.cli.main import cli

    fake(monkeypatch, CPU_ONLY)
    missing = {"qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"}
    real = type(PRESETS["smollm2-135m"]).installed
    monkeypatch.setattr(
        type(PRESETS["smollm2-135m"]),
        "installed",
        lambda self: self.name not in missing and real(self),
    )
    data = json.loads(CliRunner().invoke(cli, ["doctor", "--json"]).output)
    models = {row["method"]: row["models"] for row in data["methods"]}
    scorer = next(m for m in models["lightpal"] if m["role"] == "scorer")
    assert (scorer["model"], scorer["phases"], scorer["installed"]) == (
        "qwen2.5-coder-0.5b",
        ["build"],
        False,
    )
    assert [m["role"] for m in models["bm25"]] == ["LLM"]
    assert [m["role"] for m in models["dense"]] == ["embedder", "LLM"]
    commands = [f["command"] for f in data["fixes"]]
    assert "lcr models install qwen2.5-coder-0.5b" in commands
    assert "lcr models install qwen2.5-coder-1.5b" in commands
    text = CliRunner().invoke(cli, ["doctor"]).output
    assert "nothing to fix" not in text
    assert "not a GGUF preset" not in text
    assert "qwen2.5-coder-0.5b (build): NOT INSTALLED" in text.replace("\n" + " " * 15, " ")
    assert all(len(line) <= 80 for line in text.splitlines()), text


@pytest.mark.parametrize(
    ("source", "cuda"),
    [
        ("from typing import Optional\ncuda: Optional[str] = None\nhip = None\n", None),
        ("__version__ = '2.5.1+cu124'\ncuda: Optional[str] = '12.4'\n", "12.4"),
        ("cuda = '11.8'\n", "11.8"),
        ("__version__ = '2.0'\n", None),  # no cuda line at all
        ("cuda = (\n", None),  # not Python
    ],
)
def test_torch_build_is_read_without_importing_torch(source: str, cuda: str | None) -> None:
    assert machine.cuda_of_version_file(source) == cuda


def test_a_machine_without_a_gpu_does_not_import_torch() -> None:
    """Reading a CPU machine costs no torch import (~2 s: most of an estimate's time)."""
    import subprocess
    import sys

    code = (
        "import sys; from lcr.models import machine; m = machine.current(); "
        "assert 'torch' not in sys.modules, 'torch imported'; print(m.torch_cuda)"
    )
    if machine.nvidia_driver_present():
        pytest.skip("this machine has a GPU driver: torch is asked about the GPU")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    import torch

    assert done.stdout.strip() == str(torch.version.cuda)
