"""Converters from the real sets' published files to the eval format (``lcr eval prepare``).

- SQuALITY: a story a line; 5 questions, 4 human reference answers each.
- QMSum: a meeting a line; the transcript becomes ``Speaker: words`` lines; gold
  evidence of a specific query is its ``relevant_text_span`` turn ranges (inclusive).
- ODSum Story: the dev stories are one shared corpus; each story's queries
  (matched by title) ask about it, the story itself being the document-level gold.
- BABILong (Kuratov et al., 2024): a bAbI question's story facts, in order, at
  random positions between the sentences of a long filler text, up to a target
  length; the supporting facts are the gold evidence.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lcr.errors import InputError, UsageError
from lcr.eval.dataset import Document, GoldEvidence, Question
from lcr.eval.generate import MAX_LENGTH
from lcr.text.tokens import count_tokens

KINDS = ("squality", "qmsum", "odsum", "babilong")
SQUALITY_LICENSE = "story: Project Gutenberg License; answers: CC BY 4.0 (SQuALITY)"


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """Each numbered line of the text file ``path``; a binary or non-UTF-8 file (the
    wrong file given) is one line saying so."""
    try:
        with path.open(encoding="utf-8") as fh:
            yield from enumerate(fh, 1)
    except UnicodeDecodeError:
        raise InputError(
            f"{path} is not UTF-8 text (a binary file?); give the set's file as its authors "
            "publish it (see lcr eval prepare --help)"
        ) from None


def _jsonl(path: Path) -> Iterator[tuple[int, Any]]:
    if not path.exists():
        raise InputError(f"no file at {path}")
    if path.is_dir():
        raise InputError(f"{path} is a folder; give the .jsonl file")
    for lineno, line in _lines(path):
        if line.strip():
            try:
                yield lineno, json.loads(line)
            except ValueError:
                raise InputError(f"{path}:{lineno}: not valid JSON") from None


def _bad(path: Path, lineno: int, what: str) -> InputError:
    return InputError(f"{path}:{lineno}: not a {what} record (see lcr eval prepare --help)")


def squality(path: Path) -> list[Question]:
    out: list[Question] = []
    for lineno, rec in _jsonl(path):
        try:
            meta = rec["metadata"]
            text = rec["document"]
            doc_id = f"squality-{meta['passage_id']}"
            title = text.strip().splitlines()[0].strip() if text.strip() else doc_id
            doc = Document(doc_id, title, text)
            for q in rec["questions"]:
                answers = [r["response_text"].strip() for r in q["responses"]]
                out.append(
                    Question(
                        f"{doc_id}-q{q['question_number']}",
                        q["question_text"].strip(),
                        answers,
                        [doc],
                        task="squality",
                        meta={"license": SQUALITY_LICENSE},
                    )
                )
        except (KeyError, TypeError, AttributeError):
            raise _bad(path, lineno, "SQuALITY") from None
    return out


def qmsum_transcript(turns: list[dict[str, str]]) -> tuple[str, list[tuple[int, int]]]:
    """``Speaker: content`` lines; returns the text and each turn's character span."""
    parts: list[str] = []
    spans: list[tuple[int, int]] = []
    pos = 0
    for t in turns:
        line = f"{t['speaker']}: {t['content']}"
        if parts:
            pos += 1
        spans.append((pos, pos + len(line)))
        parts.append(line)
        pos += len(line)
    return "\n".join(parts), spans


def qmsum(path: Path) -> list[Question]:
    out: list[Question] = []
    for lineno, rec in _jsonl(path):
        try:
            text, turn_spans = qmsum_transcript(rec["meeting_transcripts"])
            doc = Document(f"qmsum-{lineno}", f"QMSum meeting {lineno}", text)
            for i, q in enumerate(rec.get("general_query_list", [])):
                out.append(
                    Question(
                        f"{doc.id}-g{i}",
                        q["query"].strip(),
                        [q["answer"].strip()],
                        [doc],
                        task="qmsum",
                        meta={"type": "general"},
                    )
                )
            for i, q in enumerate(rec.get("specific_query_list", [])):
                ev = []
                for span in q.get("relevant_text_span", []):
                    first, last = int(span[0]), int(span[1])
                    if not 0 <= first <= last < len(turn_spans):
                        raise InputError(f"{path}:{lineno}: turn span {span} outside the meeting")
                    ev.append(GoldEvidence(doc.id, turn_spans[first][0], turn_spans[last][1]))
                out.append(
                    Question(
                        f"{doc.id}-s{i}",
                        q["query"].strip(),
                        [q["answer"].strip()],
                        [doc],
                        ev,
                        task="qmsum",
                        meta={"type": "specific"},
                    )
                )
        except (KeyError, TypeError, ValueError, IndexError):
            raise _bad(path, lineno, "QMSum") from None
    return out


def _odsum_paths(source: Path) -> tuple[Path, Path]:
    if source.is_dir():
        docs, queries = source / "story_docs_dev.jsonl", source / "story_queries.jsonl"
    elif source.name.startswith("story_queries"):
        docs, queries = source.with_name("story_docs_dev.jsonl"), source
    else:
        docs, queries = source, source.with_name("story_queries.jsonl")
    for p in (docs, queries):
        if not p.exists():
            raise InputError(f"ODSum needs {p.name} beside {source} (or give the folder)")
    return docs, queries


def _title_key(title: str) -> str:
    return " ".join(title.lower().split())


def odsum(source: Path) -> list[Question]:
    """Every dev story is in one corpus; queries about a dev story (by title) are kept."""
    docs_path, queries_path = _odsum_paths(source)
    docs: list[Document] = []
    by_title: dict[str, Document] = {}
    for lineno, rec in _jsonl(docs_path):
        try:
            parts = [p.strip() for p in rec["divided_document"]]
            text = "\n\n".join(re.sub(r"[ \t]*\n[ \t\n]*", "\n", p) for p in parts if p)
            doc = Document(f"odsum-{rec['metadata']['passage_id']}", rec["title"].strip(), text)
        except (KeyError, TypeError, AttributeError):
            raise _bad(docs_path, lineno, "ODSum story") from None
        docs.append(doc)
        by_title[_title_key(doc.title)] = doc
    out: list[Question] = []
    for lineno, group in _jsonl(queries_path):
        try:
            for q in group:
                about = by_title.get(_title_key(q["title"]))
                if about is None:
                    continue
                answers = [r["response_text"].strip() for r in q["responses"]]
                out.append(
                    Question(
                        f"{about.id}-q{q['question_number']}",
                        q["question_text"].strip(),
                        answers,
                        list(docs),
                        [GoldEvidence(about.id)],
                        task="odsum",
                    )
                )
        except (KeyError, TypeError, AttributeError):
            raise _bad(queries_path, lineno, "ODSum query") from None
    return out


# --------------------------------------------------------------------------- BABILong

_BABI_LINE = re.compile(r"^(\d+) (.*)$")


def babi_samples(path: Path) -> list[dict[str, Any]]:
    """Each question of a bAbI file with its story's facts so far and supporting ids."""
    if not path.exists():
        raise InputError(f"no file at {path}")
    samples: list[dict[str, Any]] = []
    facts: list[tuple[int, str]] = []
    if path.is_dir():
        raise InputError(f"{path} is a folder; give a bAbI qaN_*_test.txt file")
    for lineno, line in _lines(path):
        raw = line.rstrip("\r\n")
        if not raw.strip():
            continue
        m = _BABI_LINE.match(raw.strip("\n"))
        if not m:
            raise InputError(f"{path}:{lineno}: not a bAbI line")
        num, body = int(m.group(1)), m.group(2)
        if num == 1:
            facts = []
        if "\t" in body:
            fields = body.split("\t")
            if len(fields) < 3:
                raise InputError(f"{path}:{lineno}: a bAbI question needs answer and support")
            question, answer, support = fields[0].strip(), fields[1].strip(), fields[2].split()
            samples.append(
                {
                    "question": question,
                    "answer": answer,
                    "facts": list(facts),
                    "support": [int(s) for s in support],
                    "line": lineno,
                }
            )
        else:
            facts.append((num, body.strip()))
    if not samples:
        raise InputError(f"{path} holds no bAbI questions")
    return samples


_SENTENCE_END = re.compile(r"(?<=[.!?])[\"'”’)]*\s+")


def filler_sentences(text: str) -> list[str]:
    """The filler cut into sentences (whitespace inside a sentence collapsed)."""
    flat = " ".join(text.split())
    return [s.strip() for s in _SENTENCE_END.split(flat) if s.strip()]


def babilong(
    source: Path, filler: Path | None, length: int, seed: int, limit: int | None
) -> list[Question]:
    if filler is None:
        raise UsageError("babilong needs --filler FILE: the long text the facts are hidden in")
    m = re.search(r"qa(\d+)", source.name)
    task = f"babilong-qa{m.group(1)}" if m else "babilong"
    samples = babi_samples(source)
    from lcr.text.loading import load_document

    sentences = filler_sentences(load_document(filler).text)
    if len(sentences) < 2:
        raise InputError(f"filler {filler} has too few sentences")
    sent_tokens = [count_tokens(s) for s in sentences]
    rng = random.Random(f"babilong:{task}:{seed}:{length}")
    order = list(range(len(samples)))
    rng.shuffle(order)
    if limit is not None:
        order = order[:limit]
    out: list[Question] = []
    for j, si in enumerate(order):
        s = samples[si]
        facts: list[tuple[int, str]] = s["facts"]
        fact_tokens = sum(count_tokens(f) for _, f in facts)
        budget = length - fact_tokens
        if budget <= 0:
            raise UsageError(f"--length {length} is shorter than the bAbI facts ({fact_tokens})")
        # Filler: consecutive sentences from a random start, wrapping round, up to the budget.
        start = rng.randrange(len(sentences))
        chosen: list[str] = []
        used = 0
        i = start
        while used < budget:
            t = sent_tokens[i % len(sentences)]
            if used + t > budget and chosen:
                break
            chosen.append(sentences[i % len(sentences)])
            used += t
            i += 1
        positions = sorted(rng.randrange(len(chosen) + 1) for _ in facts)
        pieces: list[str] = []
        gold: list[tuple[int, int]] = []
        support = set(s["support"])
        pos = 0
        fi = 0
        for k in range(len(chosen) + 1):
            while fi < len(facts) and positions[fi] == k:
                num, fact = facts[fi]
                if pieces:
                    pos += 1
                if num in support:
                    gold.append((pos, pos + len(fact)))
                pieces.append(fact)
                pos += len(fact)
                fi += 1
            if k < len(chosen):
                if pieces:
                    pos += 1
                pieces.append(chosen[k])
                pos += len(chosen[k])
        text = " ".join(pieces)
        doc = Document(f"{task}-{j}", f"{task} sample {j}", text)
        ev = [GoldEvidence(doc.id, a, b) for a, b in gold]
        meta = {"seed": seed, "length": length, "babi_line": s["line"]}
        out.append(Question(f"{task}-{j}", s["question"], [s["answer"]], [doc], ev, task, meta))
    return out


def prepare(
    kind: str,
    source: str | Path,
    *,
    seed: int = 0,
    limit: int | None = None,
    filler: str | Path | None = None,
    length: int = 32 * 1024,
) -> list[Question]:
    """Questions of the real set ``kind`` read from ``source`` (see :data:`KINDS`)."""
    src = Path(source)
    if limit is not None and limit < 1:
        raise UsageError("--limit must be at least 1")
    if not 0 < length <= MAX_LENGTH:
        raise UsageError(f"--length is between 1 and {MAX_LENGTH // 1024**2}m tokens")
    if kind == "babilong":
        return babilong(src, Path(filler) if filler else None, length, seed, limit)
    if filler is not None:
        raise UsageError("--filler applies to babilong only")
    readers = {"squality": squality, "qmsum": qmsum, "odsum": odsum}
    if kind not in readers:
        raise UsageError(f"unknown set {kind!r}; known: {', '.join(KINDS)}")
    if kind != "odsum" and not src.exists():
        raise InputError(f"no file at {src}")
    questions = readers[kind](src)
    return questions[:limit] if limit is not None else questions
