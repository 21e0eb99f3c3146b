"""The Python API: the examples of docs/python-api.md run as written, and the API checks
what the CLI checks."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

import lcr
from lcr.errors import SettingError, UsageError

REPO = Path(__file__).resolve().parents[1]
STORY = REPO / "examples" / "lighthouse.txt"


def _blocks() -> list[str]:
    page = (REPO / "docs" / "python-api.md").read_text(encoding="utf-8")
    return re.findall(r"```python\n(.*?)```", page, flags=re.S)


@pytest.mark.slow
def test_the_python_api_page_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copy(STORY, tmp_path / "lighthouse.txt")
    monkeypatch.chdir(tmp_path)
    blocks = _blocks()
    assert len(blocks) >= 4
    scope: dict[str, object] = {}
    for block in blocks:
        exec(compile(block, "docs/python-api.md", "exec"), scope)
    out = capsys.readouterr().out
    assert "['bm25', 'tfidf']" in out and "must be at least 1" in out
    assert out.count("LLM call(s)") == 2


def test_api_builds_retrieves_and_refuses_bad_input(tmp_path: Path) -> None:
    shutil.copy(STORY, tmp_path / "story.txt")
    book = lcr.index(tmp_path / "story.txt", methods=["bm25"])
    assert book.path == tmp_path / "story.idx" and "bm25" in book.methods
    again = lcr.index(tmp_path / "story.txt", methods=["bm25"])  # kept, not rebuilt
    assert again.methods["bm25"].dir == book.methods["bm25"].dir
    hits = lcr.retrieve(tmp_path / "story.idx", "the boat on Thursday", k=2)
    assert len(hits.evidence.items) == 2 and hits.answer is None
    assert [it.extra["rank"] for it in hits.evidence.items] == [1, 2]
    with pytest.raises(SettingError, match=r"unknown setting bm25\.colour"):
        lcr.retrieve(book, "boat", colour="red")
    with pytest.raises(SettingError, match=r"bm25\.top_k must be at least 1"):
        lcr.retrieve(book, "boat", settings={"bm25.top_k": 0})
    with pytest.raises(UsageError, match="the question is empty"):
        lcr.retrieve(book, "  ")
    with pytest.raises(UsageError, match="give out="):
        lcr.index([tmp_path / "story.txt", STORY])
