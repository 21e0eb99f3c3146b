"""The HTML pieces of ``lcr eval report`` that read records directly: tables, the
questions the methods disagree on with their evidence, and where the results came
from (:mod:`lcr.eval.report` puts the page together)."""

from __future__ import annotations

import html
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lcr.eval.summary import fmt, label

_EVIDENCE_CHARS = 2000  # one evidence item's text on the page, at most


def question_type(record: dict[str, Any]) -> str | None:
    """The data set's question type (HotpotQA's bridge / comparison), else its task."""
    for key in ("type", "task"):
        value = record.get(key)
        if isinstance(value, str) and value:
            return value
    return None


@dataclass(frozen=True)
class Price:
    """US dollars per million tokens, in and out (``--price IN,OUT``)."""

    prompt: float
    completion: float

    def of(self, metrics: dict[str, Any]) -> float | None:
        tin, tout = metrics.get("prompt_tokens"), metrics.get("completion_tokens")
        if not isinstance(tin, int | float) or not isinstance(tout, int | float):
            return None
        return (tin * self.prompt + tout * self.completion) / 1e6


def metric_of(record: dict[str, Any], name: str, price: Price | None) -> float | None:
    metrics = record.get("metrics", {})
    value = price.of(metrics) if name == "usd" and price is not None else metrics.get(name)
    if isinstance(value, int | float) and not math.isnan(value):
        return float(value)
    return None


def html_table(headers: Sequence[str], rows: Sequence[Sequence[str]], caption: str = "") -> str:
    head = "".join(f"<th scope='col'>{html.escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>"
        + "".join(
            f"<th scope='row'>{html.escape(c)}</th>" if i == 0 else f"<td>{html.escape(c)}</td>"
            for i, c in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def marked(text: str, answers: Sequence[str]) -> str:
    """``text`` escaped, each gold answer in it marked."""
    wanted = [a for a in answers if a.strip()]
    if not wanted:
        return html.escape(text)
    pattern = re.compile(
        "|".join(re.escape(a) for a in sorted(wanted, key=len, reverse=True)), re.I
    )
    out, at = [], 0
    for m in pattern.finditer(text):
        out.append(html.escape(text[at : m.start()]))
        out.append(f"<mark>{html.escape(m.group(0))}</mark>")
        at = m.end()
    out.append(html.escape(text[at:]))
    return "".join(out)


def disagreements(
    records: Sequence[dict[str, Any]], methods: Sequence[str], quality: str
) -> list[tuple[str, float, dict[str, dict[str, Any]]]]:
    """Questions whose methods' scores differ, the widest spread first:
    (id, spread, method -> record)."""
    by_q: dict[str, dict[str, dict[str, Any]]] = {}
    for r in records:
        by_q.setdefault(str(r["id"]), {})[str(r["method"])] = r
    out = []
    for qid, per in by_q.items():
        scores = [
            v for m in methods if m in per if (v := metric_of(per[m], quality, None)) is not None
        ]
        if len(scores) >= 2 and max(scores) > min(scores):
            out.append((qid, max(scores) - min(scores), per))
    out.sort(key=lambda t: -t[1])
    return out


def evidence_html(record: dict[str, Any], answers: Sequence[str]) -> str:
    items = record.get("evidence") or []
    found = record.get("metrics", {}).get("answer_found")
    tag = {1.0: "answer found", 0.0: "answer not found"}.get(found, "")
    parts = []
    for it in items:
        text = str(it.get("text", ""))
        cut = len(text) > _EVIDENCE_CHARS
        where = html.escape(str(it.get("document") or it.get("doc", "")))
        body = marked(text[:_EVIDENCE_CHARS], answers) + (" …" if cut else "")
        parts.append(f"<li><span class='src'>{where}</span> {body}</li>")
    summary = f"evidence: {len(items)} item{'s' if len(items) != 1 else ''}"
    summary += f", {tag}" if tag else ""
    return f"<details><summary>{summary}</summary><ol>{''.join(parts)}</ol></details>"


def disagreement_section(
    records: Sequence[dict[str, Any]], methods: Sequence[str], quality: str, limit: int
) -> str:
    rows = disagreements(records, methods, quality)
    if not rows:
        return f"<p>The methods score every question alike on {html.escape(label(quality))}.</p>"
    head = "".join(f"<th scope='col'>{html.escape(m)}</th>" for m in methods)
    body = []
    for qid, spread, per in rows[:limit]:
        first = next(iter(per.values()))
        answers = [str(a) for a in first.get("answers") or []]
        kind = question_type(first) or ""
        cells = []
        for m in methods:
            r = per.get(m)
            if r is None:
                cells.append("<td>-</td>")
                continue
            v = metric_of(r, quality, None)
            score = "-" if v is None else fmt(v)
            answer = r.get("answer")
            said = "" if answer is None else f"<q>{html.escape(str(answer))}</q> "
            cells.append(f"<td><b>{score}</b> {said}{evidence_html(r, answers)}</td>")
        gold = html.escape(" | ".join(answers)) if answers else "-"
        body.append(
            f"<tr><th scope='row'>{html.escape(qid)}<br><small>{html.escape(kind)}</small></th>"
            f"<td>{html.escape(str(first.get('question', '')))}</td><td>{gold}</td>"
            f"<td>{fmt(spread)}</td>{''.join(cells)}</tr>"
        )
    shown = min(limit, len(rows))
    note = f"<p>{len(rows)} questions where the methods' {html.escape(label(quality))} differ"
    note += f"; the {shown} widest apart shown." if shown < len(rows) else "."
    note += " Open a cell's evidence to see what the answer step read (gold answers marked).</p>"
    return (
        note + "<table class='disagree'><thead><tr><th scope='col'>id</th>"
        "<th scope='col'>question</th><th scope='col'>gold</th><th scope='col'>spread</th>"
        f"{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    )


def provenance(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The distinct commands, versions and commits that made the records (``made_by``)."""
    seen: dict[str, dict[str, Any]] = {}
    for r in records:
        made = r.get("made_by")
        key = repr(sorted(made.items())) if isinstance(made, dict) else "unknown"
        entry = seen.setdefault(key, {"made_by": made, "records": 0, "methods": []})
        entry["records"] += 1
        if r["method"] not in entry["methods"]:
            entry["methods"].append(r["method"])
    return list(seen.values())


def provenance_html(records: Sequence[dict[str, Any]], sources: Sequence[str], made: str) -> str:
    rows = []
    for entry in provenance(records):
        m = entry["made_by"] if isinstance(entry["made_by"], dict) else {}
        rows.append(
            [
                m.get("command") or "not recorded (made before lcr kept it, or not from lcr's CLI)",
                str(m.get("commit") or "unknown"),
                str(m.get("version") or "unknown"),
                ", ".join(entry["methods"]),
                str(entry["records"]),
            ]
        )
    models = sorted({f"{k}: {v}" for r in records for k, v in (r.get("models") or {}).items()})
    lines = [
        html_table(["command that made the results", "commit", "lcr", "methods", "records"], rows),
        f"<p>Results: {html.escape(', '.join(sources)) or '-'}. Models: "
        f"{html.escape('; '.join(models)) or 'none recorded (the methods used no model)'}.</p>",
        f"<p>This page: <code>{html.escape(made)}</code></p>" if made else "",
    ]
    return "".join(lines)
