"""What ``Index.create`` needs of each loaded document, and how the documents are
joined into the one text (``source.txt``) every span points into."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from lcr.store.manifest import SourceDoc
from lcr.text.layout import DocumentLayout

DOC_SEPARATOR = "\n\n"


@dataclass(frozen=True)
class DocumentInput:
    """What ``Index.create`` needs of a loaded document (see ``lcr.text.loading``)."""

    name: str
    text: str
    sha256: str
    size: int
    format: str = "text"
    layout: DocumentLayout = field(default_factory=DocumentLayout)
    extractor: str = "lcr"
    extractor_version: str = ""
    options: dict[str, Any] = field(default_factory=dict)
    path: str = ""  # the file's absolute path ("-" for stdin), for the repair hints
    added: str = ""  # when it joined an existing index (UTC); "": when the index was made


def join_documents(docs: Sequence[DocumentInput]) -> tuple[str, list[SourceDoc]]:
    """The documents' text in their order (a document added later comes last, so the
    offsets of those before it stay), and each one's record for the manifest."""
    parts: list[str] = []
    records: list[SourceDoc] = []
    pos = 0
    for i, doc in enumerate(docs):
        if i:
            parts.append(DOC_SEPARATOR)
            pos += len(DOC_SEPARATOR)
        parts.append(doc.text)
        records.append(
            SourceDoc(
                doc.name,
                doc.sha256,
                doc.size,
                pos,
                pos + len(doc.text),
                format=doc.format,
                pages=len(doc.layout.pages),
                extractor=doc.extractor,
                extractor_version=doc.extractor_version,
                options=dict(doc.options),
                added=doc.added,
            )
        )
        pos += len(doc.text)
    return "".join(parts), records
