"""A preset's GGUF checked on first use in each process (#72 row 10c): another file in
its place (a shared cache where someone put SmolLM2's file under the default model's
name, a truncated copy) is refused in one line, exit 1, instead of loading and being
recorded under the preset's name."""

from __future__ import annotations

import dataclasses
import hashlib
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import lcr
from lcr.cli.main import cli
from lcr.errors import ModelError
from lcr.models import loading
from lcr.models.presets import PRESETS, Preset, fingerprint
from lcr.progress import NULL_PROGRESS

SMOLLM = "smollm2-135m"
STORY = "The keeper of Gull Rock lit the lamp at dusk.\n\nSilas brought the stores on Thursday."


def smollm_file() -> Path:
    parts = PRESETS[SMOLLM].part_paths()
    if parts is None:
        pytest.skip("smollm2-135m is not installed (lcr models install smollm2-135m)")
    return parts[0]


def with_file(monkeypatch: pytest.MonkeyPatch, name: str, path: Path) -> None:
    """The preset ``name`` reads its single part from ``path``."""
    original = Preset.part_paths

    def part_paths(self: Preset) -> list[Path] | None:
        return [path] if self.name == name else original(self)

    monkeypatch.setattr(Preset, "part_paths", part_paths)


def other_tail(source: Path, dest: Path) -> None:
    """``source``'s bytes, its last byte changed: the same size, other content."""
    data = bytearray(source.read_bytes())
    data[-1] ^= 0xFF
    dest.write_bytes(bytes(data))


def test_the_installed_smollm2_file_is_the_one_the_preset_names() -> None:
    path = smollm_file()
    preset = PRESETS[SMOLLM]
    assert fingerprint([path]) == preset.expected_gguf() == (98_362_432, preset.gguf_fingerprint)


def test_a_swapped_smollm2_file_is_refused_in_one_line_exit_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = smollm_file()
    copy = tmp_path / "model.gguf"
    shutil.copyfile(real, copy)
    with_file(monkeypatch, SMOLLM, copy)
    doc = tmp_path / "story.txt"
    doc.write_text(STORY, encoding="utf-8")
    lcr.index(doc, tmp_path / "story.idx", methods=["bm25"])
    ask = ["ask", str(tmp_path / "story.idx"), "Who brought the stores?", "--llm", SMOLLM]
    ask += ["--backend", "llamacpp", "-q", "--answer-only", "--max-new-tokens", "4"]

    def run() -> Any:
        return CliRunner().invoke(cli, ask, prog_name="lcr")

    good = run()
    assert good.exit_code == 0, good.output  # the preset's own file loads and answers
    for swap in ("other tail", "truncated", "longer"):  # the first loads, unchecked
        copy.unlink()
        if swap == "truncated":
            copy.write_bytes(real.read_bytes()[: 50 * 1024 * 1024])
        elif swap == "other tail":
            other_tail(real, copy)
        else:  # SmolLM2 with a changed header byte and more bytes after it
            data = bytearray(real.read_bytes())
            data[100] ^= 0x01
            copy.write_bytes(bytes(data) + b"\0" * 4096)
        res = run()
        lines = res.stderr.splitlines()
        assert res.exit_code == 1, (swap, res.output)
        assert len(lines) == 1 and lines[0].startswith(f"lcr: {copy} is not the model {SMOLLM}")
        assert "reinstall it with: lcr models install smollm2-135m" in lines[0]
        assert "internal error" not in res.output


def test_a_swapped_joined_file_in_the_shared_cache_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A preset split in parts, joined once into $LCR_CACHE_DIR/gguf/NAME.gguf (as the
    default model is): another file put there later is refused, in a new process (the
    check is per process) and in this one once the file changed under it."""
    real = smollm_file()
    data = real.read_bytes()
    half = len(data) // 2
    (tmp_path / "p1.bin").write_bytes(data[:half])
    (tmp_path / "p2.bin").write_bytes(data[half:])
    parts = [tmp_path / "p1.bin", tmp_path / "p2.bin"]
    preset = dataclasses.replace(
        PRESETS[SMOLLM],
        name="split-model",
        parts=(PRESETS[SMOLLM].parts[0], PRESETS[SMOLLM].parts[0]),
        sha256=hashlib.sha256(data).hexdigest(),
        gguf_bytes=None,
        gguf_fingerprint=None,
    )
    monkeypatch.setattr(Preset, "part_paths", lambda self: parts)
    monkeypatch.setenv("LCR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(loading, "_CHECKED", {})
    joined = loading._ensure_gguf(preset, NULL_PROGRESS)
    assert joined == tmp_path / "cache" / "gguf" / "split-model.gguf"
    assert preset.expected_gguf() == fingerprint([joined]) == fingerprint([real])
    assert loading._ensure_gguf(preset, NULL_PROGRESS) == joined  # checked, and the same
    other_tail(real, tmp_path / "other.gguf")
    (tmp_path / "other.gguf").replace(joined)  # the same size: only the hash tells
    with pytest.raises(ModelError, match="is not the model split-model \\(other content\\)"):
        loading._ensure_gguf(preset, NULL_PROGRESS)
    monkeypatch.setattr(loading, "_CHECKED", {})  # a new process: its first use checks
    joined.write_bytes(data[: len(data) - 7])
    with pytest.raises(ModelError, match="delete it and run the command again") as caught:
        loading._ensure_gguf(preset, NULL_PROGRESS)
    assert "\n" not in str(caught.value) and f"{len(data) - 7:,} bytes" in str(caught.value)
