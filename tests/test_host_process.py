"""lcr used as a library leaves the host process as it found it (docs/python-api.md,
"What lcr changes in your process").

Each check runs in a fresh interpreter: the environment, torch's thread count and
llama.cpp's log callback are read before ``import lcr`` and after lcr's calls.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Prints what the host sees: the environment, torch's threads, llama.cpp's log callback.
STATE = """
import ctypes, json, os
def state():
    import torch
    out = {"env": dict(os.environ), "torch_threads": torch.get_num_threads()}
    try:
        import llama_cpp
    except ImportError:
        return out
    cb, data = llama_cpp.llama_log_callback(), ctypes.c_void_p()
    llama_cpp.llama_log_get(ctypes.byref(cb), ctypes.byref(data))
    out["llama_log"] = [ctypes.cast(cb, ctypes.c_void_p).value, data.value]
    return out
"""


def run_python(code: str, cwd: Path) -> dict[str, dict[str, object]]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("HF_HUB_OFFLINE", None)
    env.pop("TOKENIZERS_PARALLELISM", None)
    proc = subprocess.run(
        [sys.executable, "-c", STATE + code],
        capture_output=True, text=True, env=env, cwd=cwd, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result: dict[str, dict[str, object]] = json.loads(proc.stdout.splitlines()[-1])
    return result


def test_import_lcr_and_a_retrieval_change_nothing(tmp_path: Path, cinderella: Path) -> None:
    code = f"""
import torch
torch.set_num_threads(2)
before = state()
import lcr
from lcr.models import machine
book = lcr.index({str(cinderella)!r}, {str(tmp_path / "c.idx")!r}, methods=["bm25"])
lcr.retrieve(book, "Who hid the key?", method="bm25")
machine.current()
print(json.dumps({{"before": before, "after": state()}}))
"""
    seen = run_python(code, tmp_path)
    assert seen["after"] == seen["before"]


def test_llama_logs_are_quiet_only_during_lcrs_calls(tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp", reason="the llamacpp extra is not installed")
    code = """
import llama_cpp
before = state()
from lcr.models.llamacpp_setup import quiet_llama_logs
with quiet_llama_logs():
    during = state()
print(json.dumps({"before": before, "during": during, "after": state()}))
"""
    seen = run_python(code, tmp_path)
    assert seen["during"]["llama_log"] != seen["before"]["llama_log"]
    assert seen["after"] == seen["before"]


def test_hub_offline_is_set_for_lcrs_loads_only(tmp_path: Path) -> None:
    code = """
before = state()
from lcr.models.loading import hub_offline
with hub_offline():
    during = state()
print(json.dumps({"before": before, "during": during, "after": state()}))
"""
    seen = run_python(code, tmp_path)
    assert seen["during"]["env"]["HF_HUB_OFFLINE"] == "1"  # type: ignore[index]
    assert seen["after"] == seen["before"]


@pytest.mark.slow  # loads smollm2 on llama.cpp
def test_a_llamacpp_answer_leaves_the_log_callback(tmp_path: Path, cinderella: Path) -> None:
    pytest.importorskip("llama_cpp", reason="the llamacpp extra is not installed")
    code = f"""
import llama_cpp
before = state()
import lcr
book = lcr.index({str(cinderella)!r}, {str(tmp_path / "c.idx")!r}, methods=["bm25"])
models = lcr.use_models(llm="smollm2-135m", backend="llamacpp", device="cpu")
lcr.ask(book, "Who hid the key?", method="bm25", models=models, max_new_tokens=4)
after = state()
print(json.dumps({{"before": before["llama_log"], "after": after["llama_log"]}}))
"""
    seen = run_python(code, tmp_path)
    assert seen["after"] == seen["before"]
