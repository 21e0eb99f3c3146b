"""The eval dataset format: one JSON question a line, documents inline or by path.

One line::

    {"id": "q1", "question": "Who hid the key?", "answers": ["the cook"],
     "documents": [{"id": "book", "title": "The Book", "text": "..."}],
     "evidence": [{"doc": "book", "start": 120, "end": 164},
                  {"doc": "book", "text": "the cook hid the key"},
                  {"doc": "book"}],
     "task": "squality", "meta": {...}}

- ``answers``: one or more gold answers (alternative references; RULER tasks
  with several values expect all of them, see ``string_match_all``).
- ``documents``: each either inline ``{id, title, text}``, a reference
  ``{"id": ...}`` to a document given inline on an earlier line (so a long
  story is written once for its many questions), or a path string (relative to
  the data file's folder).
- ``evidence`` (optional): character spans ``start``/``end`` into that
  document's own text, exact strings ``text`` to locate in it, or ``{doc}``
  alone: the whole document is the gold (open-domain, document-level recall).

Questions about the same documents (same ids and texts) share one index.
Writing is canonical (fixed key order, no ASCII escaping, ``\\n`` line ends),
so the same generator seed gives the same file byte for byte.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from lcr.errors import InputError, UsageError


@dataclass(frozen=True)
class Document:
    id: str
    title: str
    text: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class GoldEvidence:
    """A gold span (``start``/``end``), string (``text``) or whole document (neither)."""

    doc: str | None
    start: int | None = None
    end: int | None = None
    text: str | None = None

    @property
    def whole_document(self) -> bool:
        return self.start is None and self.text is None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.doc is not None:
            out["doc"] = self.doc
        if self.start is not None:
            out["start"] = self.start
            out["end"] = self.end
        if self.text is not None:
            out["text"] = self.text
        return out


@dataclass
class Question:
    id: str
    question: str
    answers: list[str]
    documents: list[Document]
    evidence: list[GoldEvidence] = field(default_factory=list)
    task: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    # the data set's own question type (HotpotQA's "type": bridge or comparison)
    kind: str = ""

    def doc(self, doc_id: str) -> Document:
        for d in self.documents:
            if d.id == doc_id:
                return d
        raise InputError(f"question {self.id}: evidence names unknown document {doc_id!r}")

    def corpus_key(self) -> str:
        """Identity of the document set: questions with the same key share an index."""
        h = hashlib.sha256()
        for d in self.documents:
            h.update(d.id.encode("utf-8") + b"\0" + d.sha256.encode("ascii") + b"\0")
        return h.hexdigest()[:16]


# --------------------------------------------------------------------------- writing


def dumps_line(obj: dict[str, Any]) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(", ", ": ")) + "\n"


def question_record(q: Question, written: set[str]) -> dict[str, Any]:
    """The JSON object of ``q``; documents already in ``written`` become references."""
    docs: list[dict[str, Any]] = []
    for d in q.documents:
        if d.id in written:
            docs.append({"id": d.id})
        else:
            docs.append({"id": d.id, "title": d.title, "text": d.text})
            written.add(d.id)
    rec: dict[str, Any] = {
        "id": q.id,
        "question": q.question,
        "answers": list(q.answers),
        "documents": docs,
    }
    if q.evidence:
        rec["evidence"] = [e.to_json() for e in q.evidence]
    if q.task:
        rec["task"] = q.task
    if q.meta:
        rec["meta"] = q.meta
    if q.kind:
        rec["type"] = q.kind
    return rec


def write_questions(questions: Iterable[Question], out: TextIO) -> int:
    written: set[str] = set()
    n = 0
    for q in questions:
        out.write(dumps_line(question_record(q, written)))
        n += 1
    return n


def save(questions: Iterable[Question], path: str | Path) -> int:
    """Write ``questions`` to ``path`` (``-`` for stdout); returns the count."""
    if str(path) == "-":
        import sys

        return write_questions(questions, sys.stdout)
    p = Path(path)
    if p.parent and not p.parent.exists():
        raise InputError(f"folder {p.parent} does not exist")
    if p.is_dir():
        raise UsageError(f"{p} is a folder: name the file to write the questions to")
    tmp = p.with_name(p.name + ".tmp")
    try:
        with tmp.open("w", encoding="utf-8", newline="\n") as fh:
            n = write_questions(questions, fh)
        tmp.replace(p)
    except BaseException:  # out of memory, a full disk, Ctrl-C: no half file left behind
        tmp.unlink(missing_ok=True)
        raise
    return n


# --------------------------------------------------------------------------- reading


def _fail(where: str, message: str) -> InputError:
    return InputError(f"{where}: {message}")


def _str(obj: dict[str, Any], key: str, where: str, *, required: bool = True) -> str:
    value = obj.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise _fail(where, f"'{key}' must be a string")
    return value


def document_path(entry: str, where: str, base: Path, root: Path | None = None) -> Path:
    """The file a document path names: relative to the data file's folder ``base``, and
    inside ``root`` (``base`` unless the user gave ``--documents-root``) once symbolic
    links are followed. A data file is often someone else's, and its documents are
    copied into the results and sent to a server: ``"../../../../etc/passwd"`` is refused
    before anything is read."""
    allowed = base if root is None else root
    if "\0" in entry:
        raise _fail(where, f"document path {entry!r} holds a NUL byte")
    path = Path(entry)
    if not path.is_absolute():
        path = base / path
    inside = os.path.realpath(allowed)
    if os.path.commonpath([os.path.realpath(path), inside]) != inside:
        hint = "the data file's folder" if root is None else "--documents-root"
        raise _fail(
            where,
            f"document {entry!r} resolves outside {allowed} ({hint}); to read documents from "
            "another folder, name it with --documents-root DIR",
        )
    return path


def _document(
    entry: Any, where: str, known: dict[str, Document], base: Path, root: Path | None = None
) -> Document:
    if isinstance(entry, str):
        path = document_path(entry, where, base, root)
        key = f"path:{path}"
        if key not in known:
            from lcr.text.loading import load_document

            loaded = load_document(path)
            known[key] = Document(entry, Path(entry).name, loaded.text)
        return known[key]
    if not isinstance(entry, dict):
        raise _fail(where, "each document must be an object {id, title, text} or a path")
    doc_id = entry.get("id")
    if not isinstance(doc_id, str) or not doc_id:
        raise _fail(where, "a document needs a string 'id'")
    if "text" not in entry:
        if doc_id not in known:
            raise _fail(where, f"document {doc_id!r} is referenced before it is given inline")
        return known[doc_id]
    text = _str(entry, "text", where)
    if not text.strip():
        raise _fail(where, f"document {doc_id!r} is empty")
    doc = Document(doc_id, _str(entry, "title", where, required=False), text)
    prev = known.get(doc_id)
    if prev is not None and prev.text != text:
        raise _fail(where, f"document {doc_id!r} is given twice with different texts")
    known[doc_id] = doc
    return doc


def _evidence(entry: Any, where: str, docs: list[Document]) -> GoldEvidence:
    if not isinstance(entry, dict):
        raise _fail(where, "each evidence must be an object {doc, start, end} or {doc, text}")
    doc_id = entry.get("doc")
    if doc_id is None and len(docs) == 1:
        doc_id = docs[0].id
    if doc_id is not None and not isinstance(doc_id, str):
        raise _fail(where, "evidence 'doc' must be a document id")
    by_id = {d.id: d for d in docs}
    if doc_id is not None and doc_id not in by_id:
        raise _fail(where, f"evidence names unknown document {doc_id!r}")
    if "start" in entry or "end" in entry:
        start, end = entry.get("start"), entry.get("end")
        if not isinstance(start, int) or not isinstance(end, int) or not 0 <= start < end:
            raise _fail(where, "evidence 'start'/'end' must be integers with 0 <= start < end")
        if doc_id is None:
            raise _fail(where, "a span needs its 'doc' when a question has several documents")
        if end > len(by_id[doc_id].text):
            raise _fail(where, f"evidence span ends past document {doc_id!r}")
        return GoldEvidence(doc_id, start, end)
    if "text" in entry:
        text = entry["text"]
        if not isinstance(text, str) or not text:
            raise _fail(where, "evidence 'text' must be a non-empty string")
        return GoldEvidence(doc_id, text=text)
    if doc_id is None:
        raise _fail(where, "evidence needs 'doc', a span or a 'text'")
    return GoldEvidence(doc_id)


def parse_line(
    obj: Any, where: str, known: dict[str, Document], base: Path, root: Path | None = None
) -> Question:
    """One data line as a :class:`Question`; ``root`` as in :func:`document_path`."""
    if not isinstance(obj, dict):
        raise _fail(where, "each line must be a JSON object")
    qid = obj.get("id")
    if isinstance(qid, int):
        qid = str(qid)
    if not isinstance(qid, str) or not qid:
        raise _fail(where, "a question needs an 'id'")
    question = _str(obj, "question", where).strip()
    if not question:
        raise _fail(where, "the question is empty")
    answers = obj.get("answers", [])
    if isinstance(answers, str):
        answers = [answers]
    if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
        raise _fail(where, "'answers' must be a list of strings")
    raw_docs = obj.get("documents")
    if not isinstance(raw_docs, list) or not raw_docs:
        raise _fail(where, "'documents' must be a non-empty list")
    docs = [_document(d, where, known, base, root) for d in raw_docs]
    if len({d.id for d in docs}) != len(docs):
        raise _fail(where, "a document is listed twice")
    raw_ev = obj.get("evidence", [])
    if not isinstance(raw_ev, list):
        raise _fail(where, "'evidence' must be a list")
    evidence = [_evidence(e, where, docs) for e in raw_ev]
    meta = obj.get("meta", {})
    return Question(
        qid,
        question,
        list(answers),
        docs,
        evidence,
        _str(obj, "task", where, required=False),
        meta if isinstance(meta, dict) else {},
        kind if isinstance(kind := obj.get("type"), str) else "",
    )


def iter_questions(path: str | Path, documents_root: Path | None = None) -> Iterator[Question]:
    p = Path(path)
    if not p.exists():
        raise InputError(f"no dataset at {p}")
    if p.is_dir():
        raise InputError(f"{p} is a folder, not a JSONL dataset")
    if p.is_char_device() or p.is_block_device() or p.is_socket():  # /dev/zero never ends
        raise InputError(f"{p} is a device, not a JSONL dataset")
    known: dict[str, Document] = {}
    seen: set[str] = set()
    with p.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            where = f"{p}:{lineno}"
            try:
                obj = json.loads(line)
            except ValueError:
                raise _fail(where, "not valid JSON") from None
            q = parse_line(obj, where, known, p.parent, documents_root)
            if q.id in seen:
                raise _fail(where, f"question id {q.id!r} is used twice")
            seen.add(q.id)
            yield q


def load(
    path: str | Path, limit: int | None = None, documents_root: Path | None = None
) -> list[Question]:
    """Every question of ``path`` (the first ``limit`` ones), checked; errors name the line.
    Document paths resolve inside ``documents_root`` (default: the data file's folder)."""
    out: list[Question] = []
    try:
        for q in iter_questions(path, documents_root):
            if limit is not None and len(out) >= limit:
                break
            out.append(q)
    except UnicodeDecodeError:
        raise InputError(f"{path} is not UTF-8 text") from None
    if not out:
        raise InputError(f"{path} holds no questions")
    return out


def locate(text: str, needle: str) -> int:
    """Offset of ``needle`` in ``text``; whitespace differences are tolerated."""
    pos = text.find(needle)
    if pos >= 0:
        return pos
    import re

    words = needle.split()
    if not words:
        return -1
    m = re.search(r"\s+".join(re.escape(w) for w in words), text)
    return m.start() if m else -1


def gold_spans(q: Question) -> list[tuple[str, int, int] | None]:
    """Each gold evidence as ``(doc id, start, end)`` in its document; None if not found.

    Whole-document gold becomes the document's full span.
    """
    out: list[tuple[str, int, int] | None] = []
    for e in q.evidence:
        docs: Sequence[Document] = [q.doc(e.doc)] if e.doc is not None else q.documents
        if e.whole_document:
            d = docs[0]
            out.append((d.id, 0, len(d.text)))
        elif e.start is not None and e.end is not None:
            out.append((docs[0].id, e.start, e.end))
        else:
            assert e.text is not None
            found: tuple[str, int, int] | None = None
            for d in docs:
                pos = locate(d.text, e.text)
                if pos >= 0:
                    end = pos + len(e.text)
                    if d.text[pos:end] != e.text:  # whitespace-tolerant match: take its length
                        import re

                        m = re.compile(r"\s+".join(re.escape(w) for w in e.text.split()))
                        mm = m.match(d.text, pos)
                        end = mm.end() if mm else end
                    found = (d.id, pos, end)
                    break
            out.append(found)
    return out
