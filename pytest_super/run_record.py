"""The record of a run, with or without pytest: results.jsonl as tasks finish, summary.md and the
HTML report at the end, what the run left removed by its executor (`RunRecord`); the one mapping
of a task's outcome to its record (`outcome_record`); and `run_tasks`, which submits tasks to the
run's executor (executors/: `local` runs them here, `ray` on a cluster's nodes) and leaves the
run folder a pytest run leaves:

    from pytest_super import SuperRun, load_tasks, run_tasks

    run = SuperRun.resolve(rootdir=".", agent="gold")
    results = run_tasks(load_tasks("tasks/expert"), run)

The pytest recorder (recorder.py) is this record's pytest hooks: it turns reports into the same
records. Nothing here imports pytest.
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, cast

from pytest_super import atomic, html, redaction
from pytest_super import report as reports
from pytest_super.errors import InfrastructureError
from pytest_super.execute import kernel_settings_for, trajectory_path
from pytest_super.executors.base import make_executor
from pytest_super.llm.breaker import down_message
from pytest_super.lmr_report import benchmark_tables
from pytest_super.outcome import TaskError, TaskOutcome
from pytest_super.paths import shown_path
from pytest_super.runner import TaskResult
from pytest_super.settings import SuperRun
from pytest_super.tasks import Task
from pytest_super.trajectory import read_trajectory_data

if TYPE_CHECKING:
    from pytest_super.executors.base import Executor


class RunFolderError(Exception):
    """The run's folder cannot be written: said before any kernel starts."""


def _warn(message: str) -> None:
    warnings.warn(message, stacklevel=3)


class RunRecord:
    """The run folder's files: `add` writes a task's line to results.jsonl at once; `finish`
    closes it, has the run's executor remove what the run left (`Executor.cleanup`) and writes
    summary.md and index.html."""

    def __init__(
        self, run: SuperRun, executor: Executor | None, warn: Callable[[str], None] = _warn
    ) -> None:
        self.run = run
        self.executor = executor
        self.warn = warn
        self.records: dict[str, reports.TaskRecord] = {}
        self.html: Path | None = None
        self.write_failure: str | None = None  # why results.jsonl stopped being written
        try:
            run.run_dir.mkdir(parents=True, exist_ok=True)
            self.writer = reports.ResultsWriter(run.run_dir / "results.jsonl")
        except OSError as exc:
            raise RunFolderError(
                f"pytest-super: cannot write the run's reports in {shown_path(run.run_dir)}: "
                f"{exc.strerror or exc}; give a writable folder with --super-report-dir (or the "
                "ini key super_report_dir)"
            ) from None
        html.warm_up()  # its report's templates are compiled while the run goes on

    def add(
        self, key: str, outcome: str, properties: dict[str, object], task_id: str | None = None
    ) -> reports.TaskRecord:
        """Record a task (`key`: its node id, or its item name outside pytest)."""
        record = reports.TaskRecord(
            task_id=task_id or key.rsplit("::", 1)[-1], outcome=outcome, properties=properties
        )
        self.records[key] = record
        if self.write_failure is None:
            try:
                self.writer.write(record)
            except OSError as exc:
                self._stop_writing(exc)
        return record

    def add_outcome(self, outcome: TaskOutcome, known: dict[str, object]) -> None:
        """Record a task's outcome (`outcome_record`) after what was `known` of it before, and
        say why one that did not finish did not."""
        word, properties = outcome_record(self.run, outcome)
        self.add(outcome.name, word, {**known, **properties})
        if outcome.timed_out_after_s is not None:
            seconds = outcome.timed_out_after_s
            self.warn(f"pytest-super: {outcome.name}: its deadline of {seconds:g} s passed")
        elif outcome.error is not None:
            self.warn(f"pytest-super: {outcome.name}: {outcome.error.shown()}")

    def _stop_writing(self, exc: OSError) -> None:
        """The report folder took no more (a full disk): said once; the run goes on, the tasks'
        results still reach JUnit and the terminal, and results.jsonl keeps its whole lines."""
        self.write_failure = f"{exc.strerror or exc}"
        self.warn(
            f"pytest-super: results.jsonl in {shown_path(self.run.run_dir)} could not be written "
            f"({self.write_failure}); it holds the tasks recorded before this one (a cut last "
            "line is skipped by readers). The run goes on; JUnit and the summary below have "
            "every task."
        )

    def finish(self) -> None:
        """Close results.jsonl, have the executor remove what the run left (unless --super-keep)
        and end its connection, then summary.md and index.html when any task was recorded."""
        try:
            self.writer.close()
        except OSError as exc:
            if self.write_failure is None:
                self._stop_writing(exc)
        if self.executor is not None:
            try:
                self.executor.cleanup(self.run)
            except InfrastructureError as exc:  # the reports come first
                self.warn(f"pytest-super: {exc}")
        if self.records:
            self._write_summary_and_html()

    def _write_summary_and_html(self) -> None:
        """summary.md, then index.html. Neither may cost the run its other reports."""
        table = self.table(markdown=True)
        images = self.images()
        try:
            (self.run.run_dir / "summary.md").write_text(
                f"# pytest-super run {self.run.run_id}\n\nagent: {self.run.agent}, model: "
                f"{self.run.settings.model or '-'}\n\n{table}\n"
                + (f"\n{images}\n" if images else "")
            )
            self.html = self._write_html()
        except OSError as exc:  # a full disk must not cost the run its other reports
            self.warn(f"pytest-super: the summary and HTML report were not written: {exc}")

    def _write_html(self) -> Path | None:
        """index.html and the task pages; None, with a warning, when they could not be made. The
        report reads files this run did not write (earlier runs' results in the report folder,
        trajectories named by the records), which are read defensively; should any still
        break the page, the run keeps its results, summary and JUnit."""
        try:
            return html.write_run_report(self.run.run_dir)
        except OSError:
            raise
        except Exception as exc:  # the HTML report is the last and least of the run's reports
            self.warn(
                f"pytest-super: the HTML report was not written ({type(exc).__name__}: {exc}); "
                f"`pytest-super html {shown_path(self.run.run_dir)}` tries again"
            )
            return None

    def table(self, *, markdown: bool = False) -> str:
        columns = {self.run.agent or "run": list(self.records.values())}
        return benchmark_tables(columns, markdown=markdown)

    def images(self) -> str:
        return reports.images_line(self.records.values())


#: the flag file in the run folder of a Docker engine that stopped answering (its text: why)
ENGINE_DOWN_FILE = "engine-down.txt"


def stop_message(run: SuperRun) -> str | None:
    """Why the run stopped starting tasks, said by any of its processes: the model endpoint
    found down by the circuit breaker (llm/breaker.py) or the Docker engine gone (`engine_down`);
    None while both answer."""
    flag = run.llm_settings.down_flag if run.llm_settings is not None else None
    endpoint = down_message(Path(flag)) if flag else None
    return endpoint or down_message(run.run_dir / ENGINE_DOWN_FILE)


def engine_down(run: SuperRun, why: str) -> None:
    """The Docker engine stopped answering a task (`why`: the error's message): no other task of
    the run starts (one message, not an error per task); said once, by the first process that
    found it."""
    flag = run.run_dir / ENGINE_DOWN_FILE
    if down_message(flag) is None:
        atomic.write_atomically(flag, f"the Docker engine stopped answering ({why})")


# -- the properties of a task's record, the same from pytest and from run_tasks --------------------
def run_properties(run: SuperRun) -> dict[str, object]:
    """What every task record of the run says of the run: its agent, model and prompts."""
    return {
        "agent": run.agent,
        "model": run.settings.model or "",
        **run.settings.options.prompts.properties(),
    }


def known_properties(run: SuperRun, task: Task, repeat: int | None) -> dict[str, object]:
    """What is known of a task before its episode, so one that errors is still filed under its
    set and agent."""
    return {
        "set": task.set,
        "category": task.category,
        **run_properties(run),
        **({"repeat": repeat} if repeat else {}),
        "image": kernel_settings_for(run, task).image or "",
    }


def outcome_record(run: SuperRun, outcome: TaskOutcome) -> tuple[str, dict[str, object]]:
    """The one mapping of a task's outcome to its record: the outcome's word in results.jsonl
    ("passed", "failed", "error") and the properties it adds to what was known before the
    episode (`known_properties`): the result's, or the error's text and what its episode got
    to, with the attempts before it, its exit status and the node it ran on."""
    properties: dict[str, object]
    if outcome.result is not None:
        word = "passed" if outcome.result.passed else "failed"
        properties = result_properties(run, outcome.result)
    else:
        word = "error"
        properties = retried_property(outcome.retried)
        if outcome.error is not None:
            properties = {**error_properties(run, outcome.name, outcome.error), **properties}
        properties["exit_status"] = outcome.exit_status.value
    if outcome.node:
        properties["node"] = outcome.node
    return word, properties


def result_properties(run: SuperRun, result: TaskResult) -> dict[str, object]:
    """The properties of a finished episode: its JUnit properties (without `super.`), the
    trajectory relative to the report folder's parent (an archived report folder keeps its
    links), and why earlier attempts failed."""
    properties = reports.strip_prefix(result.junit_properties().items())
    properties["trajectory"] = os.path.relpath(result.trajectory, run.report_dir.parent)
    return {**properties, **retried_property(result.retried)}


#: how much of an error's text results.jsonl and JUnit keep (the trajectory keeps it whole)
DETAIL_CHARS = 2000
#: the token and cost fields an errored task's record sums from its trajectory's steps
_STEP_AMOUNTS = ("prompt_tokens", "cached_prompt_tokens", "completion_tokens", "cost_usd")


def error_properties(run: SuperRun, name: str, error: TaskError) -> dict[str, object]:
    """What an errored task's record says of its episode: the error's text (`detail`), and when
    the episode got as far as a trajectory, its path (the notebook's when written, relative to
    the report folder's parent as a finished task's), its steps and the tokens and cost spent."""
    properties: dict[str, object] = {"detail": redaction.redact(error.shown())}
    properties["detail"] = cast(str, properties["detail"])[:DETAIL_CHARS]
    path = trajectory_path(run, name)
    try:
        data = read_trajectory_data(path, lambda step: {k: step.get(k) for k in _STEP_AMOUNTS})
    except (OSError, ValueError, TypeError, AttributeError):
        return properties  # no episode yet (the kernel did not start), or a cut file
    notebook = path.with_suffix(".ipynb")
    shown = notebook if notebook.is_file() else path
    properties["trajectory"] = os.path.relpath(shown, run.report_dir.parent)
    steps = data.get("steps") or []
    properties["steps"] = len(steps)
    for field in _STEP_AMOUNTS:
        total = sum(s.get(field) or 0 for s in steps if isinstance(s.get(field), int | float))
        properties[field] = round(total, 6) if field == "cost_usd" else int(total)
    return properties


def retried_property(retried: list[str]) -> dict[str, object]:
    """One `retried_after` holding every earlier attempt's error, one per line."""
    return {"retried_after": "\n".join(retried)} if retried else {}


# -- running tasks without pytest ------------------------------------------------------------------
def run_tasks(
    tasks: Iterable[Task],
    run: SuperRun,
    *,
    deadline_s: float | None = None,
    executor: Executor | None = None,
) -> list[TaskResult]:
    """Submit each task (`run.repeat` times) to the run's executor (`run.executor`: `local` runs
    them here one after the other, `ray` on the cluster's nodes; `executor` gives one made
    already, e.g. `LocalExecutor(kernels=...)`) and record the run in `run.run_dir` as a pytest
    run does: results.jsonl as each task ends, summary.md and index.html at the end
    (`pytest-super html` renders it again; `--super-resume` carries on from it), what the tasks
    left removed wherever they ran (`Executor.cleanup`). With `run.resume`, tasks with a final
    result in an earlier run are not run again: their result is carried into this run's
    record. An infrastructure or task error is recorded as the task's error and the next task
    runs; Ctrl-C stops after recording. `deadline_s` bounds each task's episode as
    pytest-timeout's timeout does under pytest (`deadlines.enforce`, on the main thread here or
    on a Ray node): a task past it is recorded as an error with the exit status "timeout".
    Returns the results of the tasks that finished, in the order they were given."""
    if not run.agent:
        raise ValueError("run_tasks needs an agent: SuperRun.resolve(agent='gold', ...)")
    executor = executor or make_executor(run.executor)
    executor.start(run)  # a cluster that does not answer: said before the run's folder is made
    try:
        record = RunRecord(run, executor)
    except RunFolderError:
        executor.cleanup(run)
        raise
    finished = _finished(run)
    submitted: list[tuple[Future[TaskOutcome], _Recorder]] = []
    try:
        for task in tasks:
            for name, repeat in _items(task, run.repeat):
                if name in finished:
                    _carry(record, name, *finished[name])
                    continue
                future = executor.submit(task, run, name=name, deadline_s=deadline_s)
                recorder = _Recorder(record, known_properties(run, task, repeat))
                future.add_done_callback(recorder)
                submitted.append((future, recorder))
        outcomes = [future.result() for future, _ in submitted]
        for _, recorder in submitted:  # a future's waiter wakes before its callbacks run
            recorder.recorded.wait()
    finally:
        record.finish()
    return [outcome.result for outcome in outcomes if outcome.result is not None]


class _Recorder:
    """Records a submitted task as its future is done, in the thread that finished it (a Ray
    executor's pump: results.jsonl gets the line as the task ends). `recorded` is set once it
    has run: `Future.result()` returns before the future's callbacks have, so the run's record
    is closed only after every recorder has written its line."""

    def __init__(self, record: RunRecord, known: dict[str, object]) -> None:
        self.record = record
        self.known = known
        self.recorded = threading.Event()

    def __call__(self, future: Future[TaskOutcome]) -> None:
        try:
            if not future.cancelled() and future.exception() is None:
                self.record.add_outcome(future.result(), self.known)
        finally:
            self.recorded.set()


def _items(task: Task, repeats: int) -> list[tuple[str, int | None]]:
    if repeats == 1:
        return [(task.id, None)]
    return [(task.id + reports.repeat_suffix(n), n) for n in range(1, repeats + 1)]


def _finished(run: SuperRun) -> dict[str, tuple[str, reports.TaskRecord]]:
    if not run.resume:
        return {}
    return reports.final_results(
        run.report_dir, agent=run.agent or "", model=run.settings.model, exclude_run=run.run_id
    )


def _carry(record: RunRecord, name: str, run_id: str, earlier: reports.TaskRecord) -> None:
    """An earlier run's final result, carried into this run as pytest's resume does."""
    record.add(name, earlier.outcome, {**earlier.properties, "resumed_from": run_id})
