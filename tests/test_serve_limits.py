"""``lcr serve --http`` under connections that hold files and send nothing (issue #72,
rows 3, 4 and 7b): the "listening" line comes once the socket accepts; idle and
trickling connections, far more than the process may open files, neither kill the
server nor crowd out a real client (headers are timed, open connections capped, the
one waiting longest for its headers dropped); SIGTERM mid-build ends it within the
documented 3 s. The server runs with a low limit on open files (256), so the flood
that would exhaust it stays small; every connection is to 127.0.0.1, bounded in count
and time.
"""

from __future__ import annotations

import contextlib
import re
import resource
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client

import lcr as lcr_api
from tests.conftest import FIXTURES
from tests.test_serve import KILLED_CLIENT, STOP_WITHIN_S

pytestmark = pytest.mark.slow  # a server process

FILES = 256  # the server's limit on open files
HEADER_TIMEOUT_S = 2.0  # its --read-timeout: headers and body
FLOOD = 2_000  # connections opened against it (idle ones, then trickling ones)


def _low_file_limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (FILES, FILES))


class Server:
    """``lcr serve --http 127.0.0.1:0`` with a low file limit; the test connects to it
    the moment it says it listens (``refused_at_once`` holds that first try's error)."""

    def __init__(self, folder: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "lcr", "serve", "--http", "127.0.0.1:0", str(folder),
             "--allow-index", "--read-timeout", str(HEADER_TIMEOUT_S)],
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=_low_file_limit,
        )  # fmt: skip
        assert self.proc.stderr is not None
        self.lines: list[str] = []
        self.refused_at_once: OSError | None = None
        for line in self.proc.stderr:
            self.lines.append(line)
            found = re.search(r"listening on http://([\d.]+):(\d+)(/mcp)", line)
            if found:
                self.address = (found.group(1), int(found.group(2)))
                try:  # at once, as a script that starts the server would
                    socket.create_connection(self.address, timeout=5).close()
                except OSError as exc:
                    self.refused_at_once = exc
                self.url = f"http://{found.group(1)}:{found.group(2)}/mcp"
                break
        else:
            pytest.fail(f"lcr serve did not start: {self.lines}")
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)

    def indexes(self) -> list[str]:
        """list_indexes through the SDK's own client: a real client's call."""
        from mcp.client.streamable_http import streamable_http_client

        async def main() -> list[str]:
            http = httpx2.AsyncClient(timeout=httpx2.Timeout(60))
            async with Client(streamable_http_client(self.url, http_client=http)) as client:
                result = await client.call_tool("list_indexes", {})
                assert not result.is_error and result.structured_content is not None
                return [i["name"] for i in result.structured_content["indexes"]]

        return anyio.run(main)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("limits").resolve() / "served"
    folder.mkdir()
    shutil.copy(FIXTURES / "cinderella.txt", folder / "tale.txt")
    shutil.copy(Path(__file__).parents[1] / "examples" / "lighthouse.txt", folder / "long.txt")
    lcr_api.index([folder / "tale.txt"], folder / "tale.idx", methods=["bm25"])
    return folder


@pytest.fixture(scope="module")
def server(folder: Path) -> Iterator[Server]:
    started = Server(folder)
    try:
        yield started
    finally:
        started.stop()


def test_the_listening_line_comes_once_the_socket_accepts(server: Server) -> None:
    """Row 4: a script that connects on reading the line is never refused."""
    assert server.refused_at_once is None, server.refused_at_once


def _open_files_allowed(wanted: int) -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        top = wanted if hard == resource.RLIM_INFINITY else min(hard, wanted)
        resource.setrlimit(resource.RLIMIT_NOFILE, (top, hard))
        soft = top
    return soft


def _connect(address: tuple[str, int]) -> socket.socket | None:
    try:
        return socket.create_connection(address, timeout=0.25)
    except OSError:  # the backlog full: the excess is dropped, as it should be
        return None


def _closed_by_server(sock: socket.socket) -> bool:
    poller = select.poll()  # not select(): these descriptors run past 1,024
    poller.register(sock, select.POLLIN)
    try:
        return bool(poller.poll(0)) and sock.recv(1) == b""
    except OSError:  # reset
        return True


def test_idle_and_trickling_connections_neither_kill_nor_crowd_out_the_server(
    server: Server,
) -> None:
    """Row 3: 1,100 connections that send nothing, then 900 that trickle their headers,
    against a server that may open 256 files: it stays up (no "Too many open files"),
    a real client is served while they are open, and a trickling connection is closed
    once the read timeout has passed without its headers."""
    allowed = _open_files_allowed(FLOOD + 400)
    flood = min(FLOOD, allowed - 200)
    assert flood > 4 * FILES, f"this process may open only {allowed} files"
    idle_count = flood * 11 // 20
    held: list[socket.socket] = []
    trickling: list[socket.socket] = []
    deadline = time.monotonic() + 120  # bounded in time whatever happens
    try:
        for _ in range(idle_count):
            sock = _connect(server.address)
            if sock is not None:
                held.append(sock)
            if time.monotonic() > deadline:
                break
        assert server.proc.poll() is None, server.lines[-5:]
        assert server.indexes() == ["tale.idx"]  # a real client, among the idle ones
        for _ in range(flood - idle_count):
            sock = _connect(server.address)
            if sock is None:
                continue
            try:
                sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            except OSError:
                sock.close()
                continue
            trickling.append(sock)
            if time.monotonic() > deadline:
                break
        assert len(held) + len(trickling) > 2 * FILES  # more than the server could hold
        started = time.monotonic()
        served = 0
        while time.monotonic() - started < HEADER_TIMEOUT_S + 2:
            for sock in trickling:  # one header line at a time, never the last
                with contextlib.suppress(OSError):
                    sock.sendall(b"X-Slow: 1\r\n")
            assert server.proc.poll() is None, server.lines[-5:]
            assert server.indexes() == ["tale.idx"]  # while they trickle
            served += 1
            time.sleep(0.5)
        assert served >= 3
        # past the read timeout, no trickling connection is still open on the server
        time.sleep(1.0)
        still = [s for s in trickling if not _closed_by_server(s)]
        assert not still, f"{len(still)} of {len(trickling)} trickling connections left open"
    finally:
        for sock in held + trickling:
            sock.close()
    assert server.proc.poll() is None
    assert server.indexes() == ["tale.idx"]
    assert not any("Too many open files" in line for line in server.lines), server.lines[-5:]


def test_sigterm_mid_build_ends_the_server_within_seconds(server: Server, folder: Path) -> None:
    """Row 7b: SIGTERM while a build runs ends an HTTP server within the documented
    3 s (it took 14-17 s), exit 143 and the server's own line; the index it was
    building is absent or whole, its lock file removed."""
    target = folder / "stopped.idx"
    client = subprocess.Popen(
        [sys.executable, "-c", KILLED_CLIENT, server.url, "no-token", "index",
         str(folder / "long.txt"), str(target)],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert client.stdout is not None
        assert client.stdout.readline().strip() == "started"
        stopped = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        server.proc.wait(timeout=30)
        took = time.monotonic() - stopped
    finally:
        client.kill()
        client.wait()
    print(f"SIGTERM to exit: {took:.1f} s")  # shown with -s
    assert took < STOP_WITHIN_S, f"{took:.1f} s"
    assert server.proc.returncode == 128 + signal.SIGTERM
    time.sleep(0.2)  # the reader thread's last lines
    last = server.lines[-1].strip()
    assert last.startswith("lcr: stopped by SIGTERM"), last
    assert "run the command again" not in last
    assert not (folder / ".stopped.idx.lock").exists()
    if target.exists():
        from click.testing import CliRunner

        from lcr.cli.main import cli

        verified = CliRunner().invoke(cli, ["info", str(target), "--verify"])
        assert verified.exit_code == 0, verified.output
