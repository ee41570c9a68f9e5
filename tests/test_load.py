"""Load: 40 short tasks on two xdist workers against the real Docker engine, with every way a task
can end at once: passes, failures, cell timeouts, a compute limit, a pytest-timeout, a kernel that
kills itself, and a worker killed with SIGKILL mid-task. Every task must get exactly one result in
results.jsonl and in the JUnit XML (none lost, none counted twice), each with the right outcome,
and no container of the run may be left on the engine. The agent is SOLUTION_AGENT, which runs
the solution cells as gold does: a gold miss would be an environment error, not a failure.

Sized for CI on 2 cores: about a minute.
"""

from __future__ import annotations

import os
import signal
import xml.etree.ElementTree as ET

import pytest

from tests.support.projects import (  # the helpers of the scale tests: same projects, same processes
    FAIL,
    KILL_KERNEL,
    PASS,
    SOLUTION_AGENT,
    PytestRun,
    containers,
    junit_outcomes,
    make_project,
    only_run_dir,
    outcomes,
    pid_of,
    results,
    sleep_then_answer,
    task_yaml,
    wait_for_container,
)

pytestmark = [pytest.mark.load, pytest.mark.docker]


def load_tasks() -> tuple[dict[str, str], dict[str, tuple[str, str]]]:
    """40 tasks and, for each, the outcome and exit status it must end with."""
    tasks: dict[str, str] = {}
    expected: dict[str, tuple[str, str]] = {}

    def add(task_id: str, text: str, outcome: str, exit_status: str) -> None:
        tasks[f"expert/{task_id}"] = text
        expected[task_id] = (outcome, exit_status)

    for i in range(22):
        add(f"pass{i:02}", task_yaml(f"pass{i:02}", PASS), "passed", "submitted")
    for i in range(10):
        add(f"fail{i:02}", task_yaml(f"fail{i:02}", FAIL), "failed", "submitted")
    for i in range(4):  # the cell that prints the answer is interrupted after 2 s
        text = task_yaml(f"celltimeout{i}", sleep_then_answer(60), limits={"cell_timeout_s": 2})
        add(f"celltimeout{i}", text, "failed", "no_submission")
    # 1.5 s + 0.5 s (cut to what is left of the 2 s) of cell time, then the limit ends it
    naps = [sleep_then_answer(1.5)] * 2
    text = task_yaml("computelimit", *naps, PASS, limits={"compute_s": 2})
    add("computelimit", text, "failed", "compute_limit")
    # pytest-timeout of 4 s (a @pytest.mark.timeout put on by the project's conftest)
    add("pytesttimeout", task_yaml("pytesttimeout", sleep_then_answer(60)), "error", "")
    # the kernel dies, is restarted, the next cell still answers
    add("killskernel", task_yaml("killskernel", KILL_KERNEL, PASS), "passed", "submitted")
    # its worker is killed with SIGKILL from this test while its cell sleeps
    add("victim", task_yaml("victim", sleep_then_answer(60)), "error", "worker_crashed")
    assert len(tasks) == 40
    return tasks, expected


def test_forty_tasks_on_two_workers_lose_nothing_and_leak_nothing(project_dir, engine):  # noqa: F811
    tasks, expected = load_tasks()
    make_project(project_dir, tasks, timeouts={"pytesttimeout": 4})
    junit = project_dir / "junit.xml"
    run = PytestRun(
        project_dir,
        "tasks",
        f"--super-agent={SOLUTION_AGENT}",
        "-n",
        "2",
        "--dist",
        "worksteal",
        f"--junitxml={junit}",
        "--super-mem=512m",
        "--super-cpus=1",
    )
    try:
        box = wait_for_container(engine, project_dir, "victim", timeout=150)
        os.kill(pid_of(project_dir, box.labels["pytest-super.worker"]), signal.SIGKILL)
        code = run.wait(240)
    finally:
        run.kill_group()
    out = run.output()
    assert code == 1, out
    run_dir = only_run_dir(project_dir)

    # results.jsonl: each task exactly once (outcomes() fails on a duplicate), with its outcome
    lines = {r["task_id"]: r for r in results(run_dir)}
    assert outcomes(run_dir) == {k: outcome for k, (outcome, _) in expected.items()}, out
    for task_id, (_, exit_status) in expected.items():
        if exit_status:
            assert lines[task_id]["exit_status"] == exit_status, (task_id, lines[task_id])

    # JUnit: each task exactly once, the same outcomes
    junit_kind = {"passed": "passed", "failed": "failure", "error": "error"}
    assert junit_outcomes(junit) == {k: junit_kind[o] for k, (o, _) in expected.items()}
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("tests") == "40"

    # the summary counts all 40 under their set, the crashed task too (one set: no "all" row)
    assert "| expert | 40 | 23 | 2 |" in (run_dir / "summary.md").read_text()
    assert containers(engine, run_id=run_dir.name) == []
