"""Every path a cluster run writes or reads must be the same file on every node: a
probe file written by the driver is read by each worker, and one written by each
worker is read by the driver. A folder or source either side cannot see is refused
in one line, before any build starts."""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from lcr.errors import UsageError

PROBE = ".lcr-probe-"


class NotSharedError(UsageError):
    """A path the driver and a worker do not both see: the cluster needs shared storage."""


@dataclass(frozen=True)
class ProbeRequest:
    """What each worker checks: each folder holds ``PROBE + token`` with ``token`` in
    it (and gets the worker's own reply file); each source has the size the driver saw."""

    token: str
    folders: tuple[str, ...]
    sources: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class ProbeReply:
    worker: str  # this worker's name in its reply files
    node: str  # the node's address, for the message
    unseen: tuple[str, ...] = field(default=())  # folders or sources it could not see


def reply_name(token: str, worker: str) -> str:
    return f"{PROBE}{token}-{worker}"


def probe_here(request: ProbeRequest, node: str = "") -> ProbeReply:
    """On a worker: which of the request's folders and sources this node cannot see,
    and a reply file written into each folder it can."""
    worker = secrets.token_hex(6)
    unseen: list[str] = []
    for folder in request.folders:
        try:
            seen = (Path(folder) / (PROBE + request.token)).read_text(encoding="utf-8")
            (Path(folder) / reply_name(request.token, worker)).write_text(
                request.token, encoding="utf-8"
            )
        except OSError:
            seen = ""
        if seen != request.token:
            unseen.append(folder)
    for source, size in request.sources:
        try:
            if os.path.getsize(source) == size:
                continue
        except OSError:
            pass
        unseen.append(source)
    return ProbeReply(worker, node, tuple(unseen))


AskWorkers = Callable[[ProbeRequest], Sequence[ProbeReply]]


def check_storage(folders: Sequence[Path], sources: Sequence[Path], ask: AskWorkers) -> None:
    """Refuse, naming the path, unless every worker (``ask`` runs :func:`probe_here` on
    each) sees every folder and source the driver sees, and the driver sees what each
    worker wrote. Every probe file is removed again."""
    token = secrets.token_hex(8)
    folders = sorted({Path(os.path.abspath(f)) for f in folders})
    request = ProbeRequest(
        token,
        tuple(str(f) for f in folders),
        tuple((str(Path(os.path.abspath(s))), os.path.getsize(s)) for s in sources),
    )
    written: list[Path] = []
    try:
        for folder in folders:
            probe = folder / (PROBE + token)
            try:
                probe.write_text(token, encoding="utf-8")
            except OSError as exc:
                raise UsageError(f"cannot write in {folder}: {exc.strerror or exc}") from None
            written.append(probe)
        replies = list(ask(request))
        for reply in replies:
            written += [Path(f) / reply_name(token, reply.worker) for f in request.folders]
        for reply in replies:
            node = f" on node {reply.node}" if reply.node else ""
            for unseen in reply.unseen:
                raise NotSharedError(
                    f"{unseen} is not reachable from a Ray worker{node}: every index and "
                    "source must be on storage all nodes share"
                )
            for name in request.folders:
                if not (Path(name) / reply_name(token, reply.worker)).is_file():
                    raise NotSharedError(
                        f"{name}: what a Ray worker{node} wrote there is not here: every "
                        "index and source must be on storage all nodes share"
                    )
    finally:
        for probe_file in written:
            with contextlib.suppress(OSError):
                probe_file.unlink()
