"""process_identity.py: who a process is (its start time, its parent), this boot and this PID
namespace, read from /proc in one place; and the reaper's own copy (kernels/inside/reaper.py, a
program shipped into its own container that imports nothing of ours) reads the same."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from pytest_super import process_identity
from pytest_super.kernels.inside import reaper

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="Linux /proc only")

#: a command name with what trips a naive reading of /proc/<pid>/stat: spaces and parentheses
ODD_NAME = "a) b (c"


@pytest.fixture
def child() -> Iterator[subprocess.Popen[bytes]]:
    """A child process of this one, named ODD_NAME, waiting on its stdin."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"open('/proc/self/comm', 'w').write({ODD_NAME!r}); print(flush=True); input()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert proc.stdout is not None
    proc.stdout.readline()  # named by now
    yield proc
    proc.kill()
    proc.wait()


def _zombie(proc: subprocess.Popen[bytes]) -> None:
    """End `proc` without reaping it: it stays a zombie until `wait`."""
    proc.kill()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with open(f"/proc/{proc.pid}/stat") as f:
            if f.read().rpartition(")")[2].split()[0] == "Z":
                return
        time.sleep(0.01)
    raise AssertionError(f"process {proc.pid} never became a zombie")


def test_a_live_process_has_a_start_time_a_zombie_and_a_gone_one_none(child) -> None:
    with open(f"/proc/{child.pid}/comm") as f:
        assert f.read().strip() == ODD_NAME
    ticks = process_identity.start_ticks(child.pid)
    assert isinstance(ticks, int) and ticks > 0
    assert ticks >= process_identity.start_ticks(os.getpid())  # started after this process
    assert process_identity.start_ticks(child.pid) == ticks  # the same process, the same time
    assert child.pid in process_identity.child_pids(os.getpid())
    _zombie(child)
    assert process_identity.start_ticks(child.pid) is None
    child.wait()
    assert process_identity.start_ticks(child.pid) is None
    assert child.pid not in process_identity.child_pids(os.getpid())


def test_a_grandchild_is_not_a_child(child) -> None:
    assert os.getpid() not in process_identity.child_pids(os.getpid())
    assert process_identity.child_pids(child.pid) == []


def test_this_boot_and_this_pid_namespace() -> None:
    boot = process_identity.boot_id()
    assert boot is not None and re.fullmatch(r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", boot)
    namespace = process_identity.pid_namespace()
    assert isinstance(namespace, int) and namespace > 0


def test_the_reapers_copy_reads_what_process_identity_reads(child) -> None:
    """The reaper judges a lease's holder by its own copy: it must agree with the harness's."""
    assert reaper.here() == (process_identity.boot_id(), process_identity.pid_namespace())
    for pid in (os.getpid(), child.pid, 1):
        assert reaper.start_ticks(pid) == process_identity.start_ticks(pid), pid
    _zombie(child)
    assert reaper.start_ticks(child.pid) is None is process_identity.start_ticks(child.pid)
    child.wait()
    assert reaper.start_ticks(child.pid) is None is process_identity.start_ticks(child.pid)
