"""Joining or starting a Ray cluster, for the two places edgefl uses one: a sweep's runs
(:class:`edgefl.sweep.executors.RayExecutor`) and a run's training jobs (:class:`edgefl.training.executors.RayExecutor`).

Ray is an optional extra (``pip install 'edgefl[ray]'``), imported only here. A local cluster binds its services to
127.0.0.1, so nothing listens beyond this machine.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from edgefl.errors import EdgeflError

__all__ = ["RAY_INSTALL_HINT", "RayUnavailable", "connect", "import_ray", "is_loopback", "loopback_mode",
           "start_local_cluster"]  # fmt: skip

RAY_INSTALL_HINT = "pip install 'edgefl[ray]'"


class RayUnavailable(EdgeflError, RuntimeError):
    """Ray is not installed, or its cluster cannot be joined or started; the message says which and why."""


def import_ray(what: str = "--executor ray") -> Any:
    """The ``ray`` module, or :class:`RayUnavailable` saying that ``what`` needs it and how to install it."""
    try:
        import ray
    except ImportError:
        raise RayUnavailable(f"{what} needs Ray, which is not installed; install it with: {RAY_INSTALL_HINT}") from None
    return ray


QUIET = {"log_to_driver": False, "logging_level": logging.WARNING}


def start_local_cluster(num_cpus: int) -> None:
    """Start a one-machine Ray cluster with ``num_cpus`` CPUs, its services bound to 127.0.0.1, and connect."""
    ray = import_ray()
    with loopback_mode():
        ray.init(num_cpus=num_cpus, include_dashboard=False, _node_ip_address="127.0.0.1", **QUIET)


def is_loopback(address: str) -> bool:
    """Whether a cluster ``address`` (``HOST:PORT`` or ``ray://HOST:PORT``) is on this machine's loopback."""
    host = address.removeprefix("ray://").rsplit(":", 1)[0].strip("[]")
    return host in ("localhost", "::1") or host.startswith("127.")


@contextmanager
def loopback_mode() -> Iterator[None]:
    """Make Ray use 127.0.0.1 as this node's address while the block runs (``ray.init`` inside).

    ``ray.init(_node_ip_address="127.0.0.1")`` alone is not enough on Linux: Ray replaces a loopback address by
    the host's reachable one unless it runs in its single-machine mode (the mode of
    ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``). A driver joining a cluster bound to 127.0.0.1 needs the same mode
    to find its local node.
    """
    try:
        from ray._private import ray_constants
    except ImportError:  # a Ray without that module: Ray decides
        yield
        return
    if not hasattr(ray_constants, "ENABLE_RAY_CLUSTER"):
        yield
        return
    old = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = old


def connect(address: str | None, *, num_cpus: int) -> bool:
    """Connect this process to a Ray cluster: the one it is already connected to; else ``address``
    (``"HOST:PORT"`` or ``"auto"``); else (None) a local cluster with ``num_cpus`` CPUs, started here. Returns
    whether it started one (the caller shuts it down); raises :class:`RayUnavailable` naming the address."""
    ray = import_ray()
    if ray.is_initialized():
        return False
    try:
        if address is None:
            start_local_cluster(num_cpus)
            return True
        if is_loopback(address):  # a cluster bound to 127.0.0.1 (e.g. start_local_cluster's)
            with loopback_mode():
                ray.init(address=address, _node_ip_address="127.0.0.1", **QUIET)
        else:
            ray.init(address=address, **QUIET)
    except Exception as exc:  # noqa: BLE001 - Ray raises several types for an unreachable cluster
        where = f"--address {address!r}: cannot join the Ray cluster" if address else "cannot start a local Ray cluster"
        text = " ".join(str(exc).split()) or "(no message)"
        raise RayUnavailable(f"{where}: {type(exc).__name__}: {text}") from None
    return False
