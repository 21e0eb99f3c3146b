"""The OpenAI-compatible backend against a real server: llama-cpp-python's own.

The server is started by this module on a free loopback port with the
smollm2-135m preset's GGUF and stopped after. Skipped, with the reason, where the
``llamacpp`` extra (with its ``server`` part) is not installed.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("llama_cpp", reason="the llamacpp extra is not installed")
pytest.importorskip("uvicorn", reason="the llamacpp extra's server part is not installed")
pytest.importorskip("fastapi", reason="the llamacpp extra's server part is not installed")

from lcr.cli.main import main
from lcr.errors import CapabilityError, LLMCallError, ModelError
from lcr.models.backends import choose_backend
from lcr.models.base import Capability, Generation
from lcr.models.container import Models
from lcr.models.openai_llm import (
    OpenAILLM,
    RetryPolicy,
    ServerError,
    UrllibTransport,
)
from lcr.models.presets import PRESETS
from lcr.models.spec import ModelSpec

SMOL = "smollm2-135m"
REPO = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """llama-cpp-python's OpenAI-compatible server on a free port; its /v1 URL."""
    paths = PRESETS[SMOL].part_paths()
    assert paths, "smollm2-135m is not installed (lcr models install smollm2-135m)"
    port = _free_port()
    cmd = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(paths[0]),
        "--model_alias",
        SMOL,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        "4096",
        "--n_threads",
        "2",
        "--verbose",
        "False",
    ]
    # the server's log goes to a file: a pipe nobody reads fills up and blocks it
    log_path = tmp_path_factory.mktemp("server") / "server.log"
    log = log_path.open("w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 120
    while True:
        if proc.poll() is not None:
            pytest.fail(f"the llama-cpp-python server exited: {log_path.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(url + "/models", timeout=2) as resp:
                if resp.status == 200:
                    break
        except OSError:
            pass
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("the llama-cpp-python server did not start within 120 s")
        time.sleep(0.5)
    yield url
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


@pytest.fixture()
def llm(server: str) -> OpenAILLM:
    return OpenAILLM.connect(ModelSpec(llm=SMOL, backend="openai", base_url=server))


def ask(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def test_generate_through_the_server(llm: OpenAILLM) -> None:
    gen = llm.generate(ask("Count from 1 to 10, separated by commas."), max_new_tokens=24)
    assert "3" in gen.text
    assert gen.prompt_tokens > 5 and 0 < gen.completion_tokens <= 24
    assert llm.usage.calls == 1 and llm.usage.completion_tokens == gen.completion_tokens
    again = llm.generate(ask("Count from 1 to 10, separated by commas."), max_new_tokens=24)
    assert again.text == gen.text  # temperature 0 and a fixed seed
    cut = llm.generate(
        ask("Count from 1 to 10, separated by commas."), max_new_tokens=24, stop=["5"]
    )
    assert "5" not in cut.text


def test_a_streamed_reply_arrives_piece_by_piece(server: str) -> None:
    """``stream: true`` through llama.cpp's server: the pieces are the reply the call
    returns, the same reply as without streaming, and its usage is counted once."""
    llm = OpenAILLM.connect(ModelSpec(llm=SMOL, backend="openai", base_url=server))
    question = ask("Count from 1 to 20, separated by commas.")
    # the server keeps the last prompt's KV cache and runs only its last token again when
    # the same prompt comes back: a first call, so that the two compared calls both do
    # that (on an AVX2 CPU one token alone and the same token at the end of the whole
    # prompt's batch come out of different kernels, and greedy smollm2 parted at "3.")
    llm.generate(question, max_new_tokens=40)
    whole = llm.generate(question, max_new_tokens=40)
    pieces: list[str] = []
    streamed = llm.generate(question, max_new_tokens=40, on_text=pieces.append)
    assert streamed.text == whole.text and "3" in streamed.text
    assert "".join(pieces) == streamed.text and len(pieces) > 5, pieces
    assert llm.usage.calls == 3 and streamed.prompt_tokens > 5
    # this server sends no usage when streaming: a token per event, as it sends them
    assert streamed.completion_tokens == len(pieces) <= 40


def test_a_streamed_reply_keeps_the_byte_limit_and_the_deadline(server: str) -> None:
    question = ask("Count from 1 to 200, separated by commas.")
    small = OpenAILLM(UrllibTransport(server, max_bytes=600), model_id=SMOL, context_window=4096)
    shown: list[str] = []
    with pytest.raises(LLMCallError, match=r"more than 600 bytes: not a chat reply"):
        small.generate(question, max_new_tokens=200, on_text=shown.append)
    assert shown  # cut mid-reply, after some of it was shown: not tried again
    # a deadline far shorter than the reply: an idle machine writes smollm2's count in
    # about a second, so 1 s was a race
    hasty = OpenAILLM(
        UrllibTransport(server), model_id=SMOL, context_window=4096, call_timeout=0.05
    )
    with pytest.raises(LLMCallError, match=r"within --call-timeout 0.05 s"):
        hasty.generate(question, max_new_tokens=400, on_text=shown.append)


def test_sampling_with_a_seed_is_repeatable_through_the_server(llm: OpenAILLM) -> None:
    """GraphReader samples at temperature 0.2 with a seed per call: the server is sent it."""
    prompt = ask("Write one sentence about a cat.")

    def sample(seed: int) -> str:
        return llm.generate(prompt, max_new_tokens=12, temperature=1.0, seed=seed).text

    sample(11)  # both calls below then reuse the server's cache of this prompt alike
    assert sample(11) == sample(11)
    assert len({sample(s) for s in range(4)}) > 1  # sampled, not greedy


def test_batch_is_sent_concurrently_and_reported_as_it_returns(server: str) -> None:
    llm = OpenAILLM.connect(ModelSpec(llm=SMOL, base_url=server, concurrency=3))
    convs = [ask(f"Say the number {n} in words.") for n in range(5)]
    seen: list[int] = []
    out = llm.generate_batch(convs, max_new_tokens=6, on_result=lambda i, g: seen.append(i))
    assert sorted(seen) == list(range(5))
    assert len(out) == 5 and all(isinstance(g, Generation) for g in out)
    assert llm.usage.calls == 5


class FlakyTransport:
    """The real transport, with chosen requests failing: how a real network misbehaves."""

    def __init__(self, inner: UrllibTransport, fail: dict[int, bool]) -> None:
        self.inner = inner
        self.fail = fail  # request number -> transient?
        self.count = 0

    def request(
        self, method: str, path: str, payload: dict[str, Any] | None, timeout: float
    ) -> dict[str, Any]:
        self.count += 1
        if self.count in self.fail:
            raise ServerError(f"injected failure {self.count}", transient=self.fail[self.count])
        return self.inner.request(method, path, payload, timeout)


def test_transient_failures_are_retried(server: str) -> None:
    transport = FlakyTransport(UrllibTransport(server), {1: True, 2: True})
    sleeps: list[float] = []
    llm = OpenAILLM(transport, model_id=SMOL, context_window=4096, sleep=sleeps.append)
    gen = llm.generate(ask("Say hi."), max_new_tokens=4)
    assert gen.completion_tokens > 0
    assert transport.count == 3 and llm.retries == 2 and len(sleeps) == 2


def test_a_call_that_fails_for_good_keeps_what_was_paid(server: str) -> None:
    transport = FlakyTransport(UrllibTransport(server), {3: False})
    llm = OpenAILLM(transport, model_id=SMOL, context_window=4096, concurrency=1)
    convs = [ask(f"Say the number {n}.") for n in range(5)]
    kept: dict[int, str] = {}
    with pytest.raises(LLMCallError, match="injected failure 3"):
        llm.generate_batch(convs, max_new_tokens=4, on_result=lambda i, g: kept.update({i: g.text}))
    assert sorted(kept) == [0, 1]  # both answers paid for before the failure reached the caller
    assert transport.count == 3  # nothing new was sent after the failure


def test_unreachable_server_fails_after_its_retries() -> None:
    port = _free_port()  # nothing listens there
    llm = OpenAILLM(
        UrllibTransport(f"http://127.0.0.1:{port}/v1"),
        model_id=SMOL,
        context_window=4096,
        retry=RetryPolicy(attempts=3, base_s=0.01, cap_s=0.02),
    )
    with pytest.raises(LLMCallError, match=r"after 3 tries.*cannot reach"):
        llm.generate(ask("hello"), max_new_tokens=2)


def test_choice_probability_from_the_servers_logprobs(llm: OpenAILLM, smollm) -> None:  # type: ignore[no-untyped-def]
    spec = ModelSpec(llm=SMOL, backend="openai", base_url=llm.transport.base_url)  # type: ignore[attr-defined]
    yes_no = frozenset({Capability.GENERATE, Capability.CHOICE_PROBABILITY})
    assert choose_backend("openai", yes_no, "mixpr retrieval", spec) == "openai"
    question = ask("Is Paris the capital of France? Answer Yes or No.")
    p = llm.choice_probability(question)
    assert 0.0 < p < 1.0
    assert abs(p - smollm.choice_probability(question)) < 0.15  # same weights, in process


def test_capabilities_a_server_lacks_are_refused_up_front(server: str) -> None:
    spec = ModelSpec(llm=SMOL, backend="openai", base_url=server)
    with pytest.raises(CapabilityError, match=r"continuation_logprob.*--backend"):
        choose_backend("openai", frozenset({Capability.CONTINUATION_LOGPROB}), "lightpal", spec)
    with pytest.raises(CapabilityError, match="--base-url"):
        choose_backend("openai", frozenset({Capability.GENERATE}), "answering", ModelSpec())
    models = Models(spec=ModelSpec(llm=SMOL, base_url=server))  # auto + a URL: the server
    assert models.require(frozenset({Capability.GENERATE}), "answering") == "openai"


def test_wrong_path_is_one_clear_line(server: str) -> None:
    llm = OpenAILLM(
        UrllibTransport(server.removesuffix("/v1") + "/nope"), model_id=SMOL, context_window=4096
    )
    with pytest.raises(LLMCallError, match="HTTP 404"):
        llm.generate(ask("hello"), max_new_tokens=2)
    with pytest.raises(ModelError, match="--base-url"):
        OpenAILLM.connect(ModelSpec(llm=SMOL))


def test_raptor_index_and_ask_through_the_server(
    server: str, tmp_path: Path, cinderella: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """End to end through the CLI: RAPTOR's summaries built concurrently by the server."""
    text = cinderella.read_text(encoding="utf-8")
    story = tmp_path / "story.txt"
    story.write_text(text[:6000], encoding="utf-8")
    common = ["--backend", "openai", "--base-url", server, "--llm", SMOL, "-q"]
    args = [
        "index",
        str(story),
        "-m",
        "raptor",
        "--set",
        "raptor.summary_max_new_tokens=24",
        "--concurrency",
        "3",
        *common,
    ]
    with pytest.raises(SystemExit) as done:
        main(args)
    assert done.value.code == 0, capsys.readouterr().err
    info = json.loads(_run_json(["info", str(tmp_path / "story.idx"), "--json"], capsys))
    usage = info["methods"]["raptor"]["stats"]["llm_usage"]
    assert usage["calls"] >= 2 and usage["completion_tokens"] > 0
    out = json.loads(
        _run_json(
            [
                "ask",
                str(tmp_path / "story.idx"),
                "Who lost a slipper?",
                "-m",
                "raptor",
                "--json",
                "--max-new-tokens",
                "16",
                *common,
            ],
            capsys,
        )
    )
    # the answer alone: the support check reads words (answer.p_yes asks the server)
    assert out["answer"] and out["usage"]["calls"] == 1
    assert out["models"]["llm"] == SMOL


def _run_json(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as done:
        main(args)
    captured = capsys.readouterr()
    assert done.value.code == 0, captured.err
    return captured.out.strip().splitlines()[-1]


def test_cli_refuses_openai_without_a_url(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "LCR_BASE_URL"}
    story = tmp_path / "s.txt"
    story.write_text("A short story about a cat. " * 20)
    proc = subprocess.run(
        [sys.executable, "-m", "lcr", "index", str(story), "-m", "raptor", "--backend", "openai"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
    )
    assert proc.returncode == 2
    assert "--base-url" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "s.idx").exists()
