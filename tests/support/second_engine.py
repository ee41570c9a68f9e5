"""A second Docker engine on this host, for the tests of `--super-docker-host` / DOCKER_HOST and of
isolation across engines (conftest.py's `second_engine` fixture starts it; it needs root)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import docker
import docker.errors
import pytest

from pytest_super.kernels.docker.image import DEFAULT_BASE, OFFLINE_BASE
from pytest_super.kernels.docker.network import TASK_NETWORK

# One second engine per process (an xdist worker, a session without xdist) at most, on a slot no
# other process of this host holds: test_scale and test_isolation both start one, on two workers
# at once, and sessions of other checkouts on the same host too; they must not share a socket,
# data root, bridge or subnet (CI once saw one module's teardown stop the engine the other was
# using). The slot is an abstract unix socket bound for the process's life: the kernel releases
# it when the process dies, however it dies, and the next process to claim the slot removes what
# the dead one left (its dockerd, data root, bridge: `start_second_engine`).
SLOTS = 100  # the subnets 172.31.150-249, the pools 10.110-209 (ray_cluster.py keeps off them)


def _claim_slot() -> tuple[int, socket.socket]:
    for slot in range(SLOTS):
        lock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            lock.bind(f"\0pytest-super-second-engine-{slot}")
        except OSError:
            lock.close()
            continue
        return slot, lock
    raise RuntimeError(f"all {SLOTS} slots of second Docker engines are held by other processes")


_SLOT, _SLOT_LOCK = _claim_slot()
SECOND_SOCKET = f"/tmp/pytest-super-dockerd2-s{_SLOT}.sock"
SECOND_HOST = f"unix://{SECOND_SOCKET}"
SECOND_BRIDGE = f"psd2s{_SLOT}"
SECOND_SUBNET = f"172.31.{150 + _SLOT}"
SECOND_ROOT = f"/tmp/pytest-super-docker2-s{_SLOT}"
#: written when the slot's engine stopped cleanly: its data root may be used again
KEPT = f"{SECOND_ROOT}.kept"


def _sh(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, check=False)


def _cannot_start_second_engine(reason: str) -> NoReturn:
    """Skip on a developer's machine; with CI=true a missing prerequisite is a failure."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI=true: scripts/ensure-docker.sh provides dockerd and ip as root)")
    pytest.skip(reason)


def start_second_engine(image: str) -> Iterator[docker.DockerClient]:
    """A second dockerd on its own socket, data root, exec root and bridge, holding `image`;
    stopped afterwards (the `second_engine` fixture of conftest.py)."""
    if os.geteuid() != 0:
        _cannot_start_second_engine("a second Docker engine needs root (dockerd, a bridge)")
    dockerd = shutil.which("dockerd")
    if dockerd is None:
        _cannot_start_second_engine("no dockerd binary on this machine to start a second engine")
    if shutil.which("ip") is None:
        _cannot_start_second_engine("no `ip` command (iproute2) to make the second engine's bridge")
    _remove_left()
    made_bridge = False
    if _sh("ip", "link", "show", SECOND_BRIDGE).returncode != 0:
        steps = [
            ("ip", "link", "add", "name", SECOND_BRIDGE, "type", "bridge"),
            ("ip", "addr", "add", f"{SECOND_SUBNET}.1/24", "dev", SECOND_BRIDGE),
            ("ip", "link", "set", SECOND_BRIDGE, "up"),
        ]
        for step in steps:
            done = _sh(*step)
            if done.returncode != 0:
                _cannot_start_second_engine(
                    f"cannot make a bridge for a second engine: {done.stderr.strip()}"
                )
        made_bridge = True
    data_root, exec_root, kept = Path(SECOND_ROOT), Path(f"{SECOND_ROOT}-exec"), Path(KEPT)
    _clear_unless_kept(data_root, exec_root, kept)
    stopped_cleanly = False
    log = open(f"{SECOND_ROOT}.log", "ab")  # noqa: SIM115 - closed in teardown
    daemon = subprocess.Popen(
        [
            dockerd,
            f"--host={SECOND_HOST}",
            f"--data-root={data_root}",
            f"--exec-root={SECOND_ROOT}-exec",
            f"--pidfile={SECOND_ROOT}.pid",
            f"--bridge={SECOND_BRIDGE}",
            "--iptables=false",
            "--ip-masq=false",
            # never without: a dockerd that finds its default network of an earlier start in its
            # data root and has --default-address-pool deletes the host's docker0 (moby's
            # configureNetworking: "Clear stale bridge network", skipped with live restore)
            "--live-restore",
            # its own pool for the task network: two new engines at once would pick the same subnet
            f"--default-address-pool=base=10.{110 + _SLOT}.0.0/16,size=24",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                client = docker.DockerClient(base_url=SECOND_HOST)
                client.ping()
                break
            except Exception:
                if daemon.poll() is not None or time.monotonic() > deadline:
                    tail = Path(f"{SECOND_ROOT}.log").read_text()[-1500:]
                    _cannot_start_second_engine(f"a second dockerd did not start: {tail}")
                time.sleep(0.5)
        _hold_only(client, image)
        # and the base the engine's reaper image is built FROM (reaper.py)
        _load(client, *_present(DEFAULT_BASE, OFFLINE_BASE))
        yield client
        for container in client.containers.list(all=True):  # live restore: they would outlive it
            with contextlib.suppress(docker.errors.APIError):
                container.remove(force=True)
        for network in client.networks.list(names=[TASK_NETWORK]):  # its host bridge outlives it
            with contextlib.suppress(docker.errors.APIError):
                network.remove()
        # one it could not remove (a "dead" container: its root filesystem busy) must not reach
        # the next module's engine through a kept data root (it kept a reaper busy for good)
        stopped_cleanly = not client.containers.list(all=True, ignore_removed=True)
        client.close()
    finally:
        daemon.terminate()
        try:
            daemon.wait(timeout=60)
        except subprocess.TimeoutExpired:
            stopped_cleanly = False
            daemon.kill()
            daemon.wait()
        log.close()
        if made_bridge:
            _sh("ip", "link", "delete", SECOND_BRIDGE)
        if stopped_cleanly:
            _clear(exec_root)
            kept.touch()
        else:
            _clear(data_root, exec_root)


def _clear_unless_kept(data_root: Path, exec_root: Path, kept: Path) -> None:
    """Clear the exec root; the data root too, unless the slot's last engine stopped cleanly
    with no container left and marked it `kept` (it holds the image: a `docker save | docker
    load` of it took 188-338 s of a module's set-up on a loaded machine), and nothing is mounted
    under it (a container's root filesystem left mounted: the next engine cannot remove that
    container). Any other data root is a killed one's. The mark goes: an engine killed from now
    on leaves a data root the next start clears."""
    try:
        kept.unlink()
        keep = not _mounts_under(data_root)
    except FileNotFoundError:
        keep = False
    _clear(*([] if keep else [data_root]), exec_root)


def _mounts_under(root: Path) -> list[str]:
    with open("/proc/self/mounts") as mounts:
        points = [line.split()[1] for line in mounts]
    return [p for p in points if p == str(root) or p.startswith(f"{root}/")]


def _hold_only(client: docker.DockerClient, image: str) -> None:
    """Load `image` from the main engine unless a kept data root holds it; remove the kernel
    images of other builds (each near 1 GB) a kept one holds."""
    for found in client.images.list(filters={"label": "pytest-super.image=1"}):
        if image not in found.tags:
            with contextlib.suppress(docker.errors.APIError):
                client.images.remove(found.id, force=True)
    _load(client, image)


def _remove_left() -> None:
    """Remove what a killed process left on this slot: its dockerd (its pid file names it, its
    command line this slot's socket; SIGKILLed, waited for), then its bridge. Its data root goes
    with `_clear`."""
    with contextlib.suppress(OSError, ValueError):
        pid = int(Path(f"{SECOND_ROOT}.pid").read_text().strip())
        if f"--host={SECOND_HOST}".encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
            os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 30
            while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
                time.sleep(0.1)
    if _sh("ip", "link", "show", SECOND_BRIDGE).returncode == 0:
        _sh("ip", "link", "delete", SECOND_BRIDGE)


def _load(client: docker.DockerClient, *images: str) -> None:
    """Copy each of `images` from the main engine to the second one unless it holds it."""
    for wanted in images:
        try:
            client.images.get(wanted)
        except docker.errors.ImageNotFound:
            saved = subprocess.Popen(["docker", "save", wanted], stdout=subprocess.PIPE)
            subprocess.run(
                ["docker", "-H", SECOND_HOST, "load", "-q"], stdin=saved.stdout, check=True
            )
            saved.wait()


def _present(*names: str) -> list[str]:
    """Those of `names` the main engine holds."""
    return [name for name in names if _sh("docker", "image", "inspect", name).returncode == 0]


def _clear(*roots: Path) -> None:
    """Remove an engine's data and exec roots, what is mounted under them unmounted first: a
    data root half removed (its layers gone, its image records not) broke the next engine
    started on it ("stat .../overlay2/<id>: no such file or directory"). The newest first: a
    killed engine's bind mount of its data root onto itself hides the mounts made before it."""
    for root in roots:
        for point in reversed(_mounts_under(root)):
            _sh("umount", "-l", point)
        shutil.rmtree(root, ignore_errors=True)
