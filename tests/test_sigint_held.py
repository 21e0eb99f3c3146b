"""Ctrl-C while lcr waits on an LLM server that holds its reply (#72 row 13): the
process exits within 2 s of SIGINT, exit 130, one line, and what was paid is kept."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.conftest import REPO

QUESTION = "What was the name of the boat that brought the stores every Thursday?"
GRACE_S = 2.0


class HeldServer:
    """An OpenAI-compatible server that answers its first ``answered`` chat calls and
    then holds every later one (it reads the request and never replies)."""

    def __init__(self, answered: int) -> None:
        self.answered = answered
        self.calls = 0
        self.held = threading.Event()
        self.release = threading.Event()
        self.lock = threading.Lock()


@contextmanager
def held_server(answered: int = 0) -> Iterator[tuple[str, HeldServer]]:
    state = HeldServer(answered)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def _send(self, obj: object) -> None:
            body = json.dumps(obj).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            self._send({"data": [{"id": "held"}]})

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            with state.lock:
                state.calls += 1
                hold = state.calls > state.answered
            if hold:
                state.held.set()
                state.release.wait(120)
                return
            reply = {"message": {"role": "assistant", "content": "A keeper and his boat."}}
            usage = {"prompt_tokens": 10, "completion_tokens": 5}
            self._send({"choices": [{**reply, "index": 0}], "usage": usage})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", state
    finally:
        state.release.set()
        server.shutdown()
        server.server_close()


def stopped_after(args: list[str], cwd: Path, state: HeldServer) -> tuple[int, float, str]:
    """Run ``lcr ARGS`` as a user does, Ctrl-C (to its process group) half a second
    after a call is held; the exit code, the seconds from SIGINT to exit, stderr."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "lcr", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert state.held.wait(300), "no LLM call was held"
        time.sleep(0.5)
        sent = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=30)
        finally:
            took = time.monotonic() - sent
        assert proc.stderr is not None
        return proc.returncode, took, proc.stderr.read()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture
def story(tmp_path: Path) -> Path:
    return Path(shutil.copy(REPO / "examples" / "lighthouse.txt", tmp_path / "story.txt"))


@pytest.mark.parametrize(
    "method", ["bm25", pytest.param("dense", marks=pytest.mark.slow)]
)  # dense: the embedder loaded, whose teardown took seconds after the interrupt
def test_ctrl_c_while_ask_waits_on_a_held_reply_exits_at_once(story: Path, method: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "lcr", "index", "story.txt", "-m", method, "-q"],
        cwd=story.parent,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=True,
    )
    with held_server() as (url, state):
        args = ["ask", "story.idx", QUESTION, "-m", method, "--backend", "openai"]
        args += ["--base-url", url]
        code, took, err = stopped_after([*args, "--llm", "held"], story.parent, state)
    assert code == 130, err
    assert err.splitlines()[-1].startswith("lcr: interrupted"), err
    assert "Traceback" not in err
    assert took < GRACE_S, f"exit {took:.2f} s after SIGINT"


@pytest.mark.slow  # loads the embedder RAPTOR clusters with
def test_ctrl_c_while_a_raptor_build_waits_exits_at_once_and_keeps_the_cache(
    story: Path,
) -> None:
    """Two summaries answered, the third held: Ctrl-C ends the build within 2 s, the
    index is not made, and the two replies paid for are in its cache for the rerun."""
    with held_server(answered=2) as (url, state):
        args = ["index", "story.txt", "-m", "raptor", "-q", "--backend", "openai"]
        args += ["--base-url", url, "--llm", "held", "--concurrency", "1"]
        args += ["--set", "raptor.summary_max_new_tokens=16"]
        code, took, err = stopped_after(args, story.parent, state)
    assert code == 130, err
    assert err.splitlines()[-1].startswith("lcr: interrupted"), err
    assert took < GRACE_S, f"exit {took:.2f} s after SIGINT"
    caches = list((story.parent / "story.idx").glob("cache/raptor*.jsonl"))
    kept = [json.loads(line) for path in caches for line in path.read_text().splitlines()]
    assert len(kept) == 2, caches
