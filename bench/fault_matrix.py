"""The fault matrix: lcr tried as a hostile user would, every outcome sorted and counted.

    .venv/bin/python bench/fault_matrix.py                  # every case, about 10 minutes
    .venv/bin/python bench/fault_matrix.py --only manifest  # the cases whose name has it
    .venv/bin/python bench/fault_matrix.py --list           # the cases, by row of issue #37
    .venv/bin/python bench/fault_matrix.py --json           # a machine-readable summary

Each case is a small named scenario in its own temporary folder that runs the real
CLI as a subprocess (``python -m lcr``, so PYTHONPATH picks the tree under test;
``--lcr CMD`` runs another), each run with a timeout. What happened is sorted into
the counters of issue #37: tracebacks, internal errors, damaged indexes, deleted user
files, paid calls repeated, reads/writes outside, wrong exit codes, hangs (and two
more the issue asks for: multi-line errors, nondeterministic builds). A counter counts
cases: a case adds at most one to each. Target: every count 0.

LLM builds run against a fake OpenAI-compatible server started here on 127.0.0.1
(deterministic replies); a request whose exact body was answered before, in the same
case, is a paid call repeated. Memory cases run under ``RLIMIT_AS`` (4 GB), so a guard
that does not engage fails the case instead of the machine. Run by hand, never in CI:
stdlib only, plus lcr itself in the processes it starts.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
COUNTERS = (
    "tracebacks",
    "internal errors",
    "damaged indexes",
    "deleted user files",
    "paid calls repeated",
    "reads/writes outside",
    "wrong exit codes",
    "hangs",
)
# asked for by the issue's "What to build" but not among its counters: counted apart
EXTRA_COUNTERS = ("multi-line errors", "nondeterministic builds", "memory limit reached")
GB = 1 << 30
MEMORY_LIMIT = 4 * GB  # RLIMIT_AS of the memory cases
RUN_TIMEOUT = 60.0  # one CLI run, unless the case says otherwise
LLM_TIMEOUT = 600.0  # one LLM build against the fake server (the embedder loads first)
SIGINT_GRACE = 5.0  # "SIGINT ends a run within a few seconds"
FAKE_LLM = "fake-llm"

# ----------------------------------------------------------------- classifying


@dataclass
class Outcome:
    """What one run of the CLI did."""

    label: str  # the command, shortened, for the failure line
    code: int | None  # exit code, 128+N after signal N; None: killed after its timeout
    stdout: str
    stderr: str
    seconds: float = 0.0
    timeout: float = 0.0


@dataclass(frozen=True)
class Expect:
    """What a run may do. ``codes`` None: any code (a run the case kills itself)."""

    codes: tuple[int, ...] | None = (0,)
    traceback_ok: bool = False  # --debug asks for tracebacks
    secrets: tuple[str, ...] = ()  # text of files outside: never in the output


# stderr lines that are not part of an error message: lcr's warnings and notes, and a
# library's Python warning (its "file:line: XWarning: ..." line and the source line after)
_NOISE = re.compile(r"^\S+:\d+: \w*Warning: |^\s")
_NOT_ERROR_LINE = re.compile(
    r"^(lcr: )?warning:|waiting for another lcr process|^lcr: interrupted|" + _NOISE.pattern,
    re.IGNORECASE,
)


def excerpt(text: str, limit: int = 160) -> str:
    """One line of ``text``, shortened: the failure lines stay one line each."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _last_traceback_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    start = next(i for i, ln in enumerate(lines) if ln.startswith("Traceback"))
    tail = [ln for ln in lines[start:] if not ln.startswith((" ", "\t", "Traceback"))]
    return tail[-1] if tail else lines[-1]


def classify(outcome: Outcome, expect: Expect) -> list[tuple[str, str]]:
    """The counters one run fails, each with a short excerpt of why.

    A hang is a run killed after its timeout; a traceback or ``internal error``
    anywhere in stderr counts (unless ``--debug`` asked for tracebacks); the exit
    code must be one of ``expect.codes``; the text of a file outside the index must
    never appear in the output; a failing run's message is one line.
    """
    found: list[tuple[str, str]] = []
    label = outcome.label
    if outcome.code is None:
        found.append(("hangs", f"no exit after {outcome.timeout:.0f}s: {label}"))
    traceback = "Traceback (most recent call last)" in outcome.stderr
    if traceback and not expect.traceback_ok:
        found.append(("tracebacks", f"{label}: {_last_traceback_line(outcome.stderr)}"))
    for line in outcome.stderr.splitlines():
        if "internal error" in line:
            found.append(("internal errors", f"{label}: {line.strip()}"))
            break
    if outcome.code is not None and expect.codes is not None and outcome.code not in expect.codes:
        wanted = " or ".join(str(c) for c in expect.codes)
        said = next(
            (ln for ln in outcome.stderr.splitlines() if ln.strip() and not _NOISE.search(ln)),
            "",
        )
        found.append(
            ("wrong exit codes", f"{label}: exit {outcome.code}, expected {wanted}: {said}")
        )
    for secret in expect.secrets:
        if secret in outcome.stdout or secret in outcome.stderr:
            found.append(("reads/writes outside", f"{label}: a file outside is in the output"))
            break
    if outcome.code not in (0, None) and not traceback:
        lines = [
            ln
            for ln in outcome.stderr.splitlines()
            if ln.strip() and not _NOT_ERROR_LINE.search(ln)
        ]
        if len(lines) > 1:
            found.append(("multi-line errors", f"{label}: {len(lines)} lines: {' | '.join(lines)}"))
    return [(counter, excerpt(text)) for counter, text in found]


# ------------------------------------------------------------ .npy, by hand


_NPY_CODES = {"<i8": "q", "<i4": "i", "<f8": "d", "<f4": "f", "<u4": "I", "<u8": "Q", "|u1": "B"}


@dataclass
class Npy:
    """A plain ``.npy`` file: its dtype, shape and raw little-endian data."""

    descr: str
    shape: tuple[int, ...]
    data: bytes

    @classmethod
    def read(cls, path: Path) -> Npy:
        raw = path.read_bytes()
        if raw[:6] != b"\x93NUMPY":
            raise ValueError(f"{path} is not a .npy file")
        if raw[6] == 1:
            (hlen,), start = struct.unpack("<H", raw[8:10]), 10
        else:
            (hlen,), start = struct.unpack("<I", raw[8:12]), 12
        header = ast.literal_eval(raw[start : start + hlen].decode("latin1"))
        return cls(header["descr"], tuple(header["shape"]), raw[start + hlen :])

    def write(self, path: Path) -> None:
        header = f"{{'descr': '{self.descr}', 'fortran_order': False, 'shape': {self.shape!r}, }}"
        pad = 64 - (10 + len(header) + 1) % 64
        text = (header + " " * (pad % 64) + "\n").encode("latin1")
        path.write_bytes(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text + self.data)

    @property
    def code(self) -> str:
        return _NPY_CODES[self.descr]

    def values(self) -> list[Any]:
        size = struct.calcsize(self.code)
        count = len(self.data) // size
        return list(struct.unpack(f"<{count}{self.code}", self.data[: count * size]))

    def with_values(self, values: Sequence[Any], shape: tuple[int, ...] | None = None) -> Npy:
        data = struct.pack(f"<{len(values)}{self.code}", *values)
        return Npy(self.descr, shape if shape is not None else (len(values),), data)


# ------------------------------------------------------------ the fake server


class Scope:
    """One case's view of the fake server: its mode and what it was asked and paid."""

    def __init__(self, mode: str = "normal") -> None:
        self.mode = mode  # normal | trickle | flood | error400 | models_weird
        self.lock = threading.Lock()
        self.answered: set[str] = set()  # digests of request bodies answered in full
        self.paid = 0  # completions answered
        self.repeated = 0  # ...whose exact body had been answered before
        self.repeated_example = ""
        self.arrived = threading.Event()  # the first completion request came in
        self.hold_after: int | None = None  # hold every request after this many answers
        self.held = 0
        self.release = threading.Event()

    def stop_holding(self) -> None:
        self.hold_after = None
        self.release.set()

    def counts(self) -> tuple[int, int]:
        with self.lock:
            return self.paid, self.repeated


class FakeServer:
    """An OpenAI-compatible server on 127.0.0.1: ``/<scope>/v1/models`` and
    ``/<scope>/v1/chat/completions``, deterministic replies, one :class:`Scope` per case."""

    def __init__(self) -> None:
        self.scopes: dict[str, Scope] = {}
        self.stopping = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                server.handle_get(self)

            def do_POST(self) -> None:
                server.handle_post(self)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def scope(self, name: str, mode: str = "normal") -> Scope:
        """The scope ``name``, made with ``mode`` on first use."""
        return self.scopes.setdefault(name, Scope(mode))

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/{name}/v1"

    def close(self) -> None:
        self.stopping.set()
        for scope in self.scopes.values():
            scope.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def _route(self, h: BaseHTTPRequestHandler) -> tuple[Scope | None, str]:
        parts = h.path.strip("/").split("/", 2)
        if len(parts) != 3 or parts[1] != "v1" or parts[0] not in self.scopes:
            return None, ""
        return self.scopes[parts[0]], parts[2]

    @staticmethod
    def _json(h: BaseHTTPRequestHandler, status: int, obj: Any) -> None:
        body = json.dumps(obj).encode("utf-8")
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    def handle_get(self, h: BaseHTTPRequestHandler) -> None:
        scope, endpoint = self._route(h)
        if scope is None or endpoint != "models":
            self._json(h, 404, {"error": {"message": "not found"}})
        elif scope.mode == "models_weird":
            self._json(h, 200, {"data": 5})
        else:
            self._json(
                h, 200, {"object": "list", "data": [{"id": FAKE_LLM, "max_model_len": 8192}]}
            )

    def handle_post(self, h: BaseHTTPRequestHandler) -> None:
        scope, endpoint = self._route(h)
        body = h.rfile.read(int(h.headers.get("Content-Length") or 0))
        if scope is None or endpoint != "chat/completions":
            self._json(h, 404, {"error": {"message": "not found"}})
            return
        try:
            payload = json.loads(body)
        except ValueError:
            self._json(h, 400, {"error": {"message": "not JSON"}})
            return
        if payload.get("logprobs"):  # a capability probe or a yes/no check: not a build's call
            top = [{"token": "Yes", "logprob": -0.1}, {"token": "No", "logprob": -2.4}]
            self._json(h, 200, _reply("Yes", {"content": [{"token": "Yes", "top_logprobs": top}]}))
            return
        scope.arrived.set()
        if scope.mode == "trickle":
            self._trickle(h)
        elif scope.mode == "flood":
            self._flood(h)
        elif scope.mode == "error400":
            message = "the model refused:\nline two of the body\nline three"
            self._json(h, 400, {"error": {"message": message}})
        else:
            self._complete(h, scope, body, payload)

    def _complete(
        self, h: BaseHTTPRequestHandler, scope: Scope, body: bytes, payload: dict[str, Any]
    ) -> None:
        digest = hashlib.sha256(body).hexdigest()
        with scope.lock:
            hold = scope.hold_after is not None and scope.paid >= scope.hold_after
            if hold:
                scope.held += 1
        if hold:  # never answered: the case kills the client meanwhile
            while not scope.release.wait(0.2) and not self.stopping.is_set():
                pass
            return
        messages = payload.get("messages") or [{}]
        last = str(messages[-1].get("content", ""))
        words = re.findall(r"[A-Za-z]+", last)[-24:]
        text = "Summary: " + (" ".join(words) or "nothing") + "."
        self._json(h, 200, _reply(text, None, prompt_tokens=len(body) // 4))
        with scope.lock:
            if digest in scope.answered:
                scope.repeated += 1
                scope.repeated_example = scope.repeated_example or excerpt(last, 80)
            scope.answered.add(digest)
            scope.paid += 1

    def _trickle(self, h: BaseHTTPRequestHandler) -> None:
        """One byte every 2 s of a body that says it is 1 MB long."""
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(1 << 20))
        h.end_headers()
        with contextlib.suppress(OSError):
            while not self.stopping.wait(2.0):
                h.wfile.write(b" ")
                h.wfile.flush()

    def _flood(self, h: BaseHTTPRequestHandler) -> None:
        """A body without end (up to 8 GB): the client must stop reading."""
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Connection", "close")
        h.end_headers()
        block = b" " * (1 << 20)
        with contextlib.suppress(OSError):
            for _ in range(8 * 1024):
                if self.stopping.is_set():
                    break
                h.wfile.write(block)


def _reply(text: str, logprobs: Any, prompt_tokens: int = 8) -> dict[str, Any]:
    choice: dict[str, Any] = {
        "index": 0,
        "message": {"role": "assistant", "content": text},
        "finish_reason": "stop",
    }
    if logprobs is not None:
        choice["logprobs"] = logprobs
    done = len(text.split())
    return {
        "id": "fake",
        "object": "chat.completion",
        "model": FAKE_LLM,
        "choices": [choice],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": done,
            "total_tokens": prompt_tokens + done,
        },
    }


# ---------------------------------------------------------------- running lcr

# Limits and a closed stdout are set by a small exec wrapper rather than preexec_fn,
# which may deadlock a child forked from a process with threads (the fake server's).
_WRAPPER = """
import json, os, resource, signal, sys
cfg = json.loads(sys.argv[1])
if cfg.get("as"):
    resource.setrlimit(resource.RLIMIT_AS, (cfg["as"], cfg["as"]))
if cfg.get("fsize") is not None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (cfg["fsize"], cfg["fsize"]))
if cfg.get("close_stdout"):
    os.close(1)
os.execvp(sys.argv[2], sys.argv[2:])
"""


@dataclass
class Env:
    """What every case shares: the command under test, the fake server, the assets."""

    lcr: list[str]
    python: str
    environ: dict[str, str]
    server: FakeServer
    root: Path
    atime_works: bool
    assets: Assets | None = None


class Running:
    """A started CLI run; :meth:`wait` classifies it into its lab's findings."""

    def __init__(
        self, lab: Lab, proc: subprocess.Popen[bytes], label: str, timeout: float, expect: Expect
    ) -> None:
        self.lab, self.proc, self.label = lab, proc, label
        self.timeout, self.expect = timeout, expect
        self.started = time.monotonic()
        self.out_path = lab.logs / f"{lab.runs}.out"
        self.err_path = lab.logs / f"{lab.runs}.err"

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def signal(self, sig: int) -> None:
        """To the whole process group, as a terminal's Ctrl-C does."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)

    def wait(self, timeout: float | None = None) -> Outcome:
        left = self.timeout - (time.monotonic() - self.started) if timeout is None else timeout
        try:
            code: int | None = self.proc.wait(max(0.1, left))
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
            self.proc.wait()
            code = None
        if code is not None and code < 0:
            code = 128 - code
        outcome = Outcome(
            self.label,
            code,
            _text(self.out_path),
            _text(self.err_path),
            time.monotonic() - self.started,
            self.timeout if timeout is None else timeout,
        )
        for counter, text in classify(outcome, self.expect):
            self.lab.fail(counter, text)
        return outcome


def _text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return ""


class Lab:
    """One case's temporary folder, its runs, and what it planted to check after."""

    def __init__(self, name: str, env: Env) -> None:
        self.name = name
        self.env = env
        self.dir = env.root / "cases" / name
        self.logs = env.root / "logs" / name
        self.dir.mkdir(parents=True)
        self.logs.mkdir(parents=True)
        self.outside_dir = self.dir / "outside"
        self.findings: list[tuple[str, str]] = []
        self.notes: list[str] = []
        self.runs = 0
        self.seconds = 0.0
        self.secrets: list[str] = []
        self._sentinels: dict[Path, str] = {}
        self._outside: dict[Path, tuple[str, int]] = {}  # path -> (sha256, atime_ns)

    # -------------------------------------------------------------- recording
    def fail(self, counter: str, text: str) -> None:
        self.findings.append((counter, excerpt(text)))

    def note(self, text: str) -> None:
        self.notes.append(text)

    # ---------------------------------------------------------------- files
    def write(self, rel: str, content: str | bytes) -> Path:
        path = self.dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str):
            path.write_text(content, encoding="utf-8")
        else:
            path.write_bytes(content)
        return path

    def sentinel(self, rel: str, content: str = "") -> Path:
        """A user's file that must survive the case unchanged."""
        return self.keep(self.write(rel, content or f"user's file {rel}, {os.urandom(4).hex()}\n"))

    def keep(self, path: Path) -> Path:
        """A file already written that must survive the case unchanged."""
        self._sentinels[path] = _sha(path.read_bytes())
        return path

    def outside(self, rel: str, content: str | None = None) -> Path:
        """A file outside every index, never to be read nor written; its last-read time
        is set before its modification time, so a read moves it (relatime)."""
        secret = f"SECRET-{os.urandom(6).hex()}"
        self.secrets.append(secret)
        path = self.outside_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content if content is not None else f"{secret} private\n", "utf-8")
        self.age(path)
        return path

    def age(self, path: Path) -> None:
        """(Re)register ``path`` as a file outside: its content and its last-read time."""
        digest = _sha(path.read_bytes())
        st = path.stat()
        os.utime(path, ns=(st.st_mtime_ns - 86_400 * 10**9 * 3, st.st_mtime_ns))
        self._outside[path] = (digest, path.stat().st_atime_ns)

    def copy_asset(self, name: str, rel: str | None = None) -> Path:
        assert self.env.assets is not None
        src = self.env.assets.path(name)
        dst = self.dir / (rel or src.name)
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst, symlinks=True)
        else:
            shutil.copyfile(src, dst)
        return dst

    # ---------------------------------------------------------------- runs
    def start(
        self,
        *args: str,
        expect: Expect | tuple[int, ...] | None = (0,),
        cwd: Path | None = None,
        stdin: bytes | Path | None = None,
        timeout: float = RUN_TIMEOUT,
        memory: int | None = None,
        fsize: int | None = None,
        close_stdout: bool = False,
        stdout: Path | None = None,
        extra_env: dict[str, str] | None = None,
        python: bool = False,
        label: str = "",
    ) -> Running:
        """Start ``lcr ARGS`` (``python ARGS`` when ``python``) in its own process group."""
        self.runs += 1
        if not isinstance(expect, Expect):
            expect = Expect(codes=expect)
        expect = Expect(expect.codes, expect.traceback_ok, (*expect.secrets, *self.secrets))
        cmd = [self.env.python, *args] if python else [*self.env.lcr, *args]
        if memory or fsize is not None or close_stdout:
            cfg = {"as": memory, "fsize": fsize, "close_stdout": close_stdout}
            cmd = [sys.executable, "-I", "-S", "-c", _WRAPPER, json.dumps(cfg), *cmd]
        env = dict(self.env.environ, **(extra_env or {}))
        shown = " ".join(shlex.quote(a) for a in args[:7]) + (" ..." if len(args) > 7 else "")
        label = label or f"{'python' if python else 'lcr'} {shown}".replace(str(self.dir) + "/", "")
        out_path = self.logs / f"{self.runs}.out"
        if isinstance(stdin, Path):
            stdin_file: Any = stdin.open("rb")
        elif isinstance(stdin, bytes):
            feed = self.logs / f"{self.runs}.in"
            feed.write_bytes(stdin)
            stdin_file = feed.open("rb")
        else:
            stdin_file = subprocess.DEVNULL
        with contextlib.ExitStack() as files:
            if stdin_file is not subprocess.DEVNULL:
                files.enter_context(stdin_file)
            out = files.enter_context((stdout or out_path).open("wb"))
            err = files.enter_context((self.logs / f"{self.runs}.err").open("wb"))
            proc = subprocess.Popen(
                cmd,
                cwd=cwd or self.dir,
                stdin=stdin_file,
                stdout=out,
                stderr=err,
                env=env,
                process_group=0,
            )
        return Running(self, proc, label, timeout, expect)

    def run(self, *args: str, **options: Any) -> Outcome:
        return self.start(*args, **options).wait()

    def python(self, code: str, **options: Any) -> Outcome:
        """A Python snippet with the tree under test importable (the API's cases)."""
        return self.run("-c", code, python=True, **options)

    # ---------------------------------------------------------------- checks
    def intact(
        self,
        idx: Path,
        *,
        docs: Sequence[Path] = (),
        methods: Sequence[str] = (),
        why: str = "",
        verify: bool = True,
    ) -> bool:
        """The index is whole: its manifest, sizes, checksums and node spans check
        (read here, not by lcr), leaf text is ``source[span]``, and ``lcr info --verify``
        agrees; ``docs``: it indexes these documents; ``methods``: they are built."""
        problems = inspect_index(idx)
        if not problems and docs:
            wanted = [_sha(d.read_bytes()) for d in docs]
            have = [s.get("sha256") for s in _manifest(idx).get("sources", [])]
            if wanted != have:
                problems.append("it now indexes other documents")
        if not problems:
            built = _manifest(idx).get("methods") or {}
            problems += [f"{m} is no longer built" for m in methods if m not in built]
        if not problems and verify:
            said = self.run("info", str(idx), "--verify", expect=None)
            if said.code != 0:
                problems.append(f"info --verify: {said.stderr.strip() or said.stdout.strip()}")
        for problem in problems[:1]:
            self.fail("damaged indexes", f"{idx.name}{' ' + why if why else ''}: {problem}")
        return not problems

    def detects(self, idx: Path, what: str) -> None:
        """A tampered index: ``info --verify`` must find it damaged (exit 1)."""
        said = self.run("info", str(idx), "--verify", expect=(0, 1))
        if said.code == 0:
            self.fail("damaged indexes", f"info --verify passes with {what}")

    def finish(self) -> None:
        """What the case planted: user files whole, files outside neither read nor written."""
        for path, digest in self._sentinels.items():
            if not path.exists():
                self.fail("deleted user files", f"{path.relative_to(self.dir)} is gone")
            elif _sha(path.read_bytes()) != digest:
                self.fail("deleted user files", f"{path.relative_to(self.dir)} was changed")
        self._check_outside()

    def _check_outside(self) -> None:
        for path, (digest, atime) in self._outside.items():
            rel = path.relative_to(self.dir)
            if not path.exists():
                self.fail("reads/writes outside", f"{rel} was removed")
                continue
            if self.env.atime_works and path.stat().st_atime_ns != atime:
                self.fail("reads/writes outside", f"{rel} was read")
            if _sha(path.read_bytes()) != digest:
                self.fail("reads/writes outside", f"{rel} was written")
        if self.outside_dir.exists():
            for path in self.outside_dir.rglob("*"):
                known = path in self._outside or any(p.is_relative_to(path) for p in self._outside)
                if not known and not path.is_dir():
                    self.fail("reads/writes outside", f"{path.relative_to(self.dir)} was created")
        if self.secrets:
            for path in self.dir.rglob("*"):
                if path.is_relative_to(self.outside_dir) or not path.is_file() or path.is_symlink():
                    continue
                data = path.read_bytes()
                if any(s.encode() in data for s in self.secrets):
                    self.fail(
                        "reads/writes outside",
                        f"a file outside was copied into {path.relative_to(self.dir)}",
                    )
                    break


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _manifest(idx: Path) -> dict[str, Any]:
    try:
        raw = json.loads((idx / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return raw if isinstance(raw, dict) else {}


# ------------------------------------------------------- the index, read here

_SAFE_DIR = re.compile(r"^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$")


def inspect_index(idx: Path) -> list[str]:
    """What is wrong with the index at ``idx``, read without lcr: the manifest's
    files (sizes and checksums), every node's spans inside ``source.txt``, and every
    leaf's text equal to ``source[span]``. Empty when it is whole."""
    man = _manifest(idx)
    if not man:
        return ["manifest.json is missing or not a JSON object"]
    src = idx / "source.txt"
    if src.is_symlink():
        return ["source.txt is a symlink"]
    try:
        data = src.read_bytes()
    except OSError:
        return ["source.txt is missing"]
    if man.get("source_sha256") not in (None, _sha(data)):
        return ["source.txt does not match its checksum"]
    if man.get("source_bytes") != len(data):
        return ["source.txt has the wrong size"]
    try:
        source = data.decode("utf-8")
    except UnicodeDecodeError:
        return ["source.txt is not UTF-8"]
    sources = man.get("sources")
    if not isinstance(sources, list) or not sources:
        return ["the manifest lists no documents"]
    problems: list[str] = []
    methods = man.get("methods")
    if not isinstance(methods, dict):
        return ["the manifest's methods are not an object"]
    for name, entry in methods.items():
        problems += _inspect_method(idx, str(name), entry, source, len(sources))
    return problems


def _inspect_method(idx: Path, name: str, entry: Any, source: str, ndocs: int) -> list[str]:
    if not isinstance(entry, dict):
        return [f"{name}: its manifest entry is not an object"]
    folder = entry.get("dir")
    if not isinstance(folder, str) or not _SAFE_DIR.match(folder):
        return [f"{name}: its folder {folder!r} is not a folder of the index"]
    mdir = idx / folder
    if mdir.is_symlink() or not mdir.is_dir():
        return [f"{name}: {folder} is missing or a symlink"]
    files, digests = entry.get("files"), entry.get("sha256")
    if not isinstance(files, dict) or not isinstance(digests, dict):
        return [f"{name}: files or sha256 of its entry are not objects"]
    for rel, size in files.items():
        path = mdir / rel
        if Path(rel).is_absolute() or ".." in Path(rel).parts:
            return [f"{name}/{rel} names a file outside its folder"]
        if path.is_symlink() or not path.is_file():
            return [f"{name}/{rel} is missing or a symlink"]
        if path.stat().st_size != size:
            return [f"{name}/{rel} has the wrong size"]
        if rel in digests and _sha(path.read_bytes()) != digests[rel]:
            return [f"{name}/{rel} does not match its checksum"]
    for path in sorted(mdir.glob("*.jsonl")):
        problem = _inspect_nodes(path, source, ndocs)
        if problem:
            return [f"{name}/{path.name}: {problem}"]
    return []


def _inspect_nodes(path: Path, source: str, ndocs: int) -> str:
    """The first bad record of a node file: spans outside source.txt, reversed or
    negative, a document out of range, a single-span leaf whose text is not its span."""
    for lineno, line in enumerate(path.read_text("utf-8", errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            node = json.loads(line)
        except ValueError:
            return f"line {lineno} is not JSON"
        if not isinstance(node, dict) or "spans" not in node:
            continue  # not a node (a key table, a fact list of another shape)
        spans = node.get("spans")
        if not isinstance(spans, list):
            return f"line {lineno}: spans are not a list"
        ok = all(
            isinstance(sp, list)
            and len(sp) == 2
            and all(type(v) is int for v in sp)
            and 0 <= sp[0] <= sp[1] <= len(source)
            for sp in spans
        )
        if not ok:
            return (
                f"line {lineno}: spans {excerpt(json.dumps(spans), 60)} are not inside source.txt"
            )
        doc = node.get("doc")
        if doc is not None and not (type(doc) is int and 0 <= doc < ndocs):
            return f"line {lineno}: document {doc!r} does not exist"
        text = node.get("text")
        if node.get("level") == 0 and len(spans) == 1 and isinstance(text, str):
            start, end = spans[0]
            if source[start:end] != text:
                return f"line {lineno}: leaf text is not source[{start}:{end}]"
    return ""


# ------------------------------------------------------------------ the assets

QUERY = "glass slipper"
RAPTOR_SETS = ("--set", "raptor.summary_max_new_tokens=16")
GRAPHREADER_SETS = (
    "--set",
    "graphreader.chunk_tokens=100",
    "--set",
    "graphreader.extraction_max_new_tokens=32",
)
LLM_SETS = {"raptor": RAPTOR_SETS, "graphreader": GRAPHREADER_SETS}
# shared indexes of story.txt, built once by the case named here (a case of its own)
GOLDEN = {
    "bm25.idx": ("build_bm25", ("bm25",)),
    "default.idx": ("build_default_methods", ()),
    "raptor.idx": ("raptor_first_build", ("raptor",)),
    "graphreader.idx": ("graphreader_first_build", ("graphreader",)),
}


class CaseError(Exception):
    """The case could not run (an index it builds on could not be built): not counted."""


class Assets:
    """Texts written once, and shared indexes built once (each by a lab of its own,
    whose findings are reported like a case's) and copied into the cases that use them."""

    def __init__(self, env: Env) -> None:
        self.env = env
        self.dir = env.root / "assets"
        self.dir.mkdir()
        self._lock = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._built: dict[str, Path | None] = {}
        self.labs: list[Lab] = []
        self.scopes: dict[str, Scope] = {}
        story = (REPO / "tests" / "data" / "cinderella.txt").read_text(encoding="utf-8")
        lighthouse = (REPO / "examples" / "lighthouse.txt").read_text(encoding="utf-8")
        (self.dir / "story.txt").write_text(story, encoding="utf-8")
        other = re.sub(r"(?i)cinderella", "Ella", story)
        (self.dir / "story_b.txt").write_text(other, encoding="utf-8")
        (self.dir / "lighthouse.txt").write_text(lighthouse, encoding="utf-8")
        parts = [f"Chapter {i}.\n\n{lighthouse}" for i in range(30)]
        (self.dir / "big.txt").write_text("\n\n".join(parts), encoding="utf-8")

    def path(self, name: str) -> Path:
        return self.golden(name) if name in GOLDEN else self.dir / name

    def golden(self, name: str) -> Path:
        with self._lock:
            lock = self._locks.setdefault(name, threading.Lock())
        with lock:
            if name not in self._built:
                self._built[name] = self._build(name)
        built = self._built[name]
        if built is None:
            raise CaseError(f"the shared index {name} could not be built (see {GOLDEN[name][0]})")
        return built

    def _build(self, name: str) -> Path | None:
        case_name, methods = GOLDEN[name]
        lab = Lab(case_name, self.env)
        self.labs.append(lab)
        started = time.monotonic()
        shutil.copyfile(self.dir / "story.txt", lab.dir / "story.txt")
        args = ["index", "story.txt", "-o", "story.idx", "-q", *_methods(methods)]
        if methods and methods[0] in LLM_SETS:
            self.scopes[name] = self.env.server.scope(case_name)
            args += [*llm_args(self.env, case_name), *LLM_SETS[methods[0]]]
            lab.run(*args, timeout=LLM_TIMEOUT)
            # the same command again: up to date, nothing paid
            paid = self.scopes[name].paid
            lab.run(*args, timeout=LLM_TIMEOUT)
            again = self.scopes[name].paid - paid
            if again:
                lab.fail("paid calls repeated", f"the same build again paid {again} calls")
            lab.note(f"{methods[0]} on story.txt: {paid} calls paid")
        else:
            lab.run(*args)
        ok = lab.intact(lab.dir / "story.idx", methods=methods or ("bm25", "mixpr"))
        lab.finish()
        lab.seconds = time.monotonic() - started
        return lab.dir / "story.idx" if ok else None


def _methods(methods: Sequence[str]) -> list[str]:
    return [arg for m in methods for arg in ("-m", m)]


def llm_args(env: Env, scope: str) -> list[str]:
    """Options that send a run's LLM calls to the fake server's ``scope``."""
    env.server.scope(scope)
    return [
        "--backend",
        "openai",
        "--base-url",
        env.server.url(scope),
        "--llm",
        FAKE_LLM,
        "--concurrency",
        "2",
    ]


# ------------------------------------------------------------------- tampering


def method_dir(idx: Path, method: str) -> Path:
    return idx / str(_manifest(idx)["methods"][method]["dir"])


def save_manifest(idx: Path, manifest: Any) -> None:
    (idx / "manifest.json").write_text(json.dumps(manifest, indent=1), encoding="utf-8")


def refresh(idx: Path, method: str, *rels: str) -> None:
    """Record the current size and sha256 of ``rels`` in the manifest, so checksums
    pass and only a check of structure can find the damage."""
    man = _manifest(idx)
    entry = man["methods"][method]
    for rel in rels:
        data = (idx / entry["dir"] / rel).read_bytes()
        entry["files"][rel] = len(data)
        entry["sha256"][rel] = _sha(data)
    save_manifest(idx, man)


def refresh_source(idx: Path) -> None:
    man = _manifest(idx)
    data = (idx / "source.txt").resolve().read_bytes()
    man["source_bytes"] = len(data)
    man["source_sha256"] = _sha(data)
    save_manifest(idx, man)


def rewrite_nodes(idx: Path, method: str, change: Callable[[list[dict[str, Any]]], Any]) -> None:
    """Apply ``change`` to the node records (a list it may edit in place or replace),
    write them back with their offsets, and refresh the checksums of both."""
    mdir = method_dir(idx, method)
    lines = (mdir / "nodes.jsonl").read_text(encoding="utf-8").splitlines()
    nodes = [json.loads(line) for line in lines if line.strip()]
    changed = change(nodes)
    nodes = nodes if changed is None else changed
    data = b""
    offsets = []
    for node in nodes:
        offsets.append(len(data))
        data += (json.dumps(node, ensure_ascii=False) + "\n").encode("utf-8")
    offsets.append(len(data))
    (mdir / "nodes.jsonl").write_bytes(data)
    rels = ["nodes.jsonl"]
    if (mdir / "nodes.offsets.npy").exists():
        npy = Npy.read(mdir / "nodes.offsets.npy")
        npy.with_values(offsets).write(mdir / "nodes.offsets.npy")
        rels.append("nodes.offsets.npy")
    refresh(idx, method, *rels)


def rewrite_npy(idx: Path, method: str, rel: str, change: Callable[[Npy], Npy]) -> None:
    path = method_dir(idx, method) / rel
    change(Npy.read(path)).write(path)
    refresh(idx, method, rel)


def set_field(manifest: dict[str, Any], where: str, value: Any) -> None:
    """``where``: a dotted path (``methods.bm25.files``, ``sources.0.end``)."""
    keys = where.split(".")
    node: Any = manifest
    for key in keys[:-1]:
        node = node[int(key)] if isinstance(node, list) else node[key]
    last = keys[-1]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value


def served_damage(stdout: str, idx: Path) -> str:
    """Evidence of ``retrieve --json`` that is not the index's text: a span outside
    source.txt, or a leaf whose text is not ``source[span]``. Empty when none."""
    try:
        source = (idx / "source.txt").read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return ""
    for line in stdout.splitlines():
        try:
            result = json.loads(line)
        except ValueError:
            continue
        for item in result.get("evidence", []) if isinstance(result, dict) else []:
            spans = item.get("spans") or []
            if any(not (0 <= s <= e <= len(source)) for s, e in spans):
                return f"evidence {item.get('id')} with spans {spans} outside source.txt"
            if item.get("level") == 0 and len(spans) == 1:
                start, end = spans[0]
                if source[start:end] != item.get("text"):
                    return f"evidence {item.get('id')} whose text is not source[{start}:{end}]"
    return ""


def wait_until(ready: Callable[[], bool], timeout: float, poll: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():
            return True
        time.sleep(poll)
    return ready()


def _listing(folder: Path) -> set[str]:
    try:
        return {str(p.relative_to(folder)) for p in folder.rglob("*")}
    except OSError:
        return set()


def wait_for_work(run: Running, folder: Path, timeout: float = 30.0) -> None:
    """Until the run has changed something under ``folder`` (a build has started) and a
    moment more, or has ended."""
    before = _listing(folder)
    wait_until(lambda: not run.alive or _listing(folder) != before, timeout, 0.05)
    time.sleep(0.4)


def hint_of(text: str) -> list[str] | None:
    """The ``lcr index ...`` command a damage message tells the user to run."""
    found = re.search(r"\blcr (index [^\n]*)", text)
    if not found:
        return None
    try:
        return shlex.split(found.group(1).rstrip(").; "))
    except ValueError:
        return None


def check_tampered(lab: Lab, idx: Path, what: str, method: str, *, strict: bool = True) -> None:
    """A tampered index: ``info --verify`` must report the damage and ``retrieve`` must
    refuse it (``strict``), and never serve text that is not the index's."""
    lab.detects(idx, what) if strict else lab.run("info", str(idx), "--verify", expect=(0, 1))
    said = lab.run(
        "retrieve", str(idx), QUERY, "-m", method, "--json", "-q", expect=(1,) if strict else (0, 1)
    )
    if said.code == 0:
        problem = served_damage(said.stdout, idx)
        if problem:
            lab.fail("damaged indexes", f"retrieve -m {method} serves {problem} ({what})")


def force_repairs(lab: Lab, idx: Path, method: str = "bm25") -> None:
    """``--force`` rebuilds a damaged index of these documents whole."""
    lab.run("index", "story.txt", "-o", str(idx), "--force", "-m", method, "-q")
    lab.intact(idx, docs=[lab.dir / "story.txt"], methods=[method], why="after --force")


def golden_copy(lab: Lab, golden: str = "bm25.idx") -> Path:
    lab.copy_asset("story.txt")
    return lab.copy_asset(golden, "story.idx")


# ---------------------------------------------------------------------- cases


@dataclass(frozen=True)
class Case:
    name: str
    row: str  # the row of issue #37's table it covers ("1".."17"), or "paid" for LLM cost
    run: Callable[[Lab], None]
    order: int = 1  # 0: long, started first; 1: the rest; 2: waits for an LLM build


CASES: list[Case] = []


def case(name: str, row: str, order: int = 1) -> Callable[[Callable[[Lab], None]], Any]:
    def register(fn: Callable[[Lab], None]) -> Callable[[Lab], None]:
        CASES.append(Case(name, row, fn, order))
        return fn

    return register


def add_case(name: str, row: str, fn: Callable[[Lab], None], order: int = 1) -> None:
    CASES.append(Case(name, row, fn, order))


# row 1: concurrent --force writers with different documents ------------------


def _force_race(lab: Lab, rounds: int, methods: Sequence[str], timeout: float) -> None:
    a, b = lab.copy_asset("story.txt", "a.txt"), lab.copy_asset("story_b.txt", "b.txt")
    idx = lab.dir / "r.idx"
    for turn in range(rounds):
        runs = [
            lab.start(
                "index",
                doc.name,
                "-o",
                "r.idx",
                "--force",
                "-q",
                *_methods(methods),
                expect=(0, 1),
                timeout=timeout,
            )
            for doc in (a, b, a, b)
        ]
        outcomes = [run.wait() for run in runs]
        if not (idx / "manifest.json").exists():
            if all(o.code == 0 for o in outcomes):
                lab.fail("damaged indexes", f"round {turn + 1}: every writer exits 0, no index")
            continue
        if not lab.intact(idx, why=f"after round {turn + 1} of 4 writers", verify=turn == 0):
            return
    lab.intact(idx, why="after the last round")


@case("race_force_two_documents_bm25", "1")
def _race_bm25(lab: Lab) -> None:
    _force_race(lab, 4, ["bm25"], RUN_TIMEOUT)


@case("race_force_two_documents_default_methods", "1", order=0)
def _race_default(lab: Lab) -> None:
    _force_race(lab, 3, [], 4 * RUN_TIMEOUT)  # four writers, each waiting for the others


@case("race_create_same_document", "1")
def _race_create(lab: Lab) -> None:
    lab.copy_asset("story.txt")
    runs = [lab.start("index", "story.txt", "-o", "n.idx", "-m", "bm25", "-q") for _ in range(3)]
    for run in runs:
        run.wait()
    lab.intact(lab.dir / "n.idx", docs=[lab.dir / "story.txt"], methods=["bm25"])


@case("race_add_two_methods", "1")
def _race_add(lab: Lab) -> None:
    idx = golden_copy(lab)
    runs = [
        lab.start("index", "story.txt", "-o", "story.idx", "-m", m, "-q")
        for m in ("tfidf", "mixpr")
    ]
    for run in runs:
        run.wait()
    lab.intact(idx, methods=["bm25", "tfidf", "mixpr"])


@case("race_force_same_document", "1")
def _race_force_same(lab: Lab) -> None:
    idx = golden_copy(lab)
    runs = [
        lab.start("index", "story.txt", "-o", "story.idx", "--force", "-m", "bm25", "-q")
        for _ in range(3)
    ]
    for run in runs:
        run.wait()
    lab.intact(idx, docs=[lab.dir / "story.txt"], methods=["bm25"])


@case("read_during_rebuild", "17")
def _read_during_rebuild(lab: Lab) -> None:
    """Two readers beside --force rebuilds of the same documents: never a false damage
    (the build a reader opened may be replaced, never reported damaged)."""
    idx = golden_copy(lab, "default.idx")
    stop = threading.Event()

    def writer() -> None:
        for _ in range(3):
            lab.run("index", "story.txt", "-o", "story.idx", "--force", "-m", "mixpr", "-q")
        stop.set()

    def reader() -> None:
        while not stop.is_set():
            lab.run("retrieve", "story.idx", QUERY, "-m", "mixpr", "-q")

    threads = [threading.Thread(target=f) for f in (writer, reader, reader)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lab.intact(idx, methods=["bm25", "mixpr"])


# row 2: --force on a folder that is not an index -----------------------------

_NOT_MANIFESTS: dict[str, bytes | None] = {
    "empty": b"",
    "truncated": b'{"format": "lcr-index", "schema_ver',
    "null": b"null",
    "foreign": b'{"name": "my-web-app", "short_name": "app", "start_url": "/"}',
    "binary": bytes(range(256)),
    "list": b"[1, 2, 3]",
    "is_a_folder": None,
}


def _force_on_folder(lab: Lab, manifest: bytes | None, with_manifest: bool = True) -> None:
    lab.copy_asset("story.txt")
    lab.sentinel("proj/thesis.tex", "\\documentclass{article}\n")
    lab.sentinel("proj/notes/todo.txt")
    lab.sentinel("proj/.git/HEAD", "ref: refs/heads/main\n")
    if with_manifest:
        if manifest is None:
            (lab.dir / "proj" / "manifest.json").mkdir()
            lab.sentinel("proj/manifest.json/inner.txt")
        else:
            lab.keep(lab.write("proj/manifest.json", manifest))
    lab.run("index", "story.txt", "-o", "proj", "--force", "-m", "bm25", "-q", expect=(1,))


for _kind, _bytes in _NOT_MANIFESTS.items():
    add_case(
        f"force_on_folder_{_kind}_manifest",
        "2",
        partial(_force_on_folder, manifest=_bytes),
    )
add_case("force_on_folder_without_manifest", "2", lambda lab: _force_on_folder(lab, b"", False))


@case("force_on_a_user_file", "2")
def _force_on_file(lab: Lab) -> None:
    lab.copy_asset("story.txt")
    lab.sentinel("report.pdf", "%PDF-1.4 not an index\n")
    lab.run("index", "story.txt", "-o", "report.pdf", "--force", "-q", expect=(1, 2))


# row 3: a --force rebuild that fails or is interrupted keeps the old index ----


def _force_interrupted(lab: Lab, sig: int) -> None:
    idx = golden_copy(lab, "default.idx")
    lab.copy_asset("big.txt")
    run = lab.start(
        "index",
        "big.txt",
        "-o",
        "story.idx",
        "--force",
        "-m",
        "mixpr",
        "-q",
        expect=(0, 130) if sig == signal.SIGINT else None,
    )
    wait_for_work(run, lab.dir)
    run.signal(sig)
    run.wait(timeout=SIGINT_GRACE if sig == signal.SIGINT else RUN_TIMEOUT)
    old_or_new(lab, idx, ["bm25", "mixpr"], "big.txt", "mixpr")


def old_or_new(lab: Lab, idx: Path, old_methods: Sequence[str], new_doc: str, new: str) -> None:
    """After a --force with ``new_doc`` that failed or was stopped: the old index whole
    (story.txt, ``old_methods``), or the new one committed whole, ``new`` built."""
    sources = _manifest(idx).get("sources")
    new_path = lab.dir / new_doc
    if isinstance(sources, list) and [s.get("sha256") for s in sources if isinstance(s, dict)] == [
        _sha(new_path.read_bytes())
    ]:
        lab.intact(idx, docs=[new_path], methods=[new], why="(the old index was replaced)")
    else:
        lab.intact(idx, docs=[lab.dir / "story.txt"], methods=old_methods, why="(old index)")


add_case("force_rebuild_sigint_keeps_old_index", "3", lambda lab: _force_interrupted(lab, 2))
add_case("force_rebuild_sigkill_keeps_old_index", "3", lambda lab: _force_interrupted(lab, 9))


@case("force_rebuild_file_size_limit_keeps_old_index", "3")
def _force_fsize(lab: Lab) -> None:
    """A "full disk" (RLIMIT_FSIZE: EFBIG) during --force with a larger document: the
    message says the index is as it was, so it must be."""
    idx = golden_copy(lab, "default.idx")
    lab.copy_asset("big.txt")
    lab.run(
        "index",
        "big.txt",
        "-o",
        "story.idx",
        "--force",
        "-m",
        "mixpr",
        "-q",
        fsize=800_000,
        expect=(1,),
    )
    old_or_new(lab, idx, ["bm25", "mixpr"], "big.txt", "mixpr")


@case("raptor_force_sigint_keeps_old_index_and_cache", "3", order=2)
def _raptor_force_sigint(lab: Lab) -> None:
    """Ctrl-C during `--force -m raptor` with another document: the old index and its
    LLM cache stay, so building it again pays nothing."""
    idx = golden_copy(lab, "raptor.idx")
    lab.copy_asset("story_b.txt")
    scope = _seeded_scope(lab, "raptor.idx")
    llm = [*llm_args(lab.env, lab.name), *RAPTOR_SETS]
    scope.hold_after = scope.paid  # every call of the new build waits: it is stopped mid-way
    run = lab.start(
        "index",
        "story_b.txt",
        "-o",
        "story.idx",
        "-m",
        "raptor",
        "--force",
        "-q",
        *llm,
        expect=(130,),
        timeout=LLM_TIMEOUT,
    )
    wait_until(lambda: scope.held > 0 or not run.alive, LLM_TIMEOUT)
    time.sleep(0.5)
    run.signal(signal.SIGINT)
    run.wait(timeout=SIGINT_GRACE)
    scope.stop_holding()
    old_or_new(lab, idx, ["raptor"], "story_b.txt", "raptor")
    before = scope.repeated  # the user builds story.txt again: its cache pays for it
    lab.run(
        "index",
        "story.txt",
        "-o",
        "story.idx",
        "-m",
        "raptor",
        "--force",
        "-q",
        *llm,
        timeout=LLM_TIMEOUT,
    )
    if scope.repeated > before:
        lab.fail("paid calls repeated", f"{scope.repeated - before} summaries paid again")


def _seeded_scope(lab: Lab, golden: str) -> Scope:
    """A scope for this case that knows what the shared build's cache holds."""
    assert lab.env.assets is not None
    scope = lab.env.server.scope(lab.name)
    scope.answered |= lab.env.assets.scopes[golden].answered
    return scope


# row 4 and the cost of LLM builds: a paid call is never paid twice ----------


def _kill_and_resume(lab: Lab, method: str) -> None:
    lab.copy_asset("story.txt")
    scope = lab.env.server.scope(lab.name)
    scope.hold_after = 2
    args = [
        "index",
        "story.txt",
        "-o",
        "s.idx",
        "-m",
        method,
        "-q",
        *llm_args(lab.env, lab.name),
        *LLM_SETS[method],
    ]
    run = lab.start(*args, expect=None, timeout=LLM_TIMEOUT)
    wait_until(lambda: scope.held > 0 or not run.alive, LLM_TIMEOUT)
    time.sleep(1.0)  # what was answered is in the cache by now
    run.signal(signal.SIGKILL)
    run.wait()
    answered = scope.paid
    scope.stop_holding()
    lab.run(*args, timeout=LLM_TIMEOUT)
    if scope.repeated:
        lab.fail(
            "paid calls repeated",
            f"{scope.repeated} of {answered} calls answered before the kill paid again "
            f"({scope.repeated_example})",
        )
    lab.note(f"{method}: {answered} calls before kill -9, {scope.paid - answered} after")
    lab.intact(lab.dir / "s.idx", methods=[method])


add_case("raptor_kill9_resume", "paid", lambda lab: _kill_and_resume(lab, "raptor"), order=0)
add_case(
    "graphreader_kill9_resume", "paid", lambda lab: _kill_and_resume(lab, "graphreader"), order=0
)


def _force_again(lab: Lab, method: str, edit: bool) -> None:
    golden = f"{method}.idx"
    idx = golden_copy(lab, golden)
    scope = _seeded_scope(lab, golden)
    assert lab.env.assets is not None
    first = lab.env.assets.scopes[golden].paid
    story = lab.dir / "story.txt"
    if edit:  # one word, in the middle of the story
        text = story.read_text(encoding="utf-8")
        at = text.index(" bird ", len(text) // 2)
        story.write_text(text[:at] + " dove " + text[at + 6 :], encoding="utf-8")
    lab.run(
        "index",
        "story.txt",
        "-o",
        "story.idx",
        "-m",
        method,
        "--force",
        "-q",
        *llm_args(lab.env, lab.name),
        *LLM_SETS[method],
        timeout=LLM_TIMEOUT,
    )
    if scope.repeated:
        lab.fail(
            "paid calls repeated",
            f"{scope.repeated} of {scope.paid} calls had been paid by the first build "
            f"({scope.repeated_example})",
        )
    what = "a one-word edit" if edit else "the same text"
    lab.note(f"{method} --force with {what}: {scope.paid} calls paid (first build: {first})")
    lab.intact(idx, docs=[story], methods=[method])


add_case(
    "graphreader_force_same_text",
    "4",
    partial(_force_again, method="graphreader", edit=False),
    order=2,
)
for _method in ("raptor", "graphreader"):
    add_case(
        f"{_method}_force_one_word_edit",
        "4",
        partial(_force_again, method=_method, edit=True),
        order=2,
    )


@case("graphreader_concurrent_builds", "17", order=0)
def _concurrent_llm(lab: Lab) -> None:
    """Two runs building the same LLM method at once: each call is paid once."""
    lab.copy_asset("story.txt")
    scope = lab.env.server.scope(lab.name)
    args = [
        "index",
        "story.txt",
        "-o",
        "s.idx",
        "-m",
        "graphreader",
        "-q",
        *llm_args(lab.env, lab.name),
        *GRAPHREADER_SETS,
    ]
    runs = [lab.start(*args, timeout=LLM_TIMEOUT) for _ in range(2)]
    for run in runs:
        run.wait()
    if scope.repeated:
        lab.fail("paid calls repeated", f"{scope.repeated} of {scope.paid} calls paid twice")
    lab.intact(lab.dir / "s.idx", methods=["graphreader"])


# row 5: symlinks inside an index never lead writes (or reads) outside --------


@case("symlink_cache_file_to_outside", "5", order=0)
def _symlink_cache_file(lab: Lab) -> None:
    """cache/graphreader.jsonl -> a file outside: a build must not append to it."""
    idx = golden_copy(lab)
    target = lab.outside("dotfile.rc")
    (idx / "cache").mkdir(exist_ok=True)
    (idx / "cache" / "graphreader.jsonl").symlink_to(target)
    lab.run(
        "index",
        "story.txt",
        "-o",
        "story.idx",
        "-m",
        "graphreader",
        "-q",
        *llm_args(lab.env, lab.name),
        *GRAPHREADER_SETS,
        expect=(1,),
        timeout=LLM_TIMEOUT,
    )


@case("symlink_cache_folder_to_outside", "5", order=0)
def _symlink_cache_dir(lab: Lab) -> None:
    idx = golden_copy(lab)
    lab.outside("shared/keep.txt")
    (idx / "cache").symlink_to(lab.outside_dir / "shared")
    lab.run(
        "index",
        "story.txt",
        "-o",
        "story.idx",
        "-m",
        "graphreader",
        "-q",
        *llm_args(lab.env, lab.name),
        *GRAPHREADER_SETS,
        expect=(1,),
        timeout=LLM_TIMEOUT,
    )


@case("symlink_lock_to_outside", "5")
def _symlink_lock(lab: Lab) -> None:
    """.lock -> a path outside that does not exist: taking the lock must not create it."""
    idx = golden_copy(lab)
    lab.outside_dir.mkdir(exist_ok=True)
    (idx / ".lock").unlink(missing_ok=True)
    (idx / ".lock").symlink_to(lab.outside_dir / "created-by-lcr")
    # lcr's writer lock lives beside the index now: an old .lock inside is inert
    lab.run("index", "story.txt", "-o", "story.idx", "-m", "tfidf", "-q", expect=(0, 1))
    lab.intact(idx, methods=["bm25"])
    beside = lab.dir / ".story.idx.lock"  # the lock itself, a link: refused, not followed
    beside.symlink_to(lab.outside_dir / "created-by-lcr-beside")
    lab.run("index", "story.txt", "-o", "story.idx", "-m", "dense", "-q", expect=(1,))


@case("symlink_method_folder_to_outside", "5")
def _symlink_method_dir(lab: Lab) -> None:
    """bm25.<id> -> a copy outside: reading the index must not follow it."""
    idx = golden_copy(lab)
    mdir = method_dir(idx, "bm25")
    copy = lab.outside_dir / "bm25-copy"
    shutil.copytree(mdir, copy)
    shutil.rmtree(mdir)
    mdir.symlink_to(copy)
    for path in copy.rglob("*"):
        if path.is_file():
            lab.age(path)
    lab.run("retrieve", "story.idx", QUERY, "-m", "bm25", "-q", expect=(1,))
    lab.run("info", "story.idx", "--verify", expect=(1,))


@case("symlink_source_to_outside", "5")
def _symlink_source(lab: Lab) -> None:
    """source.txt -> a private file outside, checksums refreshed: never served."""
    idx = golden_copy(lab)
    secret = lab.outside("private.txt")
    text = (idx / "source.txt").read_text(encoding="utf-8")
    body = (secret.read_text(encoding="utf-8").strip() + " ") * (len(text) // 30)
    secret.write_text(body[: len(text)].ljust(len(text)), encoding="utf-8")
    lab.age(secret)
    (idx / "source.txt").unlink()
    (idx / "source.txt").symlink_to(secret)
    refresh_source(idx)
    lab.age(secret)
    lab.run("retrieve", "story.idx", "private", "-m", "bm25", "--json", "-q", expect=(1,))


# row 6: a manifest or an eval file never makes lcr read outside its folder ---


def _outside_copy(lab: Lab, idx: Path) -> Path:
    """A copy of the bm25 build outside the index, every file aged (reads show)."""
    copy = lab.outside_dir / "bm25.stolen"
    shutil.copytree(method_dir(idx, "bm25"), copy)
    for path in copy.rglob("*"):
        if path.is_file():
            lab.age(path)
    return copy


def _manifest_dir_outside(lab: Lab, absolute: bool) -> None:
    idx = golden_copy(lab)
    copy = _outside_copy(lab, idx)
    man = _manifest(idx)
    man["methods"]["bm25"]["dir"] = str(copy) if absolute else "../outside/bm25.stolen"
    save_manifest(idx, man)
    lab.run("info", "story.idx", "--verify", expect=(1,))
    lab.run("retrieve", "story.idx", QUERY, "-m", "bm25", "-q", expect=(1,))
    force_repairs(lab, idx)


add_case("manifest_dir_absolute_outside", "6", lambda lab: _manifest_dir_outside(lab, True))
add_case("manifest_dir_dotdot_outside", "6", lambda lab: _manifest_dir_outside(lab, False))


@case("manifest_file_name_dotdot_outside", "6")
def _manifest_file_outside(lab: Lab) -> None:
    """A listed file ``../../outside/private.txt`` with its true size and sha256."""
    idx = golden_copy(lab)
    secret = lab.outside("private.txt")
    man = _manifest(idx)
    rel = "../../outside/private.txt"
    data = secret.read_bytes()
    man["methods"]["bm25"]["files"][rel] = len(data)
    man["methods"]["bm25"]["sha256"][rel] = _sha(data)
    save_manifest(idx, man)
    lab.age(secret)
    lab.run("info", "story.idx", "--verify", expect=(1,))
    force_repairs(lab, idx)


def _eval_outside(lab: Lab, absolute: bool) -> None:
    secret = lab.outside("private.txt", None)
    words = " ".join(["The keeper rowed out to the rock at dawn."] * 40)
    secret.write_text(f"{lab.secrets[-1]} {words}\n", encoding="utf-8")
    lab.age(secret)
    path = str(secret) if absolute else "../outside/private.txt"
    question = {
        "id": "q1",
        "question": "Who rowed out?",
        "answers": ["the keeper"],
        "documents": [path],
    }
    lab.write("data/q.jsonl", json.dumps(question) + "\n")
    lab.run("eval", "data/q.jsonl", "-m", "bm25", "--retrieval-only", "-q", expect=(1, 2))


add_case("eval_document_dotdot_outside", "6", lambda lab: _eval_outside(lab, False))
add_case("eval_document_absolute_outside", "6", lambda lab: _eval_outside(lab, True))


@case("eval_document_inside_control", "6")
def _eval_inside(lab: Lab) -> None:
    """The control: a document path inside the data file's folder is read."""
    lab.copy_asset("story.txt", "data/docs/story.txt")
    question = {
        "id": "q1",
        "question": "Who lost a slipper?",
        "answers": ["Cinderella"],
        "documents": ["docs/story.txt"],
    }
    lab.write("data/q.jsonl", json.dumps(question) + "\n")
    lab.run("eval", "data/q.jsonl", "-m", "bm25", "--retrieval-only", "-q")


# row 7: crafted arrays, checksums refreshed: damage, never a crash -----------


def _array_case(
    rel: str, change: Callable[[Npy], Npy], strict: bool = True
) -> Callable[[Lab], None]:
    def run(lab: Lab) -> None:
        idx = golden_copy(lab, "default.idx")
        rewrite_npy(idx, "mixpr", rel, change)
        check_tampered(lab, idx, f"mixpr/{rel} crafted", "mixpr", strict=strict)

    return run


def _fill(value: Any) -> Callable[[Npy], Npy]:
    return lambda a: a.with_values([value] * len(a.values()), a.shape)


def _reverse(a: Npy) -> Npy:
    return a.with_values(a.values()[::-1], a.shape)


def _shorter(a: Npy) -> Npy:
    return a.with_values(a.values()[:-1])


def _huge_last(a: Npy) -> Npy:
    return a.with_values([*a.values()[:-1], 10**9], a.shape)


def _claims_huge_shape(a: Npy) -> Npy:
    return Npy(a.descr, (10**12,), a.data)


def _as_floats(a: Npy) -> Npy:
    return Npy("<f8", a.shape, struct.pack(f"<{len(a.values())}d", *map(float, a.values())))


_ARRAYS: dict[str, tuple[str, Callable[[Npy], Npy], bool]] = {
    "graph_indices_huge": ("graph.csr/indices.npy", _fill(10**6), True),
    "graph_indices_negative": ("graph.csr/indices.npy", _fill(-7), True),
    "graph_indptr_reversed": ("graph.csr/indptr.npy", _reverse, True),
    "graph_indptr_end_huge": ("graph.csr/indptr.npy", _huge_last, True),
    "graph_data_one_short": ("graph.csr/data.npy", _shorter, True),
    "graph_indices_as_floats": ("graph.csr/indices.npy", _as_floats, True),
    "tfidf_indices_huge": ("tfidf.csr/indices.npy", _fill(10**6), True),
    "pagerank_one_short": ("pagerank.npy", _shorter, True),
    "pagerank_header_claims_huge": ("pagerank.npy", _claims_huge_shape, True),
    "col_sums_one_short": ("col_sums.npy", _shorter, True),
    "offsets_past_the_end": ("nodes.offsets.npy", _fill(10**9), True),
    "idf_one_short": ("tfidf_idf.npy", _shorter, True),
    "pagerank_nan": ("pagerank.npy", _fill(float("nan")), False),
}
for _name, (_rel, _change, _strict) in _ARRAYS.items():
    add_case(f"array_mixpr_{_name}", "7", _array_case(_rel, _change, _strict))


@case("array_mixpr_shape_json_huge", "7")
def _shape_json(lab: Lab) -> None:
    idx = golden_copy(lab, "default.idx")
    (method_dir(idx, "mixpr") / "graph.csr" / "shape.json").write_text('{"shape": [1000000, 7]}')
    refresh(idx, "mixpr", "graph.csr/shape.json")
    check_tampered(lab, idx, "graph.csr/shape.json crafted", "mixpr")


@case("array_bm25_zarr_chunk_truncated", "7")
def _zarr_chunk(lab: Lab) -> None:
    idx = golden_copy(lab)
    mdir = method_dir(idx, "bm25")
    chunk = max(
        (
            p
            for p in (mdir / "bm25_indices.zarr").rglob("*")
            if p.is_file()
            and not p.name.startswith(".")
            and "zarr" not in p.name
            and p.suffix != ".json"
        ),
        key=lambda p: p.stat().st_size,
    )
    chunk.write_bytes(chunk.read_bytes()[: chunk.stat().st_size // 2])
    refresh(idx, "bm25", str(chunk.relative_to(mdir)))
    check_tampered(lab, idx, "a zarr chunk cut in half", "bm25")


# row 14: tampered nodes, checksums refreshed: damage, never evidence ---------


def _shift_spans(delta: int) -> Callable[[list[dict[str, Any]]], None]:
    def change(nodes: list[dict[str, Any]]) -> None:
        for n in nodes:
            n["spans"] = [[s + delta, e + delta] for s, e in n["spans"]]

    return change


def _negative(nodes: list[dict[str, Any]]) -> None:
    for n in nodes:
        n["spans"] = [[-5 - e, -1] for s, e in n["spans"]]


def _reversed(nodes: list[dict[str, Any]]) -> None:
    for n in nodes:
        n["spans"] = [[e, s] for s, e in n["spans"]]


def _out_of_range(nodes: list[dict[str, Any]]) -> None:
    for n in nodes:
        n["spans"] = [[10**7 + s, 10**7 + e] for s, e in n["spans"]]


def _other_text(nodes: list[dict[str, Any]]) -> None:
    for n in nodes:
        n["text"] = n["text"].swapcase()


def _doc_missing(nodes: list[dict[str, Any]]) -> None:
    for n in nodes:
        n["doc"] = 99


def _level_text(nodes: list[dict[str, Any]]) -> None:
    for n in nodes:
        n["level"] = "leaf"


def _spans_not_pairs(nodes: list[dict[str, Any]]) -> None:
    for n in nodes:
        n["spans"] = [[1, 2, 3]]


def _half(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return nodes[: len(nodes) // 2]


def _twice(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return nodes + nodes


_NODE_TAMPERS: dict[str, Callable[[list[dict[str, Any]]], Any]] = {
    "spans_negative": _negative,
    "spans_reversed": _reversed,
    "spans_out_of_range": _out_of_range,
    "spans_shifted_by_one": _shift_spans(1),
    "text_not_source": _other_text,
    "doc_out_of_range": _doc_missing,
    "level_not_a_number": _level_text,
    "spans_not_pairs": _spans_not_pairs,
    "half_the_records": _half,
    "records_twice": _twice,
}


def _nodes_case(
    method: str, change: Callable[[list[dict[str, Any]]], Any]
) -> Callable[[Lab], None]:
    def run(lab: Lab) -> None:
        idx = golden_copy(lab, "default.idx")
        rewrite_nodes(idx, method, change)
        check_tampered(lab, idx, f"{method}/nodes.jsonl tampered", method)

    return run


for _name, _tamper in _NODE_TAMPERS.items():
    add_case(f"nodes_bm25_{_name}", "14", _nodes_case("bm25", _tamper))
for _name in ("spans_out_of_range", "text_not_source", "spans_shifted_by_one", "half_the_records"):
    add_case(f"nodes_mixpr_{_name}", "14", _nodes_case("mixpr", _NODE_TAMPERS[_name]))


# row 13: damaged manifest fields: damage, not an internal error; --force repairs


# (field, value, strict): strict ones leave nothing to serve, so info must say damaged
_MANIFEST_FIELDS: list[tuple[str, Any, bool]] = [
    *[
        (f"methods.bm25.{key}", None, key in ("dir", "files"))
        for key in (
            "files",
            "sha256",
            "settings",
            "models",
            "stats",
            "counts",
            "rebuild_args",
            "dir",
            "built_at",
            "build_seconds",
        )
    ],
    *[
        (key, None, key in ("sources", "methods", "schema_version", "source_bytes"))
        for key in (
            "sources",
            "methods",
            "source_sha256",
            "source_bytes",
            "source_chars",
            "schema_version",
            "lcr_version",
            "created",
        )
    ],
    *[
        (f"sources.0.{key}", None, key in ("start", "end"))
        for key in ("name", "sha256", "size", "start", "end")
    ],
    ("methods.bm25", None, True),
    ("sources.0", None, True),
    ("methods.bm25.files", [], True),
    ("methods.bm25.files", {"nodes.jsonl": "8151"}, True),
    ("methods.bm25.sha256", {"nodes.jsonl": 5}, True),
    ("methods.bm25.settings", ["k1", 1.5], False),
    ("methods.bm25.settings.k1", "fast", False),
    ("methods.bm25.settings.chunk_tokens", -5, False),
    ("methods.bm25.models", "all of them", False),
    ("methods.bm25.stats", [], False),
    ("methods.bm25.counts", {"nodes": "15"}, False),
    ("methods.bm25.rebuild_args", "--force", False),
    ("methods.bm25.dir", 5, True),
    ("methods.bm25.dir", "", True),
    ("methods.bm25.dir", ".", True),
    ("methods", [], True),
    ("sources", {}, True),
    ("sources.0.start", -50, True),
    ("sources.0.end", 10**12, True),
    ("source_bytes", "6987", True),
    ("schema_version", "1", True),
]


def _field_name(where: str, value: Any) -> str:
    """``manifest_bm25_files_null``, ``manifest_sources_0_end_int``, ..."""
    if value is None:
        kind = "null"
    elif value == "":
        kind = "empty"
    elif isinstance(value, str) and value.strip(".") == "":
        kind = "dot"
    else:
        kind = type(value).__name__
    return f"manifest_{where.replace('methods.bm25', 'bm25').replace('.', '_')}_{kind}"


def _manifest_case(where: str, value: Any, strict: bool) -> Callable[[Lab], None]:
    def run(lab: Lab) -> None:
        idx = golden_copy(lab)
        man = _manifest(idx)
        set_field(man, where, value)
        save_manifest(idx, man)
        lab.run("info", "story.idx", expect=(1,) if strict else (0, 1))
        lab.run(
            "retrieve", "story.idx", QUERY, "-m", "bm25", "-q", expect=(1,) if strict else (0, 1)
        )
        force_repairs(lab, idx)

    return run


_seen_names: set[str] = set()
for _where, _value, _strict in _MANIFEST_FIELDS:
    _name = _field_name(_where, _value)
    while _name in _seen_names:
        _name += "_"
    _seen_names.add(_name)
    add_case(_name, "13", _manifest_case(_where, _value, _strict))


@case("manifest_mixpr_setting_as_string", "15")
def _mixpr_setting_string(lab: Lab) -> None:
    idx = golden_copy(lab, "default.idx")
    man = _manifest(idx)
    man["methods"]["mixpr"]["settings"]["threshold"] = "0.27"
    save_manifest(idx, man)
    lab.run("retrieve", "story.idx", QUERY, "-m", "mixpr", "-q", expect=(0, 1))
    force_repairs(lab, idx, "mixpr")


@case("manifest_not_utf8", "13")
def _manifest_not_utf8(lab: Lab) -> None:
    idx = golden_copy(lab)
    (idx / "manifest.json").write_bytes(b'{"format": "lcr-index", "created": "\xff\xfe"}')
    lab.run("info", "story.idx", expect=(1,))
    force_repairs(lab, idx)


# row 12: a repair hint, pasted where it was printed, repairs ------------------


def _hint_case(
    damage: Callable[[Path], str],
    method: str,
    from_elsewhere: bool = False,
    command: Sequence[str] = ("info", "{idx}", "--verify"),
) -> Callable[[Lab], None]:
    def run(lab: Lab) -> None:
        lab.copy_asset("story.txt", "docs/story.txt")
        lab.run("index", "docs/story.txt", "-o", "story.idx", "-q", "-m", "bm25", "-m", "mixpr")
        idx = lab.dir / "story.idx"
        what = damage(idx / str(_manifest(idx)["methods"][method]["dir"]))
        cwd = lab.dir / "elsewhere" if from_elsewhere else lab.dir
        cwd.mkdir(exist_ok=True)
        shown = os.path.relpath(idx, cwd)
        said = lab.run(*[a.replace("{idx}", shown) for a in command], cwd=cwd, expect=(1,))
        hint = hint_of(said.stderr + "\n" + said.stdout)
        if hint is None:
            lab.fail("damaged indexes", f"{what}: no repair command in: {said.stderr.strip()}")
            return
        lab.run(*hint, cwd=cwd)
        lab.intact(
            idx,
            docs=[lab.dir / "docs" / "story.txt"],
            methods=["bm25", "mixpr"],
            why=f"after its repair hint `lcr {' '.join(hint)}`",
        )

    return run


def _flip_byte(rel: str) -> Callable[[Path], str]:
    def damage(mdir: Path) -> str:
        path = mdir / rel
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0x20
        path.write_bytes(bytes(data))
        return f"one byte of {rel} flipped"

    return damage


def _cut(rel: str) -> Callable[[Path], str]:
    def damage(mdir: Path) -> str:
        path = mdir / rel
        path.write_bytes(path.read_bytes()[:100])
        return f"{rel} cut short"

    return damage


def _remove(rel: str) -> Callable[[Path], str]:
    def damage(mdir: Path) -> str:
        (mdir / rel).unlink()
        return f"{rel} removed"

    return damage


def _source_flip(mdir: Path) -> str:
    path = mdir.parent / "source.txt"
    data = bytearray(path.read_bytes())
    data[10] ^= 0x20
    path.write_bytes(bytes(data))
    return "one byte of source.txt flipped"


add_case("hint_repairs_bm25_flipped_byte", "12", _hint_case(_flip_byte("nodes.jsonl"), "bm25"))
add_case(
    "hint_repairs_bm25_flipped_byte_from_another_folder",
    "12",
    _hint_case(_flip_byte("nodes.jsonl"), "bm25", from_elsewhere=True),
)
add_case(
    "hint_repairs_mixpr_nodes_cut_short",
    "12",
    _hint_case(
        _cut("nodes.jsonl"), "mixpr", command=("retrieve", "{idx}", QUERY, "-m", "mixpr", "-q")
    ),
)
add_case(
    "hint_repairs_bm25_vocabulary_removed",
    "12",
    _hint_case(
        _remove("bm25_vocabulary.json"),
        "bm25",
        command=("retrieve", "{idx}", QUERY, "-m", "bm25", "-q"),
    ),
)
add_case("hint_repairs_source_flipped_byte", "12", _hint_case(_source_flip, "bm25"))


# row 8: memory stays bounded whatever the text ------------------------------


def _low_vocabulary_case(megabytes: int, timeout: float) -> Callable[[Lab], None]:
    def run(lab: Lab) -> None:
        """15 words repeated, under a 4 GB address-space limit: the max_edges guard
        engages (a build within the limit, or a one-line refusal, exit 2, that names
        mixpr.max_edges, before the memory is spent)."""
        words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi pi"
        count = megabytes * 1024 * 1024 // 6
        text = " ".join(words.split(" ")[(i * 7) % 15] for i in range(count))
        lab.write("low.txt", text)
        said = lab.run(
            "index", "low.txt", "-m", "mixpr", "-q", memory=MEMORY_LIMIT, timeout=timeout,
            expect=(0, 1, 2),
        )  # fmt: skip
        if said.code == 1:  # out of memory, or any other failure: the guard did not hold
            lab.fail("memory limit reached", f"the guard did not engage: {said.stderr.strip()}")
        if said.code == 2 and "mixpr.max_edges" not in said.stderr:
            lab.fail("wrong exit codes", f"exit 2 without the guard's line: {said.stderr.strip()}")
        if said.code == 0:
            lab.intact(lab.dir / "low.idx", methods=["mixpr"])

    return run


add_case("mixpr_low_vocabulary_memory_guard", "8", _low_vocabulary_case(4, 240), order=0)
add_case("mixpr_low_vocabulary_50mb_refused", "8", _low_vocabulary_case(50, 600), order=0)


@case("memory_error_under_ulimit", "15")
def _ulimit(lab: Lab) -> None:
    """A build that runs out of address space says so in one line."""
    lab.copy_asset("big.txt")
    lab.run("index", "big.txt", "-m", "mixpr", "-q", memory=450 * (1 << 20), expect=(1,))


# row 9: a server that trickles, floods or misbehaves -------------------------


def _answer_args(lab: Lab, mode: str) -> list[str]:
    lab.env.server.scope(lab.name, mode)
    return [
        "ask",
        "story.idx",
        "Who lost a slipper?",
        "-m",
        "bm25",
        "-q",
        "--max-new-tokens",
        "8",
        *llm_args(lab.env, lab.name),
    ]


def _trickle_then_sigint(lab: Lab, args: Sequence[str], scope: Scope) -> None:
    run = lab.start(*args, expect=(130,), timeout=LLM_TIMEOUT)
    wait_until(lambda: scope.arrived.is_set() or not run.alive, LLM_TIMEOUT)
    time.sleep(1.0)
    run.signal(signal.SIGINT)
    run.wait(timeout=SIGINT_GRACE)


@case("server_trickle_sigint_answer", "9")
def _trickle_sigint(lab: Lab) -> None:
    """Ctrl-C while a server trickles one byte every 2 s: the run ends within seconds."""
    golden_copy(lab)
    scope = lab.env.server.scope(lab.name, "trickle")
    _trickle_then_sigint(lab, _answer_args(lab, "trickle"), scope)


@case("server_trickle_sigint_batch_build", "9", order=0)
def _trickle_sigint_batch(lab: Lab) -> None:
    """The same during a build's batch of concurrent calls (GraphReader's extraction)."""
    lab.copy_asset("story.txt")
    scope = lab.env.server.scope(lab.name, "trickle")
    args = [
        "index",
        "story.txt",
        "-o",
        "s.idx",
        "-m",
        "graphreader",
        "-q",
        *llm_args(lab.env, lab.name),
        *GRAPHREADER_SETS,
    ]
    _trickle_then_sigint(lab, args, scope)


def _deadline_option(lab: Lab) -> list[str]:
    """The documented overall deadline of server calls (an option of `lcr ask --help`
    named ...timeout... or ...deadline...), set to 10 s; none yet: no option."""
    said = lab.run("ask", "--help")
    found = re.search(r"(--[\w-]*(?:timeout|deadline)[\w-]*)", said.stdout)
    return [found.group(1), "10"] if found else []


@case("server_trickle_deadline", "9")
def _trickle_deadline(lab: Lab) -> None:
    """No Ctrl-C: the run ends by the deadline (10 s when an option sets it)."""
    golden_copy(lab)
    deadline = _deadline_option(lab)
    lab.note(f"deadline option: {' '.join(deadline) or 'none documented, 45 s allowed'}")
    lab.run(*_answer_args(lab, "trickle"), *deadline, expect=(1,), timeout=45)


@case("server_endless_body", "9")
def _flood(lab: Lab) -> None:
    """A reply without end: a size limit stops it (under a 4 GB address-space limit)."""
    golden_copy(lab)
    said = lab.run(*_answer_args(lab, "flood"), expect=(1,), memory=MEMORY_LIMIT, timeout=90)
    if re.search(r"MemoryError|out of memory|cannot allocate", said.stderr, re.I):
        lab.fail("memory limit reached", f"no response size limit: {said.stderr.strip()}")


@case("server_models_data_not_a_list", "15")
def _models_weird(lab: Lab) -> None:
    golden_copy(lab)
    lab.run(*_answer_args(lab, "models_weird"), expect=(0, 1))


@case("server_error_body_multiline", "17")
def _error_multiline(lab: Lab) -> None:
    golden_copy(lab)
    lab.run(*_answer_args(lab, "error400"), expect=(1,))


@case("server_unreachable", "9")
def _unreachable(lab: Lab) -> None:
    golden_copy(lab)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    lab.run(
        "ask",
        "story.idx",
        "Who?",
        "-m",
        "bm25",
        "-q",
        "--backend",
        "openai",
        "--base-url",
        f"http://127.0.0.1:{port}/v1",
        "--llm",
        FAKE_LLM,
        expect=(1,),
    )


# row 10: stdin and FIFOs are read in pieces, binary refused at once ----------


def _stdin_case(
    data: bytes | Path, codes: tuple[int, ...], memory: bool = False
) -> Callable[[Lab], None]:
    def run(lab: Lab) -> None:
        lab.run(
            "index",
            "-",
            "-o",
            "in.idx",
            "-m",
            "bm25",
            "-q",
            stdin=data,
            expect=codes,
            memory=MEMORY_LIMIT if memory else None,
            timeout=40,
        )
        if (lab.dir / "in.idx" / "manifest.json").exists():
            lab.intact(lab.dir / "in.idx")

    return run


add_case("stdin_dev_zero", "10", _stdin_case(Path("/dev/zero"), (1,), memory=True))
add_case("stdin_random_bytes", "10", _stdin_case(os.urandom(1 << 20), (1,)))
add_case(
    "stdin_text_then_zeros",
    "10",
    _stdin_case(b"Once upon a time. " * 5000 + bytes(1 << 20), (0, 1)),
)
add_case("stdin_empty", "10", _stdin_case(b"", (1,)))
add_case("stdin_one_character", "10", _stdin_case(b"x", (0,)))
add_case(
    "stdin_invalid_utf8", "10", _stdin_case(b"caf\xe9 cr\xe8me and \xff\xfe more " * 50, (0, 1))
)
add_case("stdin_utf16_text", "10", _stdin_case("A small story. ".encode("utf-16") * 40, (0, 1)))


@case("fifo_endless_zeros", "10")
def _fifo(lab: Lab) -> None:
    fifo = lab.dir / "pipe.txt"
    os.mkfifo(fifo)
    stop = threading.Event()

    def feed() -> None:  # writes zeros while a reader has the FIFO open
        block = bytes(1 << 16)
        while not stop.is_set():
            try:
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:
                time.sleep(0.05)
                continue
            try:
                while not stop.is_set():
                    with contextlib.suppress(BlockingIOError):
                        os.write(fd, block)
            except OSError:
                pass
            finally:
                os.close(fd)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    try:
        lab.run(
            "index", "pipe.txt", "-m", "bm25", "-q", expect=(1,), memory=MEMORY_LIMIT, timeout=40
        )
    finally:
        stop.set()
        feeder.join(5)


@case("dev_urandom_as_a_file", "10")
def _urandom(lab: Lab) -> None:
    lab.run(
        "index",
        "/dev/urandom",
        "-o",
        "u.idx",
        "-m",
        "bm25",
        "-q",
        expect=(1,),
        memory=MEMORY_LIMIT,
        timeout=40,
    )


# row 11: a closed or full stdout ---------------------------------------------


@case("closed_stdout_methods", "11")
def _closed_methods(lab: Lab) -> None:
    lab.run("methods", close_stdout=True, expect=(0, 1))


@case("closed_stdout_index_force", "11")
def _closed_index(lab: Lab) -> None:
    """The build succeeds: exit 0 although its report line could not be printed."""
    idx = golden_copy(lab)
    lab.run("index", "story.txt", "-o", "story.idx", "--force", "-m", "bm25", close_stdout=True)
    lab.intact(idx, methods=["bm25"])


@case("closed_stdout_retrieve_json", "11")
def _closed_retrieve(lab: Lab) -> None:
    golden_copy(lab)
    lab.run("retrieve", "story.idx", QUERY, "--json", "-q", close_stdout=True, expect=(0, 1))


@case("full_stdout_retrieve", "11")
def _full_retrieve(lab: Lab) -> None:
    golden_copy(lab)
    lab.run("retrieve", "story.idx", QUERY, "-q", stdout=Path("/dev/full"), expect=(1,))


@case("full_stdout_info_json", "11")
def _full_info(lab: Lab) -> None:
    golden_copy(lab)
    lab.run("info", "story.idx", "--json", stdout=Path("/dev/full"), expect=(1,))


@case("full_stdout_index_force", "11")
def _full_index(lab: Lab) -> None:
    idx = golden_copy(lab)
    lab.run(
        "index",
        "story.txt",
        "-o",
        "story.idx",
        "--force",
        "-m",
        "bm25",
        stdout=Path("/dev/full"),
        expect=(0, 1),
    )
    lab.intact(idx, methods=["bm25"])


# row 15: more causes of "internal error" -------------------------------------


def _document_case(
    text: bytes, methods: Sequence[str], codes: tuple[int, ...]
) -> Callable[[Lab], None]:
    def run(lab: Lab) -> None:
        lab.write("doc.txt", text)
        said = lab.run("index", "doc.txt", "-q", *_methods(methods), expect=codes)
        if said.code == 0:
            lab.intact(lab.dir / "doc.idx")
            for m in methods or ("bm25", "mixpr"):
                lab.run("retrieve", "doc.idx", "x", "-m", m, "-q")

    return run


add_case("one_character_document_bm25", "15", _document_case(b"x", ["bm25"], (0,)))
add_case("one_character_document_default_methods", "15", _document_case(b"x", [], (0,)))
add_case("one_character_document_tfidf", "15", _document_case(b"x", ["tfidf"], (0,)))
add_case("one_accented_character_document", "15", _document_case("é".encode(), ["bm25"], (0,)))
add_case("one_digit_document_default_methods", "15", _document_case(b"7\n", [], (0,)))
add_case(
    "stopword_only_document_bm25",
    "15",
    _document_case(b"the of and a to in is it", ["bm25"], (0, 1)),
)
add_case("punctuation_only_document", "15", _document_case(b"... !!! ??? ---", [], (0, 1)))
add_case("whitespace_only_document", "15", _document_case(b" \n\t \n", ["bm25"], (1,)))
add_case("one_long_word_document", "15", _document_case(b"a" * 300_000, [], (0, 1)))


@case("index_into_dot_in_an_empty_folder", "15")
def _dot_output(lab: Lab) -> None:
    lab.copy_asset("story.txt")
    (lab.dir / "empty").mkdir()
    said = lab.run(
        "index", "../story.txt", "-o", ".", "-m", "bm25", "-q", cwd=lab.dir / "empty", expect=(0, 1)
    )
    if said.code == 0:
        lab.intact(lab.dir / "empty", methods=["bm25"])


@case("lock_is_a_folder", "15")
def _lock_dir(lab: Lab) -> None:
    idx = golden_copy(lab)
    (idx / ".lock").unlink(missing_ok=True)
    (idx / ".lock").mkdir()
    # lcr's writer lock lives beside the index now: an old .lock inside is inert
    lab.run("index", "story.txt", "-o", "story.idx", "-m", "tfidf", "-q", expect=(0, 1))
    lab.intact(idx, methods=["bm25"])
    (lab.dir / ".story.idx.lock").mkdir()  # the lock itself, a folder: one line, exit 1
    lab.run("index", "story.txt", "-o", "story.idx", "-m", "dense", "-q", expect=(1,))


@case("eval_prepare_binary_file", "15")
def _prepare_binary(lab: Lab) -> None:
    lab.write("dev.jsonl", os.urandom(4096))
    lab.run("eval", "prepare", "squality", "dev.jsonl", "-o", "out.jsonl", "-q", expect=(1, 2))


@case("eval_generate_length_huge", "15")
def _generate_huge(lab: Lab) -> None:
    lab.run(
        "eval",
        "generate",
        "hashhop",
        "--length",
        "999999999999k",
        "-o",
        "x.jsonl",
        "-q",
        expect=(2,),
        timeout=30,
    )


@case("source_invalid_utf8_refreshed", "15")
def _source_not_utf8(lab: Lab) -> None:
    idx = golden_copy(lab)
    data = bytearray((idx / "source.txt").read_bytes())
    data[20] = 0xFF
    (idx / "source.txt").write_bytes(bytes(data))
    refresh_source(idx)
    lab.detects(idx, "source.txt not UTF-8")
    lab.run("retrieve", "story.idx", QUERY, "-m", "bm25", "-q", expect=(1,))
    force_repairs(lab, idx)


def _json_file_case(method: str, rel: str, content: bytes) -> Callable[[Lab], None]:
    def run(lab: Lab) -> None:
        idx = golden_copy(lab, "default.idx")
        (method_dir(idx, method) / rel).write_bytes(content)
        refresh(idx, method, rel)
        check_tampered(lab, idx, f"{rel} replaced", method)

    return run


add_case(
    "bm25_vocabulary_not_json", "15", _json_file_case("bm25", "bm25_vocabulary.json", b"{garbage")
)
add_case("bm25_vocabulary_a_list", "15", _json_file_case("bm25", "bm25_vocabulary.json", b"[1, 2]"))
add_case(
    "mixpr_vocabulary_not_json",
    "15",
    _json_file_case("mixpr", "tfidf_vocabulary.json", b"\x00\x01garbage"),
)
add_case(
    "mixpr_vocabulary_wrong_ids",
    "15",
    _json_file_case("mixpr", "tfidf_vocabulary.json", b'{"slipper": 99999999}'),
)


# row 16: exit codes as documented, --debug included --------------------------

_USAGE: dict[str, tuple[list[str], tuple[int, ...], bool]] = {
    "debug_bad_set_value": (["--debug", "index", "story.txt", "--set", "bm25.k1=abc"], (2,), True),
    "debug_missing_argument": (["--debug", "index"], (2,), True),
    "debug_unknown_method": (["--debug", "retrieve", "story.idx", "q", "-m", "nope"], (2,), True),
    "debug_unknown_option": (["--debug", "info", "--nope"], (2,), True),
    "unknown_option": (["index", "story.txt", "--nope"], (2,), False),
    "unknown_command": (["indx", "story.txt"], (2,), False),
    "missing_input_file": (["index", "no-such-file.txt"], (1, 2), False),
    "k_zero": (["retrieve", "story.idx", "q", "-k", "0"], (2,), False),
    "k_not_a_number": (["retrieve", "story.idx", "q", "-k", "many"], (2,), False),
    "empty_question": (["retrieve", "story.idx", "", "-q"], (1, 2), False),
    "unknown_method": (["retrieve", "story.idx", "q", "-m", "nope"], (2,), False),
    "method_not_built": (["retrieve", "story.idx", "q", "-m", "tfidf", "-q"], (1,), False),
    "mode_for_a_method_without_modes": (["retrieve", "story.idx", "q", "--mode", "x"], (2,), False),
    "no_index_there": (["info", "nowhere.idx"], (1,), False),
    "stdin_twice": (["index", "-", "-", "-o", "x.idx"], (2,), False),
}


def _usage_case(args: list[str], codes: tuple[int, ...], debug: bool) -> Callable[[Lab], None]:
    def run(lab: Lab) -> None:
        golden_copy(lab)
        lab.run(*args, expect=Expect(codes, traceback_ok=debug))

    return run


for _name, (_args, _codes, _debug) in _USAGE.items():
    add_case(f"exit_code_{_name}", "16", _usage_case(_args, _codes, _debug))


# bad --set values and huge values: refused in one line, exit 2 ---------------

_SETS: dict[str, tuple[str, tuple[int, ...]]] = {
    "not_a_number": ("bm25.k1=abc", (2,)),
    "nan": ("bm25.k1=nan", (2,)),
    "infinite": ("bm25.k1=inf", (2,)),
    "overflowing_float": ("bm25.k1=1e400", (2,)),
    "negative_size": ("bm25.chunk_tokens=-1", (2,)),
    "zero_size": ("bm25.chunk_tokens=0", (2,)),
    "float_for_int": ("bm25.chunk_tokens=2.5", (2,)),
    "huge_int": ("bm25.chunk_tokens=" + "9" * 40, (0, 2)),
    "unknown_key": ("bm25.nope=1", (2,)),
    "unknown_method": ("nope.k1=1", (2,)),
    "no_equals": ("bm25.k1", (2,)),
    "empty": ("", (2,)),
    "only_equals": ("=", (2,)),
    "bad_choice": ("bm25.stemmer=klingon", (2,)),
    "bool_for_number": ("bm25.k1=true", (2,)),
    "control_characters": ("bm25.k1=\x1b[31m1\n2", (2,)),
    "mixpr_threshold_above_one": ("mixpr.threshold=7", (2,)),
    "max_edges_huge": ("mixpr.max_edges=" + "9" * 30, (0, 2)),
}


def _set_case(value: str, codes: tuple[int, ...]) -> Callable[[Lab], None]:
    def run(lab: Lab) -> None:
        lab.copy_asset("story.txt")
        method = value.split(".", 1)[0] if value.startswith("mixpr") else "bm25"
        said = lab.run(
            "index", "story.txt", "-o", "s.idx", "-m", method, "--set", value, "-q", expect=codes
        )
        if said.code == 0:
            lab.intact(lab.dir / "s.idx")

    return run


for _name, (_value, _codes) in _SETS.items():
    add_case(f"set_{_name}", "15", _set_case(_value, _codes))


@case("huge_k_retrieve", "15")
def _huge_k(lab: Lab) -> None:
    golden_copy(lab)
    lab.run("retrieve", "story.idx", QUERY, "-k", "9" * 30, "-q", expect=(0, 2), timeout=30)


@case("huge_concurrency_and_window", "15")
def _huge_options(lab: Lab) -> None:
    golden_copy(lab)
    lab.run(
        "retrieve",
        "story.idx",
        QUERY,
        "-q",
        "--concurrency",
        "9" * 20,
        "--context-window",
        "9" * 20,
        expect=(0, 2),
    )


@case("query_set_on_retrieve_bad", "15")
def _query_set(lab: Lab) -> None:
    golden_copy(lab, "default.idx")
    lab.run(
        "retrieve",
        "story.idx",
        QUERY,
        "-m",
        "mixpr",
        "--set",
        "mixpr.mode=sideways",
        "-q",
        expect=(2,),
    )
    lab.run(
        "retrieve",
        "story.idx",
        QUERY,
        "-m",
        "mixpr",
        "--set",
        "mixpr.alpha_local=-3",
        "-q",
        expect=(2,),
    )


# row 17: the smaller ones -----------------------------------------------------


def _same_stem(lab: Lab, force: bool) -> None:
    """`lcr index x.txt x.md`: both indexed (or refused), never one lost."""
    lab.copy_asset("story.txt", "x.txt")
    lab.copy_asset("lighthouse.txt", "x.md")
    said = lab.run(
        "index",
        "x.txt",
        "x.md",
        "-m",
        "bm25",
        "-q",
        *(["--force"] if force else []),
        expect=(0, 1, 2),
    )
    if said.code != 0:
        return
    indexed = {
        s.get("sha256")
        for idx in lab.dir.glob("*.idx")
        for s in _manifest(idx).get("sources", [])
        if isinstance(s, dict)
    }
    for doc in ("x.txt", "x.md"):
        if _sha((lab.dir / doc).read_bytes()) not in indexed:
            lab.fail("wrong exit codes", f"exit 0, but {doc} is in no index")


add_case("two_files_same_stem", "17", lambda lab: _same_stem(lab, False))
add_case("two_files_same_stem_force", "17", lambda lab: _same_stem(lab, True))


@case("error_file_name_with_newline", "17")
def _newline_name(lab: Lab) -> None:
    lab.run("index", "no such\nfile.txt", "-q", expect=(1, 2))


@case("error_binary_file_with_newline_name", "17")
def _newline_binary(lab: Lab) -> None:
    lab.write("bad\nname.txt", bytes(range(256)) * 10)
    lab.run("index", "bad\nname.txt", "-q", expect=(1,))


@case("error_click_usage_one_line", "17")
def _click_usage(lab: Lab) -> None:
    lab.run("retrieve", "only-one-argument", expect=(2,))


@case("mixpr_max_iter_huge_tol_zero", "17")
def _max_iter(lab: Lab) -> None:
    golden_copy(lab, "default.idx")
    lab.run(
        "retrieve",
        "story.idx",
        QUERY,
        "-m",
        "mixpr",
        "-q",
        "--set",
        "mixpr.max_iter=1000000000",
        expect=(0, 2),
        timeout=30,
    )


def _deterministic(lab: Lab, method: str) -> None:
    """The same document built in two processes (other hash seeds): the same files."""
    lab.copy_asset("story.txt")
    for out, seed in (("a.idx", "1"), ("b.idx", "2")):
        lab.run(
            "index", "story.txt", "-o", out, "-m", method, "-q", extra_env={"PYTHONHASHSEED": seed}
        )
    digests = [
        _manifest(lab.dir / out).get("methods", {}).get(method, {}).get("sha256")
        for out in ("a.idx", "b.idx")
    ]
    if digests[0] and digests[1] and digests[0] != digests[1]:
        differ = sorted(k for k in digests[0] if digests[0].get(k) != digests[1].get(k))
        lab.fail("nondeterministic builds", f"{method}: {', '.join(differ)} differ")


add_case("bm25_builds_identical_across_processes", "17", lambda lab: _deterministic(lab, "bm25"))
add_case("mixpr_builds_identical_across_processes", "17", lambda lab: _deterministic(lab, "mixpr"))
add_case("tfidf_builds_identical_across_processes", "17", lambda lab: _deterministic(lab, "tfidf"))


# SIGINT and SIGKILL during builds: the index as it was, or as it is after -----


def _first_build_stopped(lab: Lab, sig: int) -> None:
    lab.copy_asset("big.txt")
    run = lab.start("index", "big.txt", "-q", expect=(0, 130) if sig == signal.SIGINT else None)
    wait_for_work(run, lab.dir)
    run.signal(sig)
    run.wait(timeout=SIGINT_GRACE if sig == signal.SIGINT else RUN_TIMEOUT)
    idx = lab.dir / "big.idx"
    if (idx / "manifest.json").exists():
        lab.intact(idx, why="after the stop")
    lab.run("index", "big.txt", "-q")  # and the next run finishes it
    lab.intact(idx, methods=["bm25", "mixpr"])


add_case("first_build_sigint", "3", lambda lab: _first_build_stopped(lab, signal.SIGINT))
add_case("first_build_sigkill", "3", lambda lab: _first_build_stopped(lab, signal.SIGKILL))


@case("add_method_sigkill", "3")
def _add_method_killed(lab: Lab) -> None:
    idx = golden_copy(lab)
    big = lab.copy_asset("big.txt", "story.txt")  # the same name, another text: --force
    run = lab.start("index", "story.txt", "-o", "story.idx", "--force", "-q", expect=None)
    wait_for_work(run, idx)
    run.signal(signal.SIGKILL)
    run.wait()
    if (idx / "manifest.json").exists():
        lab.intact(idx, why="after kill -9")
    lab.run("index", "story.txt", "-o", "story.idx", "--force", "-q")
    lab.intact(idx, docs=[big], methods=["bm25", "mixpr"])


# the Python API checks its arguments --------------------------------------------

_API_PROBE = """
import sys, lcr
from lcr.errors import LcrError
try:
    {call}
except (LcrError, TypeError, ValueError) as exc:
    if not __import__("re").search(r"\\b{arg}\\b", str(exc)):
        print(f"internal error: {{type(exc).__name__}}: {{exc}} (names not {arg})", file=sys.stderr)
        sys.exit(1)
    sys.exit(2)
except Exception as exc:
    print(f"internal error: {{type(exc).__name__}}: {{exc}}", file=sys.stderr)
    sys.exit(1)
print("accepted", file=sys.stderr)
sys.exit(0)
"""

_API: dict[str, tuple[str, str]] = {
    "k_as_string": ('lcr.retrieve("story.idx", "glass slipper", k="3")', "k"),
    "k_as_float": ('lcr.retrieve("story.idx", "glass slipper", k=2.5)', "k"),
    "k_negative": ('lcr.retrieve("story.idx", "glass slipper", k=-1)', "k"),
    "question_none": ('lcr.retrieve("story.idx", None)', "question"),
    "question_number": ('lcr.retrieve("story.idx", 42)', "question"),
    "settings_as_list": (
        'lcr.retrieve("story.idx", "slipper", settings=["bm25.k1=2"])',
        "settings",
    ),
    "method_none": ('lcr.retrieve("story.idx", "slipper", method=None)', "method"),
    "force_as_string": ('lcr.index("story.txt", "n.idx", methods=["bm25"], force="yes")', "force"),
    # methods="bm25" is taken as one method, as `lcr index -m bm25` (not as b, m, 2, 5)
    "methods_as_number": ('lcr.index("story.txt", "m.idx", methods=5)', "methods"),
    "index_as_number": ('lcr.retrieve(7, "slipper")', "index"),
}


def _api_case(call: str, arg: str) -> Callable[[Lab], None]:
    def run(lab: Lab) -> None:
        golden_copy(lab)
        lab.python(_API_PROBE.format(call=call, arg=arg), expect=(1, 2), label=call)

    return run


for _name, (_call, _arg) in _API.items():
    add_case(f"api_{_name}", "17", _api_case(_call, _arg))


@case("api_stale_index_after_rebuild", "17")
def _stale(lab: Lab) -> None:
    """An open lcr.Index whose index was rebuilt by another process: no false damage."""
    golden_copy(lab)
    cmd = [*lab.env.lcr, "index", "story.txt", "-o", "story.idx", "--force", "-m", "bm25", "-q"]
    code = f"""
import re, subprocess, sys, lcr
from lcr.errors import LcrError
idx = lcr.open_index("story.idx")
subprocess.run({cmd!r}, check=True)
try:
    lcr.retrieve(idx, "glass slipper", method="bm25")
except LcrError as exc:
    print(f"lcr: {{exc}}", file=sys.stderr)
    sys.exit(3 if re.search("damaged|missing|rebuild", str(exc)) else 1)
"""
    lab.python(code, expect=(0, 1), label="lcr.retrieve(a stale lcr.Index)")


# ---------------------------------------------------------------------- running


@dataclass
class CaseResult:
    name: str
    row: str
    findings: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    not_run: str = ""  # why the case could not run (not counted)


def run_case(c: Case, env: Env) -> CaseResult:
    lab = Lab(c.name, env)
    started = time.monotonic()
    result = CaseResult(c.name, c.row)
    try:
        c.run(lab)
        lab.finish()
    except CaseError as exc:
        result.not_run = str(exc)
    except Exception as exc:  # a bug of this script, never counted against lcr
        result.not_run = f"the case itself failed: {exc.__class__.__name__}: {exc}"
    result.findings, result.notes = lab.findings, lab.notes
    result.seconds = time.monotonic() - started
    return result


def _setup_result(lab: Lab) -> CaseResult:
    row = "paid" if lab.name.startswith(("raptor", "graphreader")) else "1"
    return CaseResult(lab.name, row, lab.findings, lab.notes, lab.seconds)


def summarise(results: Sequence[CaseResult]) -> dict[str, int]:
    """Cases per counter: a case counts once for each counter it fails."""
    counts = dict.fromkeys((*COUNTERS, *EXTRA_COUNTERS), 0)
    for r in results:
        for counter in {c for c, _ in r.findings}:
            counts[counter] += 1
    return counts


def count_line(results: Sequence[CaseResult]) -> str:
    counts = summarise(results)
    ran = sum(1 for r in results if not r.not_run)
    main = ", ".join(f"{c} {counts[c]}" for c in COUNTERS)
    extra = ", ".join(f"{c} {counts[c]}" for c in EXTRA_COUNTERS)
    return f"fault-matrix: {ran} cases; {main}; also {extra}"


def failure_lines(results: Sequence[CaseResult]) -> list[str]:
    """One line per failing case and counter (the first excerpt), then notes."""
    lines: list[str] = []
    for r in results:
        shown: dict[str, list[str]] = {}
        for counter, text in r.findings:
            shown.setdefault(counter, []).append(text)
        for counter, texts in shown.items():
            more = f" (+{len(texts) - 1} more)" if len(texts) > 1 else ""
            lines.append(f"{r.name}: {counter}: {texts[0]}{more}")
        if r.not_run:
            lines.append(f"{r.name}: NOT RUN: {excerpt(r.not_run)}")
    return lines


def _atime_works(root: Path) -> bool:
    """Whether a read moves a file's last-read time here (relatime with atime < mtime)."""
    probe = root / "atime-probe"
    probe.write_text("x")
    st = probe.stat()
    os.utime(probe, ns=(st.st_mtime_ns - 10**14, st.st_mtime_ns))
    before = probe.stat().st_atime_ns
    probe.read_text()
    return probe.stat().st_atime_ns != before


def _environment() -> dict[str, str]:
    """The children's environment: no LCR_ setting of the user's (but the model cache)
    changes what a case does; PYTHONPATH picks the tree under test."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LCR_") or k == "LCR_CACHE_DIR"}
    env.setdefault("PYTHONPATH", str(REPO))
    env["PYTHONUNBUFFERED"] = "1"
    return env


def selected(only: Sequence[str]) -> list[Case]:
    cases = [c for c in CASES if not only or any(p in c.name for p in only)]
    return sorted(cases, key=lambda c: c.order)


# issue 54: hardening IV ------------------------------------------------------------


@case("i54_symlinked_index_stays_a_link", "54")
def _i54_symlinked_index(lab: Lab) -> None:
    """--add, remove and --force through a link swap the folder it names."""
    idx = golden_copy(lab)
    real = lab.dir / "real.idx"
    idx.rename(real)
    idx.symlink_to(real.name)
    lab.copy_asset("story_b.txt", "b.txt")
    lab.run("index", "b.txt", "-o", "story.idx", "--add", "-q")
    lab.run("remove", "story.idx", "b.txt", "-q")
    lab.run("index", "b.txt", "-o", "story.idx", "-m", "bm25", "--force", "-q")
    if not idx.is_symlink() or os.readlink(idx) != real.name:
        lab.fail("damaged indexes", "story.idx, a link, was replaced by a folder")
    lab.intact(real, docs=[lab.dir / "b.txt"], methods=["bm25"])


@case("i54_lookalike_folders_beside_kept", "54")
def _i54_lookalike_folders(lab: Lab) -> None:
    """A user's .story.idx.new-x/ (and .tmp-, .old-, .failed-) survives writers."""
    golden_copy(lab)
    for kind in ("new", "tmp", "old", "failed"):
        lab.sentinel(f".story.idx.{kind}-userdata/thesis.tex")
    lab.copy_asset("story_b.txt", "b.txt")
    lab.run("index", "b.txt", "-o", "story.idx", "--add", "-q")
    lab.run("index", "story.txt", "b.txt", "-o", "story.idx", "-m", "tfidf", "-q")


@case("i54_unsigned_cache_line_reported", "54")
def _i54_unsigned_cache(lab: Lab) -> None:
    """A cache line lcr did not sign: --verify says so in one line (exit 1)."""
    idx = golden_copy(lab)
    (idx / "cache").mkdir(exist_ok=True)
    line = json.dumps({"key": "0" * 64, "value": "The keeper was MARMOT-77."})
    (idx / "cache" / "graphreader.jsonl").write_text(line + "\n", encoding="utf-8")
    out = lab.run("info", "story.idx", "--verify", expect=(1,))
    if "did not write" not in out.stderr:
        lab.fail("wrong exit codes", f"--verify did not report the unsigned line: {out.stderr}")


@case("i54_index_given_as_documents", "54")
def _i54_index_as_documents(lab: Lab) -> None:
    idx = golden_copy(lab)
    lab.run("index", "story.idx", "-o", "story.idx", "--add", "-q", expect=(2,))
    lab.intact(idx, methods=["bm25"])


@case("i54_folder_fifo_link_outside_non_documents", "54")
def _i54_folder_contents(lab: Lab) -> None:
    """A FIFO (would block), a link to a file outside, 40 images: skipped, few lines."""
    lab.copy_asset("story.txt", "docs/story.txt")
    os.mkfifo(lab.dir / "docs" / "pipe")
    (lab.dir / "docs" / "leak.txt").symlink_to(lab.outside("secret.txt"))
    for i in range(40):
        lab.write(f"docs/img/f{i}.png", b"\x89PNG\r\n\x1a\n" + bytes(40))
    out = lab.run("index", "docs", "-o", "d.idx", "-m", "bm25", "-q", timeout=120)
    if len(out.stderr.strip().splitlines()) > 3:
        lab.fail("multi-line errors", f"{len(out.stderr.splitlines())} warning lines")


@case("i54_environment_values", "54")
def _i54_environment(lab: Lab) -> None:
    """LCR_THREADS past ggml's limit and a nan call timeout: exit 2, one line."""
    golden_copy(lab)
    ask = ["ask", "story.idx", "Who kept the light?", "-m", "bm25"]
    for threads in ("100000", "99999999999999999999", "0", "abc"):
        lab.run(*ask, "--llm", "smollm2-135m", "--backend", "llamacpp", expect=(2,),
                extra_env={"LCR_THREADS": threads})  # fmt: skip
    lab.run(*ask, "--call-timeout", "nan", expect=(2,))
    lab.run(*ask, expect=(2,), extra_env={"LCR_CALL_TIMEOUT": "nan"})


@case("i54_deep_html", "54")
def _i54_deep_html(lab: Lab) -> None:
    """400 unclosed <font>: read whole; 100,000 nested <div>: refused in one line."""
    lines = "".join(f"<font size=2>Line {i}<br>" for i in range(400))
    lab.write("font.html", f"<html><body>{lines}<p>Final paragraph.</p></body></html>")
    lab.run("index", "font.html", "-o", "font.idx", "-m", "bm25", "-q")
    if "Final paragraph." not in _text(lab.dir / "font.idx" / "source.txt"):
        lab.fail("damaged indexes", "font.html's text after 255 nested elements was lost")
    deep = "<div>" * 100_000 + "text" + "</div>" * 100_000
    lab.write("deep.html", f"<html><body>{deep}</body></html>")
    lab.run("index", "deep.html", "-o", "deep.idx", "-m", "bm25", "-q", expect=(1,))


def main(argv: Sequence[str] | None = None) -> int:
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        # started in the background: an ignored SIGINT survives exec, so the lcr runs
        # the SIGINT cases interrupt would not hear it; a handled one is reset at exec
        signal.signal(signal.SIGINT, signal.default_int_handler)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="PATTERN",
        help="run the cases whose name contains PATTERN (repeatable)",
    )
    parser.add_argument(
        "--lcr", default=None, metavar="CMD", help="the command under test (default: python -m lcr)"
    )
    parser.add_argument("--jobs", type=int, default=4, help="cases run at once (default 4)")
    parser.add_argument("--json", action="store_true", help="a JSON summary after the lines")
    parser.add_argument("--list", action="store_true", help="list the cases by row and exit")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args(argv)
    cases = selected(args.only)
    if args.list:
        print(f"built once, shared (cases too): {', '.join(n for n, _ in GOLDEN.values())}")
        for row in sorted({c.row for c in cases}, key=lambda r: (not r.isdigit(), r.zfill(3))):
            print(f"row {row}: {', '.join(c.name for c in cases if c.row == row)}")
        return 0
    lcr = shlex.split(args.lcr) if args.lcr else [sys.executable, "-m", "lcr"]
    root = Path(tempfile.mkdtemp(prefix="lcr-fault-matrix-"))
    server = FakeServer()
    env = Env(lcr, sys.executable, _environment(), server, root, _atime_works(root))
    env.assets = Assets(env)
    started = time.monotonic()
    results: list[CaseResult] = []
    try:
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            for result in pool.map(lambda c: run_case(c, env), cases):
                results.append(result)
                if not args.json:
                    for line in failure_lines([result]):
                        print(line, flush=True)
    finally:
        server.close()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    results = [*map(_setup_result, env.assets.labs), *results]
    if not args.json:
        for r in results[: len(env.assets.labs)]:
            for line in failure_lines([r]):
                print(line)
        for r in results:
            for note in r.notes:
                print(f"note: {r.name}: {note}")
        if not env.atime_works:
            print("note: reads outside are seen only in the output here (no last-read times)")
        if args.keep:
            print(f"note: the cases' folders are kept in {root}")
        print(f"note: {time.monotonic() - started:.0f} s")
        print(count_line(results))
    else:
        print(
            json.dumps(
                {
                    "cases": sum(1 for r in results if not r.not_run),
                    "counts": summarise(results),
                    "seconds": round(time.monotonic() - started, 1),
                    "failures": [
                        {"case": r.name, "row": r.row, "counter": c, "excerpt": t}
                        for r in results
                        for c, t in r.findings
                    ],
                    "not_run": {r.name: r.not_run for r in results if r.not_run},
                    "notes": {r.name: r.notes for r in results if r.notes},
                }
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
