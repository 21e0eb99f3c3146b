"""``lcr serve`` through the MCP SDK's own client, over stdio and over HTTP: every tool's
result held to the CLI's ``--json`` for the same call, errors as one-line MCP errors,
twenty clients at once, a build while others read, and the fault cases (a path outside
the served set, a huge request, a malformed message, a slow client, a client killed
mid-call, Ctrl-C to the server). Tiny bm25 indexes built here; the asks run on
smollm2-135m. Each server is a real ``lcr serve`` process; the CLI it is held to runs
in this process (``lcr.cli.main.cli``, the same command as ``lcr``), its model loaded
once for the module.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import anyio
import httpx2
import pytest
from click.testing import CliRunner
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

import lcr as lcr_api
from lcr.cli.main import cli
from lcr.cli.models import Seams
from lcr.models.container import Models
from tests.conftest import FIXTURES

pytestmark = pytest.mark.slow  # every test starts a server

T = TypeVar("T")
QUESTIONS = [
    "Who fell sick?",
    "Where did the maiden go every day?",
    "What did the snow spread over the grave?",
    "Who did the man take as another wife?",
    "What did the stepsisters say about the maiden?",
    "Where did the maiden have to sleep?",
    "What did the father bring back from the fair?",
    "What did the maiden ask her father for?",
    "Where did she plant the hazel twig?",
    "What came to the tree three times a day?",
    "What did the king give?",
    "How long did the festival last?",
    "What did the stepmother throw into the ashes?",
    "Who helped her pick out the lentils?",
    "What did the bird throw down to her?",
    "Where did she hide from the prince?",
    "What did the prince smear the staircase with?",
    "What was left sticking on the stairs?",
    "What did the eldest sister cut off?",
    "What did the pigeons peck out?",
]


def lcr(*args: str, stdin: str | None = None, llm: Any = None) -> str:
    """``lcr ARGS`` run in this process (a model given as ``llm`` instead of loaded):
    its stdout; a failure fails the test with the CLI's stderr."""
    models = None if llm is None else (lambda spec, _: Models.with_objects(llm=llm, spec=spec))
    result = CliRunner().invoke(cli, list(args), input=stdin, prog_name="lcr", obj=Seams(models))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    assert result.exit_code == 0, result.stderr
    return result.stdout


def lcr_json(*args: str, llm: Any = None) -> Any:
    return json.loads(lcr(*args, "--json", llm=llm))


def run(make: Callable[[], Awaitable[T]]) -> T:
    return anyio.run(make)


def evidence_of(result: dict[str, Any]) -> list[tuple[Any, ...]]:
    """What must be the same through the server and the CLI: ids, spans, text, citations
    (and with several indexes, each item's index)."""
    return [
        (e["id"], e["spans"], e["text"], e["document"], e["citations"], e.get("index"))
        for e in result["evidence"]
    ]


MILL = (
    "The keeper of the mill counted the sacks every evening. There were forty sacks of "
    "barley and twelve of rye, and the miller's cat slept on the rye.\n"
)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A served folder with two bm25 indexes (``tale.idx``, ``mill.idx``) and a document
    to add; an index outside it, and a link inside it to that outside index."""
    root = tmp_path_factory.mktemp("serve").resolve()
    folder = root / "served"
    folder.mkdir()
    shutil.copy(FIXTURES / "cinderella.txt", folder / "tale.txt")
    (folder / "more.txt").write_text(MILL.replace("mill", "barn"), encoding="utf-8")
    (folder / "mill.txt").write_text(MILL, encoding="utf-8")
    lcr_api.index([folder / "tale.txt"], folder / "tale.idx", methods=["bm25"])
    lcr_api.index([folder / "mill.txt"], folder / "mill.idx", methods=["bm25"])
    outside = root / "outside"
    outside.mkdir()
    shutil.copy(FIXTURES / "cinderella.txt", outside / "secret.txt")
    lcr_api.index([outside / "secret.txt"], outside / "secret.idx", methods=["bm25"])
    (folder / "link.idx").symlink_to(outside / "secret.idx")
    return folder


def stdio_params(*args: str) -> StdioServerParameters:
    # the SDK passes a child only a few variables; the tests' PYTHONPATH must reach it
    return StdioServerParameters(
        command=sys.executable, args=["-m", "lcr", "serve", *args], env=dict(os.environ)
    )


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


async def error_of(client: Client, tool: str, arguments: dict[str, Any]) -> MCPError:
    with pytest.raises(MCPError) as caught:
        await client.call_tool(tool, arguments)
    return caught.value


# ------------------------------------------------------------------------------ stdio
QUESTION = "What did the maiden ask her father for?"
ASKED = "Where did she plant the hazel twig?"
BARLEY = "How many sacks of barley were there?"
QUOTED = {"answer.check": "quote"}  # the answer's quotes, checked in its evidence
TOKENS = 16  # the longest answer: enough to compare, short for smollm2 on a busy CPU


async def read_tools_checked(client: Client, served: Path) -> None:
    """The tools' schemas and descriptions, list_indexes, and retrieve and info against
    the CLI's --json (an index named by its listed name or by its path)."""
    index = served / "tale.idx"
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert sorted(tools) == ["ask", "info", "list_indexes", "retrieve"]  # no building
    for tool in tools.values():
        assert tool.description and len(tool.description) > 80
        assert tool.input_schema["type"] == "object"
    assert tools["retrieve"].input_schema["required"] == ["index", "question"]
    ask_index = tools["ask"].input_schema["properties"]["index"]["anyOf"]
    assert [a["type"] for a in ask_index] == ["string", "array"]  # one index or several

    listed = (await call(client, "list_indexes", {}))["indexes"]
    names = [i["name"] for i in listed]
    assert names == ["mill.idx", "tale.idx"], names  # not the link to the index outside
    assert listed[1]["methods"] == ["bm25"]
    assert listed[1]["documents"][0]["name"] == "tale.txt"

    cli_retrieve = lcr_json("retrieve", str(index), QUESTION, "-k", "3")
    got = await call(client, "retrieve", {"index": "tale.idx", "question": QUESTION, "k": 3})
    assert len(got["evidence"]) == 3
    assert evidence_of(got) == evidence_of(cli_retrieve)
    by_path = await call(client, "retrieve", {"index": str(index), "question": QUESTION, "k": 3})
    assert evidence_of(by_path) == evidence_of(cli_retrieve)

    info = await call(client, "info", {"index": "tale.idx", "verify": True})
    assert info == lcr_json("info", str(index), "--verify")


async def errors_checked(client: Client, served: Path) -> None:
    """Errors are MCP errors, one line each, with the CLI's exit code in data; a path
    outside the served set is refused alone and in a list given to ask."""
    outside = str(served.parent / "outside" / "secret.idx")
    refusals = {
        "outside": outside,
        "link": str(served / "link.idx"),
        "dots": str(served / ".." / "outside" / "secret.idx"),
        "folder": str(served),
    }
    for why, where in refusals.items():
        error = await error_of(client, "retrieve", {"index": where, "question": QUESTION})
        assert "is not an index this server serves" in error.error.message, why
        assert error.error.code == -32602
        error = await error_of(client, "ask", {"index": ["tale.idx", where], "question": QUESTION})
        assert error.error.message.startswith(f"{where!r} is not an index"), why
        assert error.error.code == -32602 and error.error.data == {"exit_code": 2}
    both = await error_of(
        client, "ask", {"index": [refusals["link"], "mill.idx", outside], "question": QUESTION}
    )
    assert both.error.message.startswith(f"{refusals['link']!r}, {outside!r} are not indexes")
    unbuilt = await error_of(
        client, "retrieve", {"index": "tale.idx", "question": QUESTION, "method": "dense"}
    )
    assert "dense" in unbuilt.error.message
    bad_setting = await error_of(
        client, "retrieve", {"index": "tale.idx", "question": QUESTION, "settings": {"bm25.no": 1}}
    )
    assert bad_setting.error.code == -32602 and "bm25.no" in bad_setting.error.message
    huge = await error_of(client, "retrieve", {"index": "tale.idx", "question": "why " * 50_000})
    assert huge.error.code == -32602 and "question" in huge.error.message
    no_tool = await error_of(client, "index", {"paths": ["x"], "out": "y"})
    assert "index" in no_tool.error.message
    empty = await error_of(client, "ask", {"index": [], "question": QUESTION})
    assert empty.error.code == -32602 and "index" in empty.error.message
    pooled = await error_of(
        client, "ask", {"index": ["tale.idx", "mill.idx"], "question": QUESTION, "method": "pecan"}
    )
    assert pooled.error.code == -32602 and pooled.error.data == {"exit_code": 2}
    assert pooled.error.message.endswith("ask each index in its own call")  # no CLI flag
    for error in (both, unbuilt, bad_setting, huge, no_tool, empty, pooled):
        assert "\n" not in error.error.message
    # and the server still answers
    again = await call(client, "retrieve", {"index": "tale.idx", "question": QUESTION})
    assert again["evidence"]


def test_stdio_tools_answer_as_the_cli_does(served: Path, smollm: Any) -> None:
    """Every read tool against the CLI's --json, the errors, and real answers
    (smollm2-135m) from one index and from two: the same answer, evidence, citations
    and indexes as ``lcr ask --json`` with the same settings, the text arriving as
    progress notifications while it is written."""
    tale, mill = str(served / "tale.idx"), str(served / "mill.idx")
    settings = ["-k", "2", "--llm", "smollm2-135m", "--max-new-tokens", str(TOKENS)]
    cli_ask = lcr_json("ask", tale, ASKED, *settings, llm=smollm)
    quoted = ["--set", "answer.check=quote"]  # as QUOTED
    cli_pooled = lcr_json("ask", tale, mill, BARLEY, *settings, *quoted, llm=smollm)
    pieces: list[str] = []

    async def progressed(done: float, total: float | None, message: str | None) -> None:
        pieces.append(message or "")

    async def asked(
        client: Client, index: str | list[str], question: str, sets: dict[str, str]
    ) -> dict[str, Any]:
        arguments = {"index": index, "question": question, "k": 2, "max_new_tokens": TOKENS}
        arguments["settings"] = sets
        result = await client.call_tool("ask", arguments, progress_callback=progressed)
        assert not result.is_error, result.content
        assert result.structured_content is not None
        return result.structured_content

    async def session() -> tuple[dict[str, Any], ...]:
        async with Client(stdio_params(str(served), "--llm", "smollm2-135m")) as client:
            await read_tools_checked(client, served)
            await errors_checked(client, served)
            got = await asked(client, "tale.idx", ASKED, {})
            assert "".join(pieces).strip()  # the reply, as it was written
            pooled = await asked(client, ["tale.idx", "mill.idx"], BARLEY, QUOTED)
            return got, pooled

    got, pooled = run(session)
    for want, have in ((cli_ask, got), (cli_pooled, pooled)):
        assert have["answer"] == want["answer"] and have["answer"]
        assert evidence_of(have) == evidence_of(want)
        assert have["answer_settings"] == want["answer_settings"]
        assert have["models"]["llm"] == want["models"]["llm"]
        assert have.get("indexes") == want.get("indexes")
        assert have.get("quotes") == want.get("quotes")
        assert have.get("quote_check") == want.get("quote_check")
    assert "quote_check" in pooled and "quote_check" not in got  # asked for, or not
    assert pooled["indexes"] == [tale, mill]
    assert {e["index"] for e in pooled["evidence"]} == {tale, mill}
    assert pooled["evidence"][0]["document"] == "mill.txt"


def test_stdio_malformed_lines_get_errors_then_ctrl_c(served: Path) -> None:
    """Over stdio a line that is not JSON gets a parse error (-32700), JSON that is not
    a JSON-RPC message an invalid request (-32600: a batch, an id that is an object, a
    float, a list or a boolean, which the SDK alone never answers), each with id null,
    and the server reads on; a method lcr does not offer (prompts/get, resources/read)
    is method not found (-32601) with no traceback; LCR_SERVE_TOKEN in the environment
    (for an HTTP server) does not stop a stdio one; Ctrl-C ends it within seconds with
    exit code 130 and the server's own line, not a build's (a read of stdin in
    progress included)."""
    import queue

    proc = subprocess.Popen(
        [sys.executable, "-m", "lcr", "serve", str(served)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "LCR_SERVE_TOKEN": "meant-for-http"},
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout], daemon=True).start()  # type: ignore[union-attr]
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"},
        },
    }
    malformed = {
        '{"jsonrpc": "2.0", "id": 0, "method"': -32700,
        '{"hello": 1}': -32600,
        '[{"jsonrpc": "2.0", "id": 7, "method": "ping"}]': -32600,
        '{"jsonrpc": "1.0", "id": 8, "method": "ping"}': -32600,
        "\u00e9t\u00e9": -32700,
        '{"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}': -32600,
        '{"jsonrpc": "2.0", "id": 1.5, "method": "ping"}': -32600,
        '{"jsonrpc": "2.0", "id": [9], "method": "ping"}': -32600,
        '{"jsonrpc": "2.0", "id": true, "method": "ping"}': -32600,
    }

    def send(*lines: str) -> None:
        for line in lines:
            proc.stdin.write(line + "\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]

    def replies(n: int) -> list[dict[str, Any]]:
        try:
            return [json.loads(lines.get(timeout=60)) for _ in range(n)]
        except queue.Empty:
            proc.kill()
            pytest.fail(f"no reply; the server said: {proc.communicate()[1][-2000:]}")

    send(*malformed, json.dumps(initialize))
    *errors, reply = replies(len(malformed) + 1)
    assert [e["error"]["code"] for e in errors] == list(malformed.values())
    assert all(e["id"] is None and e["jsonrpc"] == "2.0" for e in errors)
    assert all("\n" not in e["error"]["message"] for e in errors)
    assert reply["id"] == 1 and reply["result"]["serverInfo"]["name"] == "lcr"
    send('{"jsonrpc": "2.0", "method": "notifications/initialized"}', "not json", json.dumps(
        {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    ))  # fmt: skip
    error, pong = replies(2)
    assert error["error"]["code"] == -32700 and error["id"] is None
    assert pong == {"jsonrpc": "2.0", "id": 2, "result": {}}
    send(
        json.dumps({"jsonrpc": "2.0", "id": 3, "method": "prompts/get", "params": {"name": "x"}}),
        json.dumps({"jsonrpc": "2.0", "id": 4, "method": "resources/read",
                    "params": {"uri": "file:///etc/passwd"}}),
    )  # fmt: skip
    for unoffered, want in zip(replies(2), (3, 4), strict=True):
        assert unoffered["id"] == want and unoffered["error"]["code"] == -32601, unoffered
        assert "\n" not in unoffered["error"]["message"]
    interrupted = time.monotonic()
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=20)
    assert time.monotonic() - interrupted < 8
    assert proc.returncode == 130
    said = proc.stderr.read()
    assert "Traceback" not in said, said
    assert said.strip().splitlines()[-1] == "lcr: interrupted", said  # no build to run again


# ------------------------------------------------------------------------------- HTTP
TOKEN = "s3cret-for-the-tests"
STOP_WITHIN_S = 3.5  # docs/serve.md: 3 s from the signal; half a second for a busy machine
AUTH = {"Authorization": f"Bearer {TOKEN}"}


class HttpServer:
    """A running ``lcr serve --http 127.0.0.1:0``: its URL, process and stderr lines."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "lcr", "serve", "--http", "127.0.0.1:0", *args],
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **env},
        )
        self.lines: list[str] = []
        self._listening = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()
        assert self._listening.wait(120), f"lcr serve did not start: {self.lines}"
        found = re.search(r"listening on (http://\S+)", "".join(self.lines))
        assert found
        self.url = found.group(1)

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)
            if "listening on" in line:
                self._listening.set()
        self._listening.set()

    def client(self, headers: dict[str, str] = AUTH) -> Client:
        from mcp.client.streamable_http import streamable_http_client

        http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(120))
        return Client(streamable_http_client(self.url, http_client=http))

    def said(self, text: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(text in line for line in self.lines):
                return True
            time.sleep(0.1)
        return False

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture(scope="module")
def building(served: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the served folder to build in, with an 18 KB document."""
    folder = tmp_path_factory.mktemp("building").resolve() / "served"
    shutil.copytree(served, folder, symlinks=True)
    shutil.copy(Path(__file__).parents[1] / "examples" / "lighthouse.txt", folder / "long.txt")
    lcr_api.index([folder / "long.txt"], folder / "long.idx", methods=["bm25"])
    return folder


@pytest.fixture(scope="module")
def http(building: Path) -> Iterator[HttpServer]:
    """One HTTP server for the module's HTTP tests (the last one interrupts it): a token,
    building allowed, small limits (a 3 s read timeout: 1 s cut off a reader's whole
    request on a machine at load 14), smollm2-135m as its LLM."""
    server = HttpServer(
        [str(building), "--allow-index", "--read-timeout", "3", "--max-request-bytes", "20000",
         "--llm", "smollm2-135m"],
        {"LCR_SERVE_TOKEN": TOKEN},
    )  # fmt: skip
    try:
        yield server
    finally:
        server.stop()


def test_http_twenty_clients_at_once_get_their_own_answers(
    http: HttpServer, building: Path
) -> None:
    stdin = "\n".join(QUESTIONS) + "\n"
    cli = lcr("retrieve", str(building / "tale.idx"), "-", "-k", "2", "--json", stdin=stdin)
    expected = [json.loads(line) for line in cli.splitlines()]
    assert len(expected) == len(QUESTIONS)
    results: dict[int, dict[str, Any]] = {}

    async def one(i: int) -> None:
        async with http.client() as client:
            for _ in range(2):  # twice each: forty calls in flight together
                got = await call(
                    client, "retrieve", {"index": "tale.idx", "question": QUESTIONS[i], "k": 2}
                )
                assert results.setdefault(i, got)["evidence"] == got["evidence"]

    async def all_clients() -> None:
        async with anyio.create_task_group() as group:
            for i in range(len(QUESTIONS)):
                group.start_soon(one, i)

    run(all_clients)
    assert http.proc.poll() is None
    for i, want in enumerate(expected):
        assert results[i]["question"] == QUESTIONS[i]
        assert evidence_of(results[i]) == evidence_of(want), QUESTIONS[i]


def test_http_ask_one_index_and_two_as_the_cli_does(
    http: HttpServer, building: Path, smollm: Any
) -> None:
    """Over HTTP too, ask (smollm2-135m) from one index and from two pooled is what
    ``lcr ask --json`` prints with the same settings; an index named twice in the list
    (by its path and by its name) is asked once."""
    tale, mill = str(building / "tale.idx"), str(building / "mill.idx")
    settings = ["-k", "2", "--llm", "smollm2-135m", "--max-new-tokens", str(TOKENS)]
    wanted = [
        lcr_json("ask", tale, ASKED, *settings, llm=smollm),
        lcr_json("ask", tale, mill, BARLEY, *settings, "--set", "answer.check=quote", llm=smollm),
    ]

    async def asking() -> list[dict[str, Any]]:
        async with http.client() as client:
            return [
                await call(client, "ask", {"index": index, "question": q, "k": 2,
                                           "max_new_tokens": TOKENS, "settings": sets})
                for index, q, sets in (("tale.idx", ASKED, {}),
                                       ([tale, "mill.idx", "tale.idx"], BARLEY, QUOTED))
            ]  # fmt: skip

    for have, want in zip(run(asking), wanted, strict=True):
        assert have["answer"] == want["answer"] and have["answer"]
        assert evidence_of(have) == evidence_of(want)
        assert have["answer_settings"] == want["answer_settings"]
        assert have.get("quotes") == want.get("quotes")
        assert have.get("quote_check") == want.get("quote_check")
        assert have.get("indexes") == want.get("indexes")
    # named by path and by name, tale.idx given twice: asked once, in the order given
    assert "quote_check" in wanted[1] and wanted[1]["indexes"] == [tale, mill]


def test_http_faults_get_protocol_errors_and_the_server_goes_on(
    http: HttpServer, served: Path
) -> None:
    headers = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
    }
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    no_token = httpx2.post(http.url, json=ping, headers=headers, timeout=30)
    assert no_token.status_code == 401 and "bearer token" in no_token.json()["error"]["message"]
    wrong = httpx2.post(
        http.url, json=ping, headers={**headers, "Authorization": "Bearer nope"}, timeout=30
    )
    assert wrong.status_code == 401

    async def lowercase() -> dict[str, Any]:  # RFC 9110: the scheme's name in any case
        async with http.client({"Authorization": f"bearer {TOKEN}"}) as client:
            return await call(client, "list_indexes", {})

    assert run(lowercase)["indexes"]
    headers.update(AUTH)
    for bad_id in ({"a": 1}, 1.5, [1], True):
        odd = httpx2.post(http.url, json={**ping, "id": bad_id}, headers=headers, timeout=30)
        assert odd.status_code == 400, (bad_id, odd.status_code, odd.text)
        assert odd.json()["error"]["code"] == -32600 and odd.json()["id"] is None
    batch = httpx2.post(http.url, json=[ping, ping], headers=headers, timeout=30)
    assert batch.status_code == 400 and batch.json()["error"]["code"] == -32600, batch.text
    big = httpx2.post(http.url, content=b"x" * 50_000, headers=headers, timeout=30)
    assert big.status_code == 413
    assert big.json()["error"]["message"] == "the request is over 20000 bytes"
    bad = httpx2.post(
        http.url, content=b'{"jsonrpc": "2.0", "id": 1, "method"', headers=headers, timeout=30
    )
    assert 400 <= bad.status_code < 500 and "error" in bad.json()
    not_rpc = httpx2.post(http.url, json={"hello": 1}, headers=headers, timeout=30)
    assert not_rpc.status_code == 400 and not_rpc.json()["error"]["code"] == -32600

    async def unoffered() -> list[MCPError]:
        async with http.client() as client:
            errors = []
            for ask in (
                lambda: client.get_prompt("x"),
                lambda: client.read_resource("file:///etc/passwd"),
            ):
                with pytest.raises(MCPError) as caught:
                    await ask()
                errors.append(caught.value)
            return errors

    for error in run(unoffered):
        assert error.error.code == -32601 and "\n" not in error.error.message

    host, port = http.url.removeprefix("http://").split("/")[0].split(":")
    with socket.create_connection((host, int(port)), timeout=30) as slow:
        slow.sendall(
            f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n"
            "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{".encode()
        )
        started = time.monotonic()

        async def meanwhile() -> dict[str, Any]:  # another client is served meanwhile
            async with http.client() as client:
                return await call(client, "list_indexes", {})

        assert run(meanwhile)["indexes"]
        reply = slow.recv(4096).decode()
        assert reply.startswith("HTTP/1.1 408"), reply
        assert time.monotonic() - started < 10
    assert http.proc.poll() is None

    off_loopback = ["serve", "--http", "0.0.0.0:0", str(served)]
    refused = CliRunner().invoke(cli, off_loopback, env={"LCR_SERVE_TOKEN": None})
    assert refused.exit_code == 2, refused.output
    assert refused.stderr.count("\n") == 1 and "--token" in refused.stderr


def test_http_build_while_others_read(http: HttpServer, building: Path, served: Path) -> None:
    """One client adds a method to the served index while others read it: every read is
    whole and right, progress arrives, the index verifies after. Then a document added
    through the server is found as the CLI finds it."""
    question = QUESTIONS[8]
    before = lcr_json("retrieve", str(building / "tale.idx"), question)
    progress: list[tuple[float, float | None, str | None]] = []
    reads: list[dict[str, Any]] = []
    built: dict[str, Any] = {}

    async def progressed(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    async def builder() -> None:
        async with http.client() as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            assert {"index", "add"} <= tools
            result = await client.call_tool(
                "index",
                {"paths": [str(building / "tale.txt")], "out": "tale.idx", "methods": ["mixpr"]},
                progress_callback=progressed,
            )
            assert not result.is_error, result.content
            built.update(result.structured_content or {})

    async def reader() -> None:
        async with http.client() as client:
            while not built:
                reads.append(
                    await call(client, "retrieve", {"index": "tale.idx", "question": question})
                )
                await anyio.sleep(0.05)

    async def together() -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(builder)
            for _ in range(4):
                group.start_soon(reader)

    run(together)
    assert built["methods"] == ["bm25", "mixpr"]
    assert progress, "no progress notification"
    assert len(reads) >= 4
    for read in reads:
        assert evidence_of(read) == evidence_of(before)
    assert lcr_json("info", str(building / "tale.idx"), "--verify")["verified"] is True

    async def refused() -> str:
        outside = served.parent / "outside" / "secret.txt"
        async with http.client() as client:
            error = await error_of(client, "index", {"paths": [str(outside)], "out": "x.idx"})
            return error.error.message

    assert "outside the folders this server serves" in run(refused)

    # a bad setting given to index: the one line the retrieve tool gives for it (and
    # `lcr retrieve --set`, where the value is text: a JSON number is one already)
    tale_idx = str(building / "tale.idx")
    for key, value in (("bm25.k1", "nan"), ("nope.x", 1), ("bm25.k1", -5)):

        async def bad_setting(settings: dict[str, Any]) -> tuple[MCPError, MCPError]:
            async with http.client() as client:
                built = await error_of(
                    client, "index", {"paths": [str(building / "tale.txt")],
                                      "out": str(building / "bad.idx"), "settings": settings},
                )  # fmt: skip
                read = await error_of(
                    client, "retrieve", {"index": "tale.idx", "question": question,
                                         "settings": settings},
                )  # fmt: skip
                return built, read

        error, retrieved = anyio.run(bad_setting, {key: value})
        assert error.error.code == -32602 and error.error.data == {"exit_code": 2}
        assert error.error.message == retrieved.error.message, (key, value)
        if isinstance(value, str):
            said = CliRunner().invoke(
                cli, ["retrieve", tale_idx, question, "--set", f"{key}={value}"]
            )
            assert said.exit_code == 2, said.output
            assert error.error.message == said.stderr.strip().removeprefix("lcr: ")
    assert not http.said("Traceback", timeout=0.1)

    # a document added: the server answers from it as the CLI does, and says so in info
    barley = "How many sacks of barley were there?"

    async def adding() -> tuple[dict[str, Any], ...]:
        async with http.client() as client:
            added = await call(
                client, "add", {"index": "tale.idx", "paths": [str(building / "more.txt")]}
            )
            found = await call(
                client, "retrieve", {"index": "tale.idx", "question": barley, "k": 1}
            )
            return added, found, await call(client, "info", {"index": "tale.idx"})

    added, found, info = run(adding)
    assert [d["name"] for d in added["documents"]] == ["tale.txt", "more.txt"]
    index = str(building / "tale.idx")
    cli_found = lcr_json("retrieve", index, barley, "-k", "1")
    assert found["evidence"][0]["document"] == "more.txt"
    assert evidence_of(found) == evidence_of(cli_found)
    assert info == lcr_json("info", index)


def test_http_a_client_killed_mid_call_stops_its_call(http: HttpServer) -> None:
    """A client killed while the model writes its answer: the server stops that call at
    the next piece (and says so), and goes on serving."""
    client = subprocess.Popen(
        [sys.executable, "-c", KILLED_CLIENT, http.url, TOKEN, "ask"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert client.stdout is not None
    assert client.stdout.readline().strip() == "started"
    client.kill()
    client.wait()
    assert http.said("a call stopped: cancelled", timeout=20), http.lines[-5:]

    async def still() -> dict[str, Any]:
        async with http.client() as c:
            return await call(c, "list_indexes", {})

    assert run(still)["indexes"]


def test_http_ctrl_c_mid_build_stops_within_seconds(http: HttpServer, building: Path) -> None:
    """SIGINT while a build runs: the server is gone within seconds with exit code 130,
    and the index it was building is either absent or whole (never half-written)."""
    target = building / "stopped.idx"
    client = subprocess.Popen(
        [sys.executable, "-c", KILLED_CLIENT, http.url, TOKEN, "index", str(building / "long.txt"),
         str(target)],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert client.stdout is not None
    assert client.stdout.readline().strip() == "started"
    interrupted = time.monotonic()
    http.proc.send_signal(signal.SIGINT)
    http.proc.wait(timeout=20)
    took = time.monotonic() - interrupted
    print(f"SIGINT to exit: {took:.1f} s")  # shown with -s
    assert took < STOP_WITHIN_S, f"{took:.1f} s"  # the documented 3 s
    assert http.proc.returncode == 130
    last = http.lines[-1].strip() if http.lines else ""
    assert last.startswith("lcr: interrupted") and "run the command again" not in last, last
    client.kill()
    client.wait()
    assert not (building / ".stopped.idx.lock").exists()
    assert not list(building.glob(".stopped.idx.new*"))
    if target.exists():
        assert lcr_json("info", str(target), "--verify")["verified"] is True


# A client that starts a long call and says so at its first progress notification.
KILLED_CLIENT = """
import sys, anyio, httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

url, token, tool = sys.argv[1:4]
if tool == "ask":
    arguments = {"index": "long.idx", "question": "Tell the whole story, every event in order.",
                 "max_new_tokens": 1024, "k": 2, "settings": {"answer.select": "off"}}
else:
    arguments = {"paths": [sys.argv[4]], "out": sys.argv[5], "methods": ["mixpr"]}

async def main():
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=300)
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        async def progressed(done, total, message):
            print("started", flush=True)
        await client.call_tool(tool, arguments, progress_callback=progressed)

anyio.run(main)
"""
