"""Where a run's input becomes typed plans, once, before any work.

Every ``--set`` of a run is parsed once (:func:`parse_sets`); from it each method's
typed settings are built, ``-k`` is attached to the query, what each phase needs is
checked against the backends (:func:`require`) and each model role is bound
(:func:`bind`). The CLI, the Python API and ``lcr eval`` make these plans where
input enters; :mod:`lcr.pipeline` takes them as they are and parses nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lcr import config
from lcr.answer.shared import ANSWER_TARGET, AnswerSettings
from lcr.config import Setting, Settings, SettingValue
from lcr.errors import ModelError, SettingError, UsageError
from lcr.methods import get_method, method_names
from lcr.methods.base import Method, Needs
from lcr.models.base import Role
from lcr.models.binding import NO_BINDING, Binding
from lcr.models.container import Models

AnyMethod = Method[Any, Any]
BUILD, QUERY = "build", "query"
OTHER_COMMAND = {BUILD: "ask/retrieve", QUERY: "index"}  # where the other phase's keys go


# ------------------------------------------------------------------ --set, once


@dataclass(frozen=True)
class Assignment:
    """One ``--set`` parsed: the method (or ``answer``) it names, the key as written,
    the setting's current name, its typed value and the phase that declares it."""

    target: str
    given: str
    name: str
    value: SettingValue
    phase: str  # BUILD, QUERY or ANSWER_TARGET


@dataclass(frozen=True)
class ParsedSets:
    """Every ``--set`` of a run, each parsed once and checked: every target is a known
    method (or ``answer``), every key a setting of one of its phases, every value valid."""

    assignments: tuple[Assignment, ...] = ()
    # each method a --set named, resolved once (a registry look-up and an instance) and
    # carried to the plan that uses it: a run resolves a method's name once
    resolved: Mapping[str, AnyMethod] = dataclasses.field(default_factory=dict)

    def plus(self, *more: Assignment) -> ParsedSets:
        """These and ``more`` (a later value of the same setting wins, as on a command line)."""
        return ParsedSets((*self.assignments, *more), self.resolved)

    def method(self, name: str) -> AnyMethod:
        """The method called ``name``: the one a ``--set`` resolved, else resolved now."""
        found = self.resolved.get(name)
        return found if found is not None else get_method(name)

    def answer_values(self) -> dict[str, SettingValue]:
        return {a.name: a.value for a in self.assignments if a.phase == ANSWER_TARGET}

    def values(self, method: AnyMethod, phase: str, *, strict: bool = True) -> dict[str, Any]:
        """``method``'s values for ``phase``; ``strict``: a key of its other phase fails,
        naming the command that takes it (``lcr eval`` takes both)."""
        values: dict[str, Any] = {}
        for a in self.assignments:
            if a.target != method.name:
                continue
            if a.phase != phase:
                if strict:
                    raise SettingError(
                        f"{a.target}.{a.given} is a setting of 'lcr {OTHER_COMMAND[phase]}', "
                        "not of this command"
                    )
                continue
            values[a.name] = a.value
        return values


NO_SETS = ParsedSets()


def parse_sets(sets: Sequence[str]) -> ParsedSets:
    """Parse and check every ``--set`` text once: the shared answer step's (``answer.*``)
    first, then the methods' in order; a bad one is a one-line
    :class:`~lcr.errors.SettingError` (exit 2), even for a method the command does not use."""
    return _assigned([(*config.split_assignment(text), True) for text in sets])


def typed_sets(values: Mapping[str, Any]) -> ParsedSets:
    """Settings given as Python values (``{"mixpr.mode": "local", "bm25.top_k": 3}``),
    checked as values (type and range), never turned into text and parsed again."""
    split: list[tuple[str, str, Any, bool]] = []
    for key, value in values.items():
        if not isinstance(key, str):
            raise SettingError(f'settings keys are "method.key" strings, got {key!r}')
        target, dot, name = key.partition(".")
        if not dot or not target or not name:
            raise SettingError(f'settings keys are "method.key" strings, got {key!r}')
        split.append((target, name, value, False))
    return _assigned(split)


def mode_assignment(method: AnyMethod, mode: str) -> Assignment:
    """``--mode X`` for ``method``: its ``mode`` query setting, parsed here once."""
    declared = method.query_settings.by_name()
    if "mode" not in declared:
        raise UsageError(f"--mode applies to methods with a mode setting; {method.name} has none")
    value = declared["mode"].parse(mode, f"{method.name}.mode")
    return Assignment(method.name, "mode", "mode", value, QUERY)


def _assigned(split: Sequence[tuple[str, str, Any, bool]]) -> ParsedSets:
    """``(target, key, value, is_text)`` each checked once: text is parsed, a Python
    value is checked as it is."""
    if any((target, name) == (ANSWER_TARGET, "max_new_tokens") for target, name, *_ in split):
        raise SettingError("answer.max_new_tokens is set with the --max-new-tokens option")
    answers = [_answer_assignment(n, v, text) for t, n, v, text in split if t == ANSWER_TARGET]
    AnswerSettings.build({a.name: a.value for a in answers}, label=ANSWER_TARGET)
    known = set(method_names())
    resolved: dict[str, AnyMethod] = {}
    methods = [
        _method_assignment(t, n, v, text, known, resolved)
        for t, n, v, text in split
        if t != ANSWER_TARGET
    ]
    return ParsedSets((*answers, *methods), resolved)


def _read(declared: Setting, value: Any, is_text: bool, label: str) -> SettingValue:
    return declared.parse(value, label) if is_text else declared.check(value, label)


def _answer_assignment(name: str, value: Any, is_text: bool) -> Assignment:
    declared = AnswerSettings.by_name()
    if name not in declared:
        valid = ", ".join(sorted(declared)) or "none"
        raise SettingError(f"unknown setting {ANSWER_TARGET}.{name}; valid: {valid}")
    parsed = _read(declared[name], value, is_text, f"{ANSWER_TARGET}.{name}")
    return Assignment(ANSWER_TARGET, name, name, parsed, ANSWER_TARGET)


def _method_assignment(
    target: str,
    name: str,
    value: Any,
    is_text: bool,
    known: set[str],
    resolved: dict[str, AnyMethod],
) -> Assignment:
    if target not in known:
        raise SettingError(
            f"--set names unknown method {target!r}; known: {', '.join(sorted(known))}"
        )
    if target not in resolved:  # only the methods named are loaded (a plugin may fail)
        resolved[target] = get_method(target)
    method = resolved[target]
    for phase, cls in ((BUILD, method.build_settings), (QUERY, method.query_settings)):
        if name in cls.by_name():
            parsed = _read(cls.by_name()[name], value, is_text, f"{target}.{name}")
            return Assignment(target, name, name, parsed, phase)
    for cls in (method.build_settings, method.query_settings):
        cls.refuse_fixed(name, target)
    declared = {n for cls in (method.build_settings, method.query_settings) for n in cls.by_name()}
    raise SettingError(
        f"unknown setting {target}.{name}; valid: {', '.join(sorted(declared)) or 'none'}"
    )


def build_settings(method: AnyMethod, sets: ParsedSets) -> Settings:
    """``method``'s typed build settings: its defaults overridden by ``--set``."""
    values = sets.values(method, BUILD)
    return method.build_settings.build(values, label=method.name)


def query_settings(method: AnyMethod, sets: ParsedSets) -> Settings:
    """``method``'s typed query settings: its defaults overridden by ``--set``."""
    values = sets.values(method, QUERY)
    return method.query_settings.build(values, label=method.name)


def answer_settings(
    method: AnyMethod | None, sets: ParsedSets, max_new_tokens: int = 256
) -> AnswerSettings:
    """The :class:`~lcr.answer.shared.AnswerSettings` ``method`` answers with: lcr's defaults,
    the values measured best for it (``Method.answer_measured``), the values its paper
    fixes (``Method.answer_paper``), then ``--set answer.*`` (``method`` None: lcr's
    defaults, then ``--set``)."""
    values: dict[str, Any] = {}
    if method is not None:
        values.update(method.answer_measured)
        values.update(method.answer_paper)
    values.update(sets.answer_values())
    return AnswerSettings.build(values, label=ANSWER_TARGET).replace(max_new_tokens=max_new_tokens)


# ------------------------------------------------------------ needs and roles


def bind(models: Models, needs: Needs, embedder: str | None = None) -> Models:
    """The models one phase works with, each role fixed before any work: the scorer
    role to the model ``needs`` names for it (none: the LLM itself), the embedder to
    ``embedder`` (the one an index was built with) or the one asked for. The caller's
    models are not changed; what is loaded is shared."""
    scorer = (needs.scorer_model or None) if needs.scorer else models.spec.scorer
    return models.bound(embedder or models.spec.embedder, scorer)


def require(models: Models, needs: Needs, purpose: str) -> Models:
    """``models`` bound for ``needs`` too, checked before any work: the backends can do
    what ``needs`` asks of each role. A pure function: the result is a new copy whose
    frozen binding adds these needs to what it was already checked for (so one backend
    serves all the phases of a run); no role changes its model, the caller's models
    do not change."""
    roles = bind(models, needs)
    if needs.llm:
        roles = roles.requiring(Role.LLM, needs.llm, purpose)
    if needs.scorer:
        roles = roles.requiring(Role.SCORER, needs.scorer, purpose)
    return dataclasses.replace(models, binding=roles.binding)


# ------------------------------------------------------------------ builds


@dataclass(frozen=True)
class BuildPlan:
    """One method's build as a run does it: its typed settings and what it needs,
    checked against the backends (:func:`plan_build`)."""

    method: AnyMethod
    settings: Settings
    needs: Needs
    # the backend of each role for the whole run, chosen once (plan_builds)
    binding: Binding = NO_BINDING


def plan_build(method: AnyMethod, settings: Settings, models: Models) -> BuildPlan:
    """``method``'s build with ``settings``, its needs checked before any work: the
    backends can do them (with what ``models`` are already bound for), and a second
    model it names (a scorer) is there. The plan carries the binding that includes it."""
    needs = method.build_needs(settings)
    binding = require(models, needs, f"building {method.name}").binding
    if needs.scorer and needs.scorer_model:
        from lcr.models.loading import check_available

        try:
            check_available(needs.scorer_model, "llm", "scorer")
        except ModelError as exc:
            hint = f"; {needs.scorer_missing}" if needs.scorer_missing else ""
            raise ModelError(f"{method.name}'s scorer: {exc}{hint}") from None
    return BuildPlan(method, settings, needs, binding)


def expand_methods(requested: Sequence[str]) -> list[str]:
    """``all`` means every method; nothing means the methods that need no LLM."""
    from lcr.methods import default_build_methods

    if not requested:
        return default_build_methods()
    names: list[str] = []
    for name in requested:
        for n in method_names() if name == "all" else [name]:
            get_method(n)  # unknown names fail here, before any work
            if n not in names:
                names.append(n)
    return names


def plan_builds(
    methods: Sequence[str], models: Models, sets: ParsedSets = NO_SETS
) -> list[BuildPlan]:
    """Every method's build planned and checked before any work (``methods`` as
    given: :func:`expand_methods` first for ``all`` or nothing), and one binding of the
    models worked out for all of them: each plan carries the run's."""
    return plan_together([(m, build_settings(m, sets)) for m in map(get_method, methods)], models)


def plan_together(builds: Sequence[tuple[AnyMethod, Settings]], models: Models) -> list[BuildPlan]:
    """Each (method, settings) build planned (:func:`plan_build`) in turn, each checked
    with what the ones before it need, and the run's one binding given to every plan."""
    plans: list[BuildPlan] = []
    for method, settings in builds:
        plans.append(plan_build(method, settings, models))
        models = dataclasses.replace(models, binding=plans[-1].binding)
    return [dataclasses.replace(plan, binding=models.binding) for plan in plans]


# ------------------------------------------------------------------ queries


@dataclass(frozen=True)
class QueryPlan:
    """How to answer questions, resolved once where input enters: the method, its
    typed query settings (``--set``, ``--mode`` and ``-k`` written in once) and the
    answer step's settings. Questions come separately; everything below takes the
    plan as it is."""

    method: AnyMethod
    settings: Settings
    answer: AnswerSettings
    # -k (or --set of the setting -k overrides) was given: the user chose how much
    # evidence, so the answer step's deeper pool (answer.pool) does not apply
    k_given: bool = False

    @property
    def needs(self) -> Needs:
        """What retrieving with this plan needs (answering adds ``answer_needs``)."""
        return self.method.retrieve_needs(self.settings)

    @property
    def k(self) -> int | None:
        """The value of the setting ``-k`` overrides (None: ``-k`` does not apply)."""
        name = self.method.k_setting(self.settings)
        value = getattr(self.settings, name) if name else None
        return value if isinstance(value, int) else None

    def with_k(self, k: int) -> QueryPlan:
        """This plan retrieving ``k`` (the answer step's deeper pool)."""
        name = self.method.k_setting(self.settings)
        if not name:
            return self
        return dataclasses.replace(self, settings=self.settings.replace(**{name: k}))


def plan_query(
    method_name: str,
    sets: ParsedSets = NO_SETS,
    *,
    k: int | None = None,
    mode: str | None = None,
    max_new_tokens: int = 256,
) -> QueryPlan:
    """Check everything a query carries but its question before any index opens or
    model loads: the method, every ``--set`` (even one for another method), ``k``,
    ``--mode`` (the method's ``mode`` setting). ``-k`` is written into the query
    setting the method names for it, once. The plan carries the method object: the
    name is resolved once (here, or by a ``--set``)."""
    method = sets.method(method_name)
    if mode is not None:
        sets = sets.plus(mode_assignment(method, mode))
    if k is not None and k < 1:
        raise UsageError("-k must be at least 1")
    if max_new_tokens < 1:
        raise UsageError("--max-new-tokens must be at least 1")
    settings = query_settings(method, sets)
    return fixed_query(method, settings, answer_settings(method, sets, max_new_tokens), k, sets)


def fixed_query(
    method: AnyMethod, settings: Settings, answer: AnswerSettings, k: int | None, sets: ParsedSets
) -> QueryPlan:
    """The plan of ``method`` with ``settings``: ``-k`` written into the setting it
    overrides; given when ``-k`` or a ``--set`` of that setting was."""
    named = method.k_setting(settings)
    if k is not None and named:
        settings = settings.replace(**{named: k})
    given = k is not None or bool(named and named in sets.values(method, QUERY, strict=False))
    return QueryPlan(method, settings, answer, k_given=given)


def checked_question(question: str) -> str:
    """The question as the methods read it: stripped, never empty, and text (bytes
    that were not UTF-8 reach Python as lone surrogates, which no model or JSON takes)."""
    q = question.strip()
    if not q:
        raise UsageError("the question is empty")
    try:
        q.encode("utf-8")
    except UnicodeEncodeError as err:
        raise UsageError(
            f"the question is not UTF-8 text (an undecodable byte at character {err.start + 1})"
        ) from None
    return q
