"""The folders' dead man's switch of a task on a Ray node (pytest_super/executors/ray/watchdog.py),
on this machine: a real process makes a task's folders as a Ray worker does (`nodefiles.task_folder`,
the run's start-lock folder), starts the watchdog, and then ends normally or is SIGKILLed. The
cluster's version of the same (a Ray worker killed under a run) is in tests/test_ray_faults.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.support.projects import wait_for

#: argv: the run id, then "end" (remove the folder and release the watchdog) or "hold"
WORKER = r"""
import json, shutil, sys, time
from pytest_super.executors.ray import nodefiles, watchdog

run_id, mode = sys.argv[1], sys.argv[2]
folder = nodefiles.task_folder(run_id)
guard = watchdog.start(folder, "docker")
with nodefiles.run_lock_folder(run_id) as lock_dir:
    print(json.dumps({"folder": str(folder), "lock": str(lock_dir),
                      "watchdog": guard.pid if guard else None}), flush=True)
    if mode == "hold":
        time.sleep(600)
shutil.rmtree(folder)
guard.release()
print("ended", flush=True)
"""


def _worker(
    tmp_path: Path, run_id: str, mode: str, **env: str
) -> tuple[subprocess.Popen[str], dict]:
    proc = subprocess.Popen(
        [sys.executable, "-c", WORKER, run_id, mode],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp_path), "XDG_RUNTIME_DIR": str(tmp_path), **env},
    )
    assert proc.stdout is not None
    return proc, json.loads(proc.stdout.readline())


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


@pytest.fixture
def run_id() -> str:
    return f"wd-{uuid.uuid4().hex[:8]}"


def test_a_task_that_ends_leaves_no_watchdog(tmp_path, run_id):
    proc, made = _worker(tmp_path, run_id, "end")
    assert proc.wait(60) == 0
    assert made["watchdog"]
    wait_for(lambda: _gone(made["watchdog"]), 10, "the watchdog gone once its task ended")
    assert not Path(made["folder"]).exists() and not Path(made["lock"]).exists()


@pytest.mark.docker
def test_a_sigkilled_workers_folders_go_within_seconds(tmp_path, run_id):
    proc, made = _worker(tmp_path, run_id, "hold")
    assert Path(made["folder"]).is_dir() and Path(made["lock"]).is_dir()
    os.kill(proc.pid, signal.SIGKILL)
    killed = time.monotonic()
    proc.wait(30)
    wait_for(
        lambda: not Path(made["folder"]).exists() and not Path(made["lock"]).exists(),
        60,
        "the killed worker's task and lock folders removed",
    )
    took = time.monotonic() - killed
    wait_for(lambda: _gone(made["watchdog"]), 30, "the watchdog gone after its clean-up")
    print(f"a SIGKILLed worker's folders removed {took:.1f} s after the kill")
    assert took < 30


@pytest.mark.docker
def test_the_lock_folder_stays_while_another_task_of_the_run_holds_it(tmp_path, run_id):
    live, _ = _worker(tmp_path, run_id, "hold")
    killed, made = _worker(tmp_path, run_id, "hold")
    try:
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait(30)
        wait_for(lambda: not Path(made["folder"]).exists(), 60, "the killed task's folder removed")
        wait_for(lambda: _gone(made["watchdog"]), 60, "the watchdog gone")
        assert Path(made["lock"]).is_dir()  # the live task's
    finally:
        live.kill()
        live.wait(30)


def test_with_the_switch_off_there_is_no_watchdog(tmp_path, run_id):
    proc, made = _worker(tmp_path, run_id, "hold", PYTEST_SUPER_DEAD_MAN_SWITCH="off")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)
    assert made["watchdog"] is None
    time.sleep(2)
    assert Path(made["folder"]).is_dir()  # left to the next start-up clean-up on the node
