"""The circuit breaker on the model endpoint (issue 44, item 1; pytest_super/llm/breaker.py).

A real OpenAI-compatible endpoint (tests/support/openai_server.py as a process of its own, on
127.0.0.1) is SIGKILLed during a 20-task run of the react-super agent (the local kernel backend:
a real ipykernel per task). The run must end within 60 s of the kill, say that the endpoint
stopped answering (its URL named), start no new task, and print the exact `--super-resume`
command; that command, run once the endpoint is back on the same port, finishes the run. Once in
one process, once under xdist (-n 2: the workers learn of the trip from the run folder's flag).
"""

from __future__ import annotations

import json
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.projects import PASS, PytestRun, make_project, run_dirs, task_yaml, wait_for

ROOT = Path(__file__).resolve().parents[2]
TASKS = 20
SUBMIT = 'Thought: x is 1.\nAction: submit\n<content>\n{"x": 1}\n'


class EndpointProcess:
    """The fake endpoint in a process of its own, so that killing it closes every connection."""

    def __init__(self, folder: Path, port: int = 0) -> None:
        replies = folder / f"replies-{time.monotonic_ns()}.json"
        replies.write_text(json.dumps([SUBMIT] * (TASKS * 2)))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.openai_server", str(port), str(replies)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline())
        self.base_url = f"http://127.0.0.1:{self.port}/v1"

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)


@pytest.fixture
def endpoints(tmp_path: Path) -> Iterator[list[EndpointProcess]]:
    started: list[EndpointProcess] = []
    yield started
    for endpoint in started:
        endpoint.kill()


def finished(project: Path) -> int:
    dirs = run_dirs(project)
    results = dirs[-1] / "results.jsonl" if dirs else None
    if results is None or not results.exists():
        return 0
    return len([ln for ln in results.read_text().splitlines() if ln.strip()])


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one-process", "xdist"])
def test_a_killed_endpoint_stops_the_run_and_resume_finishes_it(
    tmp_path: Path, endpoints: list[EndpointProcess], workers: list[str]
) -> None:
    project = make_project(
        tmp_path / "project",
        {f"expert/t{n:02d}": task_yaml(f"t{n:02d}", PASS) for n in range(TASKS)},
    )
    endpoint = EndpointProcess(tmp_path)
    endpoints.append(endpoint)
    args = [
        "tasks",
        "--super-agent=react-super",
        "--super-model=gpt-4o",
        f"--super-base-url={endpoint.base_url}",
        "--super-backend=local",
        "-p",
        "no:randomly",
        *workers,
    ]
    run = PytestRun(project, *args)
    try:
        wait_for(lambda: finished(project) >= 3, 240, "three finished tasks")
        endpoint.kill()
        killed = time.monotonic()
        code = run.wait(timeout=180)
    finally:
        run.kill_group()
    took = time.monotonic() - killed
    out = run.output()
    print(f"the run ended {took:.1f} s after the endpoint's kill (exit status {code})")
    assert took < 60, out
    assert "SUPER run stopped" in out and "stopped answering" in out, out
    assert f"127.0.0.1:{endpoint.port}" in out, out  # the endpoint named
    (first_run,) = run_dirs(project)
    done = finished(project)
    assert 3 <= done < TASKS, out  # no task started once the breaker tripped
    match = re.search(r"^\s+(pytest .*--super-resume)$", out, re.MULTILINE)
    assert match is not None, out
    command = shlex.split(match.group(1))
    assert command[1:-1] == args, command

    endpoints.append(EndpointProcess(tmp_path, port=endpoint.port))  # back, same URL
    resumed = subprocess.run(
        [sys.executable, "-m", *command],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    last = [d for d in run_dirs(project) if d != first_run]
    (second_run,) = last
    lines = [json.loads(ln) for ln in (second_run / "results.jsonl").read_text().splitlines()]
    assert sorted(r["task_id"] for r in lines) == [f"t{n:02d}" for n in range(TASKS)]
    assert {r["outcome"] for r in lines} == {"passed"}, lines
