"""One input document as lcr holds it, from reading the file to the index: its text,
its layout, what extracted them and a fingerprint of the raw file. ``load_document``
makes it, ``Index.create`` and ``Index.add`` take it, ``stored_documents`` gives it back."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lcr.text.layout import DocumentLayout


@dataclass(frozen=True)
class Document:
    """One input document: its normalised text, its layout (pages, headings), what
    extracted them, and a fingerprint of the raw file."""

    name: str
    text: str
    sha256: str
    size: int
    format: str = "text"
    layout: DocumentLayout = field(default_factory=DocumentLayout)
    extractor: str = "lcr"
    extractor_version: str = ""
    options: dict[str, Any] = field(default_factory=dict)
    encoding: str = ""  # what the raw bytes were decoded as ("" for one not read here)
    path: str = ""  # the file's absolute path ("-" for stdin), for the repair hints
    added: str = ""  # when it joined an existing index (UTC); "": when the index was made
