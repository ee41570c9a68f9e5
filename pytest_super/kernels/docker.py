"""The docker backend: one container per task holding one ipykernel (`DockerBox`).

This module provisions boxes; talking to the kernel inside is `runtime.JupyterKernel`'s job.

A box is a container of the kernel image (`image.default_image_tag()` unless settings.image names
another) started with tini (`init=True`) in /content. The kernel listens on five fixed ports
inside the container; they are published on random host ports bound to 127.0.0.1.

Remote engines: when the engine address (settings.docker_host, else DOCKER_HOST) is a `tcp://`
or `ssh://` URL naming another host, the ports are published on 0.0.0.0 *on that host* and the
kernel is reached at that host's address; anyone who can reach those ports still needs the key.

network "none": a container with docker's `--network none` cannot publish ports, so such boxes
join `pytest-super-isolated`, an internal bridge network (no route out, no DNS for the outside,
containers cannot reach each other) and the kernel is reached at the container's own address.
That address is routable only from the engine's host, so "none" needs a local engine.

Secrets: each box gets a fresh random HMAC key. It is never in the container's env, labels or
command line (`docker inspect` is readable by anyone with engine access): the connection file is
copied into the created container with `put_archive` (mode 0600) before it starts. The host-side
copy (for `jupyter console --existing`) lives in a private 0700 directory, mode 0600. Nothing of
the host environment is passed in.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import secrets
import shutil
import socket
import tarfile
import tempfile
import threading
import time
from typing import Any
from urllib.parse import urlparse

import docker
import docker.errors
import requests.exceptions

from pytest_super.errors import (
    EngineUnavailable,
    ImageMissing,
    InfrastructureError,
    KernelStartError,
)
from pytest_super.kernels import (
    KEPT_SUFFIX,
    LABEL,
    LABEL_HOST,
    LABEL_PID,
    LABEL_RUN,
    LABEL_TASK,
    LABEL_WORKER,
    docker_client,
    engine_address,
)
from pytest_super.kernels.base import KernelSettings
from pytest_super.kernels.image import build_hint, default_image_tag

#: the kernel's ports inside the container (each container has its own network namespace)
KERNEL_PORTS: dict[str, int] = {
    "shell_port": 50001,
    "iopub_port": 50002,
    "stdin_port": 50003,
    "control_port": 50004,
    "hb_port": 50005,
}
CONNECTION_DIR_IN_CONTAINER = "/etc/pytest-super"
CONNECTION_FILE_IN_CONTAINER = f"{CONNECTION_DIR_IN_CONTAINER}/kernel.json"
KERNEL_COMMAND = ["python", "-m", "ipykernel_launcher", "-f", CONNECTION_FILE_IN_CONTAINER]
WORKING_DIR = "/content"
ISOLATED_NETWORK = "pytest-super-isolated"
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

_ncpu: dict[str, int] = {}
_network_lock = threading.Lock()


class DockerBox:
    """One task container holding one kernel; implements runtime's `Box` protocol."""

    def __init__(
        self,
        client: docker.DockerClient,
        *,
        container_id: str,
        name: str,
        key: str,
        host_ip: str | None,
        connection_dir: str,
        docker_host: str | None,
    ) -> None:
        self.client = client
        self.api = client.api
        self.container_id = container_id
        self.name = name
        self._key = key
        self._host_ip = host_ip  # None: reach the kernel at the container's own address
        self._connection_dir = connection_dir
        self.connection_file = os.path.join(connection_dir, f"{name}.json")
        self._docker_host = docker_host
        self._info: dict[str, Any] = {}
        self._removed = False
        self.description = f"docker container {name} ({container_id[:12]})"

    # -- Box protocol -------------------------------------------------------------------------
    def connection_info(self) -> dict[str, Any]:
        if not self._info:
            self._refresh_connection()
        return dict(self._info)

    def is_alive(self) -> bool:
        try:
            state = self.api.inspect_container(self.container_id)["State"]
        except docker.errors.NotFound:
            return False
        except requests.exceptions.ConnectionError as exc:
            raise EngineUnavailable(
                f"the Docker engine went away while {self.description} ran: {exc}"
            ) from exc
        return bool(state.get("Running")) and not state.get("Restarting")

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
            f"  jupyter console --existing {self.connection_file}\n"
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
            except docker.errors.APIError as exc:
                if exc.status_code == 409:  # removal already in progress
                    return
                with contextlib.suppress(docker.errors.APIError):
                    self.api.kill(self.container_id)
                with contextlib.suppress(docker.errors.NotFound):
                    self.api.remove_container(self.container_id, force=True, v=True)
        finally:
            self._removed = True
            shutil.rmtree(self._connection_dir, ignore_errors=True)

    def _log_tail(self, lines: int = 20) -> str:
        try:
            return self.api.logs(self.container_id, tail=lines).decode(errors="replace").strip()
        except docker.errors.APIError:
            return "(no logs)"

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
        attrs = self.api.inspect_container(self.container_id)
        net = attrs["NetworkSettings"]
        if self._host_ip is None:
            ip = next(
                (
                    n["IPAddress"]
                    for n in (net.get("Networks") or {}).values()
                    if n.get("IPAddress")
                ),
                "",
            )
            if not ip:
                raise InfrastructureError(f"{self.description} has no IP address on its network")
            ports = dict(KERNEL_PORTS)
        else:
            ip = self._host_ip
            published = net.get("Ports") or {}
            ports = {}
            for name, port in KERNEL_PORTS.items():
                bindings = published.get(f"{port}/tcp") or []
                if not bindings:
                    state = attrs.get("State", {})
                    if not state.get("Running"):
                        raise KernelStartError(
                            f"the kernel in {self.description} stopped as it started (exit code "
                            f"{state.get('ExitCode')}); its last output:\n{self._log_tail()}"
                        )
                    raise InfrastructureError(
                        f"{self.description}: port {port} is not published "
                        f"(state {state.get('Status')!r}, {state.get('Error') or 'no error'})"
                    )
                ports[name] = int(bindings[0]["HostPort"])
        self._info = {
            **ports,
            "ip": ip,
            "key": self._key,
            "transport": "tcp",
            "signature_scheme": "hmac-sha256",
            "kernel_name": "",
        }
        _write_private(self.connection_file, json.dumps(self._info, indent=1).encode())


def start_docker_kernel(settings: KernelSettings, *, task_id: str) -> Any:
    """Start a container for `task_id` and return a ready `runtime.JupyterKernel` on it."""
    from pytest_super.kernels.runtime import JupyterKernel

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
    remote_host = _remote_engine_host(address)
    image = settings.image or default_image_tag()
    isolated = settings.network == "none"
    if isolated and remote_host:
        raise InfrastructureError(
            f"network 'none' needs a local engine (the kernel is reached at the container's own "
            f"address), but the engine is {address}; use network 'bridge' with a remote engine"
        )
    if settings.network not in ("bridge", "none"):
        raise InfrastructureError(
            f"kernel network {settings.network!r} is not supported; use 'bridge' or 'none'"
        )

    name = container_name(task_id, settings.worker)
    key = secrets.token_hex(32)
    host_ip = None if isolated else (remote_host or "127.0.0.1")
    bind_ip = "0.0.0.0" if remote_host else "127.0.0.1"
    binds, env = _mirror_binds(settings.git_mirrors)
    if settings.pip_cache:
        binds[settings.pip_cache] = {"bind": PIP_CACHE_DIR, "mode": "rw"}

    api = client.api
    host_config = api.create_host_config(
        init=True,
        port_bindings=None if isolated else {p: (bind_ip, None) for p in KERNEL_PORTS.values()},
        binds=binds or None,
        mem_limit=settings.mem,
        memswap_limit=settings.mem,
        nano_cpus=int(min(settings.cpus, _engine_cpus(client, address)) * 1e9),
        pids_limit=settings.pids_limit,
        privileged=False,
        cap_drop=["ALL"],
        cap_add=CAPABILITIES,
        security_opt=["no-new-privileges:true"],
        network_mode=_ensure_isolated_network(client) if isolated else "bridge",
        # no resolver answers for outside names there: fail lookups in 1 s rather than 10 s
        dns_opt=["timeout:1", "attempts:1"] if isolated else None,
    )
    labels = {
        LABEL: "1",
        LABEL_RUN: settings.run_id,
        LABEL_WORKER: settings.worker,
        LABEL_TASK: task_id,
        LABEL_PID: os.environ.get(CONTROLLER_PID_ENV) or str(os.getpid()),
        LABEL_HOST: socket.gethostname(),
    }
    connection_dir = tempfile.mkdtemp(prefix="pytest-super-kernel-")  # mode 0700
    container_id = None
    try:
        try:
            container_id = api.create_container(
                image,
                command=KERNEL_COMMAND,
                name=name,
                working_dir=WORKING_DIR,
                environment=env,
                labels=labels,
                ports=list(KERNEL_PORTS.values()),
                host_config=host_config,
                detach=True,
            )["Id"]
        except docker.errors.ImageNotFound as exc:
            raise ImageMissing(
                f"the kernel image {image!r} is not on the engine at {address}. Build it with "
                f"{build_hint(image)}"
                + ("" if settings.image is None else ", or pass an existing --super-image")
                + "."
            ) from exc
        box = DockerBox(
            client,
            container_id=container_id,
            name=name,
            key=key,
            host_ip=host_ip,
            connection_dir=connection_dir,
            docker_host=settings.docker_host,
        )
        api.put_archive(container_id, "/etc", _connection_archive(key))
        api.start(container_id)
        box._refresh_connection()
        return box
    except (requests.exceptions.ConnectionError, docker.errors.DockerException) as exc:
        _discard(api, container_id, connection_dir)
        if isinstance(exc, docker.errors.APIError):
            raise InfrastructureError(
                f"starting a kernel container for task {task_id!r} from {image!r} failed: "
                f"{exc.explanation or exc}"
            ) from exc
        raise EngineUnavailable(
            f"the Docker engine at {address} stopped answering while starting a kernel for task "
            f"{task_id!r} ({exc}). Check `docker info`; start one with `scripts/ensure-docker.sh`."
        ) from exc
    except BaseException:
        _discard(api, container_id, connection_dir)
        raise


def container_name(task_id: str, worker: str) -> str:
    """`super-<task>-<worker>-<6 hex>`: docker-legal and at most 63 characters."""
    worker_part = re.sub(r"[^a-zA-Z0-9_.-]+", "-", worker).strip("-.") or "main"
    worker_part = worker_part[:16]
    task_part = re.sub(r"[^a-zA-Z0-9_.-]+", "-", task_id).strip("-.") or "task"
    room = 63 - len("super-") - len(worker_part) - len("-") - len("-") - 6
    return f"super-{task_part[:room].rstrip('-.')}-{worker_part}-{secrets.token_hex(3)}"


def _connection_archive(key: str) -> bytes:
    """A tar holding pytest-super/kernel.json (0600) for the container's /etc."""
    info = {
        **KERNEL_PORTS,
        "ip": "0.0.0.0",
        "key": key,
        "transport": "tcp",
        "signature_scheme": "hmac-sha256",
        "kernel_name": "",
    }
    data = json.dumps(info).encode()
    buffer = io.BytesIO()
    now = time.time()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        folder = tarfile.TarInfo(CONNECTION_DIR_IN_CONTAINER.removeprefix("/etc/"))
        folder.type = tarfile.DIRTYPE
        folder.mode = 0o700
        folder.mtime = now
        tar.addfile(folder)
        member = tarfile.TarInfo(f"{folder.name}/kernel.json")
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


def _remote_engine_host(address: str) -> str | None:
    """The IP of the engine's host when it is another machine (tcp:// or ssh://), else None."""
    parsed = urlparse(address)
    if parsed.scheme not in ("tcp", "ssh", "http", "https") or not parsed.hostname:
        return None
    host = parsed.hostname
    if host in ("localhost", "::1") or host.startswith("127."):
        return None
    try:
        return socket.gethostbyname(host)
    except OSError as exc:
        raise EngineUnavailable(
            f"cannot resolve the Docker engine host {host!r} of {address}: {exc}"
        ) from exc


def _engine_cpus(client: docker.DockerClient, address: str) -> int:
    if address not in _ncpu:
        _ncpu[address] = int(client.info().get("NCPU") or os.cpu_count() or 1)
    return _ncpu[address]


def _ensure_isolated_network(client: docker.DockerClient) -> str:
    with _network_lock:
        if not client.api.networks(names=[ISOLATED_NETWORK]):
            try:
                client.api.create_network(
                    ISOLATED_NETWORK,
                    driver="bridge",
                    internal=True,
                    check_duplicate=True,
                    options={"com.docker.network.bridge.enable_icc": "false"},
                    labels={LABEL: "1"},
                )
            except docker.errors.APIError as exc:
                if exc.status_code != 409:
                    raise
    return ISOLATED_NETWORK


def _discard(api: Any, container_id: str | None, connection_dir: str) -> None:
    shutil.rmtree(connection_dir, ignore_errors=True)
    if container_id is None:
        return
    with contextlib.suppress(docker.errors.APIError, requests.exceptions.ConnectionError):
        api.remove_container(container_id, force=True, v=True)


def _write_private(path: str, data: bytes) -> None:
    """Write `path` with mode 0600 (replacing it), never readable by others even briefly."""
    tmp = f"{path}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.replace(tmp, path)
