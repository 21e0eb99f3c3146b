"""One suite every registered method must pass (after scikit-learn's check_estimator).

A new method is picked up from the registry with no change here; give it small
build settings in ``FAST_BUILD_SETTINGS`` if its defaults are too slow for CI.
"""

from __future__ import annotations

import dataclasses
import hashlib
import shutil
from pathlib import Path
from typing import Any

import pytest

from lcr import integrity, pipeline
from lcr.config import Settings
from lcr.errors import SettingError, UsageError
from lcr.methods import get_method, method_names
from lcr.models.container import Models
from lcr.store import DocumentInput, Index
from tests.fakes import ScriptedLLM

# Settings that keep each method quick on a 2,600-word story; the defaults are the papers'.
FAST_BUILD_SETTINGS: dict[str, list[str]] = {
    "raptor": ["raptor.summary_max_new_tokens=40"],
    "pecan": ["pecan.chunk_tokens=100", "pecan.s=256", "pecan.points_max_new_tokens=24"],
    "lightpal": ["lightpal.scorer=llm"],
}
# Methods that read attention and a KV cache, which the scripted LLM cannot give: they
# run on smollm2-135m over the story's opening, and tests that only need a built index
# share one build (test_build_twice_is_identical still builds twice).
REAL_LLM_METHODS = {"pecan"}
REAL_LLM_STORY_CHARS = 1500
_SHARED_BUILDS: dict[str, Path] = {}
QUESTION = "What did the prince do with the golden slipper?"


class NoLLMModels(Models):
    """Models whose LLM must never be touched."""

    @property
    def llm(self) -> Any:
        raise AssertionError("the LLM was loaded although the method's retrieval needs none")


def _doc(path: Path) -> DocumentInput:
    raw = path.read_bytes()
    return DocumentInput(path.name, raw.decode("utf-8"), hashlib.sha256(raw).hexdigest(), len(raw))


def _sets(name: str) -> list[str]:
    return FAST_BUILD_SETTINGS.get(name, [])


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _llm(name: str, request: pytest.FixtureRequest, yes_probability: float = 0.5) -> Any:
    if name in REAL_LLM_METHODS:
        return request.getfixturevalue("smollm")
    return ScriptedLLM(yes_probability=yes_probability)


def _build(
    tmp: Path,
    name: str,
    story: Path,
    embedder: Any,
    request: pytest.FixtureRequest,
    *,
    fresh: bool = False,
) -> Index:
    if name in REAL_LLM_METHODS:
        if not fresh and name in _SHARED_BUILDS:
            shutil.copytree(_SHARED_BUILDS[name], tmp)
            return Index.open(tmp)
        opening = tmp.parent / f"{tmp.stem}-opening.txt"
        opening.write_text(story.read_text(encoding="utf-8")[:REAL_LLM_STORY_CHARS])
        story = opening
    index = Index.create(tmp, [_doc(story)])
    models = Models.with_objects(llm=_llm(name, request), embedder=embedder)
    pipeline.build(index, [name], models, _sets(name))
    if name in REAL_LLM_METHODS and name not in _SHARED_BUILDS:
        _SHARED_BUILDS[name] = tmp
    return index


def _method_files(index: Index, name: str) -> dict[str, bytes]:
    mdir = index.path / index.methods[name].dir
    return {str(p.relative_to(mdir)): p.read_bytes() for p in mdir.rglob("*") if p.is_file()}


@pytest.fixture(params=method_names())
def method_name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_build_twice_is_identical(
    method_name: str,
    tmp_path: Path,
    cinderella: Path,
    embedder: Any,
    request: pytest.FixtureRequest,
) -> None:
    one = _build(tmp_path / "one.idx", method_name, cinderella, embedder, request, fresh=True)
    two = _build(tmp_path / "two.idx", method_name, cinderella, embedder, request, fresh=True)
    assert _method_files(one, method_name) == _method_files(two, method_name)
    assert one.methods[method_name].counts["nodes"] > 0


def test_reopen_gives_same_evidence_with_valid_spans(
    method_name: str,
    tmp_path: Path,
    cinderella: Path,
    embedder: Any,
    request: pytest.FixtureRequest,
) -> None:
    index = _build(tmp_path / "x.idx", method_name, cinderella, embedder, request)
    models = Models.with_objects(llm=_llm(method_name, request, 0.2), embedder=embedder)
    first = pipeline.retrieve(index, method_name, QUESTION, models)
    reopened = Index.open(tmp_path / "x.idx")
    second = pipeline.retrieve(reopened, method_name, QUESTION, models)
    assert [it.to_json() for it in first.evidence.items] == [
        it.to_json() for it in second.evidence.items
    ]
    assert first.evidence.items, "no evidence returned"
    source = reopened.source
    for it in first.evidence.items:
        assert it.spans, f"{it.id} has no spans"
        for s, e in it.spans:
            assert 0 <= s < e <= len(source)
        if len(it.spans) == 1 and it.level == 0:
            s, e = it.spans[0]
            assert source[s:e] == it.text
        assert 0 <= it.doc < len(reopened.documents)
    # a fresh build passes every structural check `lcr info --verify` makes
    assert integrity.verify_index(reopened) == {}


def test_empty_question_and_bad_settings_refused(
    method_name: str,
    tmp_path: Path,
    cinderella: Path,
    embedder: Any,
    request: pytest.FixtureRequest,
) -> None:
    index = _build(tmp_path / "x.idx", method_name, cinderella, embedder, request)
    models = Models.with_objects(llm=_llm(method_name, request), embedder=embedder)
    with pytest.raises(UsageError, match="empty"):
        pipeline.retrieve(index, method_name, "   ", models)
    with pytest.raises(SettingError, match="valid"):
        pipeline.retrieve(index, method_name, QUESTION, models, [f"{method_name}.no_such_key=1"])
    with pytest.raises(SettingError):
        pipeline.build(index, [method_name], models, [f"{method_name}.no_such_key=1"])


def test_retrieval_without_llm_when_method_says_so(
    method_name: str,
    tmp_path: Path,
    cinderella: Path,
    embedder: Any,
    request: pytest.FixtureRequest,
) -> None:
    method = get_method(method_name)
    if method.retrieve_needs(method.query_settings()).uses_llm:
        pytest.skip(f"{method_name} declares that its retrieval needs the LLM")
    index = _build(tmp_path / "x.idx", method_name, cinderella, embedder, request)
    models = NoLLMModels.with_objects(embedder=embedder)
    result = pipeline.retrieve(index, method_name, QUESTION, models)
    assert result.usage.calls == 0


def test_k_limits_ranked_methods(
    method_name: str,
    tmp_path: Path,
    cinderella: Path,
    embedder: Any,
    request: pytest.FixtureRequest,
) -> None:
    if method_name == "full":
        pytest.skip("full returns the whole text by definition: -k does not apply")
    index = _build(tmp_path / "x.idx", method_name, cinderella, embedder, request)
    models = Models.with_objects(llm=_llm(method_name, request, 0.2), embedder=embedder)
    unlimited = pipeline.retrieve(index, method_name, QUESTION, models, k=1000)
    assert len(unlimited.evidence.items) > 3  # so a limit of 3 has something to cut
    result = pipeline.retrieve(index, method_name, QUESTION, models, k=3)
    if method_name == "graphreader":  # -k is N, the number of exploration paths
        assert 1 <= len(result.evidence.info["initial_nodes"]) <= 3
    else:
        assert 1 <= len(result.evidence.items) <= 3


def test_settings_are_declared_once_and_typed(method_name: str) -> None:
    """Each phase's settings are one frozen, typed declaration: one-line help, valid
    values stated, defaults that pass their own checks, old names that map to new ones."""
    method = get_method(method_name)
    for cls in (method.build_settings, method.query_settings):
        assert issubclass(cls, Settings) and dataclasses.is_dataclass(cls)
        defaults = cls()
        with pytest.raises(dataclasses.FrozenInstanceError):
            defaults.__setattr__("x", 1)
        for s in cls.declared():
            label = f"{method_name}.{s.name}"
            assert "\n" not in s.help and len(s.help) <= 100, f"{label}: help too long"
            assert s.declares_valid_values(), f"{label} accepts anything"
            assert s.check(getattr(defaults, s.name), label) == s.default
            for old in s.renamed_from:
                assert cls.renamed()[old] == s.name
                assert old not in cls.by_name(), f"{label}: old name {old} still declared"
        assert cls.from_stored(defaults.to_json()) == defaults


def test_needs_line_is_derived_from_the_declaration(method_name: str) -> None:
    method = get_method(method_name)
    text = method.needs_text()
    build = method.build_needs(method.build_settings())
    assert text.startswith(f"build: {build.describe()};")
    if build.embedder:
        assert "embedder" in text.split(";")[0]
