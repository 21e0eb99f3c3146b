"""Twenty MCP clients asking at once through one ``lcr serve --http`` whose LLM is an
OpenAI-compatible server (``--base-url``) with ``--concurrency 4``: every client gets the
answer the CLI gives to its own question, and the server never has more than four LLM
calls in flight, nor only one (the queue lets four run together).

The LLM server here is a small scripted one that counts the calls in flight; it answers
with the last words of the prompt, which end with the question, so an answer delivered
to the wrong client would show it. The MCP side, the server, the pipeline and the CLI
are the real ones.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import pytest

import lcr as lcr_api
from tests.conftest import FIXTURES
from tests.terminal import _Handler
from tests.test_serve import QUESTIONS, TOKEN, HttpServer, call, lcr_json

pytestmark = pytest.mark.slow  # a server process

CONCURRENCY = 4


class _Counting(_Handler):
    """The scripted server of tests/terminal.py, counting the calls in flight."""

    lock = threading.Lock()
    in_flight = 0
    most = 0
    calls = 0

    def do_POST(self) -> None:
        payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        cls = type(self)
        with cls.lock:
            cls.in_flight += 1
            cls.calls += 1
            cls.most = max(cls.most, cls.in_flight)
        try:
            time.sleep(0.3)  # long enough for the queue's limit to show
            words = payload["messages"][-1]["content"].split()
            self._reply(
                {
                    "choices": [
                        {"message": {"content": " ".join(words[-8:])}, "finish_reason": "stop"}
                    ],
                    "usage": {"prompt_tokens": len(words), "completion_tokens": 8},
                }
            )
        finally:
            with cls.lock:
                cls.in_flight -= 1


@pytest.fixture(scope="module")
def llm_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Counting)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()


def test_twenty_clients_ask_at_once_and_at_most_concurrency_llm_calls_run(
    llm_server: str, tmp_path: Path
) -> None:
    folder = tmp_path / "served"
    folder.mkdir()
    shutil.copy(FIXTURES / "cinderella.txt", folder / "tale.txt")
    lcr_api.index([folder / "tale.txt"], folder / "tale.idx", methods=["bm25"])
    # the answer read whole, so one LLM call an ask: the CLI's answer is the one to match
    sets = {"answer.select": "off"}
    cli = [
        lcr_json(
            "ask",
            str(folder / "tale.idx"),
            q,
            "-k",
            "2",
            "--base-url",
            llm_server,
            "--set",
            "answer.select=off",
        )
        for q in QUESTIONS
    ]
    _Counting.most = _Counting.calls = 0
    server = HttpServer(
        [str(folder), "--base-url", llm_server, "--concurrency", str(CONCURRENCY)],
        {"LCR_SERVE_TOKEN": TOKEN},
    )
    got: dict[int, dict[str, Any]] = {}
    try:

        async def one(i: int) -> None:
            async with server.client() as client:
                arguments = {"index": "tale.idx", "question": QUESTIONS[i], "k": 2}
                got[i] = await call(client, "ask", {**arguments, "settings": sets})

        async def everyone() -> None:
            async with anyio.create_task_group() as group:
                for i in range(len(QUESTIONS)):
                    group.start_soon(one, i)

        anyio.run(everyone)
        assert server.proc.poll() is None
    finally:
        server.stop()
    assert _Counting.calls >= len(QUESTIONS)
    assert 1 < _Counting.most <= CONCURRENCY, _Counting.most
    for i, want in enumerate(cli):
        assert got[i]["question"] == QUESTIONS[i]
        assert got[i]["answer"] == want["answer"], QUESTIONS[i]
        assert [e["id"] for e in got[i]["evidence"]] == [e["id"] for e in want["evidence"]]
