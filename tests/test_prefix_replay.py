"""Pre-executed cells as the reference runs them: a failing cell is recorded and the next one runs;
a cell that runs out of time gets one wait, then the prefix goes on. Real local kernels."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_super.agents.base import Environment, EpisodeLimits, ExitStatus
from pytest_super.agents.gold import GoldAgent
from pytest_super.kernels.base import KernelSettings
from pytest_super.kernels.local import start_local_kernel
from pytest_super.runner import EpisodeSettings, replay_prefix_cells, run_episode
from pytest_super.tasks import Cell, Task
from pytest_super.trajectory import Trajectory

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

FAILING_PREFIX = (
    Cell(kind="execute", code="This plain-text line is not Python"),  # SyntaxError
    Cell(kind="edit", file="missing.py", before="a = 1\n", after="a = 2\n"),  # no such file
    Cell(kind="execute", code="%%writefile twice.py\nx = 1\nx = 1\n"),
    Cell(kind="edit", file="twice.py", before="x = 1\n", after="x = 2\n"),  # appears twice
    Cell(kind="execute", code="raise RuntimeError('boom')"),
    Cell(kind="execute", code="print('the prefix went on')"),
)


@pytest.fixture
def new_kernel() -> Iterator:
    kernels = []

    def start():
        kernel = start_local_kernel(KernelSettings(backend="local"), task_id="prefix")
        kernels.append(kernel)
        return kernel

    yield start
    for kernel in kernels:
        kernel.close()


def make_env(new_kernel, tmp_path: Path, prefix: tuple[Cell, ...], **limits) -> Environment:
    task = Task(id="prefix", set="masked", query="q", pre_executed=prefix)
    trajectory = Trajectory(path=tmp_path / "t.json", task_id=task.id, query="q", agent="gold")
    return Environment(task, new_kernel(), trajectory, EpisodeLimits(**limits))


def test_failing_prefix_cells_are_recorded_and_the_prefix_goes_on(new_kernel, tmp_path) -> None:
    env = make_env(new_kernel, tmp_path, FAILING_PREFIX)
    steps = replay_prefix_cells(env)
    assert [s.cell_status for s in steps] == ["error", "error", "ok", "error", "error", "ok"]
    assert "SyntaxError" in steps[0].output
    assert steps[5].output == "the prefix went on\n"
    assert all(s.pre_executed and s.thought == "[pre-executed by user]" for s in steps)
    assert env.prefix_steps == steps == env.trajectory.steps


def test_a_prefix_cell_that_times_out_gets_one_wait_then_the_next_runs(new_kernel, tmp_path):
    prefix = (
        Cell(kind="execute", code="import time\nprint('slow', flush=True)\ntime.sleep(30)"),
        Cell(kind="execute", code="time.sleep(1.5)\nprint('finished in the wait')"),
        Cell(kind="execute", code="print('next')"),
    )
    env = make_env(new_kernel, tmp_path, prefix, cell_timeout_s=1.0)
    steps = replay_prefix_cells(env)
    actions = [(s.action, s.cell_status) for s in steps]
    assert actions == [
        ("execute", "timeout"),
        ("continue_wait", "timeout"),  # still running after one more wait: stopped
        ("execute", "timeout"),
        ("continue_wait", "ok"),  # finished within the wait
        ("execute", "ok"),
    ]
    assert steps[1].thought == "[continued after timeout]" and steps[1].content == ""
    assert "KeyboardInterrupt" in steps[1].output  # the rest of the stopped cell is kept
    assert steps[3].output == "finished in the wait\n"
    assert steps[4].output == "next\n"
    # every second of the prefix counts against the compute limit, but none stops it
    assert env.compute_used_s >= 3.5


def test_a_task_whose_prefix_fails_is_still_run_and_scored(new_kernel, tmp_path) -> None:
    task = Task(
        id="prefix_scored",
        set="masked",
        query="q",
        answer={"n": 3},
        landmarks=("the prefix went on",),
        pre_executed=FAILING_PREFIX,
        solution=(Cell(kind="execute", code="import json; print(json.dumps({'n': 3}))"),),
    )
    result = run_episode(
        task, GoldAgent(), new_kernel, EpisodeSettings(agent="gold"), tmp_path / "traj.json"
    )
    assert result.exit_status is ExitStatus.SUBMITTED and result.accuracy == 1.0
    assert result.passed and result.landmarks == 1.0  # the prefix's output counts
