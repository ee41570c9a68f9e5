"""Who a process is, read from Linux's /proc in this one module: the kernel's boot id, this PID
namespace, a process's start time and its parent.

A pid alone does not name a process: pids are reused. A pid with its start time (clock ticks
after boot, field 22 of /proc/<pid>/stat) does, within one kernel boot and one PID namespace.
The owners of what outlives a process judge it by these (the lease of kernels/docker/lease.py,
the node watchdog of executors/ray/watchdog.py); interrupts.py finds the xdist workers by their
parent. Elsewhere than Linux, or where /proc cannot say, each answer is None (an empty list):
liveness is then left to the clock.

Standard library only: the node watchdog imports it while it runs as a bare script. The one
other reader of /proc/<pid>/stat is the reaper (kernels/inside/reaper.py), a program shipped into
its own container that imports nothing of the package; tests/test_dead_man_switch.py checks that
its copy reads what this module reads.
"""

from __future__ import annotations

import os
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
