"""A node's `NodeOutcome` (node.py) made the run's `TaskOutcome` (outcome.py) on the controller:
the trajectory files the node sent written into the run's folder, and the result given their
local path.

The outcome itself the node made, as a local run makes it (`execute.outcome_of`): its error is
data (`TaskError`: the class's name, the message, the exit status, retryability, whose fault),
read as it came, with no class looked up by its name, so an error class the controller does not
know arrives with what its node said of it. Nothing is raised from it: the `super_result`
fixture raises what the outcome says, `run_tasks` records it."""

from __future__ import annotations

from pytest_super.execute import trajectory_path
from pytest_super.executors.ray.node import NodeOutcome
from pytest_super.outcome import TaskOutcome
from pytest_super.settings import SuperRun


def task_outcome(run: SuperRun, sent: NodeOutcome) -> TaskOutcome:
    """The node's outcome of one task as the run's: its trajectory (and notebook) put into the
    run's folder, its result with the local path and the attempts before it."""
    outcome = sent.outcome
    path = trajectory_path(run, outcome.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    if sent.trajectory:
        path.write_bytes(sent.trajectory)
    if sent.notebook:
        path.with_suffix(".ipynb").write_bytes(sent.notebook)
    result = outcome.result
    if result is None:
        return outcome
    result.trajectory = str(path.with_suffix(".ipynb") if sent.notebook else path)
    result.retried = list(outcome.retried)
    if result.kept:  # --super-keep: the container stays on its node's engine
        result.kept = f"on Ray node {outcome.node} (its own Docker engine):\n{result.kept}"
    return outcome
