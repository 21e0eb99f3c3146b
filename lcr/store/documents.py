"""How the documents (:class:`~lcr.text.document.Document`, the one record from reading a
file to the index) are joined into the one text (``source.txt``) every span points into."""

from __future__ import annotations

from collections.abc import Sequence

from lcr.store.manifest import SourceDoc
from lcr.text.document import Document

DOC_SEPARATOR = "\n\n"


def join_documents(docs: Sequence[Document]) -> tuple[str, list[SourceDoc]]:
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
