"""Dense arrays and CSR sparse matrices as zarr v3 arrays: no pickle, nothing executes."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from lcr.errors import IndexDamagedError


def write_array(path: Path, array: np.ndarray) -> None:
    """One array, written on an event loop of lcr's own (see :func:`_run_quietly`)."""
    from zarr.api.asynchronous import create_array

    data = np.ascontiguousarray(array)
    _run_quietly(create_array(store=str(path), data=data, overwrite=True))


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
