"""Projects of tiny tasks run by pytest in a subprocess of their own (`make_project`, `PytestRun`),
and what the tests read of them: results, JUnit outcomes, containers, pids, engine events.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import docker
import docker.errors
import yaml

from pytest_super.junit import PREFIX, split_suite_property
from pytest_super.kernels.docker.engine import LABEL_RUN, LABEL_TASK

PASS = "print('{\"x\": 1}')"
FAIL = "print('{\"x\": 2}')"
KILL_KERNEL = "import os\nos._exit(1)"


def sleep_then_answer(seconds: float) -> str:
    return f"import time\ntime.sleep({seconds})\nprint('{{\"x\": 1}}')"


def task_yaml(task_id: str, *cells: str, limits: dict[str, Any] | None = None) -> str:
    """A gold task whose answer is {"x": 1}; the cells print what the agent submits."""
    doc: dict[str, Any] = {
        "id": task_id,
        "query": f'Report x for {task_id} as a json structured as follows: {{"x": 0}}.',
        "answer": {"x": 1},
        "solution": [{"execute": cell} for cell in cells],
    }
    if limits:
        doc["limits"] = limits
    return yaml.safe_dump(doc, sort_keys=False)


#: an agent that is not gold: it runs the task's solution cells and submits what the last one
#: prints, as the gold agent does, but its misses are its own failures (a gold miss is an
#: environment error, netfaults.gold_miss). For the tests of what a failure does (resume, --lf,
#: retries); `make_project` writes its module, so `--super-agent=` + SOLUTION_AGENT loads it.
SOLUTION_AGENT = "solution_agent:SolutionAgent"
SOLUTION_AGENT_MODULE = '''\
"""An agent that runs the solution cells, as gold does, and is scored as any agent is."""
from pytest_super.agents.gold import GoldAgent


class SolutionAgent(GoldAgent):
    # its spec as its name: results record an agent's name, --super-resume and --lf look for
    # the spec (a third-party agent by module path named otherwise is never resumed)
    name = "solution_agent:SolutionAgent"
    needs_llm = False
'''


PROJECT_CONFTEST = '''\
"""Test instrumentation: pid files per pytest process, timeout markers on chosen tasks."""
import json
import os
import pathlib

import pytest


def pytest_configure(config):
    name = os.environ.get("PYTEST_XDIST_WORKER", "controller")
    folder = pathlib.Path(str(config.rootpath), "pids")
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(str(os.getpid()))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    path = pathlib.Path(str(config.rootpath), "timeouts.json")
    marks = json.loads(path.read_text()) if path.exists() else {}
    for item in items:
        if item.name in marks:
            item.add_marker(pytest.mark.timeout(marks[item.name]))


def pytest_collection_finish(session):
    if os.environ.get("SHOW_TIMEOUTS"):
        for item in session.items:
            marker = item.get_closest_marker("timeout")
            print(f"timeout-of {item.name}: {marker.args[0] if marker else None}")
'''


# -- helpers (test_load.py uses them too) ---------------------------------------------------------
def write_solution_agent(root: Path) -> None:
    """SOLUTION_AGENT's module in `root` (a project run from there imports it)."""
    (root / "solution_agent.py").write_text(SOLUTION_AGENT_MODULE)


def make_project(
    root: Path, tasks: dict[str, str], *, timeouts: dict[str, float] | None = None
) -> Path:
    """Write tasks/<set>/<id>.yaml (keys are `<set>/<id>`), the ini, the conftest and the
    SOLUTION_AGENT's module."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "pytest.ini").write_text("[pytest]\nsuper_tasks = tasks\n")
    (root / "conftest.py").write_text(PROJECT_CONFTEST)
    write_solution_agent(root)
    for key, text in tasks.items():
        path = root / "tasks" / f"{key}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    if timeouts:
        (root / "timeouts.json").write_text(json.dumps(timeouts))
    return root


class PytestRun:
    """One pytest process (its own session, so its process group is ours to signal)."""

    def __init__(self, project: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.project = project
        self.log_path = project / f"pytest-{time.monotonic_ns()}.log"
        clean = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("PYTEST_XDIST") and k != "PYTEST_SUPER_CONTROLLER_PID"
        }
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "pytest", *args],
                cwd=project,
                env={**clean, **(env or {})},
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait(self, timeout: float = 300) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.dump_stacks()
            self.kill_group()
            raise AssertionError(
                f"pytest did not finish in {timeout} s:\n{self.output()}"
            ) from None

    def dump_stacks(self) -> None:
        """Every thread's stack of every process of the run into its output, for the failure
        message: pytest's faulthandler writes them on SIGABRT."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGABRT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=5)

    def kill_group(self) -> None:
        """Kill what is left of this run's processes (only ones this test started)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")


def run_pytest(project: Path, *args: str, timeout: float = 300, **kw: Any) -> tuple[int, str]:
    run = PytestRun(project, *args, **kw)
    code = run.wait(timeout)
    return code, run.output()


def wait_for(predicate: Callable[[], Any], timeout: float, what: str, poll: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def run_dirs(project: Path) -> list[Path]:
    reports = project / "reports"
    return sorted(p for p in reports.iterdir() if p.is_dir()) if reports.is_dir() else []


def only_run_dir(project: Path) -> Path:
    (run_dir,) = run_dirs(project)
    return run_dir


def results(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "results.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def outcomes(run_dir: Path) -> dict[str, str]:
    lines = results(run_dir)
    ids = [r["task_id"] for r in lines]
    assert len(ids) == len(set(ids)), f"a task recorded twice: {sorted(ids)}"
    return {r["task_id"]: r["outcome"] for r in lines}


def junit_outcomes(path: Path) -> dict[str, str]:
    cases = list(ET.parse(path).getroot().iter("testcase"))
    names = [c.get("name", "") for c in cases]
    assert len(names) == len(set(names)), f"a task in the JUnit file twice: {sorted(names)}"
    found = {}
    for case in cases:
        kind = next(
            (k for k in ("error", "failure", "skipped") if case.find(k) is not None), "passed"
        )
        found[case.get("name", "")] = kind
    return found


def junit_properties(path: Path) -> dict[str, dict[str, str]]:
    """case name -> its `super.*` JUnit properties, wherever the family puts them: in the test
    case (xunit1) or in the suite as `super.<case>.<field>` (xunit2, pytest's default)."""
    root = ET.parse(path).getroot()
    found: dict[str, dict[str, str]] = {}
    for case in root.iter("testcase"):
        found[case.get("name", "")] = {
            p.get("name", ""): p.get("value", "")
            for p in case.iter("property")
            if p.get("name", "").startswith(PREFIX)
        }
    for suite in root.iter("testsuite"):
        for properties in suite.findall("properties"):
            for p in properties.iter("property"):
                split = split_suite_property(p.get("name", ""))
                if split is not None and split[0] in found:
                    found[split[0]][PREFIX + split[1]] = p.get("value", "")
    return found


def containers(
    client: docker.DockerClient, *, run_id: str | None = None, task: str | None = None
) -> list[Any]:
    labels = [f"{LABEL_RUN}={run_id}"] if run_id else []
    labels += [f"{LABEL_TASK}={task}"] if task else []
    labels = labels or ["pytest-super=1"]
    return client.containers.list(all=True, filters={"label": labels}, ignore_removed=True)


def wait_for_container(
    client: docker.DockerClient, project: Path, task: str, timeout: float = 120
) -> Any:
    """The running container of `task` in the (only) run of `project`, once the task runs (its
    trajectory exists): the pool makes a task's container while the task before it runs."""

    def find() -> Any:
        dirs = run_dirs(project)
        if not dirs or not (dirs[-1] / "trajectories" / f"{task}.json").exists():
            return None
        found = [
            c for c in containers(client, run_id=dirs[-1].name, task=task) if c.status == "running"
        ]
        return found[0] if found else None

    return wait_for(find, timeout, f"a running container of task {task!r}")


def pid_of(project: Path, name: str) -> int:
    return int((project / "pids" / name).read_text())


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


class EngineEvents:
    """Every container event of a pytest-super run (create, start, destroy, ...) the engine sends
    while the block runs, read live as a stream; `of(run_id, action)` picks one run's.

    Not a later `since` query: an engine keeps only its last 256 events for one (moby's
    `eventsLimit`), and on the engine the tests share a run's events were gone by the time it
    ended (a fresh-clone run: 3 of a run's 4 "start" events found)."""

    def __init__(self, client: docker.DockerClient) -> None:
        self.client = client
        self._events: list[dict[str, Any]] = []
        self._stream: Any = None
        self._reader = threading.Thread(target=self._read, daemon=True)

    def __enter__(self) -> EngineEvents:
        self._stream = self.client.events(
            since=int(time.time()) - 1,
            filters={"type": "container", "label": LABEL_RUN},
            decode=True,
        )
        self._reader.start()
        return self

    def __exit__(self, *exc: object) -> None:
        time.sleep(0.5)  # what the block ran has ended: its last events are on their way
        with contextlib.suppress(Exception):
            self._stream.close()
        self._reader.join(timeout=10)

    def of(self, run_id: str, action: str) -> list[dict[str, Any]]:
        """The events `action` of run `run_id`'s containers, in the engine's order."""
        return [
            e
            for e in list(self._events)
            if e.get("Action") == action
            and e.get("Actor", {}).get("Attributes", {}).get(LABEL_RUN) == run_id
        ]

    def _read(self) -> None:
        with contextlib.suppress(Exception):  # the stream closed by __exit__
            for event in self._stream:
                self._events.append(event)


class ContainerWatch:
    """Samples the containers of a run (by label) while it goes on; remembers the peak count,
    and the engine's container events meanwhile (`events`, an `EngineEvents`)."""

    def __init__(self, client: docker.DockerClient, project: Path, period_s: float = 0.05) -> None:
        self.client = client
        self.project = project
        self.period_s = period_s
        self.peak = 0
        self.seen: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.events = EngineEvents(client)

    def __enter__(self) -> ContainerWatch:
        self.events.__enter__()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self.events.__exit__(*exc)

    def _run(self) -> None:
        while not self._stop.is_set():
            dirs = run_dirs(self.project)
            if dirs:
                found = containers(self.client, run_id=dirs[-1].name)
                self.seen.update(c.name for c in found)
                self.peak = max(self.peak, len(found))
            time.sleep(self.period_s)
