"""Row 14: progress bars paused for a streamed answer come back without erasing it."""

from __future__ import annotations

import os
import pty
import select
import sys
import time

import pytest

pyte = pytest.importorskip("pyte", reason="the dev extra's pyte is not installed")


def test_bars_that_come_back_after_an_answer_leave_it_on_screen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from lcr.progress import RichProgress, bars_paused

    master, slave = pty.openpty()
    terminal = os.fdopen(slave, "w", buffering=1)
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setenv("COLUMNS", "80")
    bars = RichProgress()
    with bars:
        joined = bars.task("joining the parts of qwen2.5-coder-1.5b", total=10)
        joined.advance(10)
        bars.task("loading qwen2.5-coder-1.5b (llama.cpp)", total=None)
        bars.task("reading the evidence", total=None)
        time.sleep(0.5)  # drawn: three bars
        with bars_paused():  # the answer written word by word, as lcr ask does
            terminal.write("Q: What was the boat called?\n")
            terminal.write("A: The boat was called the Patience.\n\n")
            terminal.flush()
        time.sleep(0.5)  # the bars drawn again below the answer
    terminal.flush()
    screen = pyte.Screen(80, 30)
    stream = pyte.ByteStream(screen)
    while select.select([master], [], [], 0.2)[0]:
        stream.feed(os.read(master, 65536))
    terminal.close()
    os.close(master)
    shown = [row.rstrip() for row in screen.display]
    assert "A: The boat was called the Patience." in shown, "\n".join(shown)
    assert "Q: What was the boat called?" in shown, "\n".join(shown)
