"""Loading documents and cutting them into chunks with exact character spans."""

from lcr.text.chunking import (
    Chunk,
    paragraph_windows,
    sentence_word_chunks,
    split_paragraphs,
    split_sentences,
    token_windows,
)
from lcr.text.loading import Document, decode_bytes, load_document, normalise_newlines
from lcr.text.tokens import TokenCounter, count_tokens

__all__ = [
    "Chunk",
    "Document",
    "TokenCounter",
    "count_tokens",
    "decode_bytes",
    "load_document",
    "normalise_newlines",
    "paragraph_windows",
    "sentence_word_chunks",
    "split_paragraphs",
    "split_sentences",
    "token_windows",
]
