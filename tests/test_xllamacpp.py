"""The xllamacpp backend (issue #73): the same GGUF presets run in process through
xllamacpp's prebuilt llama.cpp server, so set-up compiles nothing.

The real-model tests load smollm2-135m's GGUF and are skipped, naming the local
extra, where xllamacpp is not installed; the backend choice, the refusals and the
GGUF header reader need no engine.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import signal
import struct
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from lcr.cli.main import cli
from lcr.errors import CapabilityError, ModelError
from lcr.models import backends, loading, machine
from lcr.models.backends import choose_backend
from lcr.models.base import LLM, Capability
from lcr.models.gguf_header import header_value
from lcr.models.presets import PRESETS
from lcr.models.spec import ModelSpec
from lcr.models.xllamacpp_llm import XLlamaCppLLM, yes_share
from lcr.progress import NULL_PROGRESS
from tests.conftest import missing, needs

SMOL = "smollm2-135m"
GENERATE = frozenset({Capability.GENERATE})
CONTINUATION = frozenset({Capability.GENERATE, Capability.CONTINUATION_LOGPROB})
needs_engine = needs(SMOL, "xllamacpp")


def ask(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def run(args: list[str]) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, args, prog_name="lcr")
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def xl() -> XLlamaCppLLM:
    for part in (SMOL, "xllamacpp"):
        reason = missing(part)
        if reason is not None:
            pytest.skip(reason)
    llm = loading.load_llm(ModelSpec(llm=SMOL, device="cpu"), NULL_PROGRESS, backend="xllamacpp")
    assert isinstance(llm, XLlamaCppLLM)
    return llm


@pytest.fixture
def cpu_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine without a GPU: the CPU choice, whatever the host has."""
    cpu = dataclasses.replace(
        machine.current(), cuda_usable=False, nvidia_driver=False, llamacpp_gpu_offload=False
    )
    monkeypatch.setattr(machine, "current", lambda: cpu)


def installed_only(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    """Backends other than ``names`` (and openai, transformers) read as not installed."""
    real = backends.Backend.installed

    def installed(self: backends.Backend) -> bool:
        if self.name in ("llamacpp", "xllamacpp"):
            return self.name in names
        return real(self)

    monkeypatch.setattr(backends.Backend, "installed", installed)


# ------------------------------------------------------------- a real model


@pytest.mark.slow
def test_generates_with_the_gguf_template_and_counts_usage(xl: XLlamaCppLLM) -> None:
    assert isinstance(xl, LLM) and xl.backend == "xllamacpp"
    assert xl.context_window == 8192  # smollm2's trained window, read from the GGUF header
    before = xl.usage.calls
    question = ask("What is the capital of France? Answer in one word.")
    one = xl.generate(question, max_new_tokens=12)
    two = xl.generate(question, max_new_tokens=12)
    assert "Paris" in one.text and one.text == two.text  # greedy: the same reply
    assert one.prompt_tokens == len(xl.render(question))
    assert 0 < one.completion_tokens <= 12
    assert xl.usage.calls == before + 2
    assert xl.usage.cached_tokens >= one.prompt_tokens - 1  # the second call reused the prompt
    assert "<|im_start|>user" in xl.render_text(ask("hi"))
    assert xl.count_tokens("Hello world") == len(xl.encode("Hello world")) > 0


@pytest.mark.slow
def test_streamed_pieces_are_the_reply_and_stop_strings_cut_it(xl: XLlamaCppLLM) -> None:
    heard: list[str] = []
    question = ask("Count from one to ten in words, separated by commas.")
    whole = xl.generate(question, max_new_tokens=24)
    streamed = xl.generate(question, max_new_tokens=24, on_text=heard.append)
    assert len(heard) > 1 and "".join(heard) == streamed.text == whole.text
    cut = xl.generate(question, max_new_tokens=24, stop=[","])
    assert "," not in cut.text and whole.text.startswith(cut.text)


@pytest.mark.slow
def test_ctrl_c_stops_a_generation_at_the_next_token(xl: XLlamaCppLLM) -> None:
    """The engine swallows a signal raised inside its callback, so a plain call ran to
    its last token (245 s for 2,000 at load 15) before Ctrl-C was seen."""
    story = ask("Write a long story about a lighthouse keeper.")
    timer = threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT))
    started = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        xl.generate(story, max_new_tokens=2000)
    assert time.monotonic() - started < 30
    assert xl.generate(ask("Say hi."), max_new_tokens=4).completion_tokens > 0


@pytest.mark.slow
def test_yes_no_score_comes_from_the_top_next_tokens(xl: XLlamaCppLLM) -> None:
    p = xl.choice_probability(ask("Is Paris in France? Answer Yes or No."))
    assert 0.0 < p < 1.0
    if missing("llamacpp") is None:  # the same score as llama-cpp-python reads from the logits
        from lcr.models.llamacpp_llm import LlamaCppLLM

        paths = PRESETS[SMOL].part_paths()
        assert paths
        ref = LlamaCppLLM.load(paths[0], model_id=SMOL, context_window=4096, threads=1)
        assert abs(p - ref.choice_probability(ask("Is Paris in France? Answer Yes or No."))) < 0.03


@pytest.mark.slow
def test_continuation_scores_are_refused_in_one_line_naming_the_extra(xl: XLlamaCppLLM) -> None:
    with pytest.raises(ModelError, match=r"pip install 'lcr\[llamacpp\]'"):
        xl.continuation_logprobs("The cat", [" sat."])


@pytest.mark.slow
@needs_engine
def test_a_prompt_over_the_window_is_a_clear_error() -> None:
    paths = PRESETS[SMOL].part_paths()
    assert paths
    small = XLlamaCppLLM.load(paths[0], model_id=SMOL, context_window=256, threads=1)
    with pytest.raises(ModelError, match="does not fit the context window"):
        small.generate(ask("word " * 400), max_new_tokens=4)
    assert small.generate(ask("Say hi."), max_new_tokens=4).completion_tokens > 0


@pytest.mark.slow
@needs_engine
def test_ask_says_not_found_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The answer step on xllamacpp: a question the story does not answer is "not found",
    after the model was asked (one call, its tokens counted)."""
    monkeypatch.setenv("LCR_THREADS", "1")
    story = tmp_path / "lighthouse.txt"
    shutil.copy(Path(__file__).resolve().parents[1] / "examples" / "lighthouse.txt", story)
    code, _, err = run(["index", str(story), "-q", "-m", "bm25"])
    assert code == 0, err
    args = ["ask", str(story.with_suffix(".idx")), "What is the boiling point of mercury?"]
    args += ["-m", "bm25", "--llm", SMOL, "--backend", "xllamacpp", "--json"]
    code, out, err = run([*args, "--max-new-tokens", "16"])
    assert code == 0, err
    reply = json.loads(out)
    assert reply["answer"] == "not found in the document"
    assert reply["models"]["llm_run"] == "xllamacpp/cpu/gguf"
    assert reply["usage"]["calls"] >= 1 and reply["usage"]["completion_tokens"] > 0


# ----------------------------------------------- choices and refusals (no engine)


def test_a_need_xllamacpp_lacks_is_refused_naming_the_llamacpp_extra() -> None:
    extra = r"--backend llamacpp \(pip install 'lcr\[llamacpp\]'\)"
    with pytest.raises(CapabilityError, match=extra):
        choose_backend("xllamacpp", CONTINUATION, "lightpal retrieval", ModelSpec(llm=SMOL))
    attention = frozenset({Capability.ATTENTION})
    with pytest.raises(CapabilityError, match="--backend transformers"):
        choose_backend("xllamacpp", attention, "pecan retrieval", ModelSpec(llm=SMOL))


def test_lightpal_on_xllamacpp_fails_before_any_work(tmp_path: Path) -> None:
    story = tmp_path / "lighthouse.txt"
    shutil.copy(Path(__file__).resolve().parents[1] / "examples" / "lighthouse.txt", story)
    code, out, err = run(["index", str(story), "-m", "lightpal", "--backend", "xllamacpp"])
    assert code != 0 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "continuation_logprob" in lines[0], err
    assert "lcr[llamacpp]" in lines[0]
    assert not story.with_suffix(".idx").exists()


@needs(SMOL)
def test_auto_prefers_llama_cpp_python_then_xllamacpp(
    monkeypatch: pytest.MonkeyPatch, cpu_only: None
) -> None:
    spec = ModelSpec(llm=SMOL)
    installed_only(monkeypatch, "llamacpp", "xllamacpp")
    assert choose_backend("auto", GENERATE, "answering", spec) == "llamacpp"
    assert choose_backend("auto", CONTINUATION, "lightpal", spec) == "llamacpp"
    installed_only(monkeypatch, "xllamacpp")
    assert choose_backend("auto", GENERATE, "answering", spec) == "xllamacpp"
    choice = backends.auto_choice(GENERATE, "answering", spec)
    assert (choice.device, choice.dtype) == ("cpu", "gguf")
    yes_no = GENERATE | {Capability.CHOICE_PROBABILITY, Capability.PREFIX_CACHE}
    assert choose_backend("auto", yes_no, "answering", spec) == "xllamacpp"
    with pytest.raises(CapabilityError, match=r"pip install 'lcr\[llamacpp\]'"):
        choose_backend("auto", CONTINUATION, "lightpal retrieval", spec)
    # attention: neither llama.cpp engine has it, so transformers, as before
    attention = frozenset({Capability.ATTENTION})
    assert choose_backend("auto", attention, "pecan", spec) == "transformers"
    installed_only(monkeypatch)
    assert choose_backend("auto", GENERATE, "answering", spec) == "transformers"


def test_doctor_names_the_prebuilt_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    from lcr.cli import doctor

    with_x = dataclasses.replace(machine.current(), llamacpp_version=None, xllamacpp_version="9.9")
    monkeypatch.setattr(machine, "current", lambda: with_x)
    lines = doctor.render({**doctor.report(ModelSpec()), "machine": with_x.to_json()})
    assert any(line.startswith("  xllamacpp      9.9 (prebuilt llama.cpp") for line in lines)
    problems = doctor.fixes(with_x, ModelSpec())
    assert any("LightPAL" in p["problem"] for p in problems)


def test_yes_share_counts_an_unlisted_answer_at_the_listed_floor() -> None:
    lp = {1: math.log(0.6), 2: math.log(0.3), 3: math.log(0.1)}
    assert yes_share(lp, frozenset({1}), frozenset({2})) == pytest.approx(0.6 / 0.9)
    assert yes_share(lp, frozenset({1, 3}), frozenset({2})) == pytest.approx(0.7 / 1.0)
    assert yes_share(lp, frozenset({1}), frozenset({9})) == pytest.approx(0.6 / 0.7)
    assert yes_share(lp, frozenset({8}), frozenset({9})) == pytest.approx(0.5)
    assert yes_share({}, frozenset({8}), frozenset({9})) == 0.5


# --------------------------------------------------------------- the GGUF header


def _gguf(path: Path, pairs: list[tuple[str, int, bytes]]) -> Path:
    out = b"GGUF" + struct.pack("<IQQ", 3, 0, len(pairs))
    for key, kind, value in pairs:
        out += struct.pack("<Q", len(key)) + key.encode() + struct.pack("<I", kind) + value
    path.write_bytes(out)
    return path


def test_header_value_reads_past_arrays_and_strings(tmp_path: Path) -> None:
    tokens = struct.pack("<IQ", 8, 2) + b"".join(
        struct.pack("<Q", len(t)) + t for t in (b"<s>", b"hi")
    )
    floats = struct.pack("<IQ", 6, 3) + struct.pack("<3f", 1, 2, 3)
    name = struct.pack("<Q", 5) + b"llama"
    f = _gguf(
        tmp_path / "m.gguf",
        [
            ("general.architecture", 8, name),
            ("tokenizer.ggml.tokens", 9, tokens),
            ("tokenizer.ggml.scores", 9, floats),
            ("llama.context_length", 4, struct.pack("<I", 4096)),
        ],
    )
    assert header_value(f, ".context_length") == 4096
    assert header_value(f, ".architecture") == "llama"
    assert header_value(f, ".embedding_length") is None
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"NOPE" + b"\0" * 20)
    with pytest.raises(ModelError, match="is not a GGUF file"):
        header_value(bad, ".context_length")
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(f.read_bytes()[:40])
    with pytest.raises(ModelError, match="damaged GGUF header"):
        header_value(cut, ".context_length")


@needs(SMOL)
def test_header_value_of_the_preset() -> None:
    paths = PRESETS[SMOL].part_paths()
    assert paths
    assert header_value(paths[0], ".context_length") == 8192
