"""Kernel backends behind one entry point, plus the Docker engine connection and leftover cleanup.

`provision_kernel` picks the backend (docker or local) from `KernelSettings.backend`;
`docker_client` connects to the engine (or says how to start one); `cleanup_containers` removes the
containers this project labelled, e.g. after a run that was killed.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

from pytest_super.errors import EngineUnavailable
from pytest_super.kernels.base import Kernel, KernelSettings

if TYPE_CHECKING:
    import docker

LABEL = "pytest-super"
LABEL_RUN = "pytest-super.run"
LABEL_WORKER = "pytest-super.worker"
LABEL_TASK = "pytest-super.task"
LABEL_PID = "pytest-super.pid"
LABEL_HOST = "pytest-super.host"

_START_ENGINE_HINT = (
    "Start an engine (`sudo dockerd`, `make docker` or `scripts/ensure-docker.sh`), or point "
    "DOCKER_HOST / --super-docker-host at one that runs."
)

_clients: dict[str, docker.DockerClient] = {}
_clients_lock = threading.Lock()


def provision_kernel(settings: KernelSettings, *, task_id: str) -> Kernel:
    """Start a fresh kernel for one task with the configured backend; it is ready to execute."""
    if settings.backend == "docker":
        from pytest_super.kernels.docker import start_docker_kernel

        return start_docker_kernel(settings, task_id=task_id)
    if settings.backend == "local":
        from pytest_super.kernels.local import start_local_kernel

        return start_local_kernel(settings, task_id=task_id)
    raise ValueError(f"unknown kernel backend {settings.backend!r}; use 'docker' or 'local'")


def engine_address(docker_host: str | None) -> str:
    """The address a client for `docker_host` talks to (for messages)."""
    return docker_host or os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


def docker_client(settings: KernelSettings) -> docker.DockerClient:
    """A client of the engine at settings.docker_host, DOCKER_HOST or the local socket; pinged.

    Raises EngineUnavailable naming the address and how to start an engine.
    """
    return docker_client_for(settings.docker_host)


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
        raise EngineUnavailable(
            f"no Docker engine answers at {address} ({reason}). {_START_ENGINE_HINT}"
        ) from exc
    return client


KEPT_SUFFIX = "-kept"


def cleanup_containers(
    client: docker.DockerClient, *, run_id: str | None = None, dead_runs_only: bool = False
) -> list[str]:
    """Force-remove containers labelled `pytest-super=1`; return the names removed.

    run_id: only that run's containers (from any host). dead_runs_only: only containers whose
    lease is dead (`lease.py`: not renewed on the engine's clock, or its holder provably gone),
    whatever host or PID namespace made them; then the dead leases too. Containers kept with
    `--super-keep` (named `...-kept`) and containers that carry no lease (made before leases
    existed) are never removed as a dead run's leftovers. Neither option: every container and
    every lease (`pytest-super cleanup --all`).
    """
    from pytest_super.kernels.lease import LABEL_HOLDER, LABEL_LEASE, live_leases

    filters = {"label": [f"{LABEL}=1"] + ([f"{LABEL_RUN}={run_id}"] if run_id else [])}
    # containers first, leases second: a lease is taken before its first container is made, so
    # every container listed here has its lease in the later listing unless it is released
    found = client.containers.list(all=True, filters=filters, ignore_removed=True)
    leases: list = []
    if dead_runs_only:
        alive, leases = live_leases(client)
        found = [
            c
            for c in found
            if not c.name.endswith(KEPT_SUFFIX)
            and (c.labels or {}).get(LABEL_LEASE)
            and (c.labels or {}).get(LABEL_LEASE) not in alive
        ]
    elif run_id is None:
        leases = client.containers.list(
            all=True, filters={"label": LABEL_HOLDER}, ignore_removed=True
        )
    removed = [c.name for c in found if _force_remove(c)]
    for lease in leases:
        _force_remove(lease)
    return removed


def _force_remove(container: docker.models.containers.Container) -> bool:
    import docker.errors

    try:
        container.remove(force=True)
    except docker.errors.NotFound:
        return False
    except docker.errors.APIError as exc:
        if exc.status_code == 409:  # removal already in progress
            return False
        raise
    return True


__all__ = [
    "cleanup_containers",
    "docker_client",
    "docker_client_for",
    "engine_address",
    "forget_docker_client",
    "provision_kernel",
]
