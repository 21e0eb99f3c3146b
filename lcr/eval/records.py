"""Results files read back for ``lcr eval report``: every line checked for the fields
the report reads, and a line that is not UTF-8, not JSON, or has a field of the wrong
type is skipped with one line naming it (its line number and the field), instead of
failing somewhere inside the report."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

_NUMBER = (int, float)


def _is_text(value: Any) -> bool:
    return isinstance(value, str)


def _is_key(value: Any) -> bool:  # an id or a run key: a string or a whole number
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _is_dict(value: Any) -> bool:
    return isinstance(value, dict)


def _metrics_ok(value: Any) -> bool:
    """Every metric a finite number (or null or NaN: not measured)."""
    return isinstance(value, dict) and all(
        v is None or (isinstance(v, _NUMBER) and not math.isinf(v)) for v in value.values()
    )


def _texts_ok(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str | int | float) for v in value)


def _evidence_ok(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(it, dict)
        and isinstance(it.get("text", ""), str)
        and isinstance(it.get("document", ""), str | type(None))
        for it in value
    )


def _models_ok(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(v, str | type(None)) for v in value.values())


def _settings_ok(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("build", {}), dict | type(None))


# the fields the report reads: (field, required, check, what it must be)
FIELDS: tuple[tuple[str, bool, Callable[[Any], bool], str], ...] = (
    ("id", True, _is_key, "a string or a whole number"),
    ("run", True, _is_key, "a string"),
    ("method", True, _is_text, "a string"),
    ("metrics", True, _metrics_ok, "an object of numbers"),
    ("question", False, _is_text, "a string"),
    ("answers", False, _texts_ok, "a list of strings"),
    ("answer", False, lambda v: v is None or isinstance(v, str), "a string or null"),
    ("evidence", False, lambda v: v is None or _evidence_ok(v), "a list of objects"),
    ("models", False, lambda v: v is None or _models_ok(v), "an object of names"),
    ("made_by", False, lambda v: v is None or _is_dict(v), "an object"),
    ("settings", False, _settings_ok, "an object"),
    ("index", False, lambda v: v is None or isinstance(v, str), "a string"),
    ("retrieval_only", False, lambda v: isinstance(v, bool | type(None)), "true or false"),
    ("type", False, lambda v: v is None or isinstance(v, str), "a string"),
    ("task", False, lambda v: v is None or isinstance(v, str), "a string"),
)


def record_problem(record: Any) -> str | None:
    """Why ``record`` cannot be reported (the first field missing or of the wrong
    type), or None when it can."""
    if not isinstance(record, dict):
        return "not a JSON object"
    for name, required, ok, what in FIELDS:
        if name not in record:
            if required:
                return f"no field {name!r}"
            continue
        if not ok(record[name]):
            return f"field {name!r} is not {what}"
    return None


def read_report_records(path: Path, warn: Callable[[str], None]) -> list[dict[str, Any]]:
    """The records of a results file, in order; each line that cannot be reported is
    skipped with one ``warn`` line: ``results.jsonl line 7: skipped: field 'metrics' is
    not an object of numbers``."""
    out: list[dict[str, Any]] = []
    with path.open("rb") as fh:
        for number, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                warn(f"{path} line {number}: skipped: byte {exc.start + 1} is not UTF-8")
                continue
            try:
                record = json.loads(line)
            except ValueError:
                warn(f"{path} line {number}: skipped: not a JSON object")
                continue
            problem = record_problem(record)
            if problem is not None:
                warn(f"{path} line {number}: skipped: {problem}")
                continue
            out.append(record)
    return out
