"""A real terminal for CLI tests: ``lcr`` run under a pseudo-terminal of a given size, its
output read by the ``pyte`` terminal emulator, and a stand-in OpenAI-compatible server.

A test of what a person sees must draw the output as a terminal does: progress bars are
redrawn in place (cursor moves, erased lines), so a result line printed past them can be
in the byte stream and still be gone from the screen.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

pyte = pytest.importorskip("pyte", reason="the dev extra's pyte is not installed")

REPO = Path(__file__).resolve().parents[1]


@dataclass
class Screen:
    """What a terminal showed: its last screen, every row it ever showed, the exit code."""

    code: int
    final: list[str]
    seen: set[str] = field(default_factory=set)
    raw: bytes = b""

    def text(self) -> str:
        return "\n".join(row.rstrip() for row in self.final)

    def has_line(self, line: str) -> bool:
        return any(row.rstrip() == line for row in self.final)


def run_in_terminal(
    args: Sequence[str],
    *,
    columns: int,
    rows: int = 60,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 300.0,
) -> Screen:
    """``python -m lcr ARGS`` with stdin, stdout and stderr on one pseudo-terminal of
    ``columns`` x ``rows``; every screen it draws is read as a terminal would show it."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    full_env = {**os.environ, **(env or {})}
    full_env.update(TERM="xterm-256color", PYTHONPATH=str(REPO))
    for name in ("COLUMNS", "LINES", "LCR_DEBUG"):
        full_env.pop(name, None)  # the terminal's size, not a fixed one, must be used
    proc = subprocess.Popen(
        [sys.executable, "-m", "lcr", *args],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        cwd=cwd,
        env=full_env,
        start_new_session=True,
    )
    os.close(slave)
    screen = pyte.Screen(columns, rows)
    stream = pyte.ByteStream(screen)
    seen: set[str] = set()
    raw = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.1)
            if not ready:
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            raw += data
            stream.feed(data)
            seen.update(row.rstrip() for row in screen.display if row.strip())
        else:
            proc.kill()
            raise AssertionError(f"lcr {' '.join(args)} ran past {timeout} s")
    finally:
        os.close(master)
    code = proc.wait(timeout=30)
    return Screen(code, list(screen.display), seen, bytes(raw))


# ------------------------------------------------------------ a scripted LLM server
class _Handler(BaseHTTPRequestHandler):
    delay = 0.0
    word_delay = 0.0  # between the words of a streamed reply
    reply = ""  # a fixed reply instead of the prompt's last words

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def _reply(self, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._reply({"data": [{"id": "scripted", "max_model_len": 8192}]})

    def do_POST(self) -> None:
        payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        time.sleep(self.delay)
        words = payload["messages"][-1]["content"].split()
        said = self.reply.split(" ") if self.reply else words[-12:]
        text = " ".join(said)  # the end of the prompt: real words of the input
        if payload.get("stream"):
            self._stream(said, {"prompt_tokens": len(words), "completion_tokens": 12})
            return
        self._reply(
            {
                "choices": [{"message": {"content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": len(words), "completion_tokens": 12},
            }
        )

    def _stream(self, words: list[str], usage: dict[str, int]) -> None:
        """The reply as server-sent events, a word each ``word_delay`` seconds."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for i, word in enumerate(words):
            piece = {"choices": [{"delta": {"content": (" " if i else "") + word}}]}
            self.wfile.write(f"data: {json.dumps(piece)}\n\n".encode())
            self.wfile.flush()
            time.sleep(self.word_delay)
        last = {"choices": [], "usage": usage}
        self.wfile.write(f"data: {json.dumps(last)}\n\ndata: [DONE]\n\n".encode())


@contextmanager
def scripted_server(delay: float = 0.0, word_delay: float = 0.0, reply: str = "") -> Iterator[str]:
    """An OpenAI-compatible server whose "model" repeats the prompt's last words (or
    writes ``reply``) after ``delay`` seconds (streamed, when asked, a word each
    ``word_delay`` seconds): a real HTTP server for the CLI's openai backend, no model."""
    handler = type(
        "Handler", (_Handler,), {"delay": delay, "word_delay": word_delay, "reply": reply}
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
