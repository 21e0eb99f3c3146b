"""Where a method writes one build: nodes, arrays and JSON in the build's temporary
folder, which :meth:`lcr.store.Index.building` commits or drops whole."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from lcr.store.arrays import Parts, write_array, write_csr, write_mapped_array
from lcr.store.nodes import Node, write_nodes


class MethodWriter:
    """Where a method writes one build; everything lands in a temporary folder."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.counts: dict[str, int] = {}
        self.stats: dict[str, Any] = {}
        # every array of this build as a memory-mappable .npy (read without zarr)
        self.mapped = False

    def write_nodes(
        self, nodes: Iterable[Node], name: str = "nodes", *, offsets: bool = False
    ) -> int:
        """``offsets``: also store where each record starts (``name.offsets.npy``), so a
        reader can take a few nodes (:meth:`MethodReader.nodes_at`) without parsing all."""
        where: list[int] | None = [] if offsets else None
        n = write_nodes(self.dir / f"{name}.jsonl", nodes, where)
        if where is not None:
            write_mapped_array(self.dir / f"{name}.offsets.npy", np.asarray(where, np.int64))
        self.counts[name] = n
        return n

    def write_array(self, name: str, array: np.ndarray, *, mapped: bool | None = None) -> None:
        """``mapped``: an uncompressed ``.npy`` a reader memory-maps, instead of zarr
        (None: the writer's :attr:`mapped`)."""
        if self.mapped if mapped is None else mapped:
            write_mapped_array(self.dir / f"{name}.npy", array)
        else:
            write_array(self.dir / f"{name}.zarr", array)

    def write_csr(
        self, name: str, matrix: sp.spmatrix | sp.sparray | Parts, *, mapped: bool = False,
        dtype: type | None = None, loose: bool = False,
    ) -> None:  # fmt: skip
        """``mapped``: ``.npy`` arrays a reader memory-maps (values as ``dtype``), not zarr;
        ``loose``: bm25's loose arrays (:func:`~lcr.store.arrays.write_csr`)."""
        if loose:
            write_csr(self.dir / name, matrix, loose=True)
            return
        where = self.dir / (f"{name}.csr" if mapped else f"{name}.zarr")
        write_csr(where, matrix, mapped=mapped, dtype=dtype)

    def write_json(self, name: str, obj: Any) -> None:
        (self.dir / f"{name}.json").write_text(
            json.dumps(obj, ensure_ascii=False, sort_keys=True), encoding="utf-8"
        )
