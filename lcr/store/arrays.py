"""Dense arrays and CSR sparse matrices as zarr v3 arrays: no pickle, nothing executes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from lcr.errors import IndexDamagedError


def write_array(path: Path, array: np.ndarray) -> None:
    import zarr

    zarr.create_array(store=str(path), data=np.ascontiguousarray(array), overwrite=True)


def read_array(path: Path) -> np.ndarray:
    import zarr

    try:
        return np.asarray(zarr.open_array(str(path), mode="r")[...])
    except Exception as exc:  # zarr raises many types for a broken store
        raise IndexDamagedError(f"damaged array {path} ({exc.__class__.__name__})") from None


def write_csr(path: Path, matrix: sp.spmatrix | sp.sparray) -> None:
    """A CSR matrix as a folder of three zarr arrays plus its shape."""
    csr = sp.csr_array(matrix)
    path.mkdir(parents=True, exist_ok=False)
    write_array(path / "data", csr.data)
    write_array(path / "indices", csr.indices)
    write_array(path / "indptr", csr.indptr)
    (path / "shape.json").write_text(json.dumps({"shape": list(csr.shape)}))


def read_csr(path: Path) -> sp.csr_array:
    try:
        shape = tuple(json.loads((path / "shape.json").read_text())["shape"])
    except (OSError, ValueError, KeyError) as exc:
        raise IndexDamagedError(
            f"damaged sparse matrix {path} ({exc.__class__.__name__})"
        ) from None
    data = read_array(path / "data")
    indices = read_array(path / "indices")
    indptr = read_array(path / "indptr")
    if len(indptr) != shape[0] + 1 or len(data) != len(indices):
        raise IndexDamagedError(f"damaged sparse matrix {path} (inconsistent lengths)")
    return sp.csr_array((data, indices, indptr), shape=shape)
