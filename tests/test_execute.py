"""One call runs one task outside pytest (`pytest_super.execute.run_one_task`): a plain Python
process with no pytest imported runs a demo task and gets the result and the trajectory that the
pytest run of the same task gets."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_super.environment import AgentOptions
from pytest_super.errors import InfrastructureError
from pytest_super.execute import retried_of, retry_backoff_s, run_one_task
from pytest_super.kernels.base import KernelSettings
from pytest_super.settings import SuperRun
from pytest_super.tasks import Cell, Task

ROOT = Path(__file__).resolve().parent.parent
TASK = "tasks/expert/hmm-tagger.yaml"
MIRRORS = ROOT / ".super-cache" / "mirrors"

SCRIPT = """\
import json, sys
from pathlib import Path
from pytest_super import SuperRun, run_one_task
from pytest_super.kernels.base import KernelSettings
from pytest_super.tasks import load_yaml_task

run = SuperRun(
    agent="gold",
    report_dir=Path(sys.argv[2]),
    kernel=KernelSettings(git_mirrors={"https://github.com/super-demo/": sys.argv[3]}),
)
result = run_one_task(load_yaml_task(Path(sys.argv[1])), run)
loaded = sorted(m for m in sys.modules if m == "pytest" or m.startswith(("_pytest", "xdist")))
print(json.dumps({"properties": result.junit_properties(), "trajectory": result.trajectory,
                  "run_dir": str(run.run_dir), "pytest_modules": loaded}, default=str))
"""

#: what differs between two runs of the same task: timings, costs of time, the run's own paths
VARYING = {"duration_s", "trajectory"}


def _steps(trajectory_json: Path) -> list[tuple]:
    """Each step's action, code, status and output, less progress lines (git's counters, which
    redraw with carriage returns as fast as the machine goes)."""
    data = json.loads(trajectory_json.read_text())
    return [
        (s["action"], s["content"], s["cell_status"], _without_progress(s["output"]))
        for s in data["steps"]
    ]


GIT_PROGRESS = re.compile(r"^(remote: |Receiving objects|Resolving deltas|Unpacking objects)")
#: what differs between two runs of the same cell: download rates and times
RATE = re.compile(r"\d+(\.\d+)? ?[kMG]?i?B/s|\d+:\d\d:\d\d|\d+(\.\d+)?s\b")


def _without_progress(output: str) -> list[str]:
    return [RATE.sub("<t>", ln) for ln in output.splitlines() if not GIT_PROGRESS.match(ln)]


@pytest.mark.docker
@pytest.mark.slow
def test_a_task_run_by_one_call_outside_pytest_equals_its_pytest_run(tmp_path, image):
    in_pytest = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            TASK,
            "--super-agent=gold",
            "-p",
            "no:cacheprovider",
            f"--super-report-dir={tmp_path / 'pytest'}",
            "-q",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert in_pytest.returncode == 0, in_pytest.stdout[-3000:] + in_pytest.stderr[-2000:]
    (run_dir,) = (tmp_path / "pytest").iterdir()
    (record,) = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]

    alone = subprocess.run(
        [sys.executable, "-c", SCRIPT, TASK, str(tmp_path / "alone"), str(MIRRORS)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert alone.returncode == 0, alone.stderr[-3000:]
    got = json.loads(alone.stdout.strip().splitlines()[-1])
    assert got["pytest_modules"] == []  # no pytest in that process
    mine = {k.removeprefix("super."): v for k, v in got["properties"].items()}
    theirs = record
    assert mine["exit_status"] == "submitted" and mine["accuracy"] == 1.0
    for key, value in mine.items():
        if key not in VARYING:
            assert theirs[key] == value, key
    traj = Path(got["trajectory"]).with_suffix(".json")
    assert traj.is_relative_to(Path(got["run_dir"]))
    assert _steps(traj) == _steps(run_dir / "trajectories" / "hmm-tagger.json")
    assert len(_steps(traj)) > 1


class _FlakyKernels:
    """A kernel source whose first `failures` kernels cannot be had (the engine restarting)."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.asked = 0

    def __call__(self, settings: KernelSettings, name: str):
        from pytest_super.kernels.local import start_local_kernel

        self.asked += 1
        if self.asked <= self.failures:
            raise InfrastructureError("the engine is restarting")
        return start_local_kernel(settings, task_id=name)


def _tiny_task() -> Task:
    return Task(
        id="tiny",
        set="expert",
        query="print a number",
        answer={"x": 1},
        solution=(Cell(kind="execute", code="print('{\"x\": 1}')"),),
    )


@pytest.mark.filterwarnings("ignore:pytest-super. the local backend")
def test_retries_with_backoff_then_the_result_carries_why(tmp_path):
    waits: list[float] = []
    kernels = _FlakyKernels(failures=2)
    run = SuperRun(
        agent="gold",
        report_dir=tmp_path,
        retries=2,
        kernel=KernelSettings(backend="local"),
    )
    result = run_one_task(_tiny_task(), run, kernels=kernels, sleep=waits.append)
    assert result.exit_status.value == "submitted" and result.accuracy == 1.0
    assert waits == [retry_backoff_s(0), retry_backoff_s(1)] == [2.0, 4.0]
    assert len(result.retried) == 2 and "the engine is restarting" in result.retried[0]
    assert Path(result.trajectory).with_suffix(".json").is_file()


def test_the_last_attempts_error_carries_the_earlier_ones(tmp_path):
    run = SuperRun(agent="gold", report_dir=tmp_path, retries=1)
    with pytest.raises(InfrastructureError) as caught:
        run_one_task(_tiny_task(), run, kernels=_FlakyKernels(failures=5), sleep=lambda s: None)
    assert len(retried_of(caught.value)) == 1


def test_a_run_without_an_agent_is_refused(tmp_path):
    with pytest.raises(ValueError, match="needs an agent"):
        run_one_task(_tiny_task(), SuperRun(report_dir=tmp_path))


def test_settings_made_in_python_name_the_runs_containers():
    run = SuperRun(agent="gold")
    assert run.kernel.run_id == run.run_id
    assert run.settings.options == AgentOptions()
