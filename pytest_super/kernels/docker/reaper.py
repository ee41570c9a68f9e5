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
auto-removed when it exits. It holds the socket, which is the engine's root: so its image is
never a task's (`--super-image` names any image a user pulled; its `python` could be anything).
It is an image of ours, `REAPER_REPOSITORY:<hash>` (`reaper_image`): built here from a context of
two files (REAPER_DOCKERFILE, which runs nothing, and the program) on the kernel image's own base
(`reaper_base`), its id recorded at build (`trust`) and the container created from that id; a
tag moved to another image is not trusted and is built over. It starts the base's python3 with
`-I -S`: no environment, no user site, no `.pth` file of an installed package.

What the socket cannot be narrowed to: the engine's API has no per-call permissions (without an
authorization plug-in), and a read-only mount does not stop writes through a unix socket; so the
restriction is on what runs with it (only this program and the base's interpreter) and on what
else that process has (no network, no capabilities, no writable file system).

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

from pytest_super.errors import InfrastructureError
from pytest_super.scratch import scratch_folder

if TYPE_CHECKING:
    import docker

log = logging.getLogger(__name__)

REAPER_PREFIX = "pytest-super-reaper"
REAPER_REPOSITORY = "pytest-super-reaper"
LABEL_REAPER = "pytest-super.reaper"
#: on the reaper container: the image id it was created from (ours, `reaper_image`)
LABEL_REAPER_IMAGE = "pytest-super.reaper-image"
#: where the folder of the engine's socket appears inside the reaper, read-only: the folder, not
#: the socket file, so that the reaper reaches an engine restarted meanwhile (a new socket at the
#: same path; a bind mount of the old file would keep the dead one)
SOCKET_DIR_IN_CONTAINER = "/run/pytest-super-engine"
#: the environment variable that names the socket inside the reaper (kernels/inside/reaper.py)
SOCKET_ENV = "PYTEST_SUPER_ENGINE_SOCKET"
IDLE_ENV = "PYTEST_SUPER_REAPER_IDLE_S"
NOBODY = 65534

_ensure_lock = threading.Lock()


def reaper_source() -> str:
    """The program the reaper runs (standard library only)."""
    return resources.files("pytest_super.kernels.inside").joinpath("reaper.py").read_text()


#: the reaper image's build context: this Dockerfile and the program; the base is named by its
#: image id (`reaper_base`), nothing is run at build time
REAPER_DOCKERFILE = """\
ARG BASE
FROM ${BASE}
COPY reaper.py /opt/pytest-super-reaper/reaper.py
"""
REAPER_PROGRAM = "/opt/pytest-super-reaper/reaper.py"
#: how the reaper is started: the base's own python3, isolated (-I: no environment variables, no
#: user site) and without `site` (-S: no .pth file of any installed package is run)
REAPER_ENTRYPOINT = ["python3", "-I", "-S", REAPER_PROGRAM]


def reaper_version() -> str:
    text = reaper_source() + REAPER_DOCKERFILE + " ".join(REAPER_ENTRYPOINT)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def reaper_tag() -> str:
    return f"{REAPER_REPOSITORY}:{reaper_version()}"


def reaper_name() -> str:
    """`pytest-super-reaper-<hash of its program>`: reapers of two versions can run side by
    side (both honour the same leases) instead of replacing each other."""
    return f"{REAPER_PREFIX}-{reaper_version()}"


def engine_socket(address: str) -> str | None:
    """The path of a local engine's unix socket; None for an engine reached otherwise."""
    parsed = urlparse(address)
    if parsed.scheme not in ("unix", "") or not parsed.path:
        return None
    return parsed.path


def ensure_reaper(
    client: docker.DockerClient, address: str, *, idle_s: float | None = None
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
            _create_reaper(client, path, reaper_image(client), name, idle_s)
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
        image,  # the image id: a tag moved meanwhile changes nothing
        entrypoint=REAPER_ENTRYPOINT,
        command=[],
        name=name,
        user=f"{NOBODY}:{NOBODY}",
        environment={
            SOCKET_ENV: f"{SOCKET_DIR_IN_CONTAINER}/{os.path.basename(socket_path)}",
            **({IDLE_ENV: str(idle_s)} if idle_s is not None else {}),
        },
        labels={LABEL_REAPER: reaper_version(), LABEL_REAPER_IMAGE: image},
        network_disabled=True,
        host_config=config,
        detach=True,
    )


def _socket_group(path: str) -> int:
    """The group that may use the engine's socket (the reaper joins it; it runs as nobody)."""
    return os.stat(path).st_gid


def reaper_image(client: docker.DockerClient) -> str:
    """The id of the reaper's image on this engine: `reaper_tag()` when it names an image this
    machine built (`trust`), else built now from the minimal context (REAPER_DOCKERFILE and the
    program) on a trusted base (`reaper_base`) and recorded. Never a task's image: a tag moved
    to another image (by a registry, a user, a task image) is not trusted and is built over."""
    from pytest_super.kernels.docker import trust

    tag = reaper_tag()
    present = trust.image_id(client.api, tag)
    if present is not None and trust.trusted(tag, present):
        return present
    base = reaper_base(client)
    with scratch_folder("pytest-super-reaper-") as context:
        (context / "Dockerfile").write_text(REAPER_DOCKERFILE)
        (context / "reaper.py").write_text(reaper_source())
        for chunk in client.api.build(
            path=str(context),
            tag=tag,
            buildargs={"BASE": base},
            labels={LABEL_REAPER: reaper_version(), "pytest-super.reaper-base": base},
            pull=False,
            rm=True,
            forcerm=True,
            decode=True,
        ):
            if "error" in chunk:
                raise InfrastructureError(
                    f"building the reaper's image {tag} failed: {chunk['error'].strip()}"
                )
    built = trust.record_present(client.api, tag)
    if built is None:
        raise InfrastructureError(f"building the reaper's image {tag} left no image")
    return built


def reaper_base(client: docker.DockerClient) -> str:
    """The image id the reaper's image is built FROM: the kernel image's own base
    (`python:3.10-slim`, or the bootstrapped `pytest-super-base:bookworm`) when the engine holds
    it, else a kernel image of ours this machine built (by its recorded id). Never pulled here,
    never a task's image (--super-image)."""
    from pytest_super.kernels.docker import trust
    from pytest_super.kernels.docker.image import DEFAULT_BASE, OFFLINE_BASE, default_image_tag

    for name in (DEFAULT_BASE, OFFLINE_BASE):
        found = trust.image_id(client.api, name)
        if found is not None:
            return found
    for profile in ("default",):
        tag = default_image_tag(profile)
        found = trust.image_id(client.api, tag)
        if found is not None and trust.trusted(tag, found):
            return found
    raise InfrastructureError(
        f"no base for the reaper's image on this engine: it needs {DEFAULT_BASE} or "
        f"{OFFLINE_BASE} (`docker pull {DEFAULT_BASE}`, or `pytest-super image build "
        "--offline`), or the default kernel image built here"
    )
