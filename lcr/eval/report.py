"""``lcr eval report``: the results of a run as one HTML page that opens offline.

Pure: result records in, a page and its figures out (the CLI reads and writes).
The numbers come from :mod:`lcr.eval.summary` and :mod:`lcr.eval.stats`, the
same functions and the same formatting as ``lcr eval``'s printed tables, so the
page and the terminal never disagree.

The charts are drawn with matplotlib and inlined as SVG: a static figure needs
no script, so the page makes no request and opens in any browser, offline; the
same figure object is saved as PNG and SVG for a paper (``--figures``). Plotly
would embed about 3.5 MB of JavaScript for hover labels a table beside each
chart gives anyway. Every chart has its numbers in a table beside it (the text
alternative), and each drawn point carries an id (``pt-CHART-N``) so a test can
count what was drawn.
"""

from __future__ import annotations

import html
import io
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

from lcr.eval.report_parts import (
    Price,
    disagreement_section,
    html_table,
    metric_of,
    provenance_html,
    question_type,
)
from lcr.eval.stats import bootstrap_mean, paired_bootstrap
from lcr.eval.summary import (
    BUILD_METRICS,
    SPLIT_METRICS,
    build_columns,
    cell,
    fmt,
    label,
    split_cell,
    split_columns,
    summarize,
)

# The cost axes a quality-against-cost chart may use, and their labels.
COSTS: tuple[tuple[str, str], ...] = (
    ("prompt_tokens", "LLM tokens in per question"),
    ("evidence_tokens", "evidence tokens read per question"),
    ("wall_s", "seconds per question"),
    ("llm_calls", "LLM calls per question"),
    ("usd", "US dollars per question"),
)
COST_NAMES = tuple(name for name, _ in COSTS)
# Quality metrics in the order a default is chosen: the answer's F1 first.
QUALITY_ORDER = ("f1", "em", "rouge_l", "match_all", "recall", "char_recall", "doc_recall")
# The disagreement table shows at most this many questions by default.
DISAGREEMENTS = 50


@dataclass
class Chart:
    """One figure of the page: its file stem, caption, the figure, and its table."""

    name: str
    caption: str
    figure: Any  # matplotlib.figure.Figure
    table: str  # the chart's numbers as an HTML table
    points: int  # drawn points (or bars): what a test counts


@dataclass
class Report:
    html: str
    charts: list[Chart] = field(default_factory=list)


@dataclass(frozen=True)
class ReportOptions:
    quality: str | None = None  # None: f1, else the first of QUALITY_ORDER present
    costs: tuple[str, ...] = ()  # empty: every cost the results have (usd with a price)
    price: Price | None = None
    disagreements: int = DISAGREEMENTS
    title: str = "lcr eval report"
    # a line under the title: the data set and its licence's attribution, say
    note: str = ""


# --------------------------------------------------------------------------- the records


def methods_of(records: Sequence[dict[str, Any]]) -> list[str]:
    """Method names in the order they first appear."""
    return list(dict.fromkeys(str(r["method"]) for r in records))


def distinct_runs(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One record per (question, run), the last kept; a method run with two different
    settings (two run keys) becomes two rows, ``method [key]``, so neither hides the other."""
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    for r in records:
        latest[(str(r["id"]), str(r.get("run", "")))] = r
    keys: dict[str, list[str]] = {}
    for method, key in ((str(r["method"]), str(r.get("run", ""))) for r in latest.values()):
        if key not in keys.setdefault(method, []):
            keys[method].append(key)
    out = []
    for r in latest.values():
        if len(keys[str(r["method"])]) > 1:
            r = {**r, "method": f"{r['method']} [{str(r.get('run', ''))[:6]}]"}
        out.append(r)
    return out


def _by_id(
    records: Sequence[dict[str, Any]], method: str, metric: str, price: Price | None = None
) -> dict[str, float]:
    out = {}
    for r in records:
        if r["method"] == method:
            v = metric_of(r, metric, price)
            if v is not None:
                out[str(r["id"])] = v
    return out


def choose_quality(summary: dict[str, Any], wanted: str | None) -> str:
    names: list[str] = summary["metrics"]
    if wanted is not None:
        if wanted not in names:
            raise ValueError(
                f"the results have no {wanted!r} to chart; they have: {', '.join(names)}"
            )
        return wanted
    for name in QUALITY_ORDER:
        if name in names:
            return name
    raise ValueError("the results have no quality metric (F1, EM, recall) to chart")


def choose_costs(
    records: Sequence[dict[str, Any]], wanted: Sequence[str], price: Price | None
) -> list[str]:
    """The cost axes to draw: those asked for, else each the results spent (not all zero)."""
    if "usd" in wanted and price is None:
        raise ValueError("a cost in US dollars needs --price IN,OUT (dollars per 1M tokens)")
    names = list(wanted) or [c for c in COST_NAMES if c != "usd" or price is not None]
    out = []
    for name in names:
        values = [v for r in records if (v := metric_of(r, name, price)) is not None]
        if values and (wanted or any(values)):  # all zero: a retrieval-only run's LLM counters
            out.append(name)
    return out


# --------------------------------------------------------------------------- figures


def plain(text: object) -> str:
    """``text`` drawn as written: each ``$`` escaped, so matplotlib never reads a name
    such as ``$x^$`` as mathtext (a name that is not valid TeX would fail the page)."""
    return str(text).replace("$", r"\$")


def _figure(width: float = 6.4, height: float = 4.0) -> tuple[Any, Any]:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    return fig, fig.subplots()


def svg_of(figure: Any, name: str) -> str:
    """The figure as inline SVG: text stays text (selectable, read by screen readers),
    no date, ids salted by the chart's name so two charts never share one."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": name}):
        figure.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue()
    text = text[text.index("<svg") :]
    # matplotlib numbers its groups per figure (axes_1, ...): prefixed with the chart's
    # name, ids stay unique on a page of many charts (the drawn points' pt- ids are kept)
    text = re.sub(r'\bid="(?!pt-)([^"]+)"', rf'id="{name}-\1"', text)
    text = re.sub(r'href="#([^"]+)"', rf'href="#{name}-\1"', text)
    return text.replace("url(#", f"url(#{name}-")


def figure_bytes(chart: Chart, kind: str) -> bytes:
    """The chart as a file for a paper: ``svg`` (text drawn as paths, so it looks the
    same without the fonts) or ``png`` (200 dpi); no date, so a rerun writes the same."""
    import matplotlib

    buf = io.BytesIO()
    metadata = {"Date": None} if kind == "svg" else {"Software": None}
    with matplotlib.rc_context({"svg.fonttype": "path", "svg.hashsalt": chart.name}):
        chart.figure.savefig(buf, format=kind, dpi=200, metadata=metadata)
    return buf.getvalue()


def _errs(ivs: Sequence[dict[str, float]]) -> list[list[float]]:
    return [
        [max(0.0, iv["mean"] - iv["low"]) for iv in ivs],
        [max(0.0, iv["high"] - iv["mean"]) for iv in ivs],
    ]


def frontier(points: dict[str, tuple[float, float]]) -> list[str]:
    """The methods no other beats on both cost (lower) and quality (higher), cheapest first."""
    best = -math.inf
    out = []
    for method, (_cost, quality) in sorted(points.items(), key=lambda kv: (kv[1][0], -kv[1][1])):
        if quality > best:
            out.append(method)
            best = quality
    return out


def quality_cost_chart(
    records: Sequence[dict[str, Any]],
    methods: Sequence[str],
    summary: dict[str, Any],
    quality: str,
    cost: str,
    price: Price | None,
) -> Chart:
    """Each method a point at its mean cost and quality, 95% intervals on both axes;
    the dashed line joins the methods on the cost-quality frontier."""
    name = f"quality-vs-{cost}"
    fig, ax = _figure()
    rows, points = [], {}
    drawn = 0
    for i, method in enumerate(methods):
        q = summary["methods"].get(method, {}).get(quality)
        c = summary["methods"].get(method, {}).get(cost)
        if c is None or cost == "usd":
            vals = list(_by_id(records, method, cost, price).values())
            c = bootstrap_mean(vals).to_json() if vals else None
        if q is None or c is None:
            continue
        (line, _, _) = ax.errorbar(
            [c["mean"]],
            [q["mean"]],
            xerr=_errs([c]),
            yerr=_errs([q]),
            fmt="o",
            capsize=3,
            color=f"C{i % 10}",
            label=plain(method),
        )
        line.set_gid(f"pt-{name}-{drawn}")
        drawn += 1
        ax.annotate(  # alternate above and below, so two methods at one point stay legible
            plain(method),
            (c["mean"], q["mean"]),
            textcoords="offset points",
            xytext=(6, 6 if drawn % 2 else -12),
            fontsize=8,
        )
        points[method] = (c["mean"], q["mean"])
        rows.append([method, cell(c, " "), cell(q, " ")])
    best = frontier(points)
    if len(best) > 1:
        ax.plot([points[m][0] for m in best], [points[m][1] for m in best], "--", color="0.6", lw=1)
    for row in rows:
        row.append("yes" if row[0] in best else "no")
    lows = [points[m][0] for m in points]
    if lows and min(lows) > 0 and max(lows) / min(lows) > 50:
        ax.set_xscale("log")
    costs = dict(COSTS)
    ax.set_xlabel(costs[cost] + (" (lower is cheaper)" if cost != "usd" else ""))
    ax.set_ylabel(f"{label(quality)} (mean, 95% interval)")
    ax.grid(True, alpha=0.3)
    caption = f"{label(quality)} against {costs[cost]}: each method's mean with 95% bootstrap "
    caption += "intervals on both axes; dashed: the methods no other beats on both"
    if cost == "usd" and price is not None:
        caption += f" (at ${price.prompt:g} per 1M tokens in, ${price.completion:g} out)"
    headers = ["method", costs[cost], label(quality), "on the frontier"]
    return Chart(name, caption, fig, html_table(headers, rows), drawn)


@dataclass(frozen=True)
class Difference:
    a: str
    b: str
    metric: str
    test: dict[str, float]
    holm: float = float("nan")


def paired_differences(
    records: Sequence[dict[str, Any]],
    methods: Sequence[str],
    metrics: Sequence[str],
    summary: dict[str, Any],
    price: Price | None,
) -> list[Difference]:
    """Every pair of methods, paired bootstrap on the questions both answered, with
    Holm's step-down adjustment of the p-values within each metric (many pairs, many
    chances). Two methods' figures are the printed table's own (``summary['paired']``)."""
    printed = summary.get("paired") or {}
    out: list[Difference] = []
    for metric in metrics:
        tests: list[Difference] = []
        for a, b in combinations(methods, 2):
            if printed.get("a") == a and printed.get("b") == b and metric in printed["tests"]:
                tests.append(Difference(a, b, metric, printed["tests"][metric]))
                continue
            va = _by_id(records, a, metric, price)
            vb = _by_id(records, b, metric, price)
            shared = [i for i in va if i in vb]
            if shared:
                t = paired_bootstrap([va[i] for i in shared], [vb[i] for i in shared])
                tests.append(Difference(a, b, metric, t.to_json()))
        out.extend(_holm(tests))
    return out


def _holm(tests: list[Difference]) -> list[Difference]:
    order = sorted(range(len(tests)), key=lambda i: tests[i].test["p_value"])
    adjusted = [float("nan")] * len(tests)
    running = 0.0
    for rank, i in enumerate(order):
        p = tests[i].test["p_value"]
        if math.isnan(p):
            continue
        running = max(running, min(1.0, (len(tests) - rank) * p))
        adjusted[i] = running
    return [Difference(t.a, t.b, t.metric, t.test, adjusted[i]) for i, t in enumerate(tests)]


def differences_chart(diffs: Sequence[Difference], quality: str) -> Chart | None:
    shown = [d for d in diffs if d.metric == quality]
    if not shown:
        return None
    name = "paired-differences"
    fig, ax = _figure(6.4, max(1.6, 0.45 * len(shown) + 1.0))
    for i, d in enumerate(shown):
        (line, _, _) = ax.errorbar(
            [d.test["diff"]], [i], xerr=_errs([_as_interval(d.test)]), fmt="o", capsize=3,
            color="C0" if d.test["low"] > 0 or d.test["high"] < 0 else "0.45",
        )  # fmt: skip
        line.set_gid(f"pt-{name}-{i}")
    ax.axvline(0, color="0.3", lw=0.8)
    ax.set_yticks(range(len(shown)), [plain(f"{d.a} − {d.b}") for d in shown])
    ax.invert_yaxis()
    ax.set_xlabel(f"difference in {label(quality)} (paired, 95% interval)")
    ax.grid(True, axis="x", alpha=0.3)
    caption = (
        f"Paired differences in {label(quality)} on the questions both methods answered; "
        "blue: the interval excludes 0"
    )
    return Chart(name, caption, fig, _differences_table(shown), len(shown))


def _as_interval(test: dict[str, float]) -> dict[str, float]:
    return {"mean": test["diff"], "low": test["low"], "high": test["high"]}


def _differences_table(diffs: Sequence[Difference]) -> str:
    headers = ["methods (a − b)", "metric", "difference", "95% interval", "p", "Holm p", "n"]
    rows = [
        [
            f"{d.a} − {d.b}",
            label(d.metric),
            fmt(d.test["diff"]),
            f"[{fmt(d.test['low'])}, {fmt(d.test['high'])}]",
            f"{d.test['p_value']:.3f}",
            "-" if math.isnan(d.holm) else f"{d.holm:.3f}",
            str(d.test["n"]),
        ]
        for d in diffs
    ]
    return html_table(headers, rows)


def split_chart(summary: dict[str, Any], quality: str) -> Chart | None:
    """Accuracy when a gold answer was in the evidence read, and when it was not."""
    split = summary.get("split") or {}
    metric = quality if quality in dict(SPLIT_METRICS) else "f1"
    if not split:
        return None
    name = "answer-found-split"
    fig, ax = _figure(6.4, 3.6)
    drawn = 0
    methods = list(split)
    for j, (part, tag, marker) in enumerate(
        (("found", "answer in the evidence", "o"), ("not_found", "answer not in it", "s"))
    ):
        for i, method in enumerate(methods):
            iv = split[method][part].get(metric)
            if iv is None:
                continue
            (line, _, _) = ax.errorbar(
                [i + (j - 0.5) * 0.25], [iv["mean"]], yerr=_errs([iv]), fmt=marker, capsize=3,
                color=f"C{j}", label=tag if i == 0 or drawn == 0 else None,
            )  # fmt: skip
            line.set_gid(f"pt-{name}-{drawn}")
            drawn += 1
    if not drawn:
        return None
    ax.set_xticks(range(len(methods)), [plain(m) for m in methods])
    ax.set_ylabel(f"{label(metric)} (mean, 95% interval)")
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    cols = split_columns()
    rows = [
        [method, *(split_cell(row[part], m, " ") for part, m, _ in cols)]
        for method, row in split.items()
    ]
    caption = (
        f"{label(metric)} by whether a gold answer was in the evidence the answer step read: "
        "low on the left means found but not read (the answer step's failure), low on the "
        "right, not retrieved"
    )
    return Chart(name, caption, fig, html_table(["method", *(h for _, _, h in cols)], rows), drawn)


def type_breakdown(
    records: Sequence[dict[str, Any]], methods: Sequence[str], quality: str
) -> dict[str, dict[str, dict[str, float]]]:
    """Per question type, per method: the quality metric's mean and 95% interval."""
    types = sorted({t for r in records if (t := question_type(r)) is not None})
    out: dict[str, dict[str, dict[str, float]]] = {}
    for kind in types:
        row = {}
        for method in methods:
            vals = [
                v
                for r in records
                if r["method"] == method and question_type(r) == kind
                if (v := metric_of(r, quality, None)) is not None
            ]
            if vals:
                row[method] = bootstrap_mean(vals).to_json()
        out[kind] = row
    return out


def type_chart(
    breakdown: dict[str, dict[str, dict[str, float]]], methods: Sequence[str], quality: str
) -> Chart | None:
    if len(breakdown) < 2:  # one type is the table above again
        return None
    name = "by-question-type"
    fig, ax = _figure(6.4, 3.8)
    kinds = list(breakdown)
    drawn = 0
    width = 0.8 / max(1, len(methods))
    for i, method in enumerate(methods):
        xs, ivs = [], []
        for k, kind in enumerate(kinds):
            if method in breakdown[kind]:
                xs.append(k - 0.4 + width * (i + 0.5))
                ivs.append(breakdown[kind][method])
        for x, iv in zip(xs, ivs, strict=True):
            (line, _, _) = ax.errorbar(
                [x], [iv["mean"]], yerr=_errs([iv]), fmt="o", capsize=3, color=f"C{i % 10}",
                label=plain(method) if iv is ivs[0] else None,
            )  # fmt: skip
            line.set_gid(f"pt-{name}-{drawn}")
            drawn += 1
    ax.set_xticks(range(len(kinds)), [plain(k) for k in kinds])
    ax.set_ylabel(f"{label(quality)} (mean, 95% interval)")
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    headers = ["question type", *(f"{m} {label(quality)}" for m in methods)]
    rows = [
        [
            f"{kind} (n={max((iv['n'] for iv in row.values()), default=0)})",
            *(cell(row.get(m), " ") for m in methods),
        ]
        for kind, row in breakdown.items()
    ]
    caption = f"{label(quality)} by the data set's question type, per method"
    return Chart(name, caption, fig, html_table(headers, rows), drawn)


def build_chart(summary: dict[str, Any]) -> Chart | None:
    build = summary.get("build") or {}
    timed = [(m, row["build_s"]) for m, row in build.items() if "build_s" in row]
    if not timed:
        return None
    name = "build-cost"
    fig, ax = _figure(6.4, max(1.6, 0.45 * len(timed) + 1.0))
    for i, (_, iv) in enumerate(timed):
        (bar,) = ax.barh([i], [iv["mean"]], xerr=_errs([iv]), capsize=3, color="C0").patches
        bar.set_gid(f"pt-{name}-{i}")
    ax.set_yticks(range(len(timed)), [plain(m) for m, _ in timed])
    ax.invert_yaxis()
    ax.set_xlabel("seconds to build one index (mean, 95% interval)")
    ax.grid(True, axis="x", alpha=0.3)
    shown = build_columns(build)
    headers = ["method", "indexes", *(dict(BUILD_METRICS)[m] for m in shown)]
    rows = [
        [m, str(row["indexes"]), *(cell(row.get(c), " ") for c in shown)]
        for m, row in build.items()
    ]
    caption = "What building one index cost, per method (one build serves all its questions)"
    return Chart(name, caption, fig, html_table(headers, rows), len(timed))


# --------------------------------------------------------------------------- the page


def summary_table(summary: dict[str, Any]) -> str:
    """``lcr eval``'s printed table, cell for cell."""
    names: list[str] = summary["metrics"]
    headers = ["method", "n", *(label(m) for m in names)]
    rows = [
        [method, str(row.get("questions", 0)), *(cell(row.get(m), " ") for m in names)]
        for method, row in summary["methods"].items()
    ]
    return html_table(headers, rows, "mean [95% bootstrap interval], as lcr eval prints it")


_CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:1.5em auto;
max-width:1200px;padding:0 1em;color:#1a1a1a;background:#fff}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5em 0;font-size:13px}
th,td{border:1px solid #ddd;padding:3px 6px;text-align:right;vertical-align:top}
thead th{background:#f3f3f3}th[scope=row]{text-align:left}caption{text-align:left;color:#555}
.chart{display:flex;flex-wrap:wrap;gap:1em;align-items:flex-start;margin-bottom:1.5em}
figure{flex:0 1 640px}
.chart svg{max-width:100%;height:auto}figure{margin:0}figcaption{color:#444;max-width:42em}
.disagree td,.disagree th{text-align:left}.disagree td{max-width:28em}.disagree q{color:#333}
details ol{padding-left:1.2em;margin:.3em 0}details li{margin:.2em 0;white-space:pre-wrap}
.src{color:#777;font-size:11px}mark{background:#ffe58a}code{font-size:12px;word-break:break-all}
"""


def _chart_html(chart: Chart) -> str:
    svg = svg_of(chart.figure, chart.name).replace(
        "<svg ", f"<svg role='img' aria-labelledby='cap-{chart.name}' ", 1
    )
    return (
        f"<div class='chart' id='chart-{chart.name}' data-points='{chart.points}'>"
        f"<figure>{svg}<figcaption id='cap-{chart.name}'>{html.escape(chart.caption)}"
        f"</figcaption></figure><div class='numbers'>{chart.table}</div></div>"
    )


def build_report(
    records: Sequence[dict[str, Any]],
    builds: Sequence[dict[str, Any]] = (),
    options: ReportOptions = ReportOptions(),
    *,
    sources: Sequence[str] = (),
    made: str = "",
) -> Report:
    """The page and its charts for ``records`` (the results JSONL's lines) and ``builds``
    (``runner.build_costs``' records); ``made``: the command that makes the page."""
    if not records:
        raise ValueError("no results to report")
    records = distinct_runs(records)
    methods = methods_of(records)
    retrieval_only = all(r.get("retrieval_only") for r in records)
    summary = summarize(records, methods, retrieval_only=retrieval_only, builds=builds)
    quality = choose_quality(summary, options.quality)
    costs = choose_costs(records, options.costs, options.price)
    charts = [
        quality_cost_chart(records, methods, summary, quality, c, options.price) for c in costs
    ]
    diffs = paired_differences(records, methods, [quality, *costs[:1]], summary, options.price)
    breakdown = type_breakdown(records, methods, quality)
    extra = [
        differences_chart(diffs, quality),
        split_chart(summary, quality),
        type_chart(breakdown, methods, quality),
        build_chart(summary),
    ]
    charts += [c for c in extra if c is not None]
    by_name = {c.name: c for c in charts}

    def section(title: str, anchor: str, body: str) -> str:
        return f"<section id='{anchor}'><h2>{html.escape(title)}</h2>{body}</section>"

    parts = [
        f"<h1>{html.escape(options.title)}</h1>",
        f"<p class='note'>{html.escape(options.note)}</p>" if options.note else "",
        f"<p>{len(methods)} methods on {len({r['id'] for r in records})} questions"
        f"{' (retrieval only: no answers)' if retrieval_only else ''}; quality: "
        f"{html.escape(label(quality))}. Every interval is a 95% percentile bootstrap "
        "over questions (2,000 resamples, seed 0), as <code>lcr eval</code> prints.</p>",
        section(
            "Where the results come from", "provenance", provenance_html(records, sources, made)
        ),
        section(
            "Quality against cost",
            "quality-cost",
            "".join(_chart_html(by_name[f"quality-vs-{c}"]) for c in costs)
            or "<p>No cost was recorded.</p>",
        ),
        section("All metrics", "summary", summary_table(summary)),
    ]
    if len(methods) > 1:
        body = _chart_html(by_name["paired-differences"]) if "paired-differences" in by_name else ""
        others = [d for d in diffs if d.metric != quality]
        if others:
            body += "<p>And on cost:</p>" + _differences_table(others)
        note = (
            "<p>Paired bootstrap of a − b on the questions both methods answered; p is "
            "two-sided, Holm's p adjusts for the number of pairs.</p>"
        )
        parts.append(section("Paired differences", "paired", note + body))
    if "answer-found-split" in by_name:
        parts.append(
            section("Found but not read", "split", _chart_html(by_name["answer-found-split"]))
        )
    if breakdown:
        body = (
            _chart_html(by_name["by-question-type"])
            if "by-question-type" in by_name
            else type_table(breakdown, methods, quality)
        )
        parts.append(section("By question type", "types", body))
    parts.append(
        section(
            "Building the indexes",
            "build",
            _chart_html(by_name["build-cost"])
            if "build-cost" in by_name
            else "<p>No build costs: give the indexes' folder (--index-dir) to show them.</p>",
        )
    )
    if len(methods) > 1:
        parts.append(
            section(
                "Questions where the methods disagree",
                "disagree",
                disagreement_section(records, methods, quality, options.disagreements),
            )
        )
    return Report(_page(options.title, parts), charts)


def _page(title: str, parts: Sequence[str]) -> str:
    """The whole page: no script, and a policy that lets it request nothing."""
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; "
        "style-src 'unsafe-inline'; img-src data:\">"
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>"
        + "".join(parts)
        + "</body></html>\n"
    )


def type_table(
    breakdown: dict[str, dict[str, dict[str, float]]], methods: Sequence[str], quality: str
) -> str:
    headers = ["question type", *(f"{m} {label(quality)}" for m in methods)]
    rows = [[kind, *(cell(row.get(m), " ") for m in methods)] for kind, row in breakdown.items()]
    return html_table(headers, rows)
