"""The Python API: the examples of docs/python-api.md run as written, and the API checks
what the CLI checks."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

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
    with pytest.raises(UsageError, match="question is empty"):
        lcr.retrieve(book, "  ")
    with pytest.raises(UsageError, match="give out="):
        lcr.index([tmp_path / "story.txt", STORY])


@pytest.fixture(scope="module")
def small_book(tmp_path_factory: pytest.TempPathFactory) -> lcr.Index:
    folder = tmp_path_factory.mktemp("api")
    shutil.copy(STORY, folder / "story.txt")
    return lcr.index(folder / "story.txt", methods=["bm25"])


@pytest.mark.parametrize(
    ("call", "kind", "message"),
    [
        (lambda b: lcr.retrieve(b, "boat", k="3"), TypeError, r"^k must be a whole number"),
        (lambda b: lcr.retrieve(b, "boat", k=2.5), TypeError, r"^k must be .* got 2\.5 \(float\)"),
        (lambda b: lcr.retrieve(b, "boat", k=True), TypeError, r"^k must be a whole number"),
        (lambda b: lcr.retrieve(b, "boat", k=0), ValueError, r"^k must be at least 1, got 0"),
        (lambda b: lcr.retrieve(b, None), TypeError, r"^question must be a string, got None"),
        (lambda b: lcr.retrieve(b, "boat", method=None), TypeError, r"^method must be a string"),
        (
            lambda b: lcr.retrieve(b, "boat", settings=["bm25.top_k", 3]),
            TypeError,
            r"^settings must be a mapping",
        ),
        (lambda b: lcr.retrieve(b, "boat", settings={3: 4}), TypeError, r"^settings keys"),
        (lambda b: lcr.retrieve(b, "boat", models="smollm2-135m"), TypeError, r"^models must"),
        (lambda b: lcr.retrieve(None, "boat"), TypeError, r"^index must be a path"),
        (lambda b: lcr.retrieve("", "boat"), ValueError, r"^index is an empty path"),
        (lambda b: lcr.retrieve("a\0b.idx", "boat"), ValueError, r"^index holds a NUL byte"),
        (lambda b: lcr.ask(b, ["boat?", None]), TypeError, r"^question\[1\] must be a string"),
        (lambda b: lcr.ask(b, "boat?", max_new_tokens="9"), TypeError, r"^max_new_tokens must"),
        (lambda b: lcr.index(b.path.parent / "story.txt", force="yes"), TypeError, r"^force must"),
        (lambda b: lcr.index(b.path.parent / "story.txt", methods=[None]), TypeError, r"methods"),
        (lambda b: lcr.index(None), TypeError, r"^paths must be a path or a list of paths"),
        (lambda b: lcr.index("a\0b.txt"), ValueError, r"^paths holds a NUL byte"),
        (lambda b: lcr.use_models(device="gpu"), ValueError, r"^device must be one of"),
        (lambda b: lcr.use_models(context_window="8k"), TypeError, r"^context_window must"),
        (lambda b: lcr.use_models(llm=5), TypeError, r"^llm must be a string or None"),
    ],
)
def test_the_api_says_which_argument_has_the_wrong_type_or_value(
    small_book: lcr.Index, call: Any, kind: type[Exception], message: str
) -> None:
    """Issue 37: these were raw TypeError/AttributeError from lcr's internals, or (force,
    k=True) quietly accepted; each is now lcr's own error, naming the argument."""
    before = sorted(p.name for p in small_book.path.iterdir())
    with pytest.raises(kind, match=message) as caught:
        call(small_book)
    assert isinstance(caught.value, UsageError) and caught.value.exit_code == 2
    assert sorted(p.name for p in small_book.path.iterdir()) == before
