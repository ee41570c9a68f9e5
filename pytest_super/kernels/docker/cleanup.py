"""Removing what runs left behind on an engine and on this host: the containers this project
labelled (e.g. after a run that was killed), dead runs' leases, and the private host folders
(kernel keys, connection files, channel sockets) whose container is gone.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import stat
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_super.atomic import write_atomically
from pytest_super.kernels.docker.engine import LABEL, LABEL_RUN, engine_identity
from pytest_super.kernels.docker.lease import (
    LABEL_HOLDER,
    LABEL_LEASE,
    LABEL_LEASE_RUN,
    live_leases,
)
from pytest_super.process_identity import Holder

if TYPE_CHECKING:
    import docker
    import docker.models.containers

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
    filters: dict[str, str | list[str] | bool] = {
        "label": [f"{LABEL}=1"] + ([f"{LABEL_RUN}={run_id}"] if run_id else [])
    }
    # containers first, leases second: a lease is taken before its first container is made, so
    # every container listed here has its lease in the later listing unless it is released.
    # Sparse (the listing alone, no inspection of each container, which an interrupted run's
    # clean-up would wait for before its first removal) unless the labels are needed.
    found = client.containers.list(
        all=True, filters=filters, ignore_removed=True, sparse=not dead_runs_only
    )
    leases: list[docker.models.containers.Container] = []
    if dead_runs_only:
        alive, leases = live_leases(client)
        found = [
            c
            for c in found
            if not (c.name or "").endswith(KEPT_SUFFIX)
            and (c.labels or {}).get(LABEL_LEASE)
            and (c.labels or {}).get(LABEL_LEASE) not in alive
        ]
    elif run_id is None:
        leases = client.containers.list(
            all=True, filters={"label": LABEL_HOLDER}, ignore_removed=True
        )
    removed = [_name(c) for c, ok in zip(found, _remove_all(found), strict=True) if ok]
    _remove_all(leases)
    cleanup_host_folders(client)
    return removed


def cleanup_dead_leases(client: docker.DockerClient, run_id: str) -> int:
    """Remove the leases of `run_id`'s processes that are dead (a killed run's: `pytest-super
    cleanup --run`); a live one's process still runs tasks. Returns how many were removed."""
    dead = [
        lease
        for lease in live_leases(client, run_id=run_id)[1]
        if (lease.labels or {}).get(LABEL_LEASE_RUN) == run_id
    ]
    return sum(_remove_all(dead))


#: the prefix and owner file of a box's host folder (`make_host_folder`)
HOST_FOLDER_PREFIX = "pytest-super-kernel-"
OWNER_FILE = "owner.json"
#: The owner file's key for the process that made the folder (process_identity.Holder's labels),
#: written as the folder is made: its engine and container are added once the container exists
#: (seconds later on a loaded engine), and a folder whose start its maker never finished is
#: removed as soon as that process is provably gone (a worker killed mid-start, issue 42).
MAKER = "maker"
#: A folder without an owner file (the instant between `mkdtemp` and its write, or an earlier
#: version's) that holds nothing but an empty `ipc` folder is a crashed start once this old (s).
UNOWNED_FOLDER_GRACE_S = 60.0


#: Linux bounds a unix socket path to 107 bytes; a box's longest is
#: `<root>/pytest-super-kernel-<8 random>/ipc/kernel-50001`, 46 bytes more than its root.
SOCKET_PATH_MAX = 107
_LONGEST_UNDER_ROOT = len("/pytest-super-kernel-12345678/ipc/kernel-50001")


def make_host_folder() -> str:
    """A new box folder (mode 0700) whose owner file names this process as its maker."""
    folder = tempfile.mkdtemp(prefix=HOST_FOLDER_PREFIX, dir=host_folder_root())
    write_atomically(Path(folder, OWNER_FILE), json.dumps(maker_entry()))
    return folder


def maker_entry() -> dict[str, dict[str, str]]:
    """The owner file's record of the process making or starting a box (`MAKER`)."""
    return {MAKER: Holder.of_this_process().labels()}


def host_folder_root() -> str:
    """Where box folders go: the temporary directory if short enough for the sockets, else /tmp."""
    root = tempfile.gettempdir()
    return root if len(root) + _LONGEST_UNDER_ROOT <= SOCKET_PATH_MAX else "/tmp"


def cleanup_host_folders(
    client: docker.DockerClient, *, folder_root: str | None = None
) -> list[str]:
    """Remove the box folders on this host whose container no longer exists on `client`'s engine.

    A folder names its engine and container in its owner file; folders of other engines are left
    alone. One whose owner file names only its maker (its container not made yet) is removed once
    that process is provably gone. A folder without an owner file is removed only if it is empty
    but for an empty `ipc` folder and older than `UNOWNED_FOLDER_GRACE_S` (else it is a box being
    created, or not ours).
    Returns the folders removed.
    """
    import docker.errors

    engine = engine_identity(client.info())
    removed: list[str] = []
    for path in _host_folders():
        try:
            owner = _read_owner(path)
        except FileNotFoundError:
            if not _crashed_start(path):
                continue
        except (OSError, ValueError):
            continue
        else:
            if "engine" not in owner:  # its start was under way: ended if its maker is gone
                if not _start_cut(path, owner):
                    continue
            elif owner.get("engine") != engine:
                continue
            else:
                try:
                    client.api.inspect_container(str(owner.get("container") or "-"))
                    continue
                except docker.errors.NotFound:
                    pass
        remove_host_folder(path)
        removed.append(path)
    return removed


#: the size of the tmpfs mounted on a box's channel folder (`mount_channel_folder`): room for the
#: kernel's five sockets (which take no blocks) and nothing a task could fill a disk with
CHANNEL_TMPFS = "size=256k,nr_inodes=64,mode=0700,nosuid,nodev,noexec"


def mount_channel_folder(channel_dir: str) -> bool:
    """Make a box's channel folder its own small tmpfs (root on Linux only), so a task cannot
    store data in the host folder bind-mounted for its kernel's sockets; False where it cannot
    be done (not root, no `mount`): the disk watch still counts the folder then."""
    if os.geteuid() != 0 or shutil.which("mount") is None or not _engine_sees_our_mounts():
        return False
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", CHANNEL_TMPFS, "pytest-super-ipc", channel_dir],
        capture_output=True,
        timeout=30,
    )
    return done.returncode == 0


@functools.cache
def _engine_sees_our_mounts() -> bool:
    """Whether a local `dockerd` runs in this process's mount namespace: only then does a bind
    mount of the channel folder show the engine our tmpfs (a run in a namespace of its own, as
    `unshare --mount-proc` makes, would hand the kernel an empty folder the controller never
    sees). A dockerd this process cannot see (another PID namespace, a remote engine): no."""
    try:
        ours = os.readlink("/proc/self/ns/mnt")
    except OSError:
        return False
    for comm in Path("/proc").glob("[0-9]*/comm"):
        try:
            if comm.read_text().strip() == "dockerd":
                return os.readlink(comm.parent / "ns" / "mnt") == ours
        except OSError:
            continue
    return False


def remove_host_folder(folder: str) -> None:
    """Remove a box's host folder, its channel tmpfs unmounted first (lazily: a socket still
    open elsewhere does not hold the removal up)."""
    channel_dir = os.path.join(folder, "ipc")
    if os.path.ismount(channel_dir):
        subprocess.run(["umount", "-l", channel_dir], capture_output=True, timeout=30)
    shutil.rmtree(folder, ignore_errors=True)


def _host_folders() -> list[str]:
    """The box folders in the temporary folders: real folders of ours only (another user's, or
    a symlink, planted under the prefix in a shared /tmp is none of our business)."""
    found = []
    for root in dict.fromkeys([host_folder_root(), tempfile.gettempdir()]):
        with contextlib.suppress(OSError):
            found += [
                os.path.join(root, n) for n in os.listdir(root) if n.startswith(HOST_FOLDER_PREFIX)
            ]
    return [path for path in found if _ours(path)]


def _ours(path: str) -> bool:
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid()


#: an owner file is a line of JSON of about 120 bytes
_OWNER_FILE_MAX = 4096


def _read_owner(folder: str) -> dict[str, object]:
    """A box folder's owner file, opened so that a FIFO or symlink there cannot block or redirect
    the read (`O_NOFOLLOW | O_NONBLOCK`, a regular file only, a bounded read)."""
    fd = os.open(
        os.path.join(folder, OWNER_FILE), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    )
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError(f"{folder}/{OWNER_FILE} is not a regular file")
        data = f.read(_OWNER_FILE_MAX + 1)
    if len(data) > _OWNER_FILE_MAX:
        raise ValueError(f"{folder}/{OWNER_FILE} is larger than an owner file")
    owner = json.loads(data)
    if not isinstance(owner, dict):
        raise ValueError(f"{folder}/{OWNER_FILE} does not hold an object")
    return owner


def _crashed_start(path: str) -> bool:
    try:
        young = time.time() - os.stat(path).st_mtime < UNOWNED_FOLDER_GRACE_S
        return not young and all(
            (name == "ipc" and not os.listdir(os.path.join(path, name)))
            or name == OWNER_FILE  # its maker's alone: the caller read it
            or name.startswith(f".{OWNER_FILE}.")  # its first write, cut before its rename
            for name in os.listdir(path)
        )
    except OSError:
        return False


def _start_cut(path: str, owner: dict[str, object]) -> bool:
    """Whether a folder whose owner file names only its maker is a start that will never end:
    its maker is provably gone; or, a maker this process cannot judge (another PID namespace or
    boot), the folder is a crashed start by its age and contents."""
    labels = owner.get(MAKER)
    holder = None
    if isinstance(labels, dict):
        holder = Holder.from_labels({str(k): str(v) for k, v in labels.items()})
    if holder is not None and holder.provably_gone():
        return True
    if holder is not None and holder.provably_alive():
        return False
    return _crashed_start(path)


def _name(container: docker.models.containers.Container) -> str:
    """A container's name, from its inspection or (sparse) from the engine's listing."""
    names = container.attrs.get("Names") or [""]
    return container.name or str(names[0]).lstrip("/") or container.id or ""


#: containers one clean-up removes at once
REMOVERS = 8


def _remove_all(containers: list[docker.models.containers.Container]) -> list[bool]:
    """Force-remove containers at once (each removal waits for the engine to kill its
    container: 0.2-0.3 s on 2 busy cores, which an interrupted run's end waits for); whether each
    was removed by this call. The first engine error is raised once all are done."""
    if len(containers) < 2:
        return [_force_remove(c) for c in containers]
    with ThreadPoolExecutor(max_workers=min(REMOVERS, len(containers))) as pool:
        return list(pool.map(_force_remove, containers))


#: how long a removal another process started (the engine's reaper's, another clean-up's) is
#: waited for by one that meets it: an engine removes a container in well under a second
REMOVAL_WAIT_S = 30.0


def _force_remove(container: docker.models.containers.Container) -> bool:
    """Whether this call removed `container`. A removal another process has under way (the
    engine's 409) is waited for (at most REMOVAL_WAIT_S), so that the container is gone when the
    caller judges its host folder (`cleanup_host_folders`): judged while the engine was still
    removing it, the folder was kept, and a Ray node's watchdog, its pass otherwise empty, left
    it for good (CI of e948600: the Ray driver SIGKILLed, the reaper and the watchdog both
    removing a task's container)."""
    import docker.errors

    try:
        container.remove(force=True)
    except docker.errors.NotFound:
        return False
    except docker.errors.APIError as exc:
        if exc.status_code != 409:  # 409: removal already in progress
            raise
        _wait_removed(container)
        return False
    return True


def _wait_removed(container: docker.models.containers.Container) -> None:
    import docker.errors

    deadline = time.monotonic() + REMOVAL_WAIT_S
    while time.monotonic() < deadline:
        try:
            container.reload()
        except docker.errors.NotFound:
            return
        time.sleep(0.1)
