"""A Docker task container holding one kernel (`DockerBox`, runtime's `Box`), as
`backend.py` made it: what it answers (alive, restarted, kept, removed) and how this host reaches
the kernel's sockets in it (`kernel_connection`).

Kernel channels: the kernel listens on no network port at all. It uses ZeroMQ's `ipc` transport
(unix sockets) in a folder private to the box: on a local engine a host folder (mode 0700)
bind-mounted at /run/pytest-super, so the controller connects to the sockets directly; on a remote
engine a tmpfs in the container, reached through the engine's own connection (`relay.py`).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from pathlib import Path

import docker
import docker.errors
import requests.exceptions

from pytest_super.atomic import write_atomically
from pytest_super.errors import DiskLimitExceeded, EngineUnavailable, InfrastructureError
from pytest_super.kernels.base import console_command
from pytest_super.kernels.docker.cleanup import KEPT_SUFFIX, remove_host_folder
from pytest_super.kernels.docker.diskwatch import INODE_BYTES, UNKNOWN, DiskLimits, DiskUse
from pytest_super.kernels.docker.engine import engine_address
from pytest_super.kernels.docker.lease import remove_later

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
#: seconds `restart` gives the old kernel after SIGTERM (its state is discarded anyway)
STOP_TIMEOUT_S = 0


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
        self._info: dict[str, object] = {}
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
    def connection_info(self) -> dict[str, object]:
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

    def restart(self) -> dict[str, object]:
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


def kernel_connection(prefix: str, key: str) -> dict[str, object]:
    """The jupyter connection dict of a kernel whose sockets are `<prefix>-<channel number>`."""
    return {
        **KERNEL_PORTS,
        "ip": prefix,
        "key": key,
        "transport": "ipc",
        "signature_scheme": "hmac-sha256",
        "kernel_name": "",
    }


def _size(n: int) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"
