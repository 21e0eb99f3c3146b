"""Embeddings kept as they are made, so an interrupted build resumes where it stopped.

A dense build embeds its chunks in batches; each batch's rows go into the
method's cache (``<index>/cache/<method>.jsonl``, the file that keeps LLM outputs:
appended, fsynced, signed, a torn last line ignored) the moment they exist. A
batch is keyed by its texts' content hashes and the embedder's identity, so a
build run again with the same chunks and the same embedder reads the batches
already made and embeds only the rest, and one with another embedder, another
device or other chunks embeds afresh.

The batches are those :meth:`~lcr.models.embedder.SentenceTransformerEmbedder.encode`
makes of the distinct texts (longest first, 32 at a time), each encoded alone as
the model would have encoded it within the whole: a resumed build's rows are the
rows an uninterrupted build makes, bit for bit.
"""

from __future__ import annotations

import base64
import hashlib
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from lcr.models.base import Embedder
from lcr.progress import NULL_PROGRESS, Progress
from lcr.store import LLMCache, cache_key

BATCH = 32  # the embedder's own batch size


def embedder_identity(embedder: Embedder) -> list[Any]:
    """What decides an embedder's rows besides the text: its model, its width, and the
    device and dtype it runs on where it says (a GPU's rows differ in the last bits)."""
    model = getattr(embedder, "model", None)
    device = str(getattr(model, "device", getattr(embedder, "device", "")))
    dtype = str(getattr(model, "dtype", ""))
    return [embedder.model_id, int(embedder.dim), device, dtype]


def encode_kept(
    embedder: Embedder,
    texts: Sequence[str],
    cache: LLMCache,
    *,
    progress: Progress = NULL_PROGRESS,
    description: str = "embedding chunks",
) -> np.ndarray:
    """One L2-normalised float32 row per text, each batch read from ``cache`` where an
    earlier (perhaps interrupted) build made it, else embedded and stored at once."""
    n = len(texts)
    dim = int(embedder.dim)
    out = np.zeros((n, dim), dtype=np.float32)
    task = progress.task(description, total=n)
    if n == 0:
        return out
    hashes = [hashlib.blake2b(t.encode("utf-8"), digest_size=16).hexdigest() for t in texts]
    first: dict[str, int] = {}
    for i, h in enumerate(hashes):
        first.setdefault(h, i)
    copies = Counter(hashes)
    order = sorted(first.values(), key=lambda i: -len(texts[i]))  # as encode() batches
    identity = embedder_identity(embedder)
    rows: dict[str, np.ndarray] = {}
    for at in range(0, len(order), BATCH):
        batch = order[at : at + BATCH]
        key = cache_key("embeddings", identity, [hashes[i] for i in batch])
        got = _decode(cache.get(key), len(batch), dim)
        if got is None:
            got = np.asarray(
                embedder.encode([texts[i] for i in batch], batch_size=len(batch)),
                dtype=np.float32,
            )
            cache.put(key, _encode(got))
        for i, row in zip(batch, got, strict=True):
            rows[hashes[i]] = row
        task.advance(sum(copies[hashes[i]] for i in batch))
    for i, h in enumerate(hashes):
        out[i] = rows[h]
    return out


def _encode(rows: np.ndarray) -> dict[str, Any]:
    data = np.ascontiguousarray(rows, dtype="<f4")
    return {"shape": list(data.shape), "f32": base64.b64encode(data.tobytes()).decode("ascii")}


def _decode(value: Any, n: int, dim: int) -> np.ndarray | None:
    """A stored batch's rows, or None when there is none or it is not ``n`` x ``dim``."""
    if not isinstance(value, dict) or value.get("shape") != [n, dim]:
        return None
    try:
        raw = base64.b64decode(str(value.get("f32", "")), validate=True)
    except ValueError:
        return None
    if len(raw) != n * dim * 4:
        return None
    return np.frombuffer(raw, dtype="<f4").reshape(n, dim).astype(np.float32)
