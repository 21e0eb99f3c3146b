"""The checks every method must pass, importable by a method's own tests.

After scikit-learn's ``check_estimator``: a package that adds a method runs

    from lcr.testing import check_method
    check_method(MyMethod)            # or a registered name: check_method("overlap")

in its own test suite, and each failure is an ``AssertionError`` naming the check
(whatever went wrong inside it: an error lcr raised is said in the same line).
What a method declares (:class:`~lcr.methods.base.Method`'s ``k_option``,
``quick_build_settings``, ``tested_with_real_llm``, its ``Needs``) says which
checks apply and how; no check names a method. After scikit-learn's
``parametrize_with_checks``, :func:`parametrize_with_checks` makes each check a
test of its own (one pytest id per check, sharing one build per method)::

    from lcr.testing import parametrize_with_checks

    @parametrize_with_checks([MyMethod])
    def test_my_method(method, check):
        check(method)

:class:`MethodChecks` runs one check at a time, for a caller that wants them one
by one otherwise.

The models are real components: :class:`~lcr.models.hashing.HashingEmbedder`
unless an embedder is given, and :class:`ScriptedLLM`, a deterministic LLM made
of string operations, unless the method declares it needs a real one.
"""

from __future__ import annotations

import atexit
import dataclasses
import hashlib
import random
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lcr import api, pipeline
from lcr.config import Settings, value_text
from lcr.errors import SettingError, UsageError
from lcr.evidence import Usage
from lcr.methods import declaration_problems, get_method, method_names, registered
from lcr.methods.base import SHARED_ANSWER, AnswerState, AnswerStep, Method
from lcr.models.base import (
    ALL_CAPABILITIES,
    LLM,
    Capability,
    ContinuationScore,
    Embedder,
    Generation,
    Message,
    OnText,
)
from lcr.models.container import Models
from lcr.models.hashing import HashingEmbedder
from lcr.pipeline import integrity
from lcr.store import Document, Index

if TYPE_CHECKING:
    import pytest

QUESTION = "What did the prince do with the golden slipper?"
REAL_LLM_TEXT_CHARS = 1500  # a real small model builds over this much of the text


class ScriptedLLM:
    """A deterministic LLM: replies are cut from its prompt, probabilities are fixed.

    ``generate`` answers with the first ``words`` words (at most ``max_new_tokens``)
    of the last message, from the first ``after`` on when it is given, so summaries
    are real text made from their input; ``choice_probability`` returns
    ``yes_probability``; a continuation scores higher the more words it shares with
    its context. Every call is counted in ``usage`` and its prompt kept in ``prompts``.
    """

    model_id = "scripted-test-llm"
    backend = "scripted"
    capabilities: frozenset[Capability] = ALL_CAPABILITIES

    def __init__(self, yes_probability: float = 0.5, words: int = 20, after: str = "") -> None:
        self.usage = Usage()
        self.yes_probability = yes_probability
        self.words = words
        self.after = after
        self.prompts: list[list[Message]] = []

    @property
    def context_window(self) -> int:
        return 4096

    def count_tokens(self, text: str) -> int:
        return len(re.findall(r"\w+|[^\w\s]", text))

    def generate(
        self,
        messages: Sequence[Message],
        *,
        max_new_tokens: int = 256,
        stop: Sequence[str] = (),
        temperature: float = 0.0,
        on_text: OnText | None = None,
        seed: int | None = None,
    ) -> Generation:
        self.prompts.append(list(messages))
        content = messages[-1]["content"]
        if self.after and self.after in content:
            content = content.split(self.after, 1)[1]
        words = content.split()[: min(self.words, max_new_tokens)]
        text = " ".join(words)
        if on_text is not None:
            for i, word in enumerate(words):
                on_text(word if i == 0 else " " + word)  # a word at a time, as a model writes
        prompt_tokens = sum(self.count_tokens(m["content"]) for m in messages)
        completion = self.count_tokens(text)
        self.usage.add(prompt_tokens, completion)
        return Generation(text, prompt_tokens, completion)

    def generate_batch(
        self,
        conversations: Sequence[Sequence[Message]],
        *,
        max_new_tokens: int = 256,
        stop: Sequence[str] = (),
        temperature: float = 0.0,
        on_result: Callable[[int, Generation], None] | None = None,
    ) -> list[Generation]:
        out = []
        for i, c in enumerate(conversations):
            gen = self.generate(c, max_new_tokens=max_new_tokens, stop=stop)
            out.append(gen)
            if on_result is not None:
                on_result(i, gen)
        return out

    def choice_probability(
        self, messages: Sequence[Message], yes: str = "Yes", no: str = "No"
    ) -> float:
        self.prompts.append(list(messages))
        self.usage.add(sum(self.count_tokens(m["content"]) for m in messages), 0)
        return self.yes_probability

    def continuation_logprob(self, context: str, continuation: str) -> float:
        self.usage.add(self.count_tokens(context + continuation), 0)
        shared = len(set(context.lower().split()) & set(continuation.lower().split()))
        return -float(self.count_tokens(continuation)) + 0.5 * shared

    def continuation_logprobs(
        self, context: str, continuations: Sequence[str], *, max_tokens: int | None = None
    ) -> list[ContinuationScore]:
        return [
            ContinuationScore(self.continuation_logprob(context, c), self.count_tokens(c))
            for c in continuations
        ]


class NoLLMModels(Models):
    """Models whose LLM must never be touched."""

    @property
    def llm(self) -> Any:
        raise AssertionError("the LLM was loaded although the method's retrieval needs none")


def sample_text() -> str:
    """A few KB of plain English in paragraphs, the same on every run: the text the
    checks build over when none is given (its words overlap :data:`QUESTION`'s)."""
    rng = random.Random(38)
    people = ["the prince", "the king", "the sister", "the mother", "the girl", "a pigeon"]
    verbs = ["found", "kept", "hid", "carried", "lost", "showed", "tried on", "polished"]
    things = ["the golden slipper", "a silver dress", "the hazel tree", "the ashes", "a lentil"]
    places = ["in the garden", "at the ball", "by the hearth", "in the tower", "on the stairs"]
    paragraphs = []
    for _ in range(40):
        sentences = [
            f"{rng.choice(people).capitalize()} {rng.choice(verbs)} {rng.choice(things)} "
            f"{rng.choice(places)}."
            for _ in range(rng.randint(3, 6))
        ]
        paragraphs.append(" ".join(sentences))
    return "\n\n".join(paragraphs) + "\n"


# ------------------------------------------------------------------ the checks


class MethodChecks:
    """The checks of one method, run one at a time, sharing a build where a check
    needs only a built index (``check_build_twice_is_identical`` builds its own two).

    ``real_llm`` makes the LLM of a method that declares ``tested_with_real_llm``
    (required for such a method); ``workdir`` holds the indexes (a temporary folder
    when None, removed by :meth:`close`). A class nobody registered is in the
    registry only while a check runs, so the checks leave the registry as they
    found it.
    """

    def __init__(
        self,
        method: str | type[Method],
        *,
        embedder: Embedder | None = None,
        real_llm: Callable[[], LLM] | None = None,
        text: str | Path | None = None,
        workdir: Path | None = None,
    ) -> None:
        self._stack = ExitStack()
        self.method: Method = get_method(method) if isinstance(method, str) else method()
        self.name: str = getattr(self.method, "name", None) or type(self.method).__name__
        self._cls = type(self.method)
        if self.method.tested_with_real_llm and real_llm is None:
            raise ValueError(
                f"{self.name} declares tested_with_real_llm: pass real_llm= (a callable "
                "returning a small real LLM with the capabilities it needs)"
            )
        self.embedder = embedder if embedder is not None else HashingEmbedder()
        self.real_llm = real_llm
        if workdir is None:
            workdir = Path(self._stack.enter_context(tempfile.TemporaryDirectory()))
        self.workdir = workdir
        self.text = self._text(text)
        self._shared: Path | None = None
        self._count = 0

    def close(self) -> None:
        self._stack.close()

    def __enter__(self) -> MethodChecks:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def names(self) -> list[str]:
        """The checks that apply to this method, by what it declares."""
        return applicable_checks(self.method)

    def run(self, check: str) -> None:
        """Run one check; any failure is an ``AssertionError`` naming the method and the
        check (an error raised inside it, lcr's or the method's, is said on that line)."""
        try:
            with ExitStack() as registry:
                if check != check_declarations.__name__:  # which may find it has no name
                    registry.enter_context(_registered_unless_known(self._cls))
                CHECKS[check](self)
        except AssertionError as exc:
            raise AssertionError(f"{self.name}: {check}: {exc}") from exc
        except Exception as exc:
            said = " ".join(str(exc).split()) or "(no message)"
            raise AssertionError(f"{self.name}: {check}: {type(exc).__name__}: {said}") from exc

    # ------------------------------------------------------------- helpers
    def _text(self, text: str | Path | None) -> str:
        if text is None:
            body = sample_text()
        elif isinstance(text, Path):
            body = text.read_text(encoding="utf-8")
        else:
            body = text
        return body[:REAL_LLM_TEXT_CHARS] if self.method.tested_with_real_llm else body

    def llm(self, yes_probability: float = 0.5) -> LLM:
        if not self.method.tested_with_real_llm or self.real_llm is None:
            return ScriptedLLM(yes_probability=yes_probability)
        return self.real_llm()

    def models(self, yes_probability: float = 0.5) -> Models:
        return Models.with_objects(llm=self.llm(yes_probability), embedder=self.embedder)

    def build_sets(self) -> list[str]:
        return [
            f"{self.name}.{key}={value_text(value)}"
            for key, value in self.method.quick_build_settings.items()
        ]

    def fresh_build(self) -> Index:
        self._count += 1
        path = self.workdir / f"{self.name}-{self._count}.idx"
        raw = self.text.encode("utf-8")
        doc = Document("text.txt", self.text, hashlib.sha256(raw).hexdigest(), len(raw))
        index = Index.create(path, [doc])
        api.plan_and_build(index, [self.name], self.models(), self.build_sets())
        return Index.open(path)

    def built(self) -> Index:
        """A copy of the shared build, for a check that may change it."""
        if self._shared is None:
            self._shared = self.fresh_build().path
        self._count += 1
        copy = self.workdir / f"{self.name}-{self._count}.idx"
        shutil.copytree(self._shared, copy)
        return Index.open(copy)


@contextmanager
def _registered_unless_known(method: type[Method]) -> Iterator[str]:
    if method.name in method_names() and type(get_method(method.name)) is method:
        yield method.name
        return
    with registered(method) as name:
        yield name


def _method_files(index: Index, name: str) -> dict[str, bytes]:
    mdir = index.path / index.methods[name].dir
    return {str(p.relative_to(mdir)): p.read_bytes() for p in mdir.rglob("*") if p.is_file()}


def check_declarations(c: MethodChecks) -> None:
    """The class declares what lcr reads from every method (a name, a one-line summary,
    its paper, settings each declared with ``setting()``): the registry refuses a
    plugin without them, in one line naming what is missing."""
    missing = declaration_problems(c._cls)
    assert not missing, "; ".join(missing)


def check_build_twice_is_identical(c: MethodChecks) -> None:
    """Two builds of the same text with the same settings write the same bytes."""
    one, two = c.fresh_build(), c.fresh_build()
    assert _method_files(one, c.name) == _method_files(two, c.name), "two builds differ"
    assert one.methods[c.name].counts.get("nodes", 0) > 0, "the build recorded no nodes"


def check_reopen_gives_same_evidence_with_valid_spans(c: MethodChecks) -> None:
    """A reopened index gives the same evidence; every span lies in source.txt and a
    level-0 item with one span is exactly its text; the build passes --verify."""
    index = c.built()
    models = c.models(0.2)
    first = api.plan_and_retrieve(index, c.name, QUESTION, models)
    reopened = Index.open(index.path)
    second = api.plan_and_retrieve(reopened, c.name, QUESTION, models)
    assert [it.to_json() for it in first.evidence.items] == [
        it.to_json() for it in second.evidence.items
    ], "a reopened index gave other evidence"
    assert first.evidence.items, "no evidence returned"
    source = reopened.source
    for it in first.evidence.items:
        assert it.spans, f"{it.id} has no spans"
        for s, e in it.spans:
            assert 0 <= s < e <= len(source), f"{it.id}: span {(s, e)} outside source.txt"
        if len(it.spans) == 1 and it.level == 0:
            s, e = it.spans[0]
            assert source[s:e] == it.text, f"{it.id}: text is not its span"
        assert 0 <= it.doc < len(reopened.documents), f"{it.id}: no document {it.doc}"
    assert integrity.verify_index(reopened) == {}, "a fresh build fails lcr info --verify"


def check_bad_input_refused(c: MethodChecks) -> None:
    """An empty question and an unknown setting are refused with lcr's errors."""
    index = c.built()
    models = c.models()
    _raises(UsageError, "empty", lambda: api.plan_and_retrieve(index, c.name, "   ", models))
    bad = [f"{c.name}.no_such_key=1"]
    _raises(
        SettingError, "valid", lambda: api.plan_and_retrieve(index, c.name, QUESTION, models, bad)
    )
    _raises(SettingError, "", lambda: api.plan_and_build(index, [c.name], models, bad))


def check_retrieval_needs_no_llm(c: MethodChecks) -> None:
    """A method whose retrieval declares no LLM retrieves without touching one."""
    index = c.built()
    result = api.plan_and_retrieve(
        index, c.name, QUESTION, NoLLMModels.with_objects(embedder=c.embedder)
    )
    assert result.usage.calls == 0, "retrieval made LLM calls"


def check_k_limits(c: MethodChecks) -> None:
    """``-k`` bounds what the method declares it counts (``k_option``), and is the query
    setting it names for it (``k_option.setting``). The limit is 3, or one less than
    the method returns with ``-k 1000`` where that is fewer, so it always binds (a
    method returning a single item is held to ``-k 1`` giving one)."""
    index = c.built()
    models = c.models(0.2)
    key = c.method.k_option.info_key
    what = key or "items"

    def counted(k: int) -> tuple[list[Any], Any]:
        result = api.plan_and_retrieve(index, c.name, QUESTION, models, k=k)
        return (result.evidence.info[key] if key else result.evidence.items), result

    unlimited = len(counted(1000)[0])
    assert unlimited >= 1, f"-k 1000 gave no {what}"
    limit = max(1, min(3, unlimited - 1))
    limited, result = counted(limit)
    assert 1 <= len(limited) <= limit, f"-k {limit} gave {len(limited)} {what}"
    name = c.method.k_option.setting
    if name:  # -k is that setting: the same retrieval either way
        sets = [f"{c.name}.{name}={limit}"]
        by_set = api.plan_and_retrieve(index, c.name, QUESTION, models, sets)
        assert [it.to_json() for it in by_set.evidence.items] == [
            it.to_json() for it in result.evidence.items
        ], f"-k {limit} and --set {c.name}.{name}={limit} gave different evidence"


def check_k_ignored(c: MethodChecks) -> None:
    """A method that declares ``-k`` does not apply gives the same evidence whatever it is."""
    index = c.built()
    models = c.models()
    one = api.plan_and_retrieve(index, c.name, QUESTION, models, k=1)
    many = api.plan_and_retrieve(index, c.name, QUESTION, models, k=1000)
    assert [it.to_json() for it in one.evidence.items] == [
        it.to_json() for it in many.evidence.items
    ], "-k changed the evidence of a method that says it ignores -k"


def check_answer_step(c: MethodChecks) -> None:
    """The declared answer step answers through the pipeline: the retrieval keeps the
    state the step declares (and only when asked), the record names the step (or the
    shared step it handed to), what it read lies in source.txt, and its cost is counted."""
    index = c.built()
    models = c.models(0.9)
    step = c.method.answer_step(c.method.query_settings())
    assert isinstance(step, AnswerStep), f"answer_step gave {step!r}"
    assert issubclass(step.state_type, AnswerState), "state_type is not an AnswerState"
    query = pipeline.plan_query(c.name)
    kept = pipeline.retrieve_query(index, query, QUESTION, models, keep_state=True)
    try:
        step.state_of(kept.evidence)
    except TypeError as exc:
        raise AssertionError(f"the retrieval kept the wrong state: {exc}") from None
    alone = api.plan_and_retrieve(index, c.name, QUESTION, models)
    assert alone.evidence.state is None, "a retrieval alone kept its answer state"
    result = api.plan_and_ask(index, c.name, QUESTION, models)
    assert isinstance(result.answer, str), "no answer"
    recorded = (result.answer_settings or {}).get("step")
    assert recorded in (step.name, SHARED_ANSWER.name), f"the record names step {recorded!r}"
    assert result.evidence.state is None, "the answer state outlived the answer"
    assert result.read is not None, "what the answer read is not recorded"
    for it in result.read:
        assert all(0 <= s < e <= len(index.source) for s, e in it.spans), f"{it.id}: spans"
    spent = result.usage.to_json() != result.evidence.usage.to_json()
    assert spent, "the answer's LLM usage was not counted"


def check_settings_declared_once_and_typed(c: MethodChecks) -> None:
    """Each phase's settings are one frozen, typed declaration: one-line help, valid
    values stated, defaults that pass their own checks and parse back from their text,
    and each default saying where it comes from (:func:`unexplained_defaults`)."""
    for cls in (c.method.build_settings, c.method.query_settings):
        assert issubclass(cls, Settings) and dataclasses.is_dataclass(cls), f"{cls} not Settings"
        defaults = cls()
        _raises(dataclasses.FrozenInstanceError, "", partial(defaults.__setattr__, "x", 1))
        for s in cls.declared():
            label = f"{c.name}.{s.name}"
            assert "\n" not in s.help and len(s.help) <= 100, f"{label}: help too long"
            assert s.declares_valid_values(), f"{label} accepts anything"
            assert s.check(getattr(defaults, s.name), label) == s.default, f"{label}: default"
            assert s.parse(str(s.default)) == s.default, f"{label}: default's text"
        assert cls.from_stored(defaults.to_json()) == defaults, f"{cls.__name__} round trip"
    unexplained = unexplained_defaults(c.method)
    assert not unexplained, "; ".join(unexplained)
    for key in c.method.quick_build_settings:
        assert key in c.method.build_settings.by_name(), f"quick_build_settings: no {key}"
    if c.method.k_option.setting:
        k_setting = c.method.query_settings.by_name().get(c.method.k_option.setting)
        assert k_setting is not None and k_setting.value_type is int, (
            f"k_option.setting: {c.method.k_option.setting} is no whole-number query setting"
        )


DEFAULTS_HEADING = "How the defaults were chosen"


def unexplained_defaults(method: Method) -> list[str]:
    """Each build and query setting of ``method`` whose default does not say where it
    comes from, one line each (what lcr's docs test holds lcr's own methods to): a
    setting declared with no origin (``paper=``, ``reference_code=``, ``library=``,
    ``nearest=``, ``measured=PAGE``, ``arbitrary=``) must be named, in backquotes,
    under the heading "How the defaults were chosen" of the method's ``manual`` (a
    Markdown file, its path from lcr's source tree or from the folder holding the
    method's package); a ``measured=`` page given as a path must exist there."""
    roots = _manual_roots(type(method))
    why = _section(_local_file(method.manual, roots), DEFAULTS_HEADING)
    out = []
    for cls in (method.build_settings, method.query_settings):
        for s in cls.declared():
            label = f"{method.name}.{s.name}"
            page = s.measured_in.partition("#")[0]
            if page and "://" not in page and _local_file(page, roots) is None:
                out.append(f"{label}: measured on {page}, which is not there")
            named = f"`{s.name}`" in why or f"`{label}`" in why
            if s.origin == "lcr" and not named:
                out.append(
                    f"{label} does not say where its default comes from: declare it with "
                    "paper=, reference_code=, library=, nearest=, measured=PAGE or "
                    f'arbitrary=, or name it under "{DEFAULTS_HEADING}" in its manual'
                )
    return out


def _manual_roots(cls: type) -> list[Path]:
    """Where a method's relative paths are read from: the folder holding the top-level
    package of the class that declares its ``manual`` (lcr's source tree for lcr's own,
    a plugin's checkout for a plugin), then lcr's source tree."""
    import sys

    declaring = next((k for k in cls.__mro__ if "manual" in vars(k)), cls)
    roots = []
    where = getattr(sys.modules.get(declaring.__module__), "__file__", None)
    if where:
        folder = Path(where).resolve().parent
        while (folder / "__init__.py").is_file():
            folder = folder.parent
        roots.append(folder)
    return [*roots, Path(__file__).resolve().parent.parent]


def _local_file(path: str, roots: Sequence[Path]) -> Path | None:
    if not path or "://" in path:
        return None
    for root in roots:
        if (root / path).is_file():
            return root / path
    return None


def _section(path: Path | None, title: str) -> str:
    """The text under the Markdown heading ``title`` of ``path``, to the next heading."""
    if path is None:
        return ""
    out: list[str] = []
    inside = False
    for line in path.read_text(encoding="utf-8").splitlines():
        heading = re.match(r"^#{1,6}\s+(.*?)\s*$", line)
        if heading:
            inside = heading.group(1) == title
        elif inside:
            out.append(line)
    return "\n".join(out)


def check_needs_line_is_derived(c: MethodChecks) -> None:
    """``lcr methods``' needs line is written from the declared ``Needs``."""
    method = c.method
    text = method.needs_text()
    build = method.build_needs(method.build_settings())
    assert text.startswith(f"build: {build.describe()};"), f"needs line: {text}"


def _raises(kind: type[BaseException], match: str, call: Callable[[], object]) -> None:
    try:
        call()
    except kind as exc:
        assert re.search(match, str(exc)), f"{kind.__name__} without {match!r}: {exc}"
        return
    raise AssertionError(f"expected {kind.__name__}, nothing was raised")


CHECKS: dict[str, Callable[[MethodChecks], None]] = {
    f.__name__: f
    for f in (
        check_declarations,
        check_build_twice_is_identical,
        check_reopen_gives_same_evidence_with_valid_spans,
        check_bad_input_refused,
        check_retrieval_needs_no_llm,
        check_k_limits,
        check_k_ignored,
        check_answer_step,
        check_settings_declared_once_and_typed,
        check_needs_line_is_derived,
    )
}


def applicable_checks(method: Method) -> list[str]:
    """The checks that apply to ``method``, by its declarations."""
    skip = set()
    if method.retrieve_needs(method.query_settings()).uses_llm:
        skip.add(check_retrieval_needs_no_llm.__name__)
    skip.add(check_k_ignored.__name__ if method.k_option.applies else check_k_limits.__name__)
    return [name for name in CHECKS if name not in skip]


def check_method(
    method: str | type[Method],
    *,
    embedder: Embedder | None = None,
    real_llm: Callable[[], LLM] | None = None,
    text: str | Path | None = None,
) -> None:
    """Run every check that applies to ``method`` (a registered name or a class); the
    first failure raises ``AssertionError`` naming its check."""
    with MethodChecks(method, embedder=embedder, real_llm=real_llm, text=text) as checks:
        for name in checks.names():
            checks.run(name)


class MethodCheck:
    """One check, as :func:`parametrize_with_checks` hands it to a test: ``check(method)``
    runs it on the checks of ``method`` made for that decorator (made at the first of
    its checks, so the checks of one method share its build)."""

    def __init__(self, name: str, suites: _Suites) -> None:
        self.name = name
        self._suites = suites

    def __call__(self, method: str | type[Method]) -> None:
        self._suites.get(method).run(self.name)

    def __repr__(self) -> str:
        return self.name


class _Suites:
    """The :class:`MethodChecks` of one :func:`parametrize_with_checks`, one per method,
    closed (their folders removed) when the process ends."""

    def __init__(self, **options: Any) -> None:
        self.options = options
        self.made: dict[str | type[Method], MethodChecks] = {}
        atexit.register(self.close)

    def get(self, method: str | type[Method]) -> MethodChecks:
        if method not in self.made:
            embedder, real_llm = self.options["embedder"], self.options["real_llm"]
            self.made[method] = MethodChecks(
                method,
                embedder=embedder() if embedder is not None else None,
                real_llm=real_llm,
                text=self.options["text"],
            )
        return self.made[method]

    def close(self) -> None:
        for checks in self.made.values():
            checks.close()
        self.made.clear()


def parametrize_with_checks(
    methods: Sequence[str | type[Method]],
    *,
    embedder: Callable[[], Embedder] | None = None,
    real_llm: Callable[[], LLM] | None = None,
    text: str | Path | None = None,
) -> pytest.MarkDecorator:
    """A pytest decorator making each check that applies to each of ``methods`` (classes,
    or registered names) a test of its own, id ``NAME-check_...``, after
    scikit-learn's ``parametrize_with_checks``::

        @parametrize_with_checks([Overlap])
        def test_overlap(method, check):
            check(method)

    ``embedder`` (a callable making one; lcr's hashing embedder when None),
    ``real_llm`` and ``text`` are :func:`check_method`'s. A method that declares
    ``tested_with_real_llm`` needs ``real_llm``: without it, it is left out, and
    one test named ``NAME-needs_real_llm`` fails saying so."""
    import pytest

    suites = _Suites(embedder=embedder, real_llm=real_llm, text=text)
    params = []
    for method in methods:
        instance = get_method(method) if isinstance(method, str) else method()
        label = getattr(instance, "name", None) or getattr(method, "__name__", str(method))
        if instance.tested_with_real_llm and real_llm is None:
            params.append(pytest.param(method, _needs_real_llm, id=f"{label}-needs_real_llm"))
            continue
        for name in applicable_checks(instance):
            params.append(pytest.param(method, MethodCheck(name, suites), id=f"{label}-{name}"))
    return pytest.mark.parametrize(("method", "check"), params)


def _needs_real_llm(method: str | type[Method]) -> None:
    name = method if isinstance(method, str) else method.name
    raise AssertionError(
        f"{name} declares tested_with_real_llm: give parametrize_with_checks real_llm= "
        "(a callable returning a small real LLM)"
    )
