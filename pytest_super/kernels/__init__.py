"""Kernel backends behind one entry point, plus the Docker engine connection and leftover cleanup.

`provision_kernel` picks the backend (docker or local) from `KernelSettings.backend`;
`docker_client` connects to the engine (or says how to start one); `cleanup_containers` removes the
containers this project labelled, e.g. after a run that was killed, and `cleanup_host_folders` the
private host folders (kernel keys, connection files, channel sockets) whose container is gone.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import threading
import time
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
    cleanup_host_folders(client)
    return removed


#: the prefix and owner file of a box's host folder (kernels/docker.py makes them)
HOST_FOLDER_PREFIX = "pytest-super-kernel-"
OWNER_FILE = "owner.json"
#: A folder is made just before its container is created and its owner file written just after
#: (well under a second here), and it holds no key before that. One without an owner file that
#: holds nothing but an empty `ipc` folder is a crashed start once this old (s).
UNOWNED_FOLDER_GRACE_S = 60.0


#: Linux bounds a unix socket path to 107 bytes; a box's longest is
#: `<root>/pytest-super-kernel-<8 random>/ipc/kernel-50001`, 46 bytes more than its root.
SOCKET_PATH_MAX = 107
_LONGEST_UNDER_ROOT = len("/pytest-super-kernel-12345678/ipc/kernel-50001")


def host_folder_root() -> str:
    """Where box folders go: the temporary directory if short enough for the sockets, else /tmp."""
    root = tempfile.gettempdir()
    return root if len(root) + _LONGEST_UNDER_ROOT <= SOCKET_PATH_MAX else "/tmp"


def cleanup_host_folders(
    client: docker.DockerClient, *, folder_root: str | None = None
) -> list[str]:
    """Remove the box folders on this host whose container no longer exists on `client`'s engine.

    A folder names its engine and container in its owner file; folders of other engines are left
    alone. A folder without an owner file is removed only if it is empty but for an empty `ipc`
    folder and older than `UNOWNED_FOLDER_GRACE_S` (else it is a box being created, or not ours).
    Returns the folders removed.
    """
    import docker.errors

    engine = client.info()["ID"]
    removed: list[str] = []
    for path in _host_folders():
        try:
            with open(os.path.join(path, OWNER_FILE)) as f:
                owner = json.load(f)
        except FileNotFoundError:
            if not _crashed_start(path):
                continue
        except (OSError, ValueError):
            continue
        else:
            if owner.get("engine") != engine:
                continue
            try:
                client.api.inspect_container(owner.get("container") or "-")
                continue
            except docker.errors.NotFound:
                pass
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def _host_folders() -> list[str]:
    found = []
    for root in dict.fromkeys([host_folder_root(), tempfile.gettempdir()]):
        with contextlib.suppress(OSError):
            found += [
                os.path.join(root, n) for n in os.listdir(root) if n.startswith(HOST_FOLDER_PREFIX)
            ]
    return found


def _crashed_start(path: str) -> bool:
    try:
        young = time.time() - os.stat(path).st_mtime < UNOWNED_FOLDER_GRACE_S
        return not young and all(
            name == "ipc" and not os.listdir(os.path.join(path, name)) for name in os.listdir(path)
        )
    except OSError:
        return False


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
    "cleanup_host_folders",
    "docker_client",
    "docker_client_for",
    "engine_address",
    "forget_docker_client",
    "provision_kernel",
]
