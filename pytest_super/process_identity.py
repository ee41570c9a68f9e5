"""Who a process is, read from Linux's /proc in this one module: the kernel's boot id, this PID
namespace, a process's start time and its parent.

A pid alone does not name a process: pids are reused. A pid with its start time (clock ticks
after boot, field 22 of /proc/<pid>/stat) does, within one kernel boot and one PID namespace.
The owners of what outlives a process judge it by these (the lease of kernels/docker/lease.py,
the node watchdog of executors/ray/watchdog.py, the guardian of executors/ray/guardian.py), all
through the one dead man's switch loop of deadman.py; interrupts.py finds the xdist workers by
their parent. Elsewhere than Linux, or where /proc cannot say, each answer is None (an empty list):
liveness is then left to the clock.

Standard library only: the node watchdog imports it while it runs as a bare script. The one
other reader of /proc/<pid>/stat is the reaper (kernels/inside/reaper.py), a program shipped into
its own container that imports nothing of the package; tests/test_dead_man_switch.py checks that
its copy reads what this module reads.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

#: field 3 of /proc/<pid>/stat for a process that is dead but not reaped (zombie) or dead
_DEAD_STATES = ("Z", "X")


def _stat_fields(pid: int | str) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (field 3, the state, first); None
    when the process is gone or the file does not read. The name is in parentheses and may hold
    spaces and parentheses itself: the fields start after the last ")"."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    _, sep, rest = stat.rpartition(")")
    fields = rest.split()
    return fields if sep and len(fields) > 19 else None


def start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks after boot (field 22 of /proc/<pid>/stat); None
    if it is gone or a zombie (dead, not yet reaped: an xdist worker whose controller was killed
    with it stays one until init reaps it)."""
    fields = _stat_fields(pid)
    if fields is None or fields[0] in _DEAD_STATES:
        return None
    try:
        return int(fields[19])
    except ValueError:
        return None


def child_pids(parent: int) -> list[int]:
    """The pids of `parent`'s direct children (field 4 of each /proc/<pid>/stat, the parent's
    pid), as /proc lists them now; [] where /proc is not."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        fields = _stat_fields(entry.name)
        if fields is not None and fields[1] == str(parent):
            found.append(int(entry.name))
    return found


def boot_id() -> str | None:
    """This kernel boot's id (/proc/sys/kernel/random/boot_id); None where it cannot be read."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return None


def pid_namespace() -> int | None:
    """The inode of this process's PID namespace (/proc/self/ns/pid); None where it cannot be
    read."""
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return None


#: a holder's labels (`Holder.labels`): the names a Docker lease container has always carried
#: (kernels/inside/reaper.py reads the same; tests/test_dead_man_switch.py checks they agree)
LABEL_HOLDER_PID = "pytest-super.lease-pid"
LABEL_HOLDER_START = "pytest-super.lease-pid-start"
LABEL_HOLDER_PID_NS = "pytest-super.lease-pid-ns"
LABEL_HOLDER_BOOT = "pytest-super.lease-boot-id"

#: the dead man's switch of a run's processes (Docker's leases and reaper, a Ray node's watchdog):
#: "off" leaves a killed run's leftovers to `pytest-super cleanup` or the next run
SWITCH_ENV = "PYTEST_SUPER_DEAD_MAN_SWITCH"


def switch_wanted() -> bool:
    """Does this process hold the dead man's switch for what it leaves (`SWITCH_ENV`)?"""
    return os.environ.get(SWITCH_ENV, "on").strip().lower() not in ("off", "0", "no", "false")


@dataclass(frozen=True)
class Holder:
    """A process that owns what outlives it (a Docker lease, a Ray task's folders on its node), in
    terms that prove liveness only within the same PID namespace; written down as labels (a lease
    container's, a node folder's owner file)."""

    pid: int
    boot_id: str | None
    pid_ns: int | None
    start_ticks: int | None

    @classmethod
    def of_this_process(cls) -> Holder:
        pid = os.getpid()
        return cls(pid, boot_id(), pid_namespace(), start_ticks(pid))

    def labels(self) -> dict[str, str]:
        """This holder as labels (a lease container's, a node folder's owner file)."""
        return {
            LABEL_HOLDER_PID: str(self.pid),
            LABEL_HOLDER_START: "" if self.start_ticks is None else str(self.start_ticks),
            LABEL_HOLDER_PID_NS: "" if self.pid_ns is None else str(self.pid_ns),
            LABEL_HOLDER_BOOT: self.boot_id or "",
        }

    @classmethod
    def from_labels(cls, labels: dict[str, str]) -> Holder | None:
        """The holder labels (`labels`) name; None without them (an earlier version's)
        or when they are not numbers."""
        try:
            return cls(
                int(labels[LABEL_HOLDER_PID]),
                labels.get(LABEL_HOLDER_BOOT) or None,
                int(labels[LABEL_HOLDER_PID_NS]) if labels.get(LABEL_HOLDER_PID_NS) else None,
                int(labels[LABEL_HOLDER_START]) if labels.get(LABEL_HOLDER_START) else None,
            )
        except (KeyError, ValueError):
            return None

    def _comparable(self) -> bool:
        """Does this holder share our kernel boot and PID namespace (so its pid means here what
        it meant there)?"""
        here = Holder.of_this_process()
        if None in (self.boot_id, self.pid_ns, self.start_ticks, here.boot_id, here.pid_ns):
            return False
        return (self.boot_id, self.pid_ns) == (here.boot_id, here.pid_ns)

    def provably_gone(self) -> bool:
        """True only when this holder shares our kernel boot and PID namespace and its process
        is gone (or the pid now names a process started at another time)."""
        return self._comparable() and start_ticks(self.pid) != self.start_ticks

    def provably_alive(self) -> bool:
        """True only when this holder shares our kernel boot and PID namespace and its pid names
        the same process still (same start time; stopped with SIGSTOP counts: it is alive)."""
        return self._comparable() and start_ticks(self.pid) == self.start_ticks
