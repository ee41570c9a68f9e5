"""Ctrl-C during a large `pytest -n 2` collection (issue 41 cause 9): the project, its 10,000-row
JSONL file and the interrupted run, shared by the attack test
(tests/attacks/test_attack_round5_inputs.py) and benchmarks/bench_ctrl_c.py --case collection."""

from __future__ import annotations

import json
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from tests.support.attack_runs import Run, wait_for
from tests.support.projects import make_project
from tests.support.ray_cluster import stat_fields

ROWS = 10_000

#: appended to the project's conftest: each xdist worker says when it starts collecting the task
#: file (the attack's clock starts there, whatever the machine's load did to the workers' start)
COLLECTING = """

def pytest_collectstart(collector):
    import pathlib
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker and collector.nodeid.endswith(".jsonl"):
        folder = pathlib.Path(str(collector.config.rootpath), "collecting")
        folder.mkdir(exist_ok=True)
        (folder / worker).write_text("")
"""

#: appended after COLLECTING: each xdist worker ignores SIGINT once it collects (workers that do
#: not end on their interrupt: the mechanism of the attack's 18.2 s)
STUBBORN_WORKERS = """

_says_collecting = pytest_collectstart


def pytest_collectstart(collector):
    import signal
    _says_collecting(collector)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
"""


def masked_rows(path: Path, count: int = ROWS) -> None:
    """`count` rows of SUPER's Masked set (the test data's rows, each under an id of its own): a
    collection of about 35 s under -n 2 on an idle machine."""
    source = Path(__file__).resolve().parent.parent / "data" / "tasks_module" / "super"
    rows = [json.loads(line) for line in (source / "masked.jsonl").read_text().splitlines()]
    lines = []
    for i in range(count):
        row = dict(rows[i % len(rows)], task_id=f"{rows[i % len(rows)]['task_id']}-{i}")
        lines.append(json.dumps(row))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def group_processes(pgid: int) -> list[str]:
    """The processes of process group `pgid` as /proc lists them now, zombies included (a dead
    process not yet reaped still answers `killpg(pgid, 0)`): each as "pid state command"."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        fields = stat_fields(int(entry.name))
        if len(fields) < 3 or fields[2] != str(pgid):
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            command = "?"
        found.append(f"{entry.name} {fields[0]} {command.strip()[:200]}")
    return found


def group_left_after(pgid: int, within_s: float) -> tuple[list[str], list[str]]:
    """(what process group `pgid` held at the call, what it still holds after `within_s`):
    the run's end is its last process's, not its controller's (a worker or its zombie may
    outlive the controller's exit by a moment). Polled every 0.1 s; the second list is []
    as soon as the group is empty."""
    first = group_processes(pgid)
    deadline = time.monotonic() + max(within_s, 0.0)
    left = first
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = group_processes(pgid)
    return first, left


@dataclass
class Interrupted:
    run: Run
    code: int
    took_s: float  # from the SIGINT to the controller's exit
    bound_s: float  # the time the run had to end in, from the SIGINT

    def group_left(self) -> tuple[list[str], list[str]]:
        """(what the run's process group held at the controller's exit, what it still holds
        once `bound_s` from the SIGINT is over): `group_left_after` on the run's group."""
        return group_left_after(self.run.proc.pid, self.bound_s - self.took_s)


def interrupt_collection(
    root: Path,
    after_s: float,
    *,
    stubborn: bool = False,
    agent: str | None = "gold",
    bound_s: float = 15.0,
    running: bool = False,
) -> Interrupted:
    """`pytest -n 2` collecting ROWS Masked rows in `root`, Ctrl-C (SIGINT to its process group,
    as a terminal sends it) `after_s` after both workers started collecting the file; the run
    must end within `bound_s` (else AssertionError, the run killed). `agent=None`: no --super-agent
    (the tasks are collected and skipped: pytest's and xdist's own interrupt). `running`: the
    clock starts once the collection is over and the tasks run (xdist's "[N items]" line)."""
    make_project(root, {})
    with (root / "conftest.py").open("a") as conftest:
        conftest.write(COLLECTING + (STUBBORN_WORKERS if stubborn else ""))
    masked_rows(root / "tasks" / "masked.jsonl")
    args = ["tasks", "-n", "2", "-p", "no:cacheprovider"]
    run = Run(root, *args, *([f"--super-agent={agent}"] if agent else []))
    try:
        wait_for(
            lambda: (
                run.proc.poll() is not None or len(list((root / "collecting").glob("gw*"))) == 2
            ),
            240,
            "both workers collecting",
        )
        if running:
            wait_for(
                lambda: run.proc.poll() is not None or f"[{ROWS} items]" in run.output(),
                240,
                "the collection over",
            )
        time.sleep(after_s)
        assert run.proc.poll() is None, run.output()[-3000:]
        os.killpg(run.proc.pid, signal.SIGINT)
        started = time.monotonic()
        code = run.wait(bound_s)
        return Interrupted(run, code, time.monotonic() - started, bound_s)
    except BaseException:
        if run.proc.poll() is None:
            run.kill()
        raise
