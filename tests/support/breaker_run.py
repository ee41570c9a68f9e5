"""A 20-task run of the react-super agent (the local kernel backend: a real ipykernel per task)
against the fake endpoint in a process of its own, to be stopped while it runs: by the endpoint's
death (the circuit breaker, issue 44) or by Ctrl-C. Used by tests/attacks/test_endpoint_breaker.py
(the behaviour) and benchmarks/bench_breaker.py (how long the stop takes)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.support.projects import PASS, make_project, run_dirs, task_yaml

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


def breaker_project(folder: Path) -> Path:
    """A project of `TASKS` tasks that pass once the agent submits."""
    return make_project(
        folder, {f"expert/t{n:02d}": task_yaml(f"t{n:02d}", PASS) for n in range(TASKS)}
    )


def run_args(endpoint: EndpointProcess, workers: list[str]) -> list[str]:
    return [
        "tasks",
        "--super-agent=react-super",
        "--super-model=gpt-4o",
        f"--super-base-url={endpoint.base_url}",
        "--super-backend=local",
        "-p",
        "no:randomly",
        *workers,
    ]


def finished(project: Path) -> int:
    """Tasks with a result in the project's latest run."""
    dirs = run_dirs(project)
    results = dirs[-1] / "results.jsonl" if dirs else None
    if results is None or not results.exists():
        return 0
    return len([ln for ln in results.read_text().splitlines() if ln.strip()])
