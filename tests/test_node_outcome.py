"""Issue 45 item 4: a Ray node's outcome crosses to the controller as data. The node makes the
task's `TaskOutcome` itself, through `execute.outcome_of` as a local run does, with its error as
a `TaskError` (class name, message, exit status, retryability, whose fault); the controller reads
it as it came, with no error class looked up by name. No cluster is needed: the node's side
(`run_on_node`) runs here, with a kernel backend of this module's whose kernels fail to start."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from pytest_super.errors import ExitStatus, InfrastructureError
from pytest_super.kernels.base import BackendBase, Kernel, KernelSettings
from pytest_super.process_identity import SWITCH_ENV
from pytest_super.settings import SuperRun
from tests.test_execute import _tiny_task

HERE = __name__


class ScratchDiskFull(InfrastructureError):
    """An error class of the node's only: the controller's errors.py has no such class."""

    exit_status = ExitStatus.ENVIRONMENT_ERROR
    retryable = False


class FullDiskBackend(BackendBase):
    """A backend whose kernels never start: the node's scratch disk is full."""

    def provision(self, settings: KernelSettings, *, task_id: str) -> Kernel:
        raise ScratchDiskFull(f"no room for the kernel of {task_id}")

    def cleanup_run(self, settings: KernelSettings, run_id: str) -> list[str]:
        return []

    def cleanup_dead_runs(self, settings: KernelSettings) -> list[str]:
        return []


#: the controller's side, in a process that cannot import this module (its error class unknown)
CONTROLLER = """
import json, pickle, sys
from pathlib import Path
from pytest_super.executors.ray.outcomes import task_outcome
from pytest_super.settings import SuperRun

sent = pickle.loads(Path(sys.argv[1]).read_bytes())
outcome = task_outcome(SuperRun(agent="gold", report_dir=Path(sys.argv[2])), sent)
error = outcome.error
print(json.dumps({
    "exit_status": outcome.exit_status.value,
    "node": outcome.node,
    "kind": error.kind,
    "message": error.message,
    "error_status": error.exit_status.value,
    "retryable": error.retryable,
    "whose": getattr(error, "whose", None),
}))
"""


def test_a_node_error_of_a_class_the_controller_does_not_know_keeps_its_status_and_fault(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_super.executors.ray.node import run_on_node

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "node"))  # the node's folders
    (tmp_path / "node").mkdir()
    monkeypatch.setenv(SWITCH_ENV, "off")  # no watchdog process: nothing is left to watch
    kernel = KernelSettings(backend=f"{HERE}:FullDiskBackend")
    run = SuperRun(agent="gold", report_dir=tmp_path / "node-run", retries=0, kernel=kernel)
    sent = run_on_node(_tiny_task(), run, "tiny", 60.0, [], None, {})
    # off a Ray worker the node's name is the host's: asking Ray's runtime context for the node
    # id started a local Ray cluster in this process (its gcs_server, ~/.ray/auth_token), whose
    # end took the xdist worker down ("node down: Not properly terminated") and hung the session
    ray = sys.modules.get("ray")
    assert ray is None or not ray.is_initialized()
    (tmp_path / "sent.pickle").write_bytes(pickle.dumps(sent))
    controller = subprocess.run(
        [sys.executable, "-c", CONTROLLER, str(tmp_path / "sent.pickle"), str(tmp_path / "run")],
        cwd=tmp_path,  # not the repository: `tests` (and ScratchDiskFull) cannot be imported
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert controller.returncode == 0, controller.stderr[-3000:]
    said = json.loads(controller.stdout)
    assert said["kind"] == "ScratchDiskFull"
    assert (said["exit_status"], said["error_status"]) == ("environment_error", "environment_error")
    assert said["retryable"] is False and said["whose"] == "infrastructure"
    assert (
        said["message"].startswith("on node ")
        and "no room for the kernel of tiny" in said["message"]
    )
    assert said["node"] and said["node"] != "(none)"
    assert not list((tmp_path / "node").iterdir())  # the task's folders on the node: gone
