"""The controller's guardian (pytest_super/executors/ray/guardian.py): a controller that ends
without ending its run (Ray's exit of a driver whose node was lost, a SIGKILL) leaves the summary
of what it received and a sentence with the commands that go on; one that ends as it should
leaves nothing of the guardian's. A real child process plays the controller: it starts the
guardian, writes two results, then either releases it or ends the way Ray ends a driver
(`os._exit(1)`: no `finally`, no hook). The guardian's run with a real cluster:
tests/test_ray_faults.py (the SIGKILLed controller)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

CONTROLLER = """
import os, sys, time
from pathlib import Path
from pytest_super.executors.ray import guardian
from pytest_super.report import ResultsWriter, TaskRecord

run_dir, private, how = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
private.mkdir(parents=True)
watched = guardian.Watched(
    controller_pid=os.getpid(), run_id="r1", agent="gold", run_dir=str(run_dir),
    private=str(private), resume="pytest --super-agent=gold --super-resume",
    cleanup="pytest-super cleanup --executor ray --run r1",
)
guard = guardian.start(watched)
print(guard.process.pid, flush=True)
writer = ResultsWriter(run_dir / "results.jsonl")
for name in ("a", "b"):
    writer.write(TaskRecord(name, "passed", {"set": "expert", "accuracy": 1.0}))
if how == "released":
    guard.release()
elif how == "sigkill":
    os.kill(os.getpid(), 9)
os._exit(1)  # what Ray's QuickExit does to a driver: no finally, no atexit
"""


def _controller(tmp_path: Path, how: str) -> tuple[subprocess.CompletedProcess[str], int]:
    """Run the controller; its result (the guardian's words included: it writes to the
    controller's standard error) and the guardian's pid."""
    run_dir = tmp_path / "reports" / "r1"
    done = subprocess.run(
        [sys.executable, "-c", CONTROLLER, str(run_dir), str(tmp_path / "private"), how],
        capture_output=True,
        text=True,
        timeout=60,  # the pipes close when the guardian ends too: its end is waited for
    )
    return done, int(done.stdout.split()[0])


def _gone(pid: int, timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def _wait_ignoring_sigint(pid: int, timeout: float = 20) -> None:
    """Wait until process `pid` ignores SIGINT (/proc's SigIgn mask)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("SigIgn:") and int(line.split()[1], 16) & (1 << (signal.SIGINT - 1)):
                return
        time.sleep(0.05)
    raise AssertionError(f"process {pid} did not come to ignore SIGINT in {timeout} s")


@pytest.mark.parametrize("how", ["exit-1", "sigkill"])
def test_a_controller_gone_without_ending_its_run_leaves_its_summary_and_what_to_run(tmp_path, how):
    done, guardian_pid = _controller(tmp_path, how)
    assert done.returncode == (1 if how == "exit-1" else -signal.SIGKILL)
    err = done.stderr
    assert "the controller of run r1" in err and "ended without ending the run" in err, err
    assert "2 results received kept in" in err and "results.jsonl" in err, err
    assert "run what did not finish with: pytest --super-agent=gold --super-resume" in err, err
    assert "pytest-super cleanup --executor ray --run r1" in err, err
    summary = (tmp_path / "reports" / "r1" / "summary.md").read_text()
    assert "pytest-super run r1" in summary and "expert" in summary, summary
    assert not (tmp_path / "private").exists()  # the controller's own folder went
    assert _gone(guardian_pid)


def test_a_controller_that_ends_its_run_leaves_nothing_of_the_guardians(tmp_path):
    done, guardian_pid = _controller(tmp_path, "released")
    assert done.returncode == 1  # its own exit status, whatever it is
    assert "pytest-super" not in done.stderr, done.stderr
    assert not (tmp_path / "reports" / "r1" / "summary.md").exists()
    assert (tmp_path / "private").is_dir()  # the controller's to remove, not the guardian's
    assert _gone(guardian_pid)


def test_the_guardian_is_out_of_the_controllers_session_and_outlives_its_ctrl_c(tmp_path):
    """Started in a session of its own: the terminal's Ctrl-C (SIGINT to the foreground group)
    and a SIGKILL of the controller's group do not reach it."""
    from pytest_super.executors.ray import guardian

    watched = guardian.Watched(
        controller_pid=os.getpid(),
        run_id="r2",
        agent="gold",
        run_dir=str(tmp_path / "r2"),
        private=str(tmp_path / "p2"),
        resume="pytest --super-resume",
        cleanup="pytest-super cleanup --run r2",
    )
    guard = guardian.start(watched)
    try:
        assert os.getsid(guard.process.pid) == guard.process.pid
        # the controller passes its Ctrl-C on to its children (interrupts.py): not this one's end
        _wait_ignoring_sigint(guard.process.pid)  # its interpreter started, its handler set
        os.kill(guard.process.pid, signal.SIGINT)
        time.sleep(0.5)
        assert guard.process.poll() is None
        assert os.getpgid(guard.process.pid) != os.getpgid(0)
        assert (
            json.loads(Path(f"/proc/{guard.process.pid}/cmdline").read_bytes().split(b"\0")[3])[
                "run_id"
            ]
            == "r2"
        )
    finally:
        guard.release()
    assert guard.process.wait(10) == 0
