"""The dead man's switch of a task's folders on a Ray node (issue 32).

A Ray worker running one of our tasks makes folders on its node: the task's folder
(`pytest-super-node-<run>-<pid>-<ticks>-*`), its kernels' host folders and the run's start-lock
folder. It removes them when the task ends or is cancelled; a worker killed by SIGKILL (Ray's
force-cancel, a dead raylet, a head lost, the driver's death) cannot. Its containers go by the
backend (Docker's: its engine's reaper, kernels/docker/reaper.py); its folders go by this watchdog: a process of its
own session, started by the worker for each task, that holds the read end of a pipe whose write
end only the worker holds (the switch's loop is deadman.py's, `deadman.ended_well`). A task that
ends writes `DONE` and closes the pipe (nothing to do); a pipe that ends without it, and the
worker's pid gone, mean the worker died, and the watchdog runs the node's clean-up of
dead owners (`nodefiles.cleanup_here`: folders whose worker is gone, unused start-lock folders,
the backend's `cleanup_dead_runs`: for Docker, containers of dead leases and their host folders),
then leaves. A task whose engine failed under
it keeps its watchdog for the worker's life (`Watchdog.keep`): the containers the engine could
not remove are removed once the worker is gone and the engine answers again. `PYTEST_SUPER_DEAD_MAN_SWITCH=off` turns it
off with the engine's reaper; the next start-up clean-up on the node (or `pytest-super cleanup`)
removes them then.

The watchdog runs as a script (this file, by its path) and imports nothing of the package but
deadman.py and process_identity.py (standard library only) until its worker died: an idle one costs a bare
interpreter (about 10 MB) and a blocked read. It shares the worker's kernel boot and PID
namespace, so the worker's pid and start time (`process_identity.start_ticks`, as
process_identity.Holder) tell whether it lives.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

from pytest_super import deadman
from pytest_super.process_identity import start_ticks

#: clean-up passes after the worker's death, `PASS_GAP_S` apart, until one removes nothing and
#: fails nothing: a container the engine is still removing keeps its host folder until a later
#: pass, and an engine that is down (killed, restarting) is tried again for up to `RETRY_S`
PASS_GAP_S = 5.0
RETRY_S = 600.0


class Watchdog:
    """The worker's side: the write end of the watchdog's pipe, and the watchdog's pid.

    The watchdog is the worker's grandchild, not its child: when a Ray worker dies the raylet
    kills the worker's child processes (Ray's `kill_child_processes_on_worker_exit`), and a
    child would die with it; the grandchild, once its parent left, is nobody's but init's."""

    def __init__(self, folder: Path, backend: str):
        pid = os.getpid()
        proc = subprocess.Popen(
            [sys.executable, __file__, str(pid), str(start_ticks(pid)), str(folder), backend],
            stdin=subprocess.PIPE,  # its write end is ours alone (close-on-exec)
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a signal to the worker's group or session spares it
            close_fds=True,
        )
        assert proc.stdin is not None and proc.stdout is not None
        said = proc.stdout.readline()  # the watchdog's pid, once it runs apart from its parent
        proc.stdout.close()
        proc.wait()  # the parent, gone at once
        self.pid = int(said) if said.strip().isdigit() else None
        self._pipe: IO[bytes] | None = proc.stdin

    def release(self) -> None:
        """The task ended and removed what it made: the watchdog reads `DONE`, sees its pipe
        end, and leaves."""
        pipe, self._pipe = self._pipe, None
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.write(DONE)
                pipe.flush()
            with contextlib.suppress(OSError):
                pipe.close()

    def keep(self) -> None:
        """The task ended but may have left containers its engine did not remove (the engine
        failed under it): the watchdog stays until this worker dies, then runs the node's
        clean-up of dead owners (waiting for the engine to answer again)."""
        _kept.append(self)


#: what the worker writes before it closes the pipe when its task ended normally
DONE = b"done\n"
#: watchdogs kept for the worker's life (`Watchdog.keep`): their pipes close when it dies
_kept: list[Watchdog] = []


def start(folder: Path, backend: str) -> Watchdog | None:
    """The watchdog of this task's `folder`, or None with the switch off."""
    from pytest_super.process_identity import switch_wanted

    return Watchdog(folder, backend) if switch_wanted() else None


# -- the watchdog's own process -------------------------------------------------------------------
def detach() -> None:
    """Leave the worker's process tree: fork, the parent exits (its parent, the worker, reaps
    it), the child says its pid and goes on."""
    if os.fork() > 0:
        os._exit(0)
    print(os.getpid(), flush=True)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)


def main(argv: list[str]) -> int:
    detach()
    pid, ticks = int(argv[0]), None if argv[1] == "None" else int(argv[1])
    folder, backend = Path(argv[2]), argv[3]
    if deadman.ended_well(sys.stdin.buffer, deadman.holder_of(pid, ticks), DONE):
        return 0  # the task ended and removed what it made
    from pytest_super.executors.ray.nodefiles import cleanup_here
    from pytest_super.kernels.base import KernelSettings

    settings = KernelSettings(backend=backend)
    give_up = time.monotonic() + RETRY_S
    while time.monotonic() < give_up:
        try:
            removed = cleanup_here(settings, None)
        except Exception:  # an engine that fails now: the next pass
            removed = ["?"]
        if not removed and not folder.exists():
            break
        time.sleep(PASS_GAP_S)
    return 0


if __name__ == "__main__":
    if sys.path and sys.path[0] == os.path.dirname(os.path.abspath(__file__)):
        del sys.path[0]  # this folder's modules (settings, session, ...) are not top-level ones
    sys.exit(main(sys.argv[1:]))
