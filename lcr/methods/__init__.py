"""The registry of methods: lcr's own, and those other packages declare.

A package adds a method without editing lcr by declaring an entry point in the
group ``lcr.methods`` (the name is the method's name, the value its class)::

    [project.entry-points."lcr.methods"]
    overlap = "lcr_overlap:Overlap"

Entry points are read the first time the registry is needed, and a method's
module is imported only when that method is used, so ``lcr --help`` stays fast.
The registry read then is frozen (:class:`Registry`): every thread (``lcr serve``'s
workers) reads that one snapshot; a caller that needs another (a test, a check of a
class no package declares) uses its own for a block (:func:`using`, :func:`registered`).
A plugin never replaces one of lcr's methods or another plugin's: the second of
two with one name is left out, and :func:`problems` says so. A plugin that
cannot be imported, or whose class does not declare what the contract asks
(:func:`declaration_problems`: a summary, a paper, settings each declared with
``setting()``), fails with a one-line :class:`~lcr.errors.MethodPluginError`
naming it and what is missing, only where it is used.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from importlib import import_module
from importlib.metadata import entry_points
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from lcr.errors import MethodPluginError, UsageError

if TYPE_CHECKING:
    from lcr.methods.base import Method

ENTRY_POINT_GROUP = "lcr.methods"

BUILT_IN: dict[str, str] = {
    "bm25": "lcr.methods.baselines:BM25",
    "tfidf": "lcr.methods.baselines:TfIdf",
    "dense": "lcr.methods.baselines:Dense",
    "hybrid": "lcr.methods.baselines:Hybrid",
    "full": "lcr.methods.baselines:FullText",
    "mixpr": "lcr.methods.mixpr:MixPR",
    "raptor": "lcr.methods.raptor:Raptor",
    "pecan": "lcr.methods.pecan:Pecan",
    "graphreader": "lcr.methods.graphreader:GraphReader",
    "lightpal": "lcr.methods.lightpal:LightPAL",
}


@dataclass(frozen=True)
class Registration:
    """Where a method's class is (``module:Class``) and who declared it."""

    name: str
    target: str
    origin: str = "lcr"  # or "the plugin DIST"
    cls: type[Method] | None = None  # a class registered in-process (:func:`registered`)

    @property
    def plugin(self) -> bool:
        return self.origin != "lcr"


@dataclass(frozen=True)
class Registry:
    """The methods lcr knows, read once and never changed: a registry with another
    method in it is another registry (:meth:`plus`), used for a block (:func:`using`)."""

    methods: Mapping[str, Registration]
    problems: tuple[str, ...] = ()  # one line per plugin method left out

    @classmethod
    def builtin(cls) -> Registry:
        """lcr's own methods alone: what lcr's own documents describe."""
        return cls(MappingProxyType({n: Registration(n, t) for n, t in BUILT_IN.items()}))

    @classmethod
    def installed(cls) -> Registry:
        """lcr's own methods, then those installed packages declare (entry points)."""
        found = dict(cls.builtin().methods)
        left_out = []
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            dist = ep.dist.name if ep.dist is not None else "an unnamed distribution"
            origin = f"the plugin {dist}"
            if ep.name in found:
                left_out.append(
                    f"method {ep.name!r} of {origin} ({ep.value}) left out: "
                    f"{found[ep.name].origin} already has a method of that name"
                )
                continue
            found[ep.name] = Registration(ep.name, ep.value, origin)
        return cls(MappingProxyType(found), tuple(left_out))

    def plus(self, method: type[Method]) -> Registry:
        """This registry and ``method``, under its ``name`` (a name taken is refused)."""
        name = method.name
        if name in self.methods:
            raise UsageError(
                f"a method named {name!r} is registered already ({self.methods[name].origin})"
            )
        target = f"{method.__module__}:{method.__qualname__}"
        added = Registration(name, target, "the caller", method)
        return Registry(MappingProxyType({**self.methods, name: added}), self.problems)


_loaded: Registry | None = None  # the installed registry, read once: never changed after
_loading = threading.Lock()
# a registry a block uses instead (:func:`using`): this thread's (context's) alone
_in_use: ContextVar[Registry | None] = ContextVar("lcr_methods_in_use", default=None)


def current() -> Registry:
    """The registry in use: the block's own (:func:`using`), else the installed one,
    read once (entry points loaded on first use; every thread reads that snapshot)."""
    chosen = _in_use.get()
    if chosen is not None:
        return chosen
    global _loaded
    if _loaded is None:
        with _loading:
            if _loaded is None:
                _loaded = Registry.installed()
    return _loaded


@contextmanager
def using(registry: Registry) -> Iterator[Registry]:
    """``registry`` instead of the installed one for the block, in this thread (and
    context) only: how a test or a check gets a registry of its own."""
    token = _in_use.set(registry)
    try:
        yield registry
    finally:
        _in_use.reset(token)


def _registrations() -> Mapping[str, Registration]:
    return current().methods


def problems() -> list[str]:
    """One line per plugin method left out of the registry (its name was taken)."""
    return list(current().problems)


def method_names() -> list[str]:
    """Every registered method: lcr's own first, then the plugins' (not imported)."""
    return list(_registrations())


def registration(name: str) -> Registration:
    found = _registrations().get(name)
    if found is None:
        raise UsageError(f"unknown method {name!r}; known: {', '.join(_registrations())}")
    return found


def get_method(name: str) -> Method:
    """An instance of the method called ``name``, its module imported on first use."""
    from lcr.methods.base import Method

    reg = registration(name)
    if reg.cls is not None:
        return reg.cls()
    if not reg.plugin:
        module, _, attr = reg.target.partition(":")
        builtin: Method = getattr(import_module(module), attr)()
        return builtin
    try:
        module, _, attr = reg.target.partition(":")
        found: Any = import_module(module)
        for part in attr.split(".") if attr else ():
            found = getattr(found, part)
    except Exception as exc:  # any failure of someone else's code: one line, named
        raise _plugin_error(name, reg, exc) from None
    if not (isinstance(found, type) and issubclass(found, Method)):
        raise MethodPluginError(
            f"method {name!r} of {reg.origin}: {reg.target} is not an lcr.methods.base.Method"
        )
    missing = declaration_problems(found)
    if missing:
        raise MethodPluginError(
            f"method {name!r} of {reg.origin} ({reg.target}) is refused: {'; '.join(missing)}"
        )
    if found.name != name:
        raise MethodPluginError(
            f"method {name!r} of {reg.origin}: its class says name = "
            f"{found.name!r}; the entry point's name must be the same"
        )
    try:
        method: Method = found()
    except Exception as exc:
        raise _plugin_error(name, reg, exc) from None
    return method


def _plugin_error(name: str, reg: Registration, exc: Exception) -> MethodPluginError:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return MethodPluginError(
        f"method {name!r} of {reg.origin} cannot be loaded from {reg.target}: "
        f"{type(exc).__name__}: {text}"
    )


# what a method class must declare itself: the attribute, and what it is for
_DECLARED = {
    "name": "its name, as --method takes it",
    "summary": "one line: what it does",
    "paper": 'its citation, or "" for a baseline',
}


def declaration_problems(cls: type[Method]) -> list[str]:
    """What ``cls`` fails to declare that lcr reads from every method (``lcr methods``,
    ``--help``, the man page, ``--set``), one short phrase each; empty when all is
    there. The registry refuses a plugin with any; ``lcr.testing``'s
    ``check_declarations`` fails on them."""
    from lcr.config import Settings
    from lcr.methods.base import KOption

    out = []
    for attr, what in _DECLARED.items():
        value = getattr(cls, attr, None)
        if not isinstance(value, str) or (attr != "paper" and not value.strip()):
            out.append(f"no {attr} ({what})")
        elif "\n" in value:
            out.append(f"its {attr} is more than one line")
    name = getattr(cls, "name", "")
    if isinstance(name, str) and name and not name.replace("_", "").replace("-", "").isalnum():
        out.append(f"its name {name!r} is not letters, digits, - and _ (--set METHOD.KEY reads it)")
    if not isinstance(getattr(cls, "manual", ""), str):
        out.append("its manual is not a path or URL")
    if not isinstance(getattr(cls, "k_option", None), KOption):
        out.append("its k_option is not a KOption (what -k counts)")
    for phase in ("build_settings", "query_settings"):
        settings = getattr(cls, phase, None)
        if not (
            isinstance(settings, type)
            and issubclass(settings, Settings)
            and dataclasses.is_dataclass(settings)
        ):
            out.append(f"its {phase} is not a Settings dataclass")
            continue
        try:
            declared = {s.name for s in settings.declared()}
        except (TypeError, ValueError) as exc:  # a setting's type lcr cannot read
            out.append(f"its {phase}: {' '.join(str(exc).split())}")
            continue
        for f in dataclasses.fields(settings):
            if f.name not in declared:
                out.append(
                    f"{settings.__name__}.{f.name} is declared without setting(), so --set "
                    "cannot reach it"
                )
    return out


def loadable_methods(on_problem: Callable[[str], None]) -> Iterator[tuple[str, Method]]:
    """Every method that loads, in registry order; each plugin left out or failing to
    load is reported through ``on_problem`` (one line) and skipped."""
    for line in problems():
        on_problem(line)
    for name in method_names():
        try:
            yield name, get_method(name)
        except MethodPluginError as exc:
            on_problem(str(exc))


def default_build_methods() -> list[str]:
    """The methods a plain ``lcr index`` builds: lcr's own that say so."""
    return [n for n in BUILT_IN if get_method(n).built_by_default]


@contextmanager
def only_builtin() -> Iterator[Registry]:
    """lcr's own methods alone for the block: what lcr's own documents (the man page)
    describe, whatever plugins are installed."""
    with using(Registry.builtin()) as registry:
        yield registry


@contextmanager
def registered(method: type[Method]) -> Iterator[str]:
    """The registry in use and ``method``, under its ``name``, for the block: how
    :func:`lcr.testing.check_method` runs a class no package has declared yet."""
    with using(current().plus(method)):
        yield method.name
