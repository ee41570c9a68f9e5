"""A node's `NodeOutcome` (node.py) turned into the run's `TaskOutcome` (outcome.py) on the
controller: the trajectory files the node sent written into the run's folder, the result given
its local path, the error as data.

The node still says its error as (its class's name in errors.py, its message): the class is
read here for its exit status and retryability only (a name that is not one of errors.py's, as
"NodeLost", or a task file's error, is an infrastructure error). Nothing is raised from it:
the `super_result` fixture raises what the outcome says, `run_tasks` records it."""

from __future__ import annotations

from pytest_super import errors
from pytest_super.errors import InfrastructureError, SuperError
from pytest_super.execute import trajectory_path
from pytest_super.executors.ray.node import NodeOutcome
from pytest_super.outcome import TaskError, TaskOutcome
from pytest_super.settings import SuperRun


def task_outcome(run: SuperRun, outcome: NodeOutcome) -> TaskOutcome:
    """The node's outcome of one task as the run's: its trajectory (and notebook) put into the
    run's folder, its result with the local path, its error or its deadline passed."""
    path = trajectory_path(run, outcome.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    if outcome.trajectory:
        path.write_bytes(outcome.trajectory)
    if outcome.notebook:
        path.with_suffix(".ipynb").write_bytes(outcome.notebook)
    node = outcome.node
    if outcome.timed_out_after_s is not None:
        seconds = outcome.timed_out_after_s
        return TaskOutcome.timed_out(outcome.name, seconds, retried=outcome.retried, node=node)
    if outcome.result is None:
        kind, message = outcome.error or ("InfrastructureError", "the node sent no outcome")
        error = TaskError.of_class(_error_class(kind), f"on node {node}: {message}")
        return TaskOutcome.failed(outcome.name, error, retried=outcome.retried, node=node)
    result = outcome.result
    result.trajectory = str(path.with_suffix(".ipynb") if outcome.notebook else path)
    result.retried = outcome.retried
    if result.kept:  # --super-keep: the container stays on its node's engine
        result.kept = f"on Ray node {node} (its own Docker engine):\n{result.kept}"
    return TaskOutcome.finished(outcome.name, result, node=node)


def _error_class(kind: str) -> type[SuperError]:
    """The class of errors.py a node's error names (read for its exit status and retryability);
    `InfrastructureError` for any other name, and for a task file's error (the controller read
    the task file: on the node it is the node's copy that broke)."""
    found = getattr(errors, kind, None)
    if isinstance(found, type) and issubclass(found, SuperError) and kind != "TaskFileError":
        return found
    return InfrastructureError
