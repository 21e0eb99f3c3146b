"""A real headless browser for tests: Debian's Chromium, driven over the DevTools
protocol on a pipe (``--remote-debugging-pipe``: JSON messages ended by NUL on file
descriptors 3 and 4), so no driver package and no port are needed.

:func:`open_page` loads a file and reports what a person's browser would have done:
console messages and uncaught errors, every request the page made, the answer of a
script run in the page, and a full-page screenshot.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
NO_CHROMIUM = (
    "needs a headless browser: no chromium on PATH (Debian: apt-get install -y chromium; "
    ".ci/run installs it)"
)


@dataclass
class PageVisit:
    """What loading one page did."""

    console: list[dict[str, Any]] = field(default_factory=list)  # level, text
    errors: list[str] = field(default_factory=list)  # uncaught exceptions
    requests: list[str] = field(default_factory=list)  # every URL the page asked for
    value: Any = None  # what the script returned
    screenshot: bytes = b""


class _Pipe:
    def __init__(self, proc: subprocess.Popen[bytes], write_fd: int, read_fd: int) -> None:
        self.proc, self.write_fd, self.read_fd = proc, write_fd, read_fd
        self.buffer = b""
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def send(self, method: str, params: dict[str, Any] | None = None, **extra: Any) -> int:
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}, **extra}
        os.write(self.write_fd, json.dumps(message).encode() + b"\0")
        return self.next_id

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.read_fd], [], [], left)[0]:
                raise TimeoutError("the browser did not answer in time")
            chunk = os.read(self.read_fd, 1 << 20)
            if not chunk:
                raise RuntimeError("the browser closed its pipe")
            self.buffer += chunk
        raw, _, self.buffer = self.buffer.partition(b"\0")
        message: dict[str, Any] = json.loads(raw)
        return message

    def call(self, method: str, params: dict[str, Any] | None = None, **extra: Any) -> Any:
        wanted = self.send(method, params, **extra)
        deadline = time.monotonic() + 60
        while True:
            message = self._read(deadline)
            if message.get("id") == wanted:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self.events.append(message)

    def wait_for(self, event: str, timeout: float = 60) -> None:
        if any(e.get("method") == event for e in self.events):
            return
        deadline = time.monotonic() + timeout
        while True:
            message = self._read(deadline)
            self.events.append(message)
            if message.get("method") == event:
                return


def open_pages(paths: list[Path], script: str) -> list[PageVisit]:
    """Load each of ``paths`` in one headless Chromium, each in a fresh tab; run ``script``
    (an expression with a JSON-able value) once it has loaded; screenshot the whole page."""
    assert CHROMIUM is not None, NO_CHROMIUM
    to_browser_r, to_browser_w = os.pipe()
    from_browser_r, from_browser_w = os.pipe()
    with tempfile.TemporaryDirectory(prefix="lcr-chromium-") as profile:
        args = [
            CHROMIUM,
            "--headless",
            "--remote-debugging-pipe",
            "--no-sandbox",  # tests run as root in CI's container
            "--disable-gpu",
            "--no-first-run",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-default-apps",
            f"--user-data-dir={profile}",
            "--window-size=1280,900",
            "about:blank",
        ]
        # the protocol's pipe is file descriptors 3 (read) and 4 (write) of the browser
        launch = f'exec "$@" 3<&{to_browser_r} 4>&{from_browser_w}'
        proc = subprocess.Popen(
            ["bash", "-c", launch, "chromium", *args],
            pass_fds=(to_browser_r, from_browser_w),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        pipe = _Pipe(proc, to_browser_w, from_browser_r)
        try:
            return [_visit(pipe, path.resolve().as_uri(), script) for path in paths]
        finally:
            try:
                pipe.send("Browser.close")
                proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()
                proc.wait()
            os.close(to_browser_w)
            os.close(from_browser_r)


def _visit(pipe: _Pipe, url: str, script: str) -> PageVisit:
    target = pipe.call("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = pipe.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    for domain in ("Runtime", "Log", "Network", "Page"):
        pipe.call(f"{domain}.enable", sessionId=session)
    pipe.events.clear()  # about:blank's own, and the tab before's
    pipe.call("Page.navigate", {"url": url}, sessionId=session)
    pipe.wait_for("Page.loadEventFired")
    time.sleep(0.2)  # a request or message right after the load event still arrives
    result = pipe.call(
        "Runtime.evaluate",
        {"expression": script, "returnByValue": True, "awaitPromise": True},
        sessionId=session,
    )
    if "exceptionDetails" in result:
        raise RuntimeError(f"the test's script failed: {result['exceptionDetails']}")
    size = pipe.call("Page.getLayoutMetrics", sessionId=session)["cssContentSize"]
    shot = pipe.call(
        "Page.captureScreenshot",
        {
            "format": "png",
            "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1},
        },
        sessionId=session,
    )
    visit = PageVisit(
        value=result["result"].get("value"), screenshot=base64.b64decode(shot["data"])
    )
    for event in pipe.events:
        if event.get("sessionId") != session:
            continue
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.consoleAPICalled":
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in params["args"])
            visit.console.append({"level": params["type"], "text": text})
        elif method == "Log.entryAdded":
            entry = params["entry"]
            visit.console.append({"level": entry["level"], "text": entry["text"]})
        elif method == "Runtime.exceptionThrown":
            visit.errors.append(json.dumps(params["exceptionDetails"])[:500])
        elif method == "Network.requestWillBeSent":
            visit.requests.append(params["request"]["url"])
    pipe.call("Target.closeTarget", {"targetId": target})
    return visit
