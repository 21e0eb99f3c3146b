"""Dense arrays and CSR sparse matrices on disk: no pickle, nothing executes.

Two layouts. zarr v3 arrays (``name.zarr``): compressed, read whole. Mapped
arrays (``name.npy``, and ``name.csr/`` holding ``data.npy``, ``indices.npy``,
``indptr.npy`` and ``shape.json``): uncompressed ``.npy`` files opened as
read-only memory maps, so a process that asks one question over a large graph
pays for the pages it touches instead of decoding every entry first. Which
layout a reader finds decides how it reads, so indexes written before the
mapped layout existed still open.

A sparse matrix is written by :func:`write_csr` and read by :func:`read_csr`, in one
of three forms: a zarr folder (``name.zarr/`` with its three arrays and
``shape.json``), a mapped folder (``name.csr/``), or bm25's loose arrays
(``name_data.zarr``, ``name_indices.zarr``, ``name_indptr.zarr`` side by side, no
shape file: bm25s's CSC score matrix, kept as the bm25 method has always stored it).

Reading checks structure, whatever the layout: numbers only, and a CSR matrix
whose row pointers climb from 0 to its entry count and whose column indices lie
inside its shape, so no array content can send a compiled product (scipy's,
numba's) outside its memory. The check is one vectorised pass over the indices,
once per process, where a walk makes many such passes.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, overload

import numpy as np
import scipy.sparse as sp

from lcr.errors import IndexDamagedError


def write_array(path: Path, array: np.ndarray) -> None:
    """One array, written on an event loop of lcr's own (see :func:`_run_quietly`)."""
    from zarr.api.asynchronous import create_array

    data = np.ascontiguousarray(array)
    _run_quietly(create_array(store=str(path), data=data, overwrite=True))


def write_arrays(arrays: dict[Path, np.ndarray]) -> None:
    """Several arrays, each as :func:`write_array` writes it, on one event loop: a loop
    and its worker threads for each small array cost more than its bytes (a bm25 build's
    three score arrays: 12.5 ms of CPU one loop each, 7.3 ms on one; bench_bm25_build.py)."""
    from zarr.api.asynchronous import create_array

    async def every_array() -> None:
        await asyncio.gather(
            *(
                create_array(store=str(path), data=np.ascontiguousarray(a), overwrite=True)
                for path, a in arrays.items()
            )
        )

    _run_quietly(every_array())


def _run_quietly(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run a zarr coroutine on a private event loop; when a chunk write fails, cancel and
    await the other chunk writes before the error goes up.

    zarr's synchronous API leaves its other chunk writes pending on its own loop when one
    fails (a full disk): at exit they printed over a hundred "Task was destroyed but it is
    pending!" lines and "Event loop is closed" tracebacks after lcr's one-line message.
    """
    result: list[Any] = []
    error: list[BaseException] = []

    def run() -> None:
        loop = asyncio.new_event_loop()
        # the other writes' own failures (the same full disk) are not news: the first is raised
        loop.set_exception_handler(lambda _loop, _context: None)
        try:
            result.append(loop.run_until_complete(coro))
        except BaseException as exc:  # handed to the caller's thread as is
            error.append(exc)
        finally:
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
            loop.close()

    try:
        asyncio.get_running_loop()
    except RuntimeError:  # the usual case: no loop in this thread, run here
        run()
    else:  # called from async code (a notebook): a loop of our own needs a thread of its own
        worker = threading.Thread(target=run, name="lcr-zarr-write")
        worker.start()
        worker.join()
    if error:
        raise error[0]
    return result[0]


class DamagedArrayError(IndexDamagedError):
    """An array or matrix that does not read as one; ``path`` is the file or folder,
    ``problem`` what is wrong with it (the reader names the index and the repair)."""

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(f"damaged array {path} ({problem})")
        self.path = path
        self.problem = problem


def read_array(path: Path) -> np.ndarray:
    import zarr

    try:
        arr = np.asarray(zarr.open_array(str(path), mode="r")[...])
    except Exception as exc:  # zarr raises many types for a broken store
        raise DamagedArrayError(path, f"does not read ({exc.__class__.__name__})") from None
    if arr.dtype.kind not in "biuf":
        raise DamagedArrayError(path, f"holds {arr.dtype}, not numbers")
    return arr


def check_csr(
    path: Path, shape: tuple[int, int], data: np.ndarray, indices: np.ndarray,
    indptr: np.ndarray,
) -> None:  # fmt: skip
    """Raise :class:`DamagedArrayError` unless the three arrays make a valid CSR matrix
    of ``shape``: whatever the files hold, no product over it reads outside memory."""
    rows, cols = shape

    def bad(problem: str) -> DamagedArrayError:
        return DamagedArrayError(path, problem)

    if data.ndim != 1 or indices.ndim != 1 or indptr.ndim != 1:
        raise bad("a part is not one-dimensional")
    if indices.dtype.kind not in "iu" or indptr.dtype.kind not in "iu":
        raise bad("its indices are not whole numbers")
    if data.dtype.kind not in "biuf":
        raise bad("its values are not numbers")
    if len(indptr) != rows + 1 or len(data) != len(indices):
        raise bad("inconsistent lengths")
    if int(indptr[0]) != 0 or int(indptr[-1]) != len(data):
        raise bad("its row pointers do not span its entries")
    if rows and bool((np.diff(indptr) < 0).any()):
        raise bad("its row pointers go backwards")
    if len(indices):
        # one pass, not two: seen as unsigned, a negative index is a huge one
        unsigned = (
            indices.view(indices.dtype.str.replace("i", "u"))
            if indices.dtype.kind == "i"
            else indices
        )
        if int(unsigned.max()) >= cols:
            raise bad(f"a column index lies outside its {cols} columns")


def write_mapped_array(path: Path, array: np.ndarray) -> None:
    """An ``.npy`` file (a header, then the raw array), readable as a memory map."""
    with path.open("wb") as fh:
        np.save(fh, np.ascontiguousarray(array), allow_pickle=False)


def read_mapped_array(path: Path) -> np.ndarray:
    """A read-only memory map of an ``.npy`` file (no pickle); numbers only."""
    try:
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
    except Exception as exc:  # a truncated or foreign file: numpy raises several types
        raise DamagedArrayError(path, f"does not read ({exc.__class__.__name__})") from None
    if not isinstance(arr, np.ndarray) or arr.dtype.kind not in "biuf":
        raise DamagedArrayError(path, "not a numeric array")
    return arr


_CSR_PARTS = ("data", "indices", "indptr")

Parts = tuple[np.ndarray, np.ndarray, np.ndarray]
"""A compressed sparse matrix's ``(data, indices, indptr)``, as scipy takes them."""


def write_csr(
    path: Path, matrix: sp.spmatrix | sp.sparray | Parts, *, mapped: bool = False,
    dtype: type | None = None, loose: bool = False,
) -> None:  # fmt: skip
    """A CSR matrix as a folder of its three arrays plus its shape: zarr arrays, or with
    ``mapped`` ``.npy`` files with sorted indices and values as ``dtype`` (float64 lets a
    product use the mapped values as they are).

    ``loose``: bm25's layout. The three arrays exactly as given (``matrix`` as its
    ``(data, indices, indptr)``: bm25s's CSC score matrix, whose dtypes and order the
    files keep), each a zarr array beside the others (``path.name`` + ``_data.zarr``,
    ``_indices.zarr``, ``_indptr.zarr``, written on one loop), with no shape file: the
    caller keeps the count of the matrix's index dimension (:func:`read_csr`)."""
    if loose:
        parts = matrix if isinstance(matrix, tuple) else _parts(sp.csr_array(matrix))
        write_arrays({_loose(path, name): a for name, a in zip(_CSR_PARTS, parts, strict=True)})
        return
    csr = sp.csr_array(matrix)
    if mapped and not csr.has_sorted_indices:
        csr = csr.sorted_indices()  # a copy: the caller's arrays stay as they are
    path.mkdir(parents=True, exist_ok=False)
    for part, array in zip(_CSR_PARTS, _parts(csr), strict=True):
        if part == "data" and dtype is not None:
            array = array.astype(dtype, copy=False)
        if mapped:
            write_mapped_array(path / f"{part}.npy", array)
        else:
            write_array(path / part, array)
    (path / "shape.json").write_text(json.dumps({"shape": list(csr.shape)}))


@overload
def read_csr(path: Path, *, mapped: bool = False) -> sp.csr_array: ...
@overload
def read_csr(path: Path, *, loose: int) -> Parts: ...
def read_csr(path: Path, *, mapped: bool = False, loose: int | None = None) -> sp.csr_array | Parts:
    """The matrix of :func:`write_csr`; ``mapped``: over read-only memory maps (nothing
    copied). ``loose``: bm25's loose arrays, given the count of their index dimension
    (bm25s's documents), returned as they are stored, once checked as the CSR matrix of
    one row per pointer (bm25s's terms) by ``loose`` columns, so no product over them
    reads outside memory."""
    if loose is not None:
        parts = tuple(read_array(_loose(path, name)) for name in _CSR_PARTS)
        data, indices, indptr = parts
        rows = max(len(indptr) - 1, 0)
        check_csr(_loose(path, "indptr"), (rows, loose), data, indices, indptr)
        return data, indices, indptr
    shape = _shape(path)
    if mapped:
        data, indices, indptr = (read_mapped_array(path / f"{p}.npy") for p in _CSR_PARTS)
    else:
        data, indices, indptr = (read_array(path / p) for p in _CSR_PARTS)
    check_csr(path, shape, data, indices, indptr)
    m = sp.csr_array((data, indices, indptr), shape=shape, copy=False)
    if mapped:
        m.has_sorted_indices = True  # written sorted; never sorted in place (read-only maps)
    return m


def _parts(csr: sp.csr_array) -> Parts:
    return csr.data, csr.indices, csr.indptr


def _loose(path: Path, part: str) -> Path:
    """Where bm25's loose layout keeps one part of the matrix ``path`` names."""
    return path.with_name(f"{path.name}_{part}.zarr")


def _shape(path: Path) -> tuple[int, int]:
    """The matrix's ``shape.json``: two whole numbers, neither negative."""
    try:
        rows, cols = json.loads((path / "shape.json").read_text(encoding="utf-8"))["shape"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DamagedArrayError(
            path / "shape.json", f"does not read ({exc.__class__.__name__})"
        ) from None
    if not all(type(x) is int and x >= 0 for x in (rows, cols)):
        raise DamagedArrayError(path / "shape.json", "its shape is not two whole numbers")
    return rows, cols
