"""The docker backend: one container per task holding one ipykernel (`DockerBox`).

This module provisions boxes; talking to the kernel inside is `runtime.JupyterKernel`'s job.
docs/security.md says what is isolated and why it is done this way.

A box is a container of the kernel image (`image.default_image_tag()` unless settings.image names
another) started with tini (`init=True`) in /content. Provisioning is a function of the image, the
network, the mounts and the limits in `KernelSettings`; nothing else of the host goes in.

Kernel channels: the kernel listens on no network port at all. It uses ZeroMQ's `ipc` transport
(unix sockets) in a folder private to the box: on a local engine a host folder (mode 0700)
bind-mounted at /run/pytest-super, so the controller connects to the sockets directly; on a remote
engine a tmpfs in the container, reached through the engine's own connection (`relay.py`). No other
container and no other host can open a channel, whatever the network.

Networks: "none" is docker's `--network none` (loopback only). "bridge" is `pytest-super-tasks`,
a bridge network per engine with inter-container traffic off; on a local engine where the harness
may run iptables, traffic from that bridge to the host itself is dropped (`hostguard.py`).

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
import hashlib
import io
import json
import os
import re
import secrets
import socket
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import docker
import docker.errors
import requests.exceptions

from pytest_super.atomic import write_atomically
from pytest_super.errors import (
    DiskLimitExceeded,
    EngineUnavailable,
    ImageMissing,
    InfrastructureError,
)
from pytest_super.kernels.base import ImageSpec, Kernel, KernelSettings, console_command
from pytest_super.kernels.docker.cleanup import (
    HOST_FOLDER_PREFIX,
    KEPT_SUFFIX,
    OWNER_FILE,
    cleanup_containers,
    cleanup_dead_leases,
    host_folder_root,
    mount_channel_folder,
    remove_host_folder,
)
from pytest_super.kernels.docker.diskwatch import (
    INODE_BYTES,
    UNKNOWN,
    DiskLimits,
    DiskUse,
    disk_watch,
)
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
from pytest_super.kernels.docker.hostguard import guard_host
from pytest_super.kernels.docker.image import build_hint, default_image_tag, image_for_task
from pytest_super.kernels.docker.lease import LABEL_LEASE, lease_for, remove_later
from pytest_super.kernels.docker.relay import RELAY_IN_CONTAINER, EngineRelay, relay_source

#: the kernel's channel numbers; with the ipc transport they are the sockets' name suffixes
#: (`<prefix>-50001` ...). Kept at the values the TCP days used so that tools reading them agree.
KERNEL_PORTS: dict[str, int] = {
    "shell_port": 50001,
    "iopub_port": 50002,
    "stdin_port": 50003,
    "control_port": 50004,
    "hb_port": 50005,
}
CONNECTION_DIR_IN_CONTAINER = "/etc/pytest-super"
CONNECTION_FILE_IN_CONTAINER = f"{CONNECTION_DIR_IN_CONTAINER}/kernel.json"
#: where the kernel's sockets live inside the container (a bind mount or a tmpfs)
CHANNEL_DIR_IN_CONTAINER = "/run/pytest-super"
CHANNEL_PREFIX = "kernel"
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
TASK_NETWORK = "pytest-super-tasks"
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
#: seconds `restart` gives the old kernel after SIGTERM (its state is discarded anyway)
STOP_TIMEOUT_S = 0
CONTROLLER_PID_ENV = "PYTEST_SUPER_CONTROLLER_PID"

_engine_infos: dict[str, dict[str, Any]] = {}
_disk_capable: dict[str, bool] = {}
_network_lock = threading.Lock()
_networks: dict[str, str] = {}


class DockerBox:
    """One task container holding one kernel; implements runtime's `Box` protocol.

    `folder` is the box's private host folder (0700): the host copy of the connection file and,
    on a local engine, the bind-mounted channel folder. `channel_dir` is where this host finds the
    kernel's sockets: that folder's `ipc/`, or the relay's sockets for a remote engine.
    """

    def __init__(
        self,
        client: docker.DockerClient,
        *,
        container_id: str,
        name: str,
        key: str,
        folder: str,
        channel_dir: str,
        docker_host: str | None,
    ) -> None:
        self.client = client
        self.api = client.api
        self.container_id = container_id
        self.name = name
        self._key = key
        self.folder = folder
        self.channel_dir = channel_dir
        self.connection_file = os.path.join(folder, "kernel.json")
        self._docker_host = docker_host
        self._info: dict[str, Any] = {}
        self._removed = False
        self.description = f"docker container {name} ({container_id[:12]})"
        #: set (to a sentence) when the box was stopped for writing more than its disk limit
        self.disk_exceeded = ""
        #: set (to a sentence) when the disk watch could not measure the box for a limit of
        #: this host (open files, memory): an environment error, not the task's
        self.disk_unmeasured = ""
        #: measures the box's disk now, stopping it if over its limit (when the disk is watched)
        self.measure_disk: Callable[[], object] | None = None
        self._on_remove: list[Callable[[], None]] = []

    # -- Box protocol -------------------------------------------------------------------------
    def connection_info(self) -> dict[str, Any]:
        if not self._info:
            self._refresh_connection()
        return dict(self._info)

    def _raise_disk_end(self) -> None:
        if self.disk_unmeasured:
            raise InfrastructureError(self.disk_unmeasured)
        if self.disk_exceeded:
            raise DiskLimitExceeded(self.disk_exceeded)

    def is_alive(self) -> bool:
        self._raise_disk_end()
        try:
            state = self.api.inspect_container(self.container_id)["State"]
        except docker.errors.NotFound:
            return False
        except requests.exceptions.ConnectionError as exc:
            raise EngineUnavailable(
                f"the Docker engine went away while {self.description} ran: {exc}"
            ) from exc
        return bool(state.get("Running")) and not state.get("Restarting")

    def check_limits(self) -> None:
        if self.measure_disk is not None and not self._removed:
            self.measure_disk()
        self._raise_disk_end()

    def restart(self) -> dict[str, Any]:
        try:
            if self.is_alive():
                self.api.restart(self.container_id, timeout=STOP_TIMEOUT_S)
            else:
                self.api.start(self.container_id)
        except docker.errors.NotFound as exc:
            raise InfrastructureError(
                f"{self.description} was removed while its task ran (docker rm, a prune, or "
                "`pytest-super cleanup --all`)"
            ) from exc
        except (docker.errors.APIError, requests.exceptions.ConnectionError) as exc:
            raise InfrastructureError(f"restarting {self.description} failed: {exc}") from exc
        self._refresh_connection()
        return dict(self._info)

    def detach(self) -> str:
        self._release()
        # renamed, so that no later run takes it for a dead run's leftover
        kept = self.name + KEPT_SUFFIX
        with contextlib.suppress(docker.errors.APIError):
            self.api.rename(self.container_id, kept)
            self.name = kept
            self.description = f"docker container {kept} ({self.container_id[:12]})"
        docker_cmd = "docker" if not self._docker_host else f"docker -H {self._docker_host}"
        return (
            f"{self.description} left running:\n"
            f"  {docker_cmd} exec -it {self.name} bash\n"
            f"  {console_command(self.connection_file)}\n"
            "it stays until you remove it (the engine's reaper spares kept containers):\n"
            f"remove it with: {docker_cmd} rm -f {self.name}"
        )

    def remove(self) -> None:
        # No grace period: the kernel's state is discarded anyway, and ipykernel often ignores the
        # SIGTERM of `docker stop` after it ran a cell (a 1 s stop timeout cost 1.2 s a box).
        # So force-remove (SIGKILL + remove in one call); if that fails, kill, then remove again.
        if self._removed:
            return
        try:
            try:
                self.api.remove_container(self.container_id, force=True, v=True)
            except docker.errors.NotFound:
                pass
            except docker.errors.APIError as exc:  # the engine's answer (before RequestException:
                # docker's APIError is a requests HTTPError, and an answer is not a silence)
                if exc.status_code == 409:  # removal already in progress
                    return
                with contextlib.suppress(docker.errors.APIError):
                    self.api.kill(self.container_id)
                with contextlib.suppress(docker.errors.NotFound):
                    self.api.remove_container(self.container_id, force=True, v=True)
            except requests.exceptions.RequestException:
                # the engine does not answer (killed, restarting): the lease's renewals remove
                # the container once it is back (the reaper spares it while we live)
                remove_later(engine_address(self._docker_host), self.container_id)
                raise
        finally:
            self._removed = True
            self._release()
            remove_host_folder(self.folder)

    def on_release(self, stop: Callable[[], None]) -> None:
        """Call `stop` once when the harness lets go of the box (remove or detach)."""
        self._on_remove.append(stop)

    def _release(self) -> None:
        stops, self._on_remove = self._on_remove, []
        for stop in stops:
            stop()

    def stop_for_disk(self, use: DiskUse, limits: DiskLimits) -> None:
        """Stop the box: it takes `use` of the disk, over its `limits` (called by the disk
        watch)."""
        if use.bytes == UNKNOWN and use.environment:
            self.disk_unmeasured = (
                f"the disk watch could not measure {self.description} ({use.why}): a limit of "
                "this host, not the task's doing; the task was stopped (raise the open-file "
                "limit, `ulimit -n`, or free memory, and run it again)"
            )
        elif use.bytes == UNKNOWN and use.why:
            self.disk_exceeded = (
                f"the disk use of {self.description} could not be measured ({use.why}); under "
                f"the limit of {_size(limits.bytes)} (--super-disk) it cannot be shown to be, so "
                "the task was stopped"
            )
        elif use.bytes == UNKNOWN:
            self.disk_exceeded = (
                f"the disk use of {self.description} could not be measured (its layer is not on "
                f"this host and the engine reports none, as for paths past PATH_MAX); under the "
                f"limit of {_size(limits.bytes)} (--super-disk) it cannot be shown to be, so the "
                "task was stopped"
            )
        elif use.bytes > limits.bytes:
            self.disk_exceeded = (
                f"{self.description} wrote {_size(use.bytes)} to its disk, over the limit of "
                f"{_size(limits.bytes)} (--super-disk); the task was stopped"
            )
        else:
            self.disk_exceeded = (
                f"{self.description} made {use.inodes:,} files and folders (inodes) on its "
                f"disk, over the limit of {limits.inodes:,} (one per {INODE_BYTES // 1024} KiB "
                f"of --super-disk={_size(limits.bytes)}); the task was stopped"
            )
        with contextlib.suppress(docker.errors.APIError, requests.exceptions.ConnectionError):
            self.api.kill(self.container_id)

    def death_reason(self) -> str:
        try:
            state = self.api.inspect_container(self.container_id)["State"]
        except docker.errors.NotFound:
            return "container removed"
        if state.get("Running"):
            return ""
        if state.get("OOMKilled"):
            return "killed (out of memory)"
        code = state.get("ExitCode")
        if code == 137:
            return "killed (SIGKILL)"
        if code is None:
            return ""
        reason = f"exit code {code}"
        if state.get("Error"):
            reason += f" ({state['Error']})"
        return reason

    # -- internals ----------------------------------------------------------------------------
    def _refresh_connection(self) -> None:
        self._info = kernel_connection(f"{self.channel_dir}/{CHANNEL_PREFIX}", self._key)
        write_atomically(Path(self.connection_file), json.dumps(self._info, indent=1), mode=0o600)


def kernel_connection(prefix: str, key: str) -> dict[str, Any]:
    """The jupyter connection dict of a kernel whose sockets are `<prefix>-<channel number>`."""
    return {
        **KERNEL_PORTS,
        "ip": prefix,
        "key": key,
        "transport": "ipc",
        "signature_scheme": "hmac-sha256",
        "kernel_name": "",
    }


class DockerBackend:
    """The docker backend: one container per kernel; leftovers are the containers it labelled."""

    #: a container may be made ahead of the task that uses it (the kernel pool)
    warm_pool = True

    def provision(self, settings: KernelSettings, *, task_id: str) -> Kernel:
        return start_docker_kernel(settings, task_id=task_id)

    def image_for(self, settings: KernelSettings, profile: str) -> str:
        """`--super-image` if given, else the tag of the profile's image (`base.ImageBackend`)."""
        return image_for_task(profile, settings.image)

    def prepare_image(self, settings: KernelSettings, spec: ImageSpec) -> str:
        """The task's Dockerfile built, then our kernel layer on it (`task_image.py`;
        `base.TaskImageBackend`)."""
        from pytest_super.kernels.docker.task_image import prepare_task_image

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
    address = engine_address(settings.docker_host)
    relayed = settings.channel == "relay" or (
        settings.channel == "auto" and is_remote_engine(address)
    )
    image = settings.image or default_image_tag()
    if settings.network not in ("bridge", "none"):
        raise InfrastructureError(
            f"kernel network {settings.network!r} is not supported; use 'bridge' or 'none'"
        )
    name = container_name(task_id, settings.worker)
    key = secrets.token_hex(32)
    folder = tempfile.mkdtemp(prefix=HOST_FOLDER_PREFIX, dir=host_folder_root())  # mode 0700
    container_id = None
    box: DockerBox | None = None
    api = client.api
    try:
        binds, env = _mirror_binds(settings.git_mirrors)
        if settings.pip_cache:
            binds[settings.pip_cache] = {"bind": PIP_CACHE_DIR, "mode": "rw"}
        channel_dir, tmpfs = _channel_folder(folder, binds, relayed=relayed)
        limits = _container_limits(client, address, settings, binds, tmpfs)
        create: dict[str, Any] = {
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
            docker_host=settings.docker_host,
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
) -> dict[str, Any]:
    """The container's mounts, resource limits, privileges and network."""
    return {
        "init": True,
        "binds": binds or None,
        "tmpfs": tmpfs,
        "mem_limit": settings.mem,
        "memswap_limit": settings.mem,
        "nano_cpus": int(min(settings.cpus, _engine_cpus(client, address)) * 1e9),
        "pids_limit": settings.pids_limit,
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
    create: dict[str, Any],
    limits: dict[str, Any],
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
    create: dict[str, Any],
    limits: dict[str, Any],
    disk_bytes: int | None,
) -> tuple[str, bool]:
    """Create the container; return its id and whether the engine itself bounds its disk."""
    api = client.api
    enforced = disk_bytes is not None and _engine_caps_disk(client, address)
    storage: dict[str, Any] = {"storage_opt": {"size": str(disk_bytes)}} if enforced else {}
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


def is_remote_engine(address: str) -> bool:
    """Does the engine at `address` run on another machine (tcp:// or ssh:// naming a host)?"""
    parsed = urlparse(address)
    if parsed.scheme not in ("tcp", "ssh", "http", "https") or not parsed.hostname:
        return False
    host = parsed.hostname
    return not (host in ("localhost", "::1") or host.startswith("127."))


def _engine_info(client: docker.DockerClient, address: str) -> dict[str, Any]:
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


def _size(n: int) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"
