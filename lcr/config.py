"""Method settings: declared once with the papers' defaults, overridden by ``--set``.

Each method declares its build-time and query-time settings as :class:`Setting`
lists. ``--set method.key=value`` is parsed here, against those declarations, so
an unknown key or a badly typed value is a usage error that lists the valid keys.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from lcr.errors import SettingError

SettingValue = int | float | str | bool | None


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
    # text that is checked where it is used (a model name): says what it may be
    free_text: str | None = None

    @property
    def value_type(self) -> type:
        if self.kind is not None:
            return self.kind
        if self.default is None:
            return str
        return type(self.default)

    def parse(self, raw: str, label: str | None = None) -> SettingValue:
        """Turn the text after ``=`` into this setting's type, or fail clearly.

        ``label`` is how the message names the setting (``mixpr.alpha_local``).
        """
        name = label or self.name
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
        values[name] = by_name[name].parse(raw, f"{method}.{name}")
    return values


def check_methods_named(
    assignments: Sequence[str],
    methods: Iterable[str],
    declared: Mapping[str, Sequence[Setting]] | None = None,
) -> None:
    """Refuse ``--set`` for a method that is not known at all (a typo).

    With ``declared`` (every setting of each method, both phases), a key no
    phase declares or a value out of its range is refused too, even for a
    method this command does not use: a bad value never waits to be noticed.
    """
    known = set(methods)
    for text in assignments:
        target, name, raw = split_assignment(text)
        if target not in known:
            raise SettingError(
                f"--set names unknown method {target!r}; known: {', '.join(sorted(known))}"
            )
        if declared is None or target not in declared:
            continue
        by_name = {s.name: s for s in declared[target]}
        if name not in by_name:
            valid = ", ".join(sorted(by_name)) or "none"
            raise SettingError(f"unknown setting {target}.{name}; valid: {valid}")
        by_name[name].parse(raw, f"{target}.{name}")
