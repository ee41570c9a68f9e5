"""The docker backend (`DockerBackend`): one container per task holding one ipykernel
(`box.DockerBox`), and the contract's other calls (the image made present, clean-ups, the leases
released at the end, the engine's faults told from a task's: `health.py`).

This module provisions boxes; talking to the kernel inside is `runtime.JupyterKernel`'s job.
docs/security.md says what is isolated and why it is done this way.

A box is a container of the kernel image (`image.default_image_tag()` unless settings.image names
another) started with tini (`init=True`) in /content. Provisioning is a function of the image, the
network, the mounts and the limits in `KernelSettings`; nothing else of the host goes in.

Kernel channels (`box.py`): no network port; the kernel's unix sockets are in a folder private to
the box, bind-mounted from the host or relayed (`relay.py`). No other container and no other host
can open a channel, whatever the network.

Networks (`network.py`): "none" is docker's `--network none` (loopback only). "bridge" is
`pytest-super-tasks`, a bridge network per engine with inter-container traffic off.

Disk: `settings.disk_bytes` bounds the container's writable layer (plus its channel folder); the
engine enforces it where it can (storage-opt), else `diskwatch.py` watches and stops the box,
whose next liveness check raises `DiskLimitExceeded` (exit status disk_limit); so does the
measurement at the episode's end (`check_limits`), for a writer that finished between two polls.

Secrets: each box gets a fresh random HMAC key. It is never in the container's env, labels or
command line (`docker inspect` is readable by anyone with engine access): the connection file is
copied into the created container with `put_archive` (mode 0600) before it starts. The host-side
copy (for `jupyter console --existing`) lives in the box's private 0700 folder, mode 0600, removed
with the box; `cleanup_host_folders` (kernels/cleanup.py) removes the folders of killed runs.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import re
import secrets
import socket
import tarfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import docker
import docker.errors
import docker.utils
import requests.exceptions

from pytest_super.atomic import write_atomically
from pytest_super.errors import EngineUnavailable, ImageMissing, InfrastructureError
from pytest_super.kernels.base import (
    BackendBase,
    BackendResources,
    CommandTools,
    ImageSpec,
    Kernel,
    KernelSettings,
    PreparedImage,
    Subparsers,
)
from pytest_super.kernels.docker import health
from pytest_super.kernels.docker.box import (
    CHANNEL_DIR_IN_CONTAINER,
    CHANNEL_PREFIX,
    CONNECTION_DIR_IN_CONTAINER,
    CONNECTION_FILE_IN_CONTAINER,
    KERNEL_PORTS,
    DockerBox,
    kernel_connection,
)
from pytest_super.kernels.docker.cleanup import (
    OWNER_FILE,
    cleanup_containers,
    cleanup_dead_leases,
    make_host_folder,
    maker_entry,
    mount_channel_folder,
    remove_host_folder,
)
from pytest_super.kernels.docker.diskwatch import disk_watch
from pytest_super.kernels.docker.engine import (
    LABEL,
    LABEL_HOST,
    LABEL_PID,
    LABEL_RUN,
    LABEL_TASK,
    LABEL_WORKER,
    docker_client,
    engine_address,
    engine_identity,
    start_engine_hint,
)
from pytest_super.kernels.docker.image import build_hint, default_image_tag, image_for_task
from pytest_super.kernels.docker.lease import LABEL_LEASE, lease_for, release_leases, remove_later
from pytest_super.kernels.docker.network import is_remote_engine, task_network
from pytest_super.kernels.docker.relay import RELAY_IN_CONTAINER, EngineRelay, relay_source
from pytest_super.kernels.docker.settings import SETTINGS as DOCKER_SETTINGS
from pytest_super.kernels.docker.settings import docker_options

KERNEL_COMMAND = ["python", "-m", "ipykernel_launcher", "-f", CONNECTION_FILE_IN_CONTAINER]
#: A controller that is not root cannot connect to sockets the container's root made with the
#: usual umask (connecting needs write permission), so then the kernel starts with umask 0. The
#: host folder around the sockets stays 0700: no other host user gets in.
KERNEL_COMMAND_UNPRIVILEGED = [
    "sh",
    "-c",
    'umask 0 && exec python -m ipykernel_launcher -f "$1"',
    "kernel",
    CONNECTION_FILE_IN_CONTAINER,
]
WORKING_DIR = "/content"
MIRRORS_DIR = "/mirrors"
PIP_CACHE_DIR = "/root/.cache/pip"
# What root needs for pip, apt and git inside the box; everything else of docker's default set
# (NET_RAW, MKNOD, SETFCAP, SETPCAP, AUDIT_WRITE) is dropped.
CAPABILITIES = [
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "SETUID",
    "SETGID",
    "KILL",
    "NET_BIND_SERVICE",
    "SYS_CHROOT",
]
CONTROLLER_PID_ENV = "PYTEST_SUPER_CONTROLLER_PID"

_engine_infos: dict[str, dict[str, Any]] = {}  # Any: docker-py's info()
_disk_capable: dict[str, bool] = {}


class DockerBackend(BackendBase):
    """The docker backend: one container per kernel; leftovers are the containers it labelled."""

    #: a container may be made ahead of the task that uses it (the kernel pool)
    warm_pool = True
    #: the settings only Docker reads (`KernelSettings.options`), declared in a module that the
    #: settings package reads without importing this one (the Docker SDK)
    settings = DOCKER_SETTINGS

    def provision(self, settings: KernelSettings, *, task_id: str) -> Kernel:
        _trust_given(settings)  # the reaper's image base may be one the controller trusts
        return start_docker_kernel(settings, task_id=task_id)

    def image_for(self, settings: KernelSettings, profile: str) -> str:
        """`--super-image` if given, else the tag of the profile's image (`base.ImageBackend`)."""
        return image_for_task(profile, settings.image)

    def prepare_image(self, settings: KernelSettings, spec: ImageSpec) -> str:
        """The task's Dockerfile built, then our kernel layer on it (`task_image.py`;
        `base.TaskImageBackend`)."""
        from pytest_super.kernels.docker.task_image import prepare_task_image

        _trust_given(settings)
        return prepare_task_image(settings, spec)

    def cleanup_run(self, settings: KernelSettings, run_id: str) -> list[str]:
        client = docker_client(settings)
        # the leases of this run's processes that died (an xdist worker killed with SIGKILL),
        # read and removed while the containers go (an interrupted run's end waits for both):
        # only this run's are read, so no other run's lease being removed is in the way; one the
        # engine fails to read now is the next run's start-up cleanup's to remove
        with ThreadPoolExecutor(1, thread_name_prefix="pytest-super-leases") as pool:
            leases = pool.submit(cleanup_dead_leases, client, run_id)
            try:
                removed = cleanup_containers(client, run_id=run_id)
            except (docker.errors.APIError, requests.exceptions.RequestException) as exc:
                raise InfrastructureError(
                    f"the engine failed to remove run {run_id}'s containers: {exc}"
                ) from exc
            with contextlib.suppress(docker.errors.APIError, requests.exceptions.RequestException):
                leases.result()
        return removed

    def cleanup_dead_runs(self, settings: KernelSettings) -> list[str]:
        try:
            return cleanup_containers(docker_client(settings), dead_runs_only=True)
        except (docker.errors.APIError, requests.exceptions.RequestException) as exc:
            # an engine too slow to answer (a read timeout) is no reason to stop a run
            raise InfrastructureError(
                f"the engine failed to remove dead runs' containers: {exc}"
            ) from exc

    def prepare(self, settings: KernelSettings, profile: str) -> PreparedImage | None:
        """The task's kernel image made present on the engine: pulled from the registry
        (`--super-registry`) when one is given, else (or when the pull fails) built when it is
        our own profile's image; one pull or build at a time on a machine (the build lock).
        None when nothing was to be done, or was done before in this process
        (`registry.prepare_kernel_image`)."""
        from pytest_super.kernels.docker.registry import prepare_kernel_image

        return prepare_kernel_image(settings, profile)

    def cleanup_all(self, settings: KernelSettings) -> list[str]:
        """Every container and lease of ours on the engine, live runs' too."""
        return cleanup_containers(docker_client(settings))

    def shutdown(self) -> None:
        """This process's leases released (their containers are the reaper's once it is gone)."""
        release_leases()

    def describe(self, settings: KernelSettings) -> BackendResources:
        """The container's memory limit in bytes as the engine reads `settings.mem` (None when it
        does not read: the engine then says so for the container), its CPUs, its engine."""
        try:
            memory: int | None = int(docker.utils.parse_bytes(settings.mem))
        except docker.errors.DockerException:
            memory = None
        where = f"the Docker engine at {engine_address(docker_options(settings).docker_host)}"
        return BackendResources(memory_bytes=memory, cpus=settings.cpus, where=where)

    def is_engine_fault(self, exc: BaseException) -> bool:
        return health.engine_fault(exc)

    def engine_problem(self, settings: KernelSettings) -> str:
        return health.engine_problem(docker_options(settings).docker_host)

    @classmethod
    def add_commands(cls, subparsers: Subparsers, tools: CommandTools) -> None:
        """`pytest-super image build|push|lock` (`cli.py`)."""
        from pytest_super.kernels.docker.cli import add_commands

        add_commands(subparsers, tools)

    def node_options(self, settings: KernelSettings) -> dict[str, object]:
        """The images this machine trusts (`trust.py`), for a node's pulls to match; no engine
        address: a node uses its own engine (its DOCKER_HOST or local socket)."""
        from pytest_super.kernels.docker import trust

        return {"trusted_images": trust.recorded(), "docker_host": None}


def _trust_given(settings: KernelSettings) -> None:
    """Trust here the images the controller trusts (`node_options`, on a Ray node)."""
    from pytest_super.kernels.docker import trust

    for tag, image_id in docker_options(settings).trusted_images:
        trust.record(tag, image_id)


def start_docker_kernel(settings: KernelSettings, *, task_id: str) -> Kernel:
    """Start a container for `task_id` and return a ready `runtime.JupyterKernel` on it."""
    from pytest_super.kernels.jupyter.runtime import JupyterKernel

    box = create_docker_box(settings, task_id=task_id)
    return JupyterKernel(
        box,
        output_cap_bytes=settings.output_cap_bytes,
        startup_timeout_s=settings.startup_timeout_s,
    )


def create_docker_box(settings: KernelSettings, *, task_id: str) -> DockerBox:
    """Create, configure and start the container; the kernel inside may still be starting."""
    client = docker_client(settings)
    options = docker_options(settings)
    address = engine_address(options.docker_host)
    relayed = options.channel == "relay" or (
        options.channel == "auto" and is_remote_engine(address)
    )
    image = settings.image or default_image_tag()
    if settings.network not in ("bridge", "none"):
        raise InfrastructureError(
            f"kernel network {settings.network!r} is not supported; use 'bridge' or 'none'"
        )
    name = container_name(task_id, settings.worker)
    key = secrets.token_hex(32)
    folder = make_host_folder()
    container_id = None
    box: DockerBox | None = None
    api = client.api
    try:
        binds, env = _mirror_binds(settings.git_mirrors)
        if options.pip_cache:
            binds[options.pip_cache] = {"bind": PIP_CACHE_DIR, "mode": "rw"}
        channel_dir, tmpfs = _channel_folder(folder, binds, relayed=relayed)
        limits = _container_limits(client, address, settings, binds, tmpfs)
        create: dict[str, Any] = {  # Any: docker-py's create() keywords
            "command": KERNEL_COMMAND if os.geteuid() == 0 else KERNEL_COMMAND_UNPRIVILEGED,
            "name": name,
            "working_dir": WORKING_DIR,
            "environment": env,
            "labels": _labels(settings, task_id),
            "detach": True,
        }
        container_id, enforced = _create_leased_container(
            client, address, image, settings, create, limits
        )
        box = DockerBox(
            client,
            container_id=container_id,
            name=name,
            key=key,
            folder=folder,
            channel_dir=channel_dir,
            docker_host=options.docker_host,
        )
        _start_container(client, address, container_id, folder, key, relayed=relayed)
        _watch_box(box, address, settings, relayed=relayed, disk_enforced=enforced)
        box._refresh_connection()
        return box
    except (requests.exceptions.ConnectionError, docker.errors.DockerException) as exc:
        _discard(api, address, container_id, folder, box)
        raise _start_error(exc, task_id, image, address) from exc
    except BaseException:
        _discard(api, address, container_id, folder, box)
        raise


def _channel_folder(
    folder: str, binds: dict[str, dict[str, str]], *, relayed: bool
) -> tuple[str, dict[str, str] | None]:
    """Where the kernel's connection sockets live: a folder of ours mounted into the container
    (added to `binds`), or, when the engine's host cannot see our folder (`relayed`), a tmpfs
    there, reached by relay. Returns the host folder and the container's tmpfs (or None)."""
    channel_dir = os.path.join(folder, "ipc")
    if relayed:  # the engine's host cannot see our folder: a tmpfs there, reached by relay
        return channel_dir, {CHANNEL_DIR_IN_CONTAINER: "rw,nosuid,nodev,noexec,size=1m,mode=0700"}
    os.mkdir(channel_dir, 0o700)
    mount_channel_folder(channel_dir)  # sockets only: no room for a task's data
    binds[channel_dir] = {"bind": CHANNEL_DIR_IN_CONTAINER, "mode": "rw"}
    return channel_dir, None


def _container_limits(
    client: docker.DockerClient,
    address: str,
    settings: KernelSettings,
    binds: dict[str, dict[str, str]],
    tmpfs: dict[str, str] | None,
) -> dict[str, Any]:  # Any: docker-py's create() keywords
    """The container's mounts, resource limits, privileges and network."""
    return {
        "init": True,
        "binds": binds or None,
        "tmpfs": tmpfs,
        "mem_limit": settings.mem,
        "memswap_limit": settings.mem,
        "nano_cpus": int(min(settings.cpus, _engine_cpus(client, address)) * 1e9),
        "pids_limit": docker_options(settings).pids_limit,
        "privileged": False,
        "cap_drop": ["ALL"],
        "cap_add": CAPABILITIES,
        "security_opt": ["no-new-privileges:true"],
        "network_mode": task_network(client, address, settings.network),
    }


def _create_leased_container(
    client: docker.DockerClient,
    address: str,
    image: str,
    settings: KernelSettings,
    create: dict[str, Any],  # Any: docker-py's create() keywords
    limits: dict[str, Any],  # Any: docker-py's create() keywords
) -> tuple[str, bool]:
    """Create the container under a lease on its image (its label), so that no image clean-up
    removes the image meanwhile; `ImageMissing`, saying how to build it, when it is absent.
    Returns the container's id and whether its disk limit is enforced by the engine."""
    try:
        create["labels"][LABEL_LEASE] = lease_for(client, address, image, settings.run_id).id
        return _create_container(client, address, image, create, limits, settings.disk_bytes)
    except docker.errors.ImageNotFound as exc:
        raise ImageMissing(
            f"the kernel image {image!r} is not on the engine at {address}. Build it with "
            f"{build_hint(image)}"
            + ("" if settings.image is None else ", or pass an existing --super-image")
            + "."
        ) from exc


def _start_container(
    client: docker.DockerClient,
    address: str,
    container_id: str,
    folder: str,
    key: str,
    *,
    relayed: bool,
) -> None:
    """Record which engine and container the host folder belongs to (for clean-up), give the
    container the kernel's connection file, and start it."""
    write_atomically(
        Path(folder, OWNER_FILE),
        json.dumps(
            {
                "engine": engine_identity(_engine_info(client, address)),
                "container": container_id,
                **maker_entry(),
            }
        ),
    )
    client.api.put_archive(container_id, "/etc", _connection_archive(key, with_relay=relayed))
    client.api.start(container_id)


def _watch_box(
    box: DockerBox, address: str, settings: KernelSettings, *, relayed: bool, disk_enforced: bool
) -> None:
    """What runs beside the started container for its life, stopped when the box is released:
    the relay of its connection sockets (`relayed`), the disk watch when the engine does not
    enforce the disk limit itself."""
    api = box.client.api
    if relayed:
        relay = EngineRelay(
            api,
            box.container_id,
            box.channel_dir,
            CHANNEL_DIR_IN_CONTAINER,
            [f"{CHANNEL_PREFIX}-{port}" for port in KERNEL_PORTS.values()],
        )
        box.on_release(relay.close)
    if settings.disk_bytes is not None and not disk_enforced:
        watched = [] if relayed else [box.channel_dir]
        watch = disk_watch(api, address)
        box.on_release(
            watch.watch(box.container_id, settings.disk_bytes, box.stop_for_disk, host_dirs=watched)
        )
        box.measure_disk = functools.partial(watch.poll, only=box.container_id)


def _start_error(exc: Exception, task_id: str, image: str, address: str) -> InfrastructureError:
    """The error of an engine that refused (`APIError`) or stopped answering while a kernel's
    container was being started."""
    if isinstance(exc, docker.errors.APIError):
        return InfrastructureError(
            f"starting a kernel container for task {task_id!r} from {image!r} failed: "
            f"{exc.explanation or exc}"
        )
    return EngineUnavailable(
        f"the Docker engine at {address} stopped answering while starting a kernel for task "
        f"{task_id!r} ({exc}). Check `docker info`. {start_engine_hint()}"
    )


def _create_container(
    client: docker.DockerClient,
    address: str,
    image: str,
    create: dict[str, Any],  # Any: docker-py's create() keywords
    limits: dict[str, Any],  # Any: docker-py's create() keywords
    disk_bytes: int | None,
) -> tuple[str, bool]:
    """Create the container; return its id and whether the engine itself bounds its disk."""
    api = client.api
    enforced = disk_bytes is not None and _engine_caps_disk(client, address)
    storage: dict[str, Any] = (
        {"storage_opt": {"size": str(disk_bytes)}} if enforced else {}
    )  # Any: docker-py's create() keywords
    try:
        config = api.create_host_config(**limits, **storage)
        return api.create_container(image, host_config=config, **create)["Id"], enforced
    except docker.errors.APIError as exc:
        if not enforced or "storage" not in str(exc.explanation or exc).lower():
            raise
    _disk_capable[address] = False  # e.g. xfs without pquota: watch instead
    config = api.create_host_config(**limits)
    return api.create_container(image, host_config=config, **create)["Id"], False


def _labels(settings: KernelSettings, task_id: str) -> dict[str, str]:
    return {
        LABEL: "1",
        LABEL_RUN: settings.run_id,
        LABEL_WORKER: settings.worker,
        LABEL_TASK: task_id,
        LABEL_PID: os.environ.get(CONTROLLER_PID_ENV) or str(os.getpid()),
        LABEL_HOST: socket.gethostname(),
    }


def container_name(task_id: str, worker: str) -> str:
    """`super-<task>-<worker>-<6 hex>`: docker-legal and at most 63 characters."""
    worker_part = re.sub(r"[^a-zA-Z0-9_.-]+", "-", worker).strip("-.") or "main"
    worker_part = worker_part[:16]
    task_part = re.sub(r"[^a-zA-Z0-9_.-]+", "-", task_id).strip("-.") or "task"
    room = 63 - len("super-") - len(worker_part) - len("-") - len("-") - 6
    return f"super-{task_part[:room].rstrip('-.')}-{worker_part}-{secrets.token_hex(3)}"


def _connection_archive(key: str, *, with_relay: bool) -> bytes:
    """A tar holding pytest-super/kernel.json (0600), and relay.py if asked, for /etc."""
    info = kernel_connection(f"{CHANNEL_DIR_IN_CONTAINER}/{CHANNEL_PREFIX}", key)
    files = {"kernel.json": json.dumps(info).encode()}
    if with_relay:
        files[os.path.basename(RELAY_IN_CONTAINER)] = relay_source()
    buffer = io.BytesIO()
    now = time.time()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        folder = tarfile.TarInfo(CONNECTION_DIR_IN_CONTAINER.removeprefix("/etc/"))
        folder.type = tarfile.DIRTYPE
        folder.mode = 0o700
        folder.mtime = now
        tar.addfile(folder)
        for file_name, data in files.items():
            member = tarfile.TarInfo(f"{folder.name}/{file_name}")
            member.size = len(data)
            member.mode = 0o600
            member.mtime = now
            tar.addfile(member, io.BytesIO(data))
    return buffer.getvalue()


def _mirror_binds(mirrors: dict[str, str]) -> tuple[dict[str, dict[str, str]], dict[str, str]]:
    """Read-only binds at /mirrors/<n> and the GIT_CONFIG_* env that redirects PREFIX to them."""
    binds: dict[str, dict[str, str]] = {}
    config: list[tuple[str, str]] = []
    for n, (prefix, directory) in enumerate(sorted(mirrors.items())):
        path = os.path.abspath(os.path.expanduser(directory))
        if not os.path.isdir(path):
            raise InfrastructureError(
                f"git mirror {prefix!r} -> {directory!r}: the directory does not exist; "
                "name a directory that holds the mirrored repositories"
            )
        target = f"{MIRRORS_DIR}/{n}"
        binds[path] = {"bind": target, "mode": "ro"}
        url = f"file://{target}" + ("/" if prefix.endswith("/") else "")
        config.append((f"url.{url}.insteadOf", prefix))
    if not config:
        return binds, {}
    config.append(("safe.directory", "*"))
    env = {"GIT_CONFIG_COUNT": str(len(config))}
    for i, (key, value) in enumerate(config):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    return binds, env


def _engine_info(
    client: docker.DockerClient, address: str
) -> dict[str, Any]:  # Any: docker-py's info()
    """`docker info` of the engine, asked once per process (its ID, CPUs and storage driver)."""
    if address not in _engine_infos:
        _engine_infos[address] = client.info()
    return _engine_infos[address]


def _engine_cpus(client: docker.DockerClient, address: str) -> int:
    return int(_engine_info(client, address).get("NCPU") or os.cpu_count() or 1)


def _engine_caps_disk(client: docker.DockerClient, address: str) -> bool:
    """Can the engine bound a container's writable layer (`--storage-opt size`)?

    overlay2 can only on xfs mounted with project quotas (pquota), which `docker info` does not
    show; on xfs the option is tried, and a refusal remembered (`_create_container`).
    """
    if address not in _disk_capable:
        info = _engine_info(client, address)
        status = dict(info.get("DriverStatus") or [])
        _disk_capable[address] = info.get("Driver") in ("btrfs", "zfs") or (
            info.get("Driver") == "overlay2" and status.get("Backing Filesystem") == "xfs"
        )
    return _disk_capable[address]


def _discard(
    api: docker.APIClient,
    address: str,
    container_id: str | None,
    folder: str,
    box: DockerBox | None,
) -> None:
    if box is not None:  # releases its relay and disk watch too
        with contextlib.suppress(docker.errors.APIError, requests.exceptions.RequestException):
            box.remove()
    remove_host_folder(folder)
    if container_id is None:
        return
    try:
        api.remove_container(container_id, force=True, v=True)
    except docker.errors.APIError:
        pass
    except requests.exceptions.RequestException:
        remove_later(address, container_id)  # the engine does not answer: once it does
