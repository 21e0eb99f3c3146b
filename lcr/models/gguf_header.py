"""One value from a GGUF file's header, read without the ``gguf`` package's full parse.

``gguf.GGUFReader`` reads every tensor's description and the whole vocabulary first
(26 s for the default 1 GB model on a busy 2-core machine); a backend that only needs
the trained context length before it starts reads the key-value pairs in order and
stops at the first key it wants. Pure I/O, no model library.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import BinaryIO

from lcr.errors import ModelError

_SCALARS = {  # GGUF value type -> struct format (little-endian)
    0: "<B",
    1: "<b",
    2: "<H",
    3: "<h",
    4: "<I",
    5: "<i",
    6: "<f",
    7: "<?",
    10: "<Q",
    11: "<q",
    12: "<d",
}
_STRING, _ARRAY = 8, 9


def _read(f: BinaryIO, n: int) -> bytes:
    data = f.read(n)
    if len(data) != n:
        raise ValueError("the header ends early")
    return data


def _string(f: BinaryIO) -> str:
    (n,) = struct.unpack("<Q", _read(f, 8))
    return _read(f, n).decode("utf-8", errors="replace")


def _value(f: BinaryIO, kind: int) -> object:
    if kind in _SCALARS:
        fmt = _SCALARS[kind]
        return struct.unpack(fmt, _read(f, struct.calcsize(fmt)))[0]
    if kind == _STRING:
        return _string(f)
    if kind == _ARRAY:
        item, count = struct.unpack("<IQ", _read(f, 12))
        if item in _SCALARS:  # skipped whole: an array is never the value asked for
            f.seek(count * struct.calcsize(_SCALARS[item]), 1)
            return None
        for _ in range(count):
            _value(f, item)
        return None
    raise ValueError(f"unknown value type {kind}")


def header_value(path: Path, suffix: str) -> object | None:
    """The value of the first header key ending in ``suffix`` (e.g. ``.context_length``),
    or None when no key does; a file that is not a GGUF is a one-line error."""
    try:
        with open(path, "rb") as f:
            if _read(f, 4) != b"GGUF":
                raise ModelError(f"{path} is not a GGUF file")
            version, _tensors, pairs = struct.unpack("<IQQ", _read(f, 20))
            if version < 2:
                raise ModelError(f"{path} is a GGUF version {version} file; 2 or later is read")
            for _ in range(pairs):
                key = _string(f)
                (kind,) = struct.unpack("<I", _read(f, 4))
                value = _value(f, kind)
                if key.endswith(suffix):
                    return value
    except OSError as exc:
        raise ModelError(f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ModelError(f"{path} has a damaged GGUF header: {exc}") from None
    return None
