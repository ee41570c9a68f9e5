"""What the run-level attack tests share: a pytest run in a session of its own, and readers of
what a run left (results, JUnit cases, containers, key folders)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from pytest_super.kernels.docker.engine import LABEL_RUN, LABEL_TASK
from pytest_super.kernels.docker.lease import LABEL_LEASE_RUN

#: Python for a process's own peak resident memory in kB (VmHWM), spliced into the code the
#: peak-memory tests run: not ru_maxrss, which keeps the parent's peak across exec
PEAK_KB = "int(next(ln.split()[1] for ln in open('/proc/self/status') if ln.startswith('VmHWM:')))"


class Run:
    """One pytest process in a session of its own (its process group is ours to signal), with a
    private TMPDIR so the key folders it leaves can be counted."""

    def __init__(self, root: Path, *args: str, prefix: list[str] | None = None) -> None:
        self.tmp = root / "tmp"
        self.tmp.mkdir(exist_ok=True)
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("PYTEST_XDIST") and k != "PYTEST_SUPER_CONTROLLER_PID"
        }
        env["TMPDIR"] = str(self.tmp)
        self.log = root / f"pytest-{time.monotonic_ns()}.log"
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [*(prefix or []), sys.executable, "-m", "pytest", *args],
                cwd=root,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"pytest did not end in {timeout} s:\n{self.output()}") from None

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def key_folders(self) -> list[str]:
        return [p.name for p in self.tmp.glob("pytest-super-kernel-*")]


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def running(engine, task: str, reports: Path) -> list:
    """The running containers of `task` in the runs of the report folder `reports` (other tests
    run tasks of the same names at the same time)."""
    found = []
    for run_dir in reports.glob("*"):
        labels = [f"{LABEL_TASK}={task}", f"{LABEL_RUN}={run_dir.name}"]
        found += engine.containers.list(filters={"label": labels}, ignore_removed=True)
    return [c for c in found if c.status == "running"]


def recorded(reports: Path) -> dict[str, str]:
    """task id -> outcome in the newest run's results.jsonl under `reports` (each id once)."""
    dirs = sorted(reports.glob("*/results.jsonl"))
    if not dirs:
        return {}
    lines = [json.loads(ln) for ln in dirs[-1].read_text().splitlines() if ln.strip()]
    ids = [r["task_id"] for r in lines]
    assert len(ids) == len(set(ids)), f"a task recorded twice: {ids}"
    return {r["task_id"]: r["outcome"] for r in lines}


def junit_cases(path: Path) -> dict[str, str]:
    """case name -> passed/error/failure/skipped in a JUnit file (each name once)."""
    cases = list(ET.parse(path).getroot().iter("testcase"))
    names = [c.get("name", "") for c in cases]
    assert len(names) == len(set(names)), f"a task twice in JUnit: {names}"
    return {
        c.get("name", ""): next(
            (k for k in ("error", "failure", "skipped") if c.find(k) is not None), "passed"
        )
        for c in cases
    }


def run_leftovers(engine, reports: Path) -> list[str]:
    """Containers of the runs under `reports`, and leases of processes of those runs."""
    left = []
    for run_dir in reports.iterdir():
        for label in (LABEL_RUN, LABEL_LEASE_RUN):
            found = engine.containers.list(
                all=True, filters={"label": f"{label}={run_dir.name}"}, ignore_removed=True
            )
            left += [c.name for c in found]
    return left


#: JSON nested 100,000 deep (json's RecursionError; our depth bound refuses it first)
DEEP = "[" * 100_000 + "]" * 100_000


def cli(*args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`pytest-super ...` in a process of its own; a hang fails the test after `timeout` s."""
    try:
        return subprocess.run(
            [sys.executable, "-m", "pytest_super.cli", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"pytest-super {' '.join(args)} hung for {timeout} s") from exc
