"""The Docker engine connection: the labels this project puts on what it makes, and one pinged
client per engine address for the process (`docker_client` says how to start an engine if none
answers).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING

from pytest_super.errors import EngineUnavailable
from pytest_super.kernels.base import KernelSettings
from pytest_super.kernels.docker.settings import docker_options
from pytest_super.paths import checkout_hint
from pytest_super.redaction import masked_url, scrub_url

if TYPE_CHECKING:
    import docker

LABEL = "pytest-super"
LABEL_RUN = "pytest-super.run"
LABEL_WORKER = "pytest-super.worker"
LABEL_TASK = "pytest-super.task"
LABEL_PID = "pytest-super.pid"
LABEL_HOST = "pytest-super.host"


def start_engine_hint() -> str:
    """How to start an engine: what works from an installed wheel, and this checkout's helper
    when pytest-super runs from one."""
    return (
        "Start an engine (`sudo dockerd`"
        f"{checkout_hint('scripts/ensure-docker.sh', 'scripts/ensure-docker.sh')}; to install "
        "one: https://docs.docker.com/engine/install/), or point DOCKER_HOST / "
        "--super-docker-host at one that runs."
    )


_clients: dict[str, docker.DockerClient] = {}
_clients_lock = threading.Lock()


def engine_identity(info: Mapping[str, object]) -> str:
    """Which engine `docker info` describes, as box owner files record it.

    Its ID alone does not tell two engines of one host apart: Docker 20.10 derives it from
    /etc/docker/key.json, which a second dockerd on the same host shares (one engine's cleanup
    then took the other's live box folders for its own orphans). Its data root does.
    """
    return f"{info.get('ID', '')}@{info.get('Name', '')}:{info.get('DockerRootDir', '')}"


def engine_address(docker_host: str | None) -> str:
    """The address a client for `docker_host` talks to (for messages)."""
    return docker_host or os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


def docker_client(settings: KernelSettings) -> docker.DockerClient:
    """A client of the engine at the `docker_host` option, DOCKER_HOST or the local socket; pinged.

    Raises EngineUnavailable naming the address and how to start an engine.
    """
    return docker_client_for(docker_options(settings).docker_host)


def docker_client_for(docker_host: str | None) -> docker.DockerClient:
    """`docker_client` by address; one pinged client per address is kept for the process."""
    address = engine_address(docker_host)
    with _clients_lock:
        client = _clients.get(address)
        if client is not None:
            return client
        client = _connect(docker_host, address)
        _clients[address] = client
        return client


def forget_docker_client(docker_host: str | None) -> None:
    """Drop the kept client for an address (after the engine went away)."""
    with _clients_lock:
        client = _clients.pop(engine_address(docker_host), None)
    if client is not None:
        client.close()


def _connect(docker_host: str | None, address: str) -> docker.DockerClient:
    import docker
    import docker.errors
    import docker.utils

    # DOCKER_TLS_VERIFY / DOCKER_CERT_PATH apply to --super-docker-host too; ssh:// engines go
    # through the `ssh` command (no paramiko needed).
    environment = {**os.environ, **({"DOCKER_HOST": docker_host} if docker_host else {})}
    try:
        client = docker.DockerClient(
            **docker.utils.kwargs_from_env(environment=environment),
            use_ssh_client=address.startswith("ssh://"),
        )
        client.ping()
    except Exception as exc:  # docker wraps requests/urllib3/socket errors inconsistently
        reason = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
        raise EngineUnavailable(  # a password in the address is never shown (docker refuses it)
            f"no Docker engine answers at {masked_url(address)} ({scrub_url(reason, address)}). "
            f"{start_engine_hint()}"
        ) from exc
    return client
