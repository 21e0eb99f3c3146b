"""Joining or starting the Ray cluster ``--ray ADDRESS`` names.

The address is checked before Ray is asked (Ray waits minutes on a head that is not
there): ``auto`` (the cluster ``ray start`` runs on this machine), ``local`` (one
started here for this run, shut down after it), or ``HOST:PORT`` / ``ray://HOST:PORT``
(a head elsewhere, reached over TCP first).
"""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import dataclass
from typing import Any

from lcr.errors import MissingExtraError, UsageError

RAY_EXTRA = "pip install 'lcr[ray]'"
REACH_TIMEOUT_S = 5.0  # a head's port not answering within this is refused
# A cluster started here for one run (``local``) starts no idle Ray workers when lcr
# connects: Ray's default starts one per CPU, each importing Ray on the very cores the
# driver and lcr's own workers are starting on, and lcr's workers are actors that Ray
# starts anyway (bench/ray_start.py measured this about 1 s faster a run on 2 cores).
# A cluster lcr joins (``auto``, an address) keeps the settings it was started with.
LOCAL_SYSTEM_CONFIG = {"prestart_worker_first_driver": False}


class RayMissingError(MissingExtraError, UsageError):
    """``--ray`` without the ``ray`` extra: a setting this install cannot honour (2)."""

    exit_code = 2


def import_ray() -> Any:
    """The ``ray`` module, or one line naming the extra."""
    try:
        import ray
    except ImportError:
        raise RayMissingError(f"--ray needs Ray, an optional extra: {RAY_EXTRA}") from None
    return ray


@dataclass(frozen=True)
class Address:
    kind: str  # "auto", "local" or "head"
    text: str  # as given
    host: str = ""
    port: int = 0


def parse_address(text: str) -> Address:
    """``auto``, ``local``, ``HOST:PORT`` or ``ray://HOST:PORT``; anything else refused."""
    given = text.strip()
    if given in ("auto", "local"):
        return Address(given, given)
    rest = given.removeprefix("ray://")
    host, colon, port = rest.rpartition(":")
    host = host.strip("[]")
    if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(
            f"--ray {text!r} is not an address: give auto, local, HOST:PORT or ray://HOST:PORT"
        )
    return Address("head", given, host, int(port))


def check_reachable(address: Address, timeout: float = REACH_TIMEOUT_S) -> None:
    """A head's port answers over TCP, or one line saying why not."""
    try:
        with socket.create_connection((address.host, address.port), timeout=timeout):
            return
    except socket.gaierror:
        why = f"the host {address.host} is not known"
    except TimeoutError:
        why = f"nothing answered within {timeout:g}s"
    except OSError as exc:
        why = exc.strerror or str(exc)
    raise UsageError(f"--ray {address.text}: no Ray head reachable there ({why})")


@dataclass
class Cluster:
    """The cluster a run uses; ``owned``: this run called ``ray.init`` (a cluster it
    started, or one it joined), so it shuts that down (or leaves it) at the end."""

    ray: Any
    address: str
    owned: bool

    def offer(self) -> tuple[int, int, int]:
        """The CPUs and GPUs the cluster offers, and the CPUs of its largest node."""
        total = self.ray.cluster_resources()
        nodes = [n.get("Resources", {}) for n in self.ray.nodes() if n.get("Alive")]
        node = max((int(r.get("CPU", 0)) for r in nodes), default=0)
        return int(total.get("CPU", 0)), int(total.get("GPU", 0)), node

    def close(self) -> None:
        if self.owned:
            self.ray.shutdown()


def _quiet_init(ray: Any, **kwargs: Any) -> None:
    """``ray.init`` without Ray's banners on stderr: lcr says what matters itself."""
    ray.init(
        include_dashboard=False,
        log_to_driver=False,
        logging_level=logging.ERROR,
        configure_logging=True,
        **kwargs,
    )


def connect(text: str, workers: int | None = None) -> Cluster:
    """The cluster ``--ray text`` names, joined or started. A process that already runs
    Ray (a test, a notebook) keeps its own cluster: this run joins it and leaves it up."""
    address = parse_address(text)
    if address.kind == "head":
        check_reachable(address)
    ray = import_ray()
    if ray.is_initialized():
        return Cluster(ray, text, owned=False)
    if address.kind == "local":
        cpus = os.cpu_count() or 1
        _quiet_init(ray, num_cpus=max(cpus, workers or 0), _system_config=dict(LOCAL_SYSTEM_CONFIG))
        return Cluster(ray, text, owned=True)
    try:
        _quiet_init(ray, address=address.text)
    except ConnectionError as exc:
        if address.kind == "auto":
            raise UsageError(
                "--ray auto: no Ray cluster runs on this machine "
                "(start one with `ray start --head`, or use --ray local)"
            ) from None
        raise UsageError(f"--ray {text}: {' '.join(str(exc).split())}") from None
    except (RuntimeError, ValueError) as exc:
        raise UsageError(f"--ray {text}: {' '.join(str(exc).split())}") from None
    return Cluster(ray, text, owned=True)
