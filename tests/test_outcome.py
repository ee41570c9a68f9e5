"""Issue 45 item 4: one outcome record. `execute.outcome_of` returns a task's `TaskOutcome` (its
result, its error as data, or its deadline passed); a Ray node's outcome becomes one at the
boundary, as data (no class looked up to raise it again); `run_record.outcome_record` is the one
mapping to a results.jsonl record; and `run_tasks` submits through the run's executor, which
cleans up after the run (issue 45 item 1)."""

from __future__ import annotations

import json
import pickle

import pytest

from pytest_super.errors import (
    EngineUnavailable,
    ExitStatus,
    HarnessError,
    InfrastructureError,
    LLMError,
    LLMRefused,
    TaskSetupError,
)
from pytest_super.kernels.base import KernelSettings
from pytest_super.settings import SuperRun
from pytest_super.tasks import Cell, Task
from tests.test_execute import _FlakyKernels, _tiny_task

LOCAL = KernelSettings(backend="local")


def _down(settings: KernelSettings, name: str):
    raise EngineUnavailable("no Docker engine answers at unix:///nowhere/docker.sock")


def test_an_engine_fault_is_an_error_outcome_that_crosses_as_data(tmp_path):
    from pytest_super.execute import outcome_of
    from pytest_super.outcome import TaskError

    run = SuperRun(agent="gold", report_dir=tmp_path, retries=0, kernel=LOCAL)
    outcome = outcome_of(_tiny_task(), run, kernels=_down)
    assert outcome.result is None and outcome.timed_out_after_s is None
    assert outcome.error == TaskError(
        kind="EngineUnavailable",
        message="no Docker engine answers at unix:///nowhere/docker.sock",
        exit_status=ExitStatus.KERNEL_ERROR,
        retryable=True,
        whose="engine",
    )
    assert (outcome.name, outcome.exit_status, outcome.node) == ("tiny", "kernel_error", "")
    assert pickle.loads(pickle.dumps(outcome)) == outcome  # plain data, whole


@pytest.mark.parametrize(
    ("error", "whose", "status", "retryable"),
    [
        (TaskSetupError("a prefix cell failed"), "task", "task_error", False),
        (HarnessError("a bug"), "harness", "harness_error", False),
        (LLMError("the endpoint failed"), "infrastructure", "llm_error", True),
        (LLMRefused("401"), "infrastructure", "llm_error", False),
        (ValueError("not ours"), "harness", "harness_error", False),
    ],
)
def test_an_error_says_whose_it_is(error, whose, status, retryable):
    from pytest_super.outcome import TaskError

    told = TaskError.of(error)
    assert (told.kind, told.whose, told.exit_status, told.retryable) == (
        type(error).__name__,
        whose,
        status,
        retryable,
    )


@pytest.mark.filterwarnings("ignore:pytest-super. the local backend")
def test_the_attempts_before_the_result_ride_in_the_outcome(tmp_path, monkeypatch):
    from pytest_super import execute

    monkeypatch.setattr(execute.time, "sleep", lambda seconds: None)  # the backoff, not waited
    run = SuperRun(agent="gold", report_dir=tmp_path, retries=1, kernel=LOCAL)
    outcome = execute.outcome_of(_tiny_task(), run, name="tiny[repeat2]", kernels=_FlakyKernels(1))
    assert outcome.error is None and outcome.result is not None
    assert outcome.exit_status is ExitStatus.SUBMITTED and outcome.result.accuracy == 1.0
    assert len(outcome.retried) == 1 and "the engine is restarting" in outcome.retried[0]
    assert outcome.name == "tiny[repeat2]"


@pytest.mark.filterwarnings("ignore:pytest-super. the local backend")
def test_a_task_past_its_deadline_is_a_timeout_outcome(tmp_path):
    from pytest_super.execute import outcome_of

    slow = Task(
        id="slow",
        set="expert",
        query="wait",
        answer={"x": 1},
        solution=(Cell(kind="execute", code="import time; time.sleep(60)"),),
    )
    run = SuperRun(agent="gold", report_dir=tmp_path, kernel=LOCAL)
    outcome = outcome_of(slow, run, deadline_s=3)
    assert outcome.timed_out_after_s == 3 and outcome.exit_status is ExitStatus.TIMEOUT
    assert outcome.result is None and outcome.error is None


def test_the_one_mapping_of_an_outcome_to_a_record(tmp_path):
    from pytest_super.outcome import TaskError, TaskOutcome
    from pytest_super.run_record import outcome_record

    run = SuperRun(agent="gold", report_dir=tmp_path)
    error = TaskError.of(EngineUnavailable("gone"))
    failed = TaskOutcome.failed("t", error, retried=["attempt 1: x"], node="n1/abc")
    assert outcome_record(run, failed) == (
        "error",
        {
            "detail": "EngineUnavailable: gone",
            "retried_after": "attempt 1: x",
            "exit_status": "kernel_error",
            "node": "n1/abc",
        },
    )
    late = TaskOutcome.timed_out("t", 5.0)
    assert outcome_record(run, late) == ("error", {"exit_status": "timeout"})


def test_a_nodes_outcome_crosses_back_as_data(tmp_path):
    """The Ray boundary: the node sends the task's `TaskOutcome` (its error as data) with the
    trajectory's bytes; the controller writes the file and keeps the outcome as it came, and
    nothing is raised."""
    from pytest_super.executors.ray.node import NodeOutcome
    from pytest_super.executors.ray.outcomes import task_outcome
    from pytest_super.outcome import TaskError, TaskOutcome

    run = SuperRun(agent="gold", report_dir=tmp_path)
    error = TaskError.of(LLMRefused("on node host/0123456789ab: the endpoint refused the key"))
    failed = TaskOutcome.failed(
        "t", error, retried=["attempt 1: LLMError: 502"], node="host/0123456789ab"
    )
    sent = NodeOutcome(pickle.loads(pickle.dumps(failed)), trajectory=b'{"steps": []}')
    outcome = task_outcome(run, sent)
    assert outcome == failed and outcome.node == "host/0123456789ab"
    assert (outcome.error.kind, outcome.error.exit_status, outcome.error.retryable) == (
        "LLMRefused",
        "llm_error",
        False,
    )
    assert json.loads((run.run_dir / "trajectories" / "t.json").read_text()) == {"steps": []}
    late = task_outcome(run, NodeOutcome(TaskOutcome.timed_out("v", 7.0, node="h/1")))
    assert late.exit_status is ExitStatus.TIMEOUT and late.timed_out_after_s == 7.0


TOY_EXECUTOR = """\
from concurrent.futures import Future

from pytest_super.errors import InfrastructureError
from pytest_super.outcome import TaskError, TaskOutcome

CALLS = []


class Toy:
    remote = True
    pytest_loop = ""

    def start(self, run):
        CALLS.append("start")

    def submit(self, task, run, *, name, deadline_s, on_step=None):
        CALLS.append(f"submit {name} {deadline_s}")
        future = Future()
        error = TaskError.of(InfrastructureError("no node took it"))
        future.set_result(TaskOutcome.failed(name, error, node="toy-node"))
        return future

    def stop(self):
        return []

    def cleanup(self, run):
        CALLS.append("cleanup")
"""


def test_run_tasks_submits_through_the_runs_executor_which_cleans_up(tmp_path, monkeypatch):
    """`run_tasks` asks the executor `run.executor` names (here one of a script's own,
    `module:Class`): started, each task submitted with its deadline, cleaned up at the end;
    its outcomes recorded as pytest records them."""
    from pytest_super import run_tasks

    (tmp_path / "toy_exec.py").write_text(TOY_EXECUTOR)
    monkeypatch.syspath_prepend(str(tmp_path))
    import toy_exec  # type: ignore[import-not-found]

    run = SuperRun(agent="gold", executor="toy_exec:Toy", report_dir=tmp_path / "r", kernel=LOCAL)
    with pytest.warns(
        UserWarning, match=r"^pytest-super: tiny: InfrastructureError: no node took it$"
    ):
        results = run_tasks([_tiny_task()], run, deadline_s=30)
    assert results == []
    assert toy_exec.CALLS == ["start", "submit tiny 30", "cleanup"]
    (record,) = [json.loads(line) for line in (run.run_dir / "results.jsonl").open()]
    assert record["task_id"] == "tiny" and record["outcome"] == "error"
    assert record["exit_status"] == "kernel_error" and record["node"] == "toy-node"
    assert record["detail"] == "InfrastructureError: no node took it"
    assert (run.run_dir / "index.html").is_file()


def test_a_failed_cleanup_is_said_and_the_reports_are_still_written(tmp_path, monkeypatch):
    from pytest_super.run_record import RunRecord

    class Leaky:
        def cleanup(self, run: SuperRun) -> None:
            raise InfrastructureError("2 containers could not be removed; run `cleanup`")

    said: list[str] = []
    run = SuperRun(agent="gold", report_dir=tmp_path)
    record = RunRecord(run, Leaky(), warn=said.append)  # type: ignore[arg-type]
    record.add("t", "passed", {"set": "expert"})
    record.finish()
    assert said == ["pytest-super: 2 containers could not be removed; run `cleanup`"]
    assert (run.run_dir / "summary.md").is_file()


PUMPED_EXECUTOR = """\
import threading
import time
from concurrent.futures import Future

from pytest_super.errors import InfrastructureError
from pytest_super.outcome import TaskError, TaskOutcome


class Awaited(Future):
    '''A future that says when its result is first waited for.'''

    def __init__(self):
        super().__init__()
        self.awaited = threading.Event()

    def result(self, timeout=None):
        self.awaited.set()
        return super().result(timeout)


def complete_when_awaited(future, outcome):
    future.awaited.wait()
    future.set_result(outcome)


class Pumped:
    '''Futures completed by a thread of the executor's own once run_tasks waits for them, as the
    Ray executor's pump completes them; the executor's own done-callback (registered first, as a
    slot's release would be) takes a while, so the recorder of run_tasks runs in that thread well
    after `result()` has returned.'''

    remote = True
    pytest_loop = ""

    def start(self, run):
        pass

    def submit(self, task, run, *, name, deadline_s, on_step=None):
        future = Awaited()
        future.add_done_callback(lambda _: time.sleep(1.0))
        error = TaskError.of(InfrastructureError("no node took it"))
        outcome = TaskOutcome.failed(name, error, node="pumped-node")
        threading.Thread(target=complete_when_awaited, args=(future, outcome)).start()
        return future

    def stop(self):
        return []

    def cleanup(self, run):
        pass
"""


def test_run_tasks_records_a_task_whose_future_is_completed_by_another_thread(
    tmp_path, monkeypatch
):
    """make test-all of 53595e2 lost a record: a Ray pump's `set_result` wakes `run_tasks`
    before the future's callbacks run, and the run's record was closed before the recorder wrote
    its line (results.jsonl held one of the two tasks `run_tasks` returned). The run's record
    now closes after every task's recorder has run."""
    from pytest_super import run_tasks

    (tmp_path / "pumped_exec.py").write_text(PUMPED_EXECUTOR)
    monkeypatch.syspath_prepend(str(tmp_path))
    run = SuperRun(
        agent="gold", executor="pumped_exec:Pumped", report_dir=tmp_path / "r", kernel=LOCAL
    )
    with pytest.warns(UserWarning, match=r"^pytest-super: tiny: InfrastructureError"):
        assert run_tasks([_tiny_task()], run) == []
    (record,) = [json.loads(line) for line in (run.run_dir / "results.jsonl").open()]
    assert record["task_id"] == "tiny" and record["node"] == "pumped-node"
    assert "tiny" in (run.run_dir / "index.html").read_text()
