"""Runs inside the reaper container: the engine side of the dead man's switch.

`python3 -I -S /opt/pytest-super-reaper/reaper.py` in the reaper's own image (built by
`kernels/docker/reaper.py` from this file on the kernel image's base, never a task's image),
started on a local engine with the folder of the engine's unix socket mounted read-only (`SOCKET`
names the socket in it) and the host's PID namespace. Standard library only: it runs with the
base's Python, not the harness's, and imports nothing of the package.

Every `SWEEP_S` it reads the leases on the engine (`kernels/docker/lease.py` says what they are)
that hold the switch (label `LABEL_SWITCH=on`), and judges each as lease.py does: a holder of
this kernel boot and PID namespace is alive exactly while its pid names the same process (a
stopped one too), and dead at once when it is gone; any other holder is dead when its lease was
not renewed for its `ttl_s`, by this host's clock (the engine's). For each dead lease it
force-removes (with volumes) every task container labelled with it, except the ones kept with
`--super-keep` (names ending in `KEPT_SUFFIX`), then the lease. It exits when it has seen no
lease and no task container of ours, or no answer from the engine, for `IDLE_S` (env
`PYTEST_SUPER_REAPER_IDLE_S`).
"""

from __future__ import annotations

import http.client
import io
import json
import os
import socket
import sys
import tarfile
import time
import urllib.parse
from typing import TypedDict, cast

#: the engine's socket, in its folder mounted read-only (an engine restarted meanwhile makes a
#: new socket there, which a mount of the old socket file would not show)
SOCKET = os.environ.get("PYTEST_SUPER_ENGINE_SOCKET") or "/run/pytest-super-engine/docker.sock"
#: the labels and names of kernels/docker (tests/test_dead_man_switch.py checks they agree)
LABEL = "pytest-super"
LABEL_LEASE = "pytest-super.lease"
LABEL_HOLDER = "pytest-super.lease-holder"
LABEL_SWITCH = "pytest-super.lease-switch"
LABEL_HOLDER_PID = "pytest-super.lease-pid"
LABEL_HOLDER_START = "pytest-super.lease-pid-start"
LABEL_HOLDER_PID_NS = "pytest-super.lease-pid-ns"
LABEL_HOLDER_BOOT = "pytest-super.lease-boot-id"
LEASE_FILE = "lease.json"
KEPT_SUFFIX = "-kept"
#: seconds between sweeps
SWEEP_S = 5.0
#: seconds with nothing of ours on the engine before the reaper leaves
IDLE_S = 60.0
#: a lease that says no ttl_s (or a bad one) is judged with this
DEFAULT_TTL_S = 90.0


class ContainerSummary(TypedDict, total=False):
    """A container as the engine lists it (`GET /containers/json`), the fields read here."""

    Id: str
    Names: list[str]
    Labels: dict[str, str]
    Created: int
    State: str


class HolderFields(TypedDict, total=False):
    """Who holds a lease (lease.py's `Holder`, as its file or its labels say)."""

    pid: int
    boot_id: str | None
    pid_ns: int | None
    start_ticks: int | None


class LeaseFile(TypedDict, total=False):
    """A lease's file (lease.py writes it)."""

    renewed: float
    ttl_s: float
    holder: HolderFields


class Engine:
    """The engine's API over its unix socket (HTTP/1.1, one connection per request)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def request(self, method: str, url: str) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection("engine", timeout=60)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(60)
        try:
            sock.connect(self.path)
            conn.sock = sock
            conn.request(method, url)
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()
            sock.close()

    def containers(self, label: str) -> list[ContainerSummary]:
        filters = urllib.parse.quote(json.dumps({"label": [label]}))
        status, body = self.request("GET", f"/containers/json?all=1&filters={filters}")
        if status != 200:
            raise OSError(f"listing containers: HTTP {status}")
        found = json.loads(body)
        return found if isinstance(found, list) else []

    def lease_file(self, container_id: str) -> LeaseFile | None:
        path = urllib.parse.quote(f"/{LEASE_FILE}")
        status, body = self.request("GET", f"/containers/{container_id}/archive?path={path}")
        if status != 200:
            return None
        try:
            with tarfile.open(fileobj=io.BytesIO(body)) as tar:
                member = tar.extractfile(LEASE_FILE)
                data = json.loads(member.read()) if member else None
        except (tarfile.TarError, ValueError, KeyError):
            return None
        return cast(LeaseFile, data) if isinstance(data, dict) else None  # fields checked as read

    def remove(self, container_id: str) -> bool:
        """Force-remove a container with its volumes; False if it was not there (or is being
        removed by someone else)."""
        status, _ = self.request("DELETE", f"/containers/{container_id}?force=1&v=1")
        return status == 204


# -- who holds a lease (lease.py's Holder, by the reaper's own /proc: the host's PID namespace) ---
def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def start_ticks(pid: int) -> int | None:
    """Field 22 of /proc/<pid>/stat; None if the process is gone or a zombie."""
    stat = _read(f"/proc/{pid}/stat")
    if stat is None:
        return None
    try:
        fields = stat.rsplit(")", 1)[1].split()
        return None if fields[0] in ("Z", "X") else int(fields[19])
    except (IndexError, ValueError):
        return None


def here() -> tuple[str | None, int | None]:
    """(this kernel's boot id, this PID namespace's inode)."""
    try:
        pid_ns: int | None = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        pid_ns = None
    return _read("/proc/sys/kernel/random/boot_id"), pid_ns


def holder_of(labels: dict[str, str], data: LeaseFile | None) -> HolderFields | None:
    """The holder as the lease file says, else as the lease container's labels say."""
    fields = (data or {}).get("holder")
    if isinstance(fields, dict):
        return fields
    try:
        return {
            "pid": int(labels[LABEL_HOLDER_PID]),
            "boot_id": labels.get(LABEL_HOLDER_BOOT) or None,
            "pid_ns": int(labels[LABEL_HOLDER_PID_NS]) if labels.get(LABEL_HOLDER_PID_NS) else None,
            "start_ticks": (
                int(labels[LABEL_HOLDER_START]) if labels.get(LABEL_HOLDER_START) else None
            ),
        }
    except (KeyError, ValueError):
        return None


def proven(holder: HolderFields | None) -> bool | None:
    """True: the holder's process is alive; False: it is gone; None: it cannot be told from here
    (another boot or PID namespace, or fields missing)."""
    if holder is None:
        return None
    boot_id, pid_ns = here()
    pid, ticks = holder.get("pid"), holder.get("start_ticks")
    if None in (boot_id, pid_ns, holder.get("boot_id"), holder.get("pid_ns"), ticks):
        return None
    if (holder.get("boot_id"), holder.get("pid_ns")) != (boot_id, pid_ns):
        return None
    if not isinstance(pid, int) or isinstance(pid, bool):
        return None
    return start_ticks(pid) == ticks


def dead(engine: Engine, lease: ContainerSummary, now: float) -> bool:
    """Is this lease's holder dead (lease.py's judgement)?"""
    labels = lease.get("Labels") or {}
    data = engine.lease_file(lease["Id"])
    alive = proven(holder_of(labels, data))
    if alive is not None:
        return not alive
    if data is None:  # created but not written yet: judged by its creation time
        return now - float(lease.get("Created") or 0) > DEFAULT_TTL_S
    try:
        return now - float(data.get("renewed", 0)) > float(data.get("ttl_s", DEFAULT_TTL_S))
    except (TypeError, ValueError):
        return True


def reap(engine: Engine, lease: ContainerSummary) -> list[str]:
    """Remove a dead lease's task containers (kept ones excepted), then the lease."""
    lease_id = (lease.get("Labels") or {}).get(LABEL_HOLDER, "")
    removed = []
    for box in engine.containers(f"{LABEL_LEASE}={lease_id}") if lease_id else []:
        names = [n.lstrip("/") for n in box.get("Names") or []]
        if any(n.endswith(KEPT_SUFFIX) for n in names):
            continue
        if engine.remove(box["Id"]):
            removed.append(names[0] if names else box["Id"])
    if engine.remove(lease["Id"]):
        removed.append(lease_id)
    return removed


#: container states of nothing that runs again: its removal failed ("dead": the engine could not
#: remove its root filesystem, a mount held elsewhere) or is under way
GONE_STATES = ("dead", "removing")


def sweep(engine: Engine) -> bool:
    """One pass; True while anything of ours is on the engine (a lease or a task container
    that is not kept, neither dead nor being removed: a dead lease kept a reaper for hours)."""
    leases = engine.containers(LABEL_HOLDER)
    now = time.time()
    for lease in leases:
        if (lease.get("Labels") or {}).get(LABEL_SWITCH) != "on":
            continue  # a lease without the switch (its holder opted out, or an earlier version)
        if dead(engine, lease, now):
            for name in reap(engine, lease):
                print(f"removed {name} (its owner is gone)", flush=True)
    boxes = [
        box
        for box in engine.containers(f"{LABEL}=1")
        if not any(n.endswith(KEPT_SUFFIX) for n in box.get("Names") or [])
    ]
    return any(found.get("State") not in GONE_STATES for found in [*leases, *boxes])


def main() -> int:
    engine = Engine(SOCKET)
    idle_s = float(os.environ.get("PYTEST_SUPER_REAPER_IDLE_S") or IDLE_S)
    last_busy = time.monotonic()
    while True:
        try:
            busy = sweep(engine)
        except (OSError, http.client.HTTPException, ValueError) as exc:
            # No answer counts as idle: a reaper that cannot reach its engine (the socket it was
            # given is gone or refused, as a proxy's socket a run was started on) leaves after
            # `idle_s`, and with it the name it holds: a live lease's renewal starts a reaper
            # that can, once the engine answers. Staying would keep the switch off for good.
            print(f"sweep failed: {exc}", file=sys.stderr, flush=True)
            busy = False
        if busy:
            last_busy = time.monotonic()
        elif time.monotonic() - last_busy >= idle_s:
            break
        time.sleep(SWEEP_S)
    print(f"nothing of ours, or no answer, for {idle_s:.0f} s: leaving", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
