"""``lcr doctor``: what this machine offers lcr, what ``auto`` picks for each method and
why, and the exact commands that fix what is missing (run it first on a GPU host, and
paste it into bug reports)."""

from __future__ import annotations

import json
import os
import textwrap
from dataclasses import replace
from typing import Any

import click

from lcr.cli.models import model_options, pop_model_spec
from lcr.errors import CapabilityError, LcrError
from lcr.models import machine
from lcr.models.backends import (
    auto_choice,
    choose_backend,
    llm_class_capabilities,
    planned_configuration,
)
from lcr.models.base import Capability, describe_capabilities
from lcr.models.spec import ModelSpec


def report(spec: ModelSpec) -> dict[str, Any]:
    """Everything ``lcr doctor`` says, as JSON-ready data."""
    m = machine.current()
    return {
        "machine": m.to_json(),
        "models": _models(),
        "methods": _choices(spec),
        "fixes": fixes(m, spec) + model_fixes(spec),
        "backend": spec.backend,
        "device": spec.device,
    }


def _models() -> dict[str, Any]:
    from lcr.models import cache
    from lcr.models.presets import list_presets

    folder = cache.cache_dir()
    cached = (
        sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) if folder.is_dir() else 0
    )
    installed = [
        {"name": p.name, "kind": p.kind, "download_bytes": p.download_bytes}
        for p in list_presets()
        if p.installed
    ]
    return {"installed": installed, "cache_dir": str(folder), "cache_bytes": cached}


def method_models(spec: ModelSpec) -> dict[str, list[dict[str, Any]]]:
    """Every model each method loads with its default settings and ``spec``: the role,
    the model, the phases that load it, and whether it is installed."""
    from lcr.methods import loadable_methods

    out: dict[str, list[dict[str, Any]]] = {}
    for name, method in loadable_methods(lambda line: None):  # `lcr methods` says why not
        build, query = method.build_settings(), method.query_settings()
        phases = {
            "build": method.build_needs(build),
            "retrieve": method.retrieve_needs(query),
            "answer": method.answer_needs(query),
        }
        roles: dict[tuple[str, str], list[str]] = {}
        for phase, needs in phases.items():
            if needs.embedder:
                roles.setdefault(("embedder", spec.embedder), []).append(phase)
            if needs.scorer and needs.scorer_model:
                roles.setdefault(("scorer", needs.scorer_model), []).append(phase)
            if needs.uses_llm:
                roles.setdefault(("LLM", spec.llm), []).append(phase)
        out[name] = [
            {"role": role, "model": model, "phases": used, "installed": _installed(model)}
            for (role, model), used in roles.items()
        ]
    return out


def _installed(model: str) -> bool | None:
    """Whether a preset is installed; None for a path, a hub id or a server's model,
    which lcr does not install."""
    from lcr.models.presets import PRESETS

    preset = PRESETS.get(model)
    return None if preset is None else preset.installed()


def model_fixes(spec: ModelSpec) -> list[dict[str, str]]:
    """One fix per preset a method would load that is not installed, naming the methods."""
    wanted: dict[str, list[str]] = {}
    for method, models in method_models(spec).items():
        for m in models:
            if m["installed"] is False and not (spec.base_url and m["role"] == "LLM"):
                wanted.setdefault(f"{m['role']}|{m['model']}", []).append(method)
    out = []
    for key, methods in wanted.items():
        role, model = key.split("|", 1)
        users = "every method" if len(methods) > 5 else ", ".join(methods)
        out.append(
            {
                "problem": f"the {role} {model} is not installed ({users} would load it)",
                "command": f"lcr models install {model}",
            }
        )
    return out


def _choices(spec: ModelSpec) -> list[dict[str, Any]]:
    """For each method: the models it loads, what its phases need of an LLM, and
    ``auto``'s pick for it."""
    from lcr.methods import loadable_methods

    models = method_models(spec)
    rows = []
    for name, method in loadable_methods(lambda line: None):  # `lcr methods` says why not
        build, query = method.build_settings(), method.query_settings()
        needs = method.build_needs(build) | method.retrieve_needs(query)
        row: dict[str, Any] = {"method": name, "models": models[name]}
        for role, caps, model in (
            ("llm", needs.llm | frozenset({Capability.GENERATE}), spec.llm),
            ("scorer", needs.scorer, needs.scorer_model or ""),
        ):
            if role == "scorer" and (not caps or not model or model == spec.llm):
                continue
            role_spec = replace(spec, llm=model)
            try:
                row[role] = _pick(caps, name, role_spec)
            except LcrError as exc:
                row[role] = {"error": str(exc)}
        rows.append(row)
    return rows


def _pick(caps: frozenset[Capability], purpose: str, spec: ModelSpec) -> dict[str, Any]:
    """The backend, device and dtype a run with ``spec`` would use, and why."""
    if spec.backend == "auto" and not spec.base_url:
        pick = auto_choice(caps, purpose, spec)
        return {
            "backend": pick.backend,
            "device": pick.device,
            "dtype": pick.dtype,
            "why": pick.reason,
        }
    backend = "openai" if spec.backend == "auto" else spec.backend
    if backend == "openai":
        missing = caps - llm_class_capabilities("openai")
        if missing:
            raise CapabilityError(
                f"{purpose} needs {describe_capabilities(missing)}, which a server does not give"
            )
        return {"backend": "openai", "device": "server", "dtype": None, "why": "--base-url"}
    chosen = choose_backend(backend, caps, purpose, spec)
    config = planned_configuration(chosen, spec)
    return {
        "backend": chosen,
        "device": config["device"],
        "dtype": config["quantize"] or config["dtype"],
        "why": f"--backend {backend}",
    }


def fixes(m: machine.Machine, spec: ModelSpec) -> list[dict[str, str]]:
    """What is missing or wrong, each with the one command that fixes it."""
    out: list[dict[str, str]] = []

    def fix(problem: str, command: str) -> None:
        out.append({"problem": problem, "command": command})

    if m.gpu_present and m.torch_version and m.torch_cuda is None:
        fix(
            f"an NVIDIA GPU is present but torch {m.torch_version} is a CPU build "
            "(transformers runs on the CPU)",
            machine.cuda_torch_command(m.torch_version),
        )
    elif m.nvidia_driver and m.torch_cuda and not m.cuda_usable and not m.gpu_hidden:
        fix(
            f"torch {m.torch_version} (CUDA {m.torch_cuda}) cannot use the GPU: the driver "
            "may be older than that CUDA",
            "nvidia-smi  # the driver's CUDA version must be at least torch's",
        )
    amx_allowed = os.environ.get("LCR_LLAMACPP_AMX") == "1"
    if m.llamacpp_version is None and m.xllamacpp_version is not None:
        fix(
            "llama-cpp-python is not installed: xllamacpp runs GGUF models, but LightPAL's "
            "continuation scores need llama-cpp-python (or --backend transformers)",
            machine.llamacpp_rebuild_command(cuda=m.gpu_present),
        )
    elif m.llamacpp_version is None:
        fix(
            "llama.cpp is not installed (the fastest backend for GGUF models)",
            machine.llamacpp_rebuild_command(cuda=m.gpu_present),
        )
    elif m.gpu_present and not m.llamacpp_gpu_offload:
        fix(
            "this llama-cpp-python build has no GPU offload (GGUF models run on the CPU)",
            machine.llamacpp_rebuild_command(cuda=True),
        )
    elif m.llamacpp_amx and not amx_allowed and not m.llamacpp_gpu:
        fix(
            "this llama-cpp-python build uses AMX kernels, which crash on lcr's test machines",
            machine.llamacpp_rebuild_command(cuda=m.gpu_present),
        )
    if m.gpu and not m.bitsandbytes_ok:
        have = f" (installed: {m.bitsandbytes_version})" if m.bitsandbytes_version else ""
        fix(
            f"--quantize 4bit/8bit needs bitsandbytes {machine.BITSANDBYTES_MIN} or newer{have}",
            machine.BITSANDBYTES_COMMAND,
        )
    return out


def render(data: dict[str, Any]) -> list[str]:
    """``lcr doctor``'s text: one fact per line."""
    m = data["machine"]
    lines = ["machine:"]
    torch = m["torch"] or "not installed"
    if m["torch"]:
        torch += f" (CUDA {m['torch_cuda']})" if m["torch_cuda"] else " (CPU build)"
    lines.append(f"  torch          {torch}")
    if m["cuda_usable"]:
        gpu = (
            f"  GPU            {m['gpu']}, compute capability {m['compute_capability']}, "
            f"{m['gpu_memory_gb']} GB; transformers computes in {m['gpu_dtype']}"
        )
        lines += textwrap.wrap(gpu, width=80, subsequent_indent=" " * 17)
    else:
        seen = "present but not usable by torch" if m["nvidia_driver"] else "none found"
        if m["gpu_hidden"]:
            seen = "hidden by CUDA_VISIBLE_DEVICES"
        lines.append(f"  GPU            {seen}")
    if m["llamacpp"]:
        offload = "GPU offload" if m["llamacpp_gpu_offload"] else "no GPU offload"
        amx = ", AMX kernels" if m["llamacpp_amx"] else ""
        lines.append(f"  llama.cpp      {m['llamacpp']} ({offload}{amx})")
    else:
        lines.append("  llama.cpp      not installed")
    if m.get("xllamacpp"):
        lines.append(f"  xllamacpp      {m['xllamacpp']} (prebuilt llama.cpp, CPU)")
    else:
        lines.append("  xllamacpp      not installed")
    lines.append(f"  CPU features   {' '.join(m['cpu_features']) or 'none of AVX2/AVX512'}")
    bnb = m["bitsandbytes"] or "not installed"
    if m["bitsandbytes"] and not m["bitsandbytes_ok"]:
        bnb += f" (too old: {machine.BITSANDBYTES_MIN} or newer needed)"
    lines.append(f"  bitsandbytes   {bnb}")
    models = data["models"]
    lines.append("models:")
    for p in models["installed"]:
        lines.append(f"  {p['name']:22} {p['kind']:9} {_human(p['download_bytes'])}")
    if not models["installed"]:
        lines.append("  no presets installed")
    lines.append(f"  cache          {models['cache_dir']} ({_human(models['cache_bytes'])})")
    lines.append("models each method loads (with its default settings):")
    for row in data["methods"]:
        used = [_model_text(m) for m in row["models"]]
        text = f"  {row['method']:12} " + ("; ".join(used) if used else "none")
        lines += textwrap.wrap(text, width=80, subsequent_indent=" " * 15)
    lines.append(f"picks (--backend {data['backend']} --device {data['device']}):")
    for row in data["methods"]:
        for role in ("llm", "scorer"):
            pick = row.get(role)
            if pick is None:
                continue
            label = row["method"] + (" scorer" if role == "scorer" else "")
            if "error" in pick:
                lines.append(f"  {label:18} cannot run: {pick['error']}")
            else:
                dtype = f" ({pick['dtype']})" if pick["dtype"] else ""
                text = f"  {label:18} {pick['backend']} on {pick['device']}{dtype}: {pick['why']}"
                lines += textwrap.wrap(text, width=80, subsequent_indent=" " * 21)
    lines.append("to fix:" if data["fixes"] else "nothing to fix")
    for f in data["fixes"]:
        lines += textwrap.wrap(f"{f['problem']}:", width=80, initial_indent="  ",
                               subsequent_indent="    ")  # fmt: skip
        lines += shell_lines(f["command"], indent="    ")
    return lines


def shell_lines(command: str, *, indent: str, width: int = 80) -> list[str]:
    """``command`` in lines of at most ``width`` columns, each but the last ending in a
    backslash (broken at spaces: pasted into a shell it runs as one line)."""
    parts = textwrap.wrap(
        command, width=width - len(indent) - 2, break_long_words=False, break_on_hyphens=False
    )
    return [indent + part + (" \\" if i < len(parts) - 1 else "") for i, part in enumerate(parts)]


def _model_text(m: dict[str, Any]) -> str:
    state = {True: "installed", False: "NOT INSTALLED", None: "not a preset"}[m["installed"]]
    return f"{m['role']} {m['model']} ({'/'.join(m['phases'])}): {state}"


def _human(n: float | None) -> str:
    if not n:
        return "-"
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


@click.command("doctor")
@click.option("--json", "as_json", is_flag=True, help="The same facts as one JSON object.")
@model_options
def doctor_cmd(as_json: bool, **model: Any) -> None:
    """GPU, backends, models: what auto picks, what to fix.

    Shows torch and its CUDA, llama.cpp and its GPU offload and CPU features,
    bitsandbytes, the installed models and their disk, which backend, device
    and dtype `--backend auto` picks for each method and why, and the exact
    command that fixes each problem found. Run it first on a GPU machine, and
    include it in bug reports.
    """
    data = report(pop_model_spec(model))
    if as_json:
        click.echo(json.dumps(data, ensure_ascii=False))
        return
    for line in render(data):
        click.echo(line)
