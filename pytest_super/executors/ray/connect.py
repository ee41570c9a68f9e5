"""Joining a Ray cluster from the controller (`--super-executor=ray`, `pytest-super image build`
and `cleanup --executor ray`): Ray imported with a hint when it is missing, the address checked
before Ray is asked (Ray itself retries for minutes), and `ray.init` called so that the plugin's
own signal handling stays in place."""

from __future__ import annotations

import signal
import socket
import threading
from typing import Any

from pytest_super.errors import SuperError

INSTALL_HINT = 'pip install "pytest-super[ray]"'
#: seconds to wait for a cluster at start-up before saying it cannot be reached
CONNECT_TIMEOUT_S = 10.0


class RayUnavailable(SuperError):
    """Ray is not installed, or the cluster cannot be reached: said before any task runs."""


def import_ray() -> Any:
    """The `ray` module, or `RayUnavailable` saying how to install it."""
    try:
        import ray
    except ImportError:
        raise RayUnavailable(
            f"--super-executor=ray needs Ray on this machine and on every node: {INSTALL_HINT}"
        ) from None
    return ray


def _check_reachable(address: str) -> None:
    """A HOST:PORT that does not answer is said at once (Ray itself retries for two minutes)."""
    if address == "auto" or "://" in address:
        return
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection(
            (host or "127.0.0.1", int(port)), timeout=CONNECT_TIMEOUT_S
        ).close()
    except (OSError, ValueError) as exc:
        raise RayUnavailable(
            f"--super-ray-address {address}: no Ray cluster answers there ({exc}); start one with "
            "`ray start --head` or name its address (RAY_ADDRESS, --super-ray-address HOST:PORT)"
        ) from None


def connect(ray: Any, address: str, namespace: str) -> None:
    """Join the cluster at `address` as a driver; `RayUnavailable` when nothing answers there."""
    _check_reachable(address)
    # Ray's driver puts its own SIGTERM handler in place (a SystemExit from inside a wait);
    # the plugin's own (SIGTERM as Ctrl-C: cancel, clean the nodes, keep the results) stays
    on_sigterm = signal.getsignal(signal.SIGTERM)
    try:
        ray.init(
            address=address,
            log_to_driver=False,
            configure_logging=False,
            namespace=namespace,
        )
    except Exception as exc:  # ConnectionError, ValueError ("no running cluster"), timeouts
        raise RayUnavailable(
            f"--super-ray-address {address}: cannot reach a Ray cluster there "
            f"({type(exc).__name__}: {exc}); start one with `ray start --head` or name its "
            "address (RAY_ADDRESS, --super-ray-address HOST:PORT)"
        ) from None
    finally:
        if threading.current_thread() is threading.main_thread() and on_sigterm is not None:
            signal.signal(signal.SIGTERM, on_sigterm)
