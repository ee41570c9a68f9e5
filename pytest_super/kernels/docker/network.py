"""The network of a Docker task container: "none", or a bridge per engine with inter-container
traffic off (`pytest-super-tasks`); on a local engine where the harness may run iptables, traffic
from that bridge to the host itself is dropped (`hostguard.py`)."""

from __future__ import annotations

import hashlib
import threading
from urllib.parse import urlparse

import docker
import docker.errors

from pytest_super.kernels.docker.engine import LABEL
from pytest_super.kernels.docker.hostguard import guard_host

TASK_NETWORK = "pytest-super-tasks"
_network_lock = threading.Lock()
_networks: dict[str, str] = {}


def task_network(client: docker.DockerClient, address: str, network: str) -> str:
    """The network_mode for a box: "none", or this engine's `pytest-super-tasks` bridge."""
    if network == "none":
        return "none"
    with _network_lock:
        if address not in _networks:
            bridge = bridge_interface(address)
            if not client.api.networks(names=[TASK_NETWORK]):
                try:
                    client.api.create_network(
                        TASK_NETWORK,
                        driver="bridge",
                        check_duplicate=True,
                        options={
                            "com.docker.network.bridge.enable_icc": "false",
                            "com.docker.network.bridge.name": bridge,
                        },
                        labels={LABEL: "1"},
                    )
                except docker.errors.APIError:
                    # another process (a task beside this one on a Ray node) made it first: the
                    # engine refuses the second with 409 or "same bridge name"; what counts is
                    # that it exists now
                    if not client.api.networks(names=[TASK_NETWORK]):
                        raise
            guard_host(bridge, local=not is_remote_engine(address))
            _networks[address] = TASK_NETWORK
    return _networks[address]


def bridge_interface(address: str) -> str:
    """The host interface name of an engine's task bridge (engines on one host must differ)."""
    return "pst" + hashlib.sha256(address.encode()).hexdigest()[:8]


def is_remote_engine(address: str) -> bool:
    """Does the engine at `address` run on another machine (tcp:// or ssh:// naming a host)?"""
    parsed = urlparse(address)
    if parsed.scheme not in ("tcp", "ssh", "http", "https") or not parsed.hostname:
        return False
    host = parsed.hostname
    return not (host in ("localhost", "::1") or host.startswith("127."))
