"""Method settings: declared once with the papers' defaults, overridden by ``--set``.

Each method declares its build-time and query-time settings as :class:`Setting`
lists. ``--set method.key=value`` is parsed here, against those declarations, so
an unknown key or a badly typed value is a usage error that lists the valid keys.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from lcr.errors import SettingError

SettingValue = int | float | str | bool | None


_TYPE_NAMES = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}


@dataclass(frozen=True)
class Setting:
    """One tunable knob. ``paper`` says the default is the published value."""

    name: str
    default: SettingValue
    help: str
    choices: tuple[str, ...] | None = None
    paper: bool = False
    kind: type | None = None  # the value type when ``default`` is None
    low: float | None = None  # numbers: the smallest valid value (inclusive)
    high: float | None = None  # numbers: the largest valid value (inclusive)

    @property
    def value_type(self) -> type:
        if self.kind is not None:
            return self.kind
        if self.default is None:
            return str
        return type(self.default)

    def parse(self, raw: str) -> SettingValue:
        """Turn the text after ``=`` into this setting's type, or fail clearly."""
        vtype = self.value_type
        if raw.lower() in {"none", "null"} and self.default is None:
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
                return self._in_range(int(raw), raw)
            if vtype is float:
                value = float(raw)
                if value != value or value in (float("inf"), float("-inf")):
                    raise SettingError(f"setting {self.name!r} takes a finite number, got {raw!r}")
                return self._in_range(value, raw)
        except ValueError:
            raise SettingError(
                f"setting {self.name!r} takes {_TYPE_NAMES.get(vtype, vtype.__name__)}, got {raw!r}"
            ) from None
        if self.choices is not None and raw not in self.choices:
            raise SettingError(
                f"setting {self.name!r} must be one of {', '.join(self.choices)}; got {raw!r}"
            )
        return raw

    def range_text(self) -> str:
        """``between 0 and 1``, ``at least 1``, ``at most 5``, or ``""``."""

        def num(x: float) -> str:
            return f"{x:g}"

        if self.low is not None and self.high is not None:
            return f"between {num(self.low)} and {num(self.high)}"
        if self.low is not None:
            return f"at least {num(self.low)}"
        if self.high is not None:
            return f"at most {num(self.high)}"
        return ""

    def _in_range(self, value: int | float, raw: str) -> int | float:
        too_low = self.low is not None and value < self.low
        too_high = self.high is not None and value > self.high
        if too_low or too_high:
            raise SettingError(f"setting {self.name!r} must be {self.range_text()}; got {raw!r}")
        return value


def defaults(settings: Iterable[Setting]) -> dict[str, SettingValue]:
    return {s.name: s.default for s in settings}


def split_assignment(text: str) -> tuple[str, str, str]:
    """``"mixpr.alpha=0.6"`` -> ``("mixpr", "alpha", "0.6")``."""
    key, sep, value = text.partition("=")
    method, dot, name = key.strip().partition(".")
    if not sep or not dot or not method or not name:
        raise SettingError(f"--set takes method.key=value, got {text!r}")
    return method, name, value.strip()


def resolve(
    method: str,
    declared: Sequence[Setting],
    assignments: Sequence[str],
    *,
    phase: str,
    other_phase: Sequence[Setting] = (),
) -> dict[str, SettingValue]:
    """Defaults of ``declared`` overridden by the ``--set`` lines that name ``method``.

    Assignments for other methods are ignored (one command line may carry settings
    for several methods). A key of ``method`` that is not declared is an error
    listing the valid keys; a key that belongs to the other phase says so.
    """
    by_name = {s.name: s for s in declared}
    values = defaults(declared)
    for text in assignments:
        target, name, raw = split_assignment(text)
        if target != method:
            continue
        if name not in by_name:
            if any(s.name == name for s in other_phase):
                other = "index" if phase == "query" else "ask/retrieve"
                raise SettingError(
                    f"{method}.{name} is a setting of 'lcr {other}', not of this command"
                )
            valid = ", ".join(sorted(by_name)) or "none"
            raise SettingError(f"unknown setting {method}.{name} for {phase} time; valid: {valid}")
        values[name] = by_name[name].parse(raw)
    return values


def check_methods_named(assignments: Sequence[str], methods: Iterable[str]) -> None:
    """Refuse ``--set`` for a method that is not known at all (a typo)."""
    known = set(methods)
    for text in assignments:
        target, _, _ = split_assignment(text)
        if target not in known:
            raise SettingError(
                f"--set names unknown method {target!r}; known: {', '.join(sorted(known))}"
            )
