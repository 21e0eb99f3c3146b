"""What this machine offers lcr's backends: read once, and read by every choice.

:func:`current` is the one place that asks about the GPU. Every decision that
depends on the hardware (``--device auto``, ``--backend auto``, the compute
dtype, llama.cpp's GPU offload, the set-up hints, ``lcr doctor``) reads the
:class:`Machine` it returns, so two checks can never disagree (a loaded driver
with a CPU build of torch is one machine, not a GPU to one check and a CPU to
another). Tests replace :func:`current` to fake a GPU.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# transformers refuses older bitsandbytes (its BITSANDBYTES_MIN_VERSION)
BITSANDBYTES_MIN = "0.46.1"
LLAMACPP_VERSION = "0.3.36"
# CPU features that matter to llama.cpp's kernels, as its system info names them
_CPU_FEATURES = ("AVX2", "AVX512", "AVX512_BF16", "AVX512_VNNI", "AMX_INT8")
_CPUINFO_FLAGS = {
    "avx2": "AVX2",
    "avx512f": "AVX512",
    "avx512_bf16": "AVX512_BF16",
    "avx512_vnni": "AVX512_VNNI",
    "amx_int8": "AMX_INT8",
}


@dataclass(frozen=True)
class Machine:
    """The facts a backend choice depends on (see the module docstring)."""

    torch_version: str | None = None
    torch_cuda: str | None = None  # the CUDA torch was built for; None: a CPU build
    cuda_usable: bool = False  # torch can run on a GPU now (driver, build, CUDA_VISIBLE_DEVICES)
    gpu_name: str | None = None
    compute_capability: tuple[int, int] | None = None
    gpu_memory_gb: float | None = None
    nvidia_driver: bool = False  # a driver or WSL2's GPU device is present
    gpu_hidden: bool = False  # CUDA_VISIBLE_DEVICES is set to nothing
    llamacpp_version: str | None = None
    llamacpp_gpu_offload: bool = False  # the build was compiled with a GPU backend
    llamacpp_amx: bool = False  # the build uses AMX kernels (crash on lcr's test machines)
    xllamacpp_version: str | None = None  # the prebuilt llama.cpp server (--backend xllamacpp)
    cpu_features: tuple[str, ...] = ()  # of the CPU itself (/proc/cpuinfo)
    bitsandbytes_version: str | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def gpu(self) -> bool:
        """A GPU transformers can use (what ``--device auto`` means for it)."""
        return self.cuda_usable

    @property
    def gpu_present(self) -> bool:
        """A GPU is there and not hidden, whether or not torch can use it."""
        return self.cuda_usable or (self.nvidia_driver and not self.gpu_hidden)

    @property
    def llamacpp_gpu(self) -> bool:
        """llama.cpp can offload every layer to a GPU here."""
        return self.llamacpp_version is not None and self.llamacpp_gpu_offload and self.gpu_present

    @property
    def native_bf16(self) -> bool:
        """bf16 in hardware (Ampere, compute capability 8.0, and newer); before it is emulated."""
        return self.compute_capability is not None and self.compute_capability >= (8, 0)

    @property
    def gpu_dtype(self) -> str:
        """What transformers computes in on this GPU: bf16 where native, else fp16."""
        return "bfloat16" if self.native_bf16 else "float16"

    @property
    def bitsandbytes_ok(self) -> bool:
        return self.bitsandbytes_version is not None and _version_at_least(
            self.bitsandbytes_version, BITSANDBYTES_MIN
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "torch": self.torch_version,
            "torch_cuda": self.torch_cuda,
            "cuda_usable": self.cuda_usable,
            "gpu": self.gpu_name,
            "compute_capability": (
                ".".join(map(str, self.compute_capability)) if self.compute_capability else None
            ),
            "gpu_memory_gb": self.gpu_memory_gb,
            "nvidia_driver": self.nvidia_driver,
            "gpu_hidden": self.gpu_hidden,
            "gpu_dtype": self.gpu_dtype if self.cuda_usable else None,
            "llamacpp": self.llamacpp_version,
            "llamacpp_gpu_offload": self.llamacpp_gpu_offload,
            "llamacpp_amx": self.llamacpp_amx,
            "xllamacpp": self.xllamacpp_version,
            "cpu_features": list(self.cpu_features),
            "bitsandbytes": self.bitsandbytes_version,
            "bitsandbytes_ok": self.bitsandbytes_ok,
        }


@functools.cache
def current() -> Machine:
    """This machine, detected once per process (torch is imported only when a GPU
    device node exists: without one CUDA cannot be usable)."""
    driver = nvidia_driver_present()
    hidden = (
        os.environ.get("CUDA_VISIBLE_DEVICES") is not None
        and not os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
    )
    # a hidden GPU is not asked about: CUDA reads CUDA_VISIBLE_DEVICES once per process, so
    # asking with it empty would hide the GPU from everything after in this process too
    torch_facts = _torch_facts(probe_gpu=driver and not hidden)
    llama = _llamacpp_facts()
    return Machine(
        **torch_facts,
        nvidia_driver=driver,
        gpu_hidden=hidden,
        **llama,
        cpu_features=cpu_features(),
        bitsandbytes_version=_dist_version("bitsandbytes"),
        xllamacpp_version=_dist_version("xllamacpp"),
    )


def nvidia_driver_present() -> bool:
    """An NVIDIA driver on Linux, or WSL2's GPU device (WSL2 has no /proc/driver/nvidia)."""
    return any(
        Path(p).exists() for p in ("/proc/driver/nvidia/version", "/dev/nvidia0", "/dev/dxg")
    )


def _torch_facts(*, probe_gpu: bool) -> dict[str, Any]:
    version = _dist_version("torch")
    if version is None:
        return {}
    facts: dict[str, Any] = {"torch_version": version}
    if not probe_gpu:  # no GPU to ask about: read the build without importing torch (~2 s)
        facts["torch_cuda"] = _torch_build_cuda()
        return facts
    try:
        import torch
    except Exception:  # a broken install: transformers will say why when it loads
        return facts
    facts["torch_cuda"] = torch.version.cuda
    if torch.version.cuda is None:
        return facts
    try:
        if torch.cuda.is_available():
            props = torch.cuda.get_device_properties(0)
            facts.update(
                cuda_usable=True,
                gpu_name=str(props.name),
                compute_capability=(int(props.major), int(props.minor)),
                gpu_memory_gb=round(props.total_memory / 2**30, 1),
            )
    except Exception:  # a driver/runtime mismatch: torch cannot use the GPU
        pass
    return facts


def _torch_build_cuda() -> str | None:
    """The CUDA version torch was built for, read from ``torch/version.py`` as text."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        path = Path(folder) / "version.py"
        if path.is_file():
            return cuda_of_version_file(path.read_text(encoding="utf-8", errors="replace"))
    return None


def cuda_of_version_file(source: str) -> str | None:
    """``cuda`` as torch's generated ``version.py`` assigns it (None for a CPU build)."""
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.AnnAssign):
            targets: list[ast.expr] = [node.target]
        elif isinstance(node, ast.Assign):
            targets = node.targets
        else:
            continue
        named = any(isinstance(t, ast.Name) and t.id == "cuda" for t in targets)
        if named and isinstance(node.value, ast.Constant):
            return str(node.value.value) if node.value.value is not None else None
    return None


def _llamacpp_facts() -> dict[str, Any]:
    if importlib.util.find_spec("llama_cpp") is None:
        return {}
    version = _dist_version("llama_cpp_python") or _dist_version("llama-cpp-python")
    try:
        import llama_cpp

        offload = bool(llama_cpp.llama_supports_gpu_offload())
        info = llama_cpp.llama_print_system_info().decode("utf-8", errors="replace")
    except Exception:  # the shared library does not load: lcr says so when it is used
        return {"llamacpp_version": version}
    return {
        "llamacpp_version": version or "unknown",
        "llamacpp_gpu_offload": offload,
        "llamacpp_amx": "AMX_INT8 = 1" in info,
    }


def cpu_features() -> tuple[str, ...]:
    """The CPU's SIMD features llama.cpp's kernels use, from /proc/cpuinfo."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="ascii", errors="replace")
    except OSError:
        return ()
    flags: set[str] = set()
    for line in text.splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
    return tuple(name for flag, name in _CPUINFO_FLAGS.items() if flag in flags)


def _dist_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _version_at_least(version: str, floor: str) -> bool:
    def parts(v: str) -> tuple[int, ...]:
        out = []
        for piece in v.split("+")[0].split("."):
            digits = "".join(c for c in piece if c.isdigit())
            if not digits:
                break
            out.append(int(digits))
        return tuple(out)

    return parts(version) >= parts(floor)


# ------------------------------------------------------------------ fix commands


def llamacpp_rebuild_command(*, cuda: bool) -> str:
    """The one command that reinstalls llama-cpp-python as lcr needs it: without the AMX
    kernels (they crash on lcr's test machines) and, for a GPU, with CUDA offload."""
    amx = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
    flags = f"-DLLAVA_BUILD=OFF -DCMAKE_C_FLAGS='{amx}' -DCMAKE_CXX_FLAGS='{amx}'"
    if cuda:
        flags = "-DGGML_CUDA=on " + flags
    return (
        f'CMAKE_ARGS="{flags}" pip install --force-reinstall --no-cache-dir --no-deps '
        f"llama-cpp-python=={LLAMACPP_VERSION}"
    )


CUDA_WHEELS = "cu126"  # PyTorch's CUDA 12.6 wheels: drivers 560 and newer


def cuda_torch_command(torch_version: str | None = None) -> str:
    """Reinstall the same torch version as a CUDA build (``cuXYZ``: pick the one your
    driver supports from pytorch.org if this one is too new for it)."""
    pin = f"torch=={torch_version.split('+')[0]}" if torch_version else "torch"
    return (
        f"pip install --force-reinstall {pin} "
        f"--index-url https://download.pytorch.org/whl/{CUDA_WHEELS}"
    )


BITSANDBYTES_COMMAND = (
    f"pip install 'bitsandbytes>={BITSANDBYTES_MIN}'  # or: pip install 'lcr[gpu]'"
)
