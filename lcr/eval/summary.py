"""The summary of a run: one row per method, means with 95% bootstrap intervals.

With exactly two methods, a paired bootstrap test of their difference on the
questions both answered is added for every metric they share. Answer accuracy
is also split by whether a gold answer was in the evidence the answer step read
(``answer_found``): low accuracy with the answer in the evidence is "found but
not read", the answer step's failure rather than retrieval's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from lcr.eval.stats import bootstrap_mean, paired_bootstrap

# Display order and labels; metrics absent from every record are not shown.
METRICS: tuple[tuple[str, str], ...] = (
    ("em", "EM"),
    ("f1", "F1"),
    ("rouge_l", "ROUGE-L"),
    ("match_all", "match all"),
    ("match_part", "match part"),
    ("recall", "recall"),
    ("char_recall", "char recall"),
    ("doc_recall", "doc recall"),
    ("answer_in_evidence", "answer in ev."),
    ("answer_found", "answer found"),
    ("evidence_tokens", "ev. tokens"),
    ("prompt_tokens", "tokens in"),
    ("completion_tokens", "tokens out"),
    ("llm_calls", "LLM calls"),
    ("wall_s", "wall s"),
    ("flops", "TFLOPs"),
)
_COST = {"prompt_tokens", "completion_tokens", "llm_calls", "flops"}
# What building one index costs (per index, not per question: questions share indexes).
BUILD_METRICS: tuple[tuple[str, str], ...] = (
    ("build_s", "build s"),
    ("llm_calls", "LLM calls"),
    ("prompt_tokens", "tokens in"),
    ("completion_tokens", "tokens out"),
)


def _values(records: Sequence[dict[str, Any]], method: str, metric: str) -> dict[str, float]:
    out = {}
    for r in records:
        if r["method"] != method:
            continue
        v = r.get("metrics", {}).get(metric)
        if isinstance(v, int | float) and not math.isnan(v):
            out[r["id"]] = float(v)
    return out


def shown_metrics(records: Sequence[dict[str, Any]], retrieval_only: bool) -> list[str]:
    present = {k for r in records for k in r.get("metrics", {})}
    names = [m for m, _ in METRICS if m in present]
    if retrieval_only:  # no LLM answered: its counters would be all zero
        names = [
            m for m in names if m not in _COST or any(r.get("metrics", {}).get(m) for r in records)
        ]
    return names


# Accuracy split by answer_found: the metrics, and the two halves' names.
SPLIT_METRICS: tuple[tuple[str, str], ...] = (("em", "EM"), ("f1", "F1"), ("match_all", "match"))
SPLIT_PARTS: tuple[tuple[str, float], ...] = (("found", 1.0), ("not_found", 0.0))


def summarize_split(
    records: Sequence[dict[str, Any]], methods: Sequence[str]
) -> dict[str, dict[str, Any]]:
    """Per method: EM / F1 / RULER match of the questions whose evidence held a gold
    answer (``found``) and of the others (``not_found``), each with its count.

    Only methods with both answers and ``answer_found`` get a split (a
    retrieval-only run has no answers to split).
    """
    out: dict[str, dict[str, Any]] = {}
    for m in methods:
        found = _values(records, m, "answer_found")
        scored = {metric: _values(records, m, metric) for metric, _ in SPLIT_METRICS}
        if not found or not any(scored.values()):
            continue
        entry: dict[str, Any] = {}
        for part, flag in SPLIT_PARTS:
            ids = [i for i, v in found.items() if v == flag]
            half: dict[str, Any] = {"questions": len(ids)}
            for metric, vals in scored.items():
                got = [vals[i] for i in ids if i in vals]
                if got:
                    half[metric] = bootstrap_mean(got).to_json()
            entry[part] = half
        out[m] = entry
    return out


def summarize_builds(
    builds: Sequence[dict[str, Any]], methods: Sequence[str]
) -> dict[str, dict[str, Any]]:
    """Per method: how many indexes, and the mean build cost of one, with its interval."""
    out: dict[str, dict[str, Any]] = {}
    for m in methods:
        rows = [b for b in builds if b["method"] == m]
        if not rows:
            continue
        entry: dict[str, Any] = {"indexes": len(rows)}
        for metric, _ in BUILD_METRICS:
            vals = [float(b[metric]) for b in rows if isinstance(b.get(metric), int | float)]
            if vals:
                entry[metric] = bootstrap_mean(vals).to_json()
        out[m] = entry
    return out


def summarize(
    records: Sequence[dict[str, Any]],
    methods: Sequence[str],
    *,
    retrieval_only: bool = False,
    builds: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """JSON-ready summary: per method and metric, mean/low/high/n; paired test for two;
    and the cost of building one index, per method (``build``)."""
    names = shown_metrics(records, retrieval_only)
    table: dict[str, dict[str, Any]] = {}
    for m in methods:
        row: dict[str, Any] = {}
        for metric in names:
            vals = _values(records, m, metric)
            if vals:
                scale = 1e-12 if metric == "flops" else 1.0
                iv = bootstrap_mean([v * scale for v in vals.values()])
                row[metric] = iv.to_json()
        row["questions"] = len({r["id"] for r in records if r["method"] == m})
        table[m] = row
    out: dict[str, Any] = {
        "metrics": names,
        "methods": table,
        "build": summarize_builds(builds, methods),
    }
    split = summarize_split(records, methods)
    if split:
        out["split"] = split
    if len(methods) == 2:
        a, b = methods
        paired: dict[str, Any] = {}
        for metric in names:
            va, vb = _values(records, a, metric), _values(records, b, metric)
            shared = [i for i in va if i in vb]
            if shared:
                scale = 1e-12 if metric == "flops" else 1.0
                test = paired_bootstrap(
                    [va[i] * scale for i in shared], [vb[i] * scale for i in shared]
                )
                paired[metric] = test.to_json()
        out["paired"] = {"a": a, "b": b, "tests": paired}
    return out


def fmt(x: float) -> str:
    if math.isnan(x):
        return "-"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    if abs(x) >= 100:
        return f"{x:.0f}"
    if abs(x) >= 10:
        return f"{x:.1f}"
    return f"{x:.3f}" if abs(x) < 1 else f"{x:.2f}"


def cell(iv: dict[str, float] | None, sep: str) -> str:
    """``mean{sep}[low, high]``, or ``-`` for a metric a method has no value for."""
    if iv is None:
        return "-"
    return f"{fmt(iv['mean'])}{sep}[{fmt(iv['low'])}, {fmt(iv['high'])}]"


def label(metric: str) -> str:
    return dict(METRICS).get(metric, metric)


def render(summary: dict[str, Any], console: Any) -> None:
    """Print the summary as rich tables on ``console``."""
    from rich.table import Table

    names: list[str] = summary["metrics"]
    table = Table(title="lcr eval: mean [95% bootstrap interval]", show_lines=False)
    table.add_column("method", style="bold")
    table.add_column("n", justify="right")
    for metric in names:
        table.add_column(label(metric), justify="right")
    for method, row in summary["methods"].items():
        cells = [method, str(row.get("questions", 0))]
        cells.extend(cell(row.get(metric), "\n") for metric in names)
        table.add_row(*cells)
    console.print(table)
    paired = summary.get("paired")
    if paired and paired["tests"]:
        t2 = Table(title=f"paired bootstrap: {paired['a']} - {paired['b']}")
        t2.add_column("metric")
        t2.add_column("difference", justify="right")
        t2.add_column("95% interval", justify="right")
        t2.add_column("p", justify="right")
        t2.add_column("n", justify="right")
        for metric, t in paired["tests"].items():
            t2.add_row(
                label(metric),
                fmt(t["diff"]),
                f"[{fmt(t['low'])}, {fmt(t['high'])}]",
                f"{t['p_value']:.3f}",
                str(t["n"]),
            )
        console.print(t2)
    split = summary.get("split")
    if split:
        console.print(_split_table(split))
    build = summary.get("build")
    if build:
        t3 = Table(
            title="index builds: mean per index",
            caption="[95% bootstrap interval]",
            title_justify="left",
            caption_justify="left",
        )
        t3.add_column("method", style="bold")
        t3.add_column("indexes", justify="right")
        shown = build_columns(build)
        for metric in shown:
            t3.add_column(dict(BUILD_METRICS)[metric], justify="right")
        for method, row in build.items():
            t3.add_row(method, str(row["indexes"]), *(cell(row.get(m), "\n") for m in shown))
        console.print(t3)


def split_columns() -> list[tuple[str, str, str]]:
    """(part, metric, header) of the split table: n and each metric, found then not."""
    cols = []
    for part, _ in SPLIT_PARTS:
        tag = "in ev." if part == "found" else "not in ev."
        cols.append((part, "questions", f"n {tag}"))
        cols.extend((part, metric, f"{name} {tag}") for metric, name in SPLIT_METRICS)
    return cols


def split_cell(half: dict[str, Any], metric: str, sep: str) -> str:
    if metric == "questions":
        return str(half.get("questions", 0))
    return cell(half.get(metric), sep)


def _split_table(split: dict[str, dict[str, Any]]) -> Any:
    from rich.table import Table

    table = Table(
        title="found but not read: accuracy by whether a gold answer is in the evidence read",
        caption="mean [95% bootstrap interval]",
        title_justify="left",
        caption_justify="left",
    )
    table.add_column("method", style="bold")
    cols = split_columns()
    for _, _, header in cols:
        table.add_column(header, justify="right")
    for method, row in split.items():
        table.add_row(method, *(split_cell(row[part], metric, "\n") for part, metric, _ in cols))
    return table


def build_columns(build: dict[str, dict[str, Any]]) -> list[str]:
    """Build time always; LLM columns only when some method built with an LLM."""
    return [m for m, _ in BUILD_METRICS if any(m in row for row in build.values())]


def markdown_builds(summary: dict[str, Any]) -> str:
    """The build costs as a Markdown table (empty when nothing was recorded)."""
    build = summary.get("build") or {}
    if not build:
        return ""
    shown = build_columns(build)
    lines = [
        "| method | indexes | " + " | ".join(dict(BUILD_METRICS)[m] for m in shown) + " |",
        "|---|---:|" + "---:|" * len(shown),
    ]
    for method, row in build.items():
        cells = " | ".join(cell(row.get(m), " ") for m in shown)
        lines.append(f"| {method} | {row['indexes']} | {cells} |")
    return "\n".join(lines) + "\n"


def markdown(summary: dict[str, Any]) -> str:
    """The summary as a Markdown table (for README results)."""
    names: list[str] = summary["metrics"]
    head = "| method | n | " + " | ".join(label(m) for m in names) + " |"
    sep = "|---|---:|" + "---:|" * len(names)
    lines = [head, sep]
    for method, row in summary["methods"].items():
        cells = " | ".join(cell(row.get(m), " ") for m in names)
        lines.append(f"| {method} | {row.get('questions', 0)} | {cells} |")
    return "\n".join(lines) + "\n"
