"""The OpenAI-compatible backend against servers that misbehave: one that trickles a
byte at a time, one whose body never ends, one whose JSON has the wrong shape
(issue 37). Each server is a real HTTP server on 127.0.0.1, started here."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from click.testing import CliRunner

from lcr.cli.main import cli
from lcr.errors import LLMCallError
from lcr.models.openai_llm import OpenAILLM, RetryPolicy, UrllibTransport
from lcr.models.spec import ModelSpec
from tests.conftest import REPO

CHAT_REPLY = {
    "choices": [{"message": {"role": "assistant", "content": "Gull Rock."}}],
    "usage": {"prompt_tokens": 12, "completion_tokens": 3},
}


class Behaviour:
    """What the server does for each path; ``seen`` counts the requests it got."""

    def __init__(self, models: object, chat: str) -> None:
        self.models = models  # the JSON of GET /models
        self.chat = chat  # "ok", "trickle", "endless", or a JSON text to send as it is
        self.seen = threading.Semaphore(0)
        self.stop = threading.Event()


def _handler(b: Behaviour) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # quiet
            pass

        def _json(self, obj: object) -> None:
            body = json.dumps(obj).encode() if not isinstance(obj, str) else obj.encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            self._json(b.models)

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            b.seen.release()
            if b.chat == "ok":
                return self._json(CHAT_REPLY)
            if b.chat not in ("trickle", "endless"):
                return self._json(b.chat)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            if b.chat == "trickle":
                self.send_header("Content-Length", "100000")
            self.end_headers()
            piece = b"{" if b.chat == "trickle" else b" " * 65536
            try:
                while not b.stop.is_set():
                    self.wfile.write(piece)
                    self.wfile.flush()
                    if b.chat == "trickle":
                        b.stop.wait(0.3)
            except OSError:
                pass  # the client has gone

    return Handler


@pytest.fixture()
def serve() -> Iterator[object]:
    """Start a server with a behaviour; its /v1 URL. Stopped after the test."""
    started: list[tuple[ThreadingHTTPServer, Behaviour]] = []

    def start(models: object = None, chat: str = "ok") -> tuple[str, Behaviour]:
        b = Behaviour({"data": [{"id": "m"}]} if models is None else models, chat)
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(b))
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        started.append((server, b))
        return f"http://127.0.0.1:{server.server_address[1]}/v1", b

    yield start
    for server, b in started:
        b.stop.set()
        server.shutdown()
        server.server_close()


def llm_for(url: str, call_timeout: float, **kw: object) -> OpenAILLM:
    return OpenAILLM(
        UrllibTransport(url, **kw),  # type: ignore[arg-type]
        model_id="m",
        context_window=4096,
        call_timeout=call_timeout,
        retry=RetryPolicy(attempts=5, base_s=0.05, cap_s=0.1),
    )


ASK = [{"role": "user", "content": "Which rock?"}]


def test_a_trickling_server_fails_the_call_at_its_deadline(serve) -> None:  # type: ignore[no-untyped-def]
    url, _ = serve(chat="trickle")
    llm = llm_for(url, call_timeout=1.5)
    t0 = time.monotonic()
    with pytest.raises(LLMCallError, match=r"within --call-timeout 1\.5 s") as err:
        llm.generate(ASK)
    assert time.monotonic() - t0 < 4
    assert "\n" not in str(err.value)
    t0 = time.monotonic()
    with pytest.raises(LLMCallError, match="--call-timeout"):  # a batch too, each call
        llm.generate_batch([ASK, ASK, ASK])
    assert time.monotonic() - t0 < 4


def test_an_endless_body_is_refused_at_the_size_limit(serve) -> None:  # type: ignore[no-untyped-def]
    url, b = serve(chat="endless")
    llm = llm_for(url, call_timeout=30, max_bytes=2_000_000)
    t0 = time.monotonic()
    with pytest.raises(LLMCallError, match="more than 2,000,000 bytes"):
        llm.generate(ASK)
    assert time.monotonic() - t0 < 10
    assert b.seen.acquire(timeout=0) and not b.seen.acquire(timeout=0)  # not retried


@pytest.mark.parametrize(
    "reply",
    [
        '{"choices": 5}',
        '{"choices": [{"message": {"content": ["a"]}}]}',
        '{"choices": [{"message": null}]}',
        "[1, 2]",
    ],
)
def test_a_chat_reply_of_the_wrong_shape_is_one_line(serve, reply: str) -> None:  # type: ignore[no-untyped-def]
    url, _ = serve(chat=reply)
    with pytest.raises(LLMCallError) as err:
        llm_for(url, call_timeout=5).generate(ASK)
    assert "\n" not in str(err.value) and ("reply" in str(err.value) or "JSON" in str(err.value))


@pytest.mark.parametrize(
    "reply",
    [
        '{"choices": [{"logprobs": {"content": [5]}}]}',
        '{"choices": [{"logprobs": {"content": [{"top_logprobs": 7}]}}]}',
        '{"choices": [{"logprobs": {"content": [{"top_logprobs": [3, null]}]}}]}',
    ],
)
def test_logprobs_of_the_wrong_shape_are_one_line(serve, reply: str) -> None:  # type: ignore[no-untyped-def]
    url, _ = serve(chat=reply)
    with pytest.raises(LLMCallError, match="no log-probabilities"):
        llm_for(url, call_timeout=5).choice_probability(ASK)


@pytest.mark.parametrize("listing", [{"data": 5}, {"data": [5, {"max_model_len": True}]}, []])
def test_a_models_listing_of_the_wrong_shape_falls_back_to_the_default_window(
    serve, listing: object, tmp_path: Path, cinderella: Path
) -> None:  # type: ignore[no-untyped-def]
    url, _ = serve(models=listing)
    llm = OpenAILLM.connect(ModelSpec(llm="m", backend="openai", base_url=url, call_timeout=5))
    assert llm.context_window == 8192
    # and through the command line: an answer, not an internal error
    doc = tmp_path / "doc.txt"
    doc.write_text(cinderella.read_text(encoding="utf-8"), encoding="utf-8")
    runner = CliRunner()
    result = runner.invoke(cli, ["index", str(doc), "-m", "bm25", "-q"])
    assert result.exit_code == 0, result.stderr
    args = ["ask", str(doc.with_suffix(".idx")), "Who?", "-m", "bm25", "--base-url", url]
    # the server's scripted "Gull Rock." is no word of Cinderella: the step withholds it
    result = runner.invoke(cli, [*args, "--llm", "m", "--call-timeout", "5", "--json"])
    assert result.exit_code == 0, result.stderr
    obj = json.loads(result.stdout)
    assert obj["withheld_answer"] == "Gull Rock." and "support" in obj
    assert result.stderr == ""  # the default support check reads words: no logprobs needed
    # no log-probabilities: the check's scoring call (made when the support constants
    # weigh P(yes)) cannot run, and the note says so
    from lcr.answer.needs import UNCHECKED
    from lcr.models.container import Models
    from lcr.store import Index
    from tests.asking import ask_with

    notes: list[str] = []
    models = Models(spec=ModelSpec(llm="m", backend="openai", base_url=url, call_timeout=5))
    index = Index.open(doc.with_suffix(".idx"))
    asked = ask_with(index, "bm25", "Who?", models, p_yes=True, note=notes.append)
    assert notes == [UNCHECKED] and asked.support is not None


def test_call_timeout_is_a_model_option_with_an_env_fallback() -> None:
    runner = CliRunner()
    result = runner.invoke(cli, ["ask", "x.idx", "q", "--call-timeout", "0"])
    assert result.exit_code == 2 and "--call-timeout" in result.stderr
    result = runner.invoke(cli, ["ask", "--help"])
    assert "--call-timeout" in result.stdout and "LCR_CALL_TIMEOUT" in result.stdout


BATCH_SCRIPT = """
import sys
from lcr.models.openai_llm import OpenAILLM, UrllibTransport
llm = OpenAILLM(UrllibTransport(sys.argv[1]), model_id="m", context_window=4096, concurrency=3)
print("started", flush=True)
llm.generate_batch([[{"role": "user", "content": str(i)}] for i in range(6)])
"""


def test_sigint_ends_a_batch_against_a_server_in_seconds(serve) -> None:  # type: ignore[no-untyped-def]
    """Three calls in flight on worker threads, the server trickling: Ctrl-C ends
    the process within a few seconds, not after the 600 s deadline."""
    url, b = serve(chat="trickle")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-c", BATCH_SCRIPT, url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        for _ in range(3):  # every call in flight has reached the server
            assert b.seen.acquire(timeout=20)
        time.sleep(0.3)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=10)
        assert time.monotonic() - t0 < 4
        assert proc.returncode != 0 and "KeyboardInterrupt" in (proc.stderr.read() or "")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
