"""Typed settings: each method declares its settings once, as a frozen dataclass.

A settings class subclasses :class:`Settings`; each field is declared with
:func:`setting`, which records its default (the paper's value where the paper's
text gives one, marked apart from a value taken from the authors' reference code),
a one-line help text and what values are valid. Everything else is
derived from that one declaration: ``--set method.key=value`` parsing and range
checks, ``lcr methods --settings``, and the values an index records (read back as
they were written; a key added since reads as its default).

Methods read attributes (``ctx.settings.top_k``), never string keys.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, ClassVar, Literal, Self, TypeVar

from lcr.errors import SettingError

SettingValue = int | float | str | bool | None
T = TypeVar("T")

_META = "lcr.setting"

# The most new tokens a setting may ask of one LLM reply: past any window lcr runs
# in, so a typo (an extra 0 or three) is refused instead of making a call that runs
# until the model's window ends.
MOST_NEW_TOKENS = 32_768


class Source(enum.Enum):
    """Where a setting's default comes from; the value is how listings name it."""

    PAPER = "paper"  # the value the paper's text gives
    REFERENCE_CODE = "reference code"  # the authors' released code (the paper names none)
    LIBRARY = "library"  # a library's documented default, kept by lcr (bm25s's k1)
    NEAREST = "nearest the paper's"  # the paper's value is not at hand: the nearest that is
    ARBITRARY = "arbitrary"  # no value is better than another (a seed): nothing to measure
    MEASURED = "lcr, measured"  # lcr's choice, made on a measurement written up on a page
    LCR = "lcr"  # lcr's choice, not measured


@dataclass(frozen=True)
class Origin:
    """A default's origin as one value: its :class:`Source` and what that source names
    (the page of a measurement, the library, the paper's value lcr stands in for)."""

    source: Source = Source.LCR
    names: str = ""

    def __post_init__(self) -> None:
        named = self.source in (Source.MEASURED, Source.LIBRARY, Source.NEAREST)
        if named != bool(self.names):
            raise ValueError(f"an origin {self.source.value!r} names {'one' if named else 'none'}")

    def __str__(self) -> str:
        return self.source.value

    @classmethod
    def declared(
        cls,
        *,
        paper: bool = False,
        reference_code: bool = False,
        measured: str = "",
        library: str = "",
        nearest: str = "",
        arbitrary: bool = False,
    ) -> Origin:
        """The origin :func:`setting`'s keywords name: at most one of them."""
        given = [
            (Source.PAPER, "") if paper else None,
            (Source.REFERENCE_CODE, "") if reference_code else None,
            (Source.MEASURED, measured) if measured else None,
            (Source.LIBRARY, library) if library else None,
            (Source.NEAREST, nearest) if nearest else None,
            (Source.ARBITRARY, "") if arbitrary else None,
        ]
        chosen = [g for g in given if g is not None]
        if len(chosen) > 1:
            raise ValueError(
                "a default comes from the paper, its reference code, a library, the nearest "
                "to the paper's, lcr's measure, or is arbitrary"
            )
        return cls(*chosen[0]) if chosen else cls()


@dataclass(frozen=True)
class Setting:
    """How one setting is shown and checked: derived from its :func:`setting` field.

    :attr:`source` says where the default comes from (:class:`Origin`), so a reader can
    tell a published claim from an implementation detail, a library's default, or lcr's
    own choice and the page of the measurement that made it.
    """

    name: str
    default: SettingValue
    help: str
    choices: tuple[str, ...] | None = None
    source: Origin = Origin()
    kind: type | None = None  # the value's type; None: the default's (str for None)
    low: float | None = None  # numbers: the smallest valid value (inclusive)
    high: float | None = None  # numbers: the largest valid value (inclusive)
    # text that is checked where it is used (a model name): says what it may be
    free_text: str | None = None
    optional: bool = False  # None is a valid value ("none" on the command line)

    @property
    def origin(self) -> str:
        """Where the default comes from, as listings name it (``paper``, ``reference
        code``, ``library``, ``nearest the paper's``, ``arbitrary``, ``lcr, measured``,
        ``lcr``)."""
        return str(self.source)

    # what the origin names, read as the listings and the JSON show them
    @property
    def paper(self) -> bool:
        return self.source.source is Source.PAPER

    @property
    def reference_code(self) -> bool:
        return self.source.source is Source.REFERENCE_CODE

    @property
    def arbitrary(self) -> bool:
        return self.source.source is Source.ARBITRARY

    @property
    def measured_in(self) -> str:
        """The page and anchor of the measurement that chose lcr's default, or ``""``."""
        return self.source.names if self.source.source is Source.MEASURED else ""

    @property
    def library(self) -> str:
        return self.source.names if self.source.source is Source.LIBRARY else ""

    @property
    def nearest(self) -> str:
        """The paper's value lcr's default stands in for, or ``""``."""
        return self.source.names if self.source.source is Source.NEAREST else ""

    @property
    def value_type(self) -> type:
        if self.kind is not None:
            return self.kind
        return str if self.default is None else type(self.default)

    def parse(self, raw: str, label: str | None = None) -> SettingValue:
        """Turn the text after ``=`` into this setting's type, or fail clearly.

        ``label`` is how the message names the setting (``mixpr.alpha_local``).
        """
        name = label or self.name
        vtype = self.value_type
        if self.optional and raw.lower() in {"none", "null"}:
            return None
        try:
            if vtype is bool:
                low = raw.lower()
                if low in {"1", "true", "yes", "on"}:
                    return True
                if low in {"0", "false", "no", "off"}:
                    return False
                raise ValueError(raw)
            if vtype is int:
                return self._in_range(int(raw), raw, name)
            if vtype is float:
                value = float(raw)
                if value != value or value in (float("inf"), float("-inf")):
                    raise ValueError(raw)
                return self._in_range(value, raw, name)
        except ValueError:
            what = {bool: "true or false", int: "a whole number", float: "a finite number"}.get(
                vtype, f"a {vtype.__name__}"
            )
            limits = f" {self.range_text()}" if self.range_text() else ""
            raise SettingError(f"{name} takes {what}{limits}, got {raw!r}") from None
        if self.choices is not None and raw not in self.choices:
            raise SettingError(f"{name} must be one of {', '.join(self.choices)}; got {raw!r}")
        return raw

    def check(self, value: Any, label: str | None = None) -> SettingValue:
        """A value given in Python (a keyword argument, a stored index): type and range."""
        name = label or self.name
        vtype = self.value_type
        if value is None and self.optional:
            return None
        if isinstance(value, str) and vtype is not str:
            return self.parse(value, name)
        if vtype is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, vtype) or (vtype is int and isinstance(value, bool)):
            raise SettingError(f"{name} takes a {vtype.__name__}, got {value!r}")
        if isinstance(value, str):  # a choice, checked as the value it is
            if self.choices is not None and value not in self.choices:
                raise SettingError(
                    f"{name} must be one of {', '.join(self.choices)}; got {value!r}"
                )
            return value
        if isinstance(value, int | float) and not isinstance(value, bool):
            return self._in_range(value, str(value), name)
        return bool(value)

    def recorded(self, value: Any) -> SettingValue:
        """A value an index recorded, of this setting's type (an int for a float too) and
        one of its choices; its range is not checked, so what an older lcr accepted
        still reads."""
        vtype = self.value_type
        if value is None and (self.optional or self.default is None):
            return None
        if vtype is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        wrong_bool = vtype is int and isinstance(value, bool)
        unknown = self.choices is not None and value not in self.choices
        fits = isinstance(value, vtype) and not (wrong_bool or unknown)
        if isinstance(value, int | float | str | bool) and fits:
            return value
        wanted = f"one of {', '.join(self.choices)}" if self.choices else f"a {vtype.__name__}"
        raise SettingError(f"{self.name} is recorded as {json.dumps(value)}, not {wanted}")

    def declares_valid_values(self) -> bool:
        """Whether a bad value can be told from a good one (a range, choices, or a bool)."""
        if self.value_type is bool:
            return True
        if self.value_type in (int, float):
            return self.low is not None or self.high is not None
        return self.choices is not None or self.free_text is not None

    def valid_text(self) -> str:
        """``one of a|b`` or the range, for listings."""
        if self.choices is not None:
            return "one of " + "|".join(self.choices)
        return self.free_text or self.range_text()

    def range_text(self) -> str:
        """``between 0 and 1``, ``at least 1``, ``at most 5``, or ``""``."""

        def num(x: float) -> str:
            return str(int(x)) if float(x).is_integer() else f"{x:g}"

        if self.low is not None and self.high is not None:
            return f"between {num(self.low)} and {num(self.high)}"
        if self.low is not None:
            return f"at least {num(self.low)}"
        if self.high is not None:
            return f"at most {num(self.high)}"
        return ""

    def _in_range(self, value: int | float, raw: str, name: str) -> int | float:
        too_low = self.low is not None and value < self.low
        too_high = self.high is not None and value > self.high
        if too_low or too_high:
            raise SettingError(f"{name} must be {self.range_text()}; got {raw!r}")
        return value


def setting(
    default: T,
    help: str,
    *,
    choices: Sequence[str] | None = None,
    paper: bool = False,
    reference_code: bool = False,
    measured: str = "",
    library: str = "",
    nearest: str = "",
    arbitrary: bool = False,
    low: float | None = None,
    high: float | None = None,
    free_text: str | None = None,
) -> T:
    """Declare one field of a :class:`Settings` class. The field's annotation is its type
    (``int``, ``float``, ``str``, ``bool``, a ``Literal`` of choices, or ``X | None``).

    ``measured``: for lcr's own default, the page and anchor where the measurement
    that chose it is written up (``docs/methods/mixpr.md#linking``).

    ``library``: the default is that library's own documented default (``"bm25s"``
    for BM25's k1 and b), kept by lcr rather than chosen.

    ``nearest``: the paper's value (``"Qwen2.5-0.5B"``), which lcr cannot offer; the
    default is the nearest it can (the same family and size).

    ``arbitrary``: no value is better than another (a seed): nothing to measure."""
    if "\n" in help:
        raise ValueError("a setting's help is one line; figures belong in the docs")
    origin = Origin.declared(
        paper=paper,
        reference_code=reference_code,
        measured=measured,
        library=library,
        nearest=nearest,
        arbitrary=arbitrary,
    )
    meta = {
        "help": help,
        "choices": tuple(choices) if choices is not None else None,
        "origin": origin,
        "low": low,
        "high": high,
        "free_text": free_text,
    }
    return dataclasses.field(default=default, metadata={_META: meta})


@dataclass(frozen=True)
class Fixed:
    """A setting lcr 0.2.0 retired into a constant: the value it is fixed at (a build an
    older lcr recorded at it still opens) and why, in a few words, for ``--set``'s refusal."""

    value: SettingValue
    why: str


def retired(**settings: Fixed) -> Mapping[str, Fixed]:
    """A settings class's ``fixed``: each retired setting's name and its :class:`Fixed`."""
    return types.MappingProxyType(settings)


@dataclass(frozen=True)
class Settings:
    """Base of a method's settings for one phase (build or query): a frozen dataclass.

    Subclasses declare fields with :func:`setting`; fields declared without it are
    not settings (``--set`` cannot reach them). ``fixed`` names the settings retired
    into constants, each with its :class:`Fixed` value.
    """

    fixed: ClassVar[Mapping[str, Fixed]] = {}

    @classmethod
    def refuse_fixed(cls, name: str, label: str) -> None:
        """A one-line :class:`SettingError` when ``name`` is a setting retired into a constant."""
        found = cls.fixed.get(name)
        if found is not None:
            raise SettingError(
                f"{label}.{name} is no longer a setting: lcr 0.2.0 fixed it at "
                f"{value_text(found.value)} ({found.why})"
            )

    @classmethod
    def declared(cls) -> tuple[Setting, ...]:
        return _declared(cls)  # type: ignore[arg-type]  # a class is hashable

    @classmethod
    def by_name(cls) -> dict[str, Setting]:
        return {s.name: s for s in cls.declared()}

    @classmethod
    def build(cls, values: Mapping[str, Any] | None = None, *, label: str = "setting") -> Self:
        """Defaults overridden by ``values``, each one checked; ``label`` names them in
        errors (the method: ``bm25`` -> ``bm25.top_k``)."""
        by_name = cls.by_name()
        checked: dict[str, Any] = {}
        for name, value in (values or {}).items():
            if name not in by_name:
                cls.refuse_fixed(name, label)
                valid = ", ".join(sorted(by_name)) or "none"
                raise SettingError(f"unknown setting {label}.{name}; valid: {valid}")
            checked[name] = by_name[name].check(value, f"{label}.{name}")
        return cls(**checked)

    @classmethod
    def from_stored(cls, stored: Mapping[str, Any]) -> Self:
        """The settings an index recorded, read as they were written: keys no longer
        declared ignored, keys added since filled with their default. Never raises on
        values an older lcr accepted; a value of the wrong type (the manifest was
        edited) is a :class:`SettingError` naming it. (A build lcr can no longer read
        truthfully is refused before this: :mod:`lcr.pipeline.integrity`.)"""
        by_name = cls.by_name()
        values: dict[str, Any] = {}
        for name, value in stored.items():
            if name in by_name:
                values[name] = by_name[name].recorded(value)
        return cls(**values)

    def to_json(self) -> dict[str, SettingValue]:
        """Every setting, and every one retired into a constant at its value: what an
        index records and a run key reads, so a build tells what it was made with."""
        values = {s.name: getattr(self, s.name) for s in self.declared()}
        return {**values, **{name: f.value for name, f in self.fixed.items()}}

    def replace(self, **changes: Any) -> Self:
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class NoSettings(Settings):
    """For a phase with nothing to set."""


@cache
def _declared(cls: type[Settings]) -> tuple[Setting, ...]:
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        meta = f.metadata.get(_META)
        if meta is None:
            continue
        kind, optional, literal = _value_type(hints[f.name], f.name, cls)
        choices = meta["choices"] if meta["choices"] is not None else literal
        out.append(
            Setting(
                name=f.name,
                default=f.default,  # type: ignore[arg-type]
                help=meta["help"],
                choices=choices,
                source=meta["origin"],
                kind=kind,
                low=meta["low"],
                high=meta["high"],
                free_text=meta["free_text"],
                optional=optional,
            )
        )
    return tuple(out)


def _value_type(hint: Any, name: str, cls: type) -> tuple[type, bool, tuple[str, ...] | None]:
    """``(type, None allowed, Literal choices)`` from a field's annotation."""
    optional = False
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        optional = len(args) < len(typing.get_args(hint))
        if len(args) != 1:
            raise TypeError(f"{cls.__name__}.{name}: one value type per setting")
        hint = args[0]
        origin = typing.get_origin(hint)
    if origin is Literal:
        values = typing.get_args(hint)
        if not all(isinstance(v, str) for v in values):
            raise TypeError(f"{cls.__name__}.{name}: Literal settings take strings")
        return str, optional, tuple(values)
    if hint not in (bool, int, float, str):
        raise TypeError(f"{cls.__name__}.{name}: unsupported setting type {hint!r}")
    return hint, optional, None


# --------------------------------------------------------------- --set lines
def value_text(value: Any) -> str:
    """A value as ``--set`` spells it (``none``, ``true``/``false``, the number or text),
    so what Python code and recorded builds hold goes through the same parser."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def split_assignment(text: str) -> tuple[str, str, str]:
    """``"mixpr.alpha=0.6"`` -> ``("mixpr", "alpha", "0.6")``."""
    key, sep, value = text.partition("=")
    method, dot, name = key.strip().partition(".")
    if not sep or not dot or not method or not name:
        raise SettingError(f"--set takes method.key=value, got {text!r}")
    return method, name, value.strip()
