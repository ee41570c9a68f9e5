"""The dead man's switch: one reaper container per local engine removes what dead owners left.

A process that starts task containers holds a lease on the engine (`lease.py`). When it takes
the lease, and again at each renewal (every `lease.RENEW_S`), it makes sure the reaper runs
(`ensure_reaper`: create-if-absent; a name conflict means another process started it). The
reaper (`kernels/inside/reaper.py`) judges the leases that hold the switch as lease.py does and
force-removes a dead lease's task containers (not the kept ones) and the lease itself, within
`lease.TTL_S` + `SWEEP_S` of the owner's death at worst, at once (one sweep) when the owner was
a process of the engine's own PID namespace. It leaves by itself once nothing of ours is there.

The reaper container: the engine's unix socket bind-mounted, the host's PID namespace (to prove
a holder alive or gone by its pid, as `lease.Holder` does), no network, every capability
dropped, a read-only root, user `nobody` in the socket's group, small memory and pid limits,
auto-removed when it exits. Its image is the lease's image under a tag of its own
(`REAPER_REPOSITORY:<hash>`), so that removing the kernel image's tag while the reaper runs is
an untag, not a conflict with a running container.

Engines reached over tcp:// or ssh:// get no reaper (their socket is not on this host): there a
later run's start-up cleanup and `pytest-super cleanup` remove dead owners' containers.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import threading
from importlib import resources
from typing import TYPE_CHECKING
from urllib.parse import urlparse

if TYPE_CHECKING:
    import docker

log = logging.getLogger(__name__)

REAPER_PREFIX = "pytest-super-reaper"
REAPER_REPOSITORY = "pytest-super-reaper"
LABEL_REAPER = "pytest-super.reaper"
#: where the folder of the engine's socket appears inside the reaper, read-only: the folder, not
#: the socket file, so that the reaper reaches an engine restarted meanwhile (a new socket at the
#: same path; a bind mount of the old file would keep the dead one)
SOCKET_DIR_IN_CONTAINER = "/run/pytest-super-engine"
#: the environment variable that names the socket inside the reaper (kernels/inside/reaper.py)
SOCKET_ENV = "PYTEST_SUPER_ENGINE_SOCKET"
IDLE_ENV = "PYTEST_SUPER_REAPER_IDLE_S"
#: the environment variable that turns the switch off for the leases a process takes
SWITCH_ENV = "PYTEST_SUPER_DEAD_MAN_SWITCH"
NOBODY = 65534

_ensure_lock = threading.Lock()


def reaper_source() -> str:
    """The program the reaper runs (standard library only)."""
    return resources.files("pytest_super.kernels.inside").joinpath("reaper.py").read_text()


def reaper_version() -> str:
    return hashlib.sha256(reaper_source().encode()).hexdigest()[:12]


def reaper_name() -> str:
    """`pytest-super-reaper-<hash of its program>`: reapers of two versions can run side by
    side (both honour the same leases) instead of replacing each other."""
    return f"{REAPER_PREFIX}-{reaper_version()}"


def switch_wanted() -> bool:
    """Does this process hold the switch for its leases (`PYTEST_SUPER_DEAD_MAN_SWITCH=off`
    leaves a killed run's containers to `pytest-super cleanup` or the next run)?"""
    return os.environ.get(SWITCH_ENV, "on").strip().lower() not in ("off", "0", "no", "false")


def engine_socket(address: str) -> str | None:
    """The path of a local engine's unix socket; None for an engine reached otherwise."""
    parsed = urlparse(address)
    if parsed.scheme not in ("unix", "") or not parsed.path:
        return None
    return parsed.path


def ensure_reaper(
    client: docker.DockerClient, address: str, image: str, *, idle_s: float | None = None
) -> str | None:
    """Start the engine's reaper unless it runs; returns its name, None where there is none (an
    engine not reached by a unix socket of this host). Raises the engine's errors."""
    import docker.errors

    path = engine_socket(address)
    if path is None or not os.path.exists(path):
        return None
    name = reaper_name()
    api = client.api
    with _ensure_lock:
        try:
            state = api.inspect_container(name)["State"]
        except docker.errors.NotFound:
            state = None
        if state is not None:
            if not state.get("Running") and state.get("Status") == "created":
                with contextlib.suppress(docker.errors.APIError):
                    api.start(name)  # another process created it and died before starting it
            return name
        try:
            _create_reaper(client, path, image, name, idle_s)
        except docker.errors.APIError as exc:
            if exc.status_code == 409:  # another process made it first (or it is leaving)
                return name
            raise
        with contextlib.suppress(docker.errors.NotFound):
            api.start(name)
    return name


def _create_reaper(
    client: docker.DockerClient, socket_path: str, image: str, name: str, idle_s: float | None
) -> None:
    import docker.types

    api = client.api
    repository_tag = f"{REAPER_REPOSITORY}:{reaper_version()}"
    api.tag(image, REAPER_REPOSITORY, reaper_version(), force=True)
    config = api.create_host_config(
        mounts=[
            docker.types.Mount(
                SOCKET_DIR_IN_CONTAINER, os.path.dirname(socket_path), type="bind", read_only=True
            )
        ],
        pid_mode="host",
        network_mode="none",
        cap_drop=["ALL"],
        security_opt=["no-new-privileges:true"],
        read_only=True,
        auto_remove=True,
        mem_limit="64m",
        memswap_limit="64m",
        pids_limit=16,
        nano_cpus=int(0.25e9),
        group_add=[str(_socket_group(socket_path))],
        init=False,
    )
    api.create_container(
        repository_tag,
        command=["python", "-I", "-c", reaper_source()],
        name=name,
        user=f"{NOBODY}:{NOBODY}",
        environment={
            SOCKET_ENV: f"{SOCKET_DIR_IN_CONTAINER}/{os.path.basename(socket_path)}",
            **({IDLE_ENV: str(idle_s)} if idle_s is not None else {}),
        },
        labels={LABEL_REAPER: reaper_version()},
        network_disabled=True,
        host_config=config,
        detach=True,
    )


def _socket_group(path: str) -> int:
    """The group that may use the engine's socket (the reaper joins it; it runs as nobody)."""
    return os.stat(path).st_gid
