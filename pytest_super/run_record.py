"""The record of a run, with or without pytest: results.jsonl as tasks finish, summary.md and the
HTML report at the end, the run's leftover kernels removed (`RunRecord`); and `run_tasks`, which
runs tasks with `run_one_task` and leaves the run folder a pytest run leaves:

    from pytest_super import SuperRun, load_tasks, run_tasks

    run = SuperRun.resolve(rootdir=".", agent="gold")
    results = run_tasks(load_tasks("tasks/expert"), run)

The pytest recorder (recorder.py) is this record's pytest hooks: it turns reports into the same
records. Nothing here imports pytest.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pytest_super import atomic, html, redaction
from pytest_super import report as reports
from pytest_super.deadlines import DeadlineExpired, enforce
from pytest_super.errors import EngineUnavailable, ExitStatus, InfrastructureError, TaskSetupError
from pytest_super.execute import (
    KernelSource,
    kernel_settings_for,
    retried_of,
    run_one_task,
    trajectory_path,
)
from pytest_super.kernels import kernel_backend
from pytest_super.llm.breaker import down_message
from pytest_super.lmr_report import benchmark_tables
from pytest_super.paths import shown_path
from pytest_super.runner import TaskResult, exit_status_of
from pytest_super.settings import SuperRun
from pytest_super.tasks import Task
from pytest_super.trajectory import read_trajectory_data


class RunFolderError(Exception):
    """The run's folder cannot be written: said before any kernel starts."""


def _warn(message: str) -> None:
    warnings.warn(message, stacklevel=3)


class RunRecord:
    """The run folder's files: `add` writes a task's line to results.jsonl at once; `finish`
    closes it, removes what the run left on its backend and writes summary.md and index.html."""

    def __init__(self, run: SuperRun, warn: Callable[[str], None] = _warn) -> None:
        self.run = run
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

    def cleanup_dead_runs(self) -> None:
        """What runs whose controller died (kill -9) left behind goes when the next run starts;
        with no engine each task will report the engine as an error of its own. On a Ray cluster
        each node does this for its own engine (executors/ray/cluster.py)."""
        if self.run.remote:
            return
        with contextlib.suppress(InfrastructureError):
            kernel_backend(self.run.kernel).cleanup_dead_runs(self.run.kernel)

    def add(
        self, key: str, outcome: str, properties: dict[str, Any], task_id: str | None = None
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
        """Close results.jsonl, remove the run's leftover kernels (unless --super-keep or the
        cluster's nodes do it), then summary.md and index.html when any task was recorded."""
        try:
            self.writer.close()
        except OSError as exc:
            if self.write_failure is None:
                self._stop_writing(exc)
        if not self.run.settings.keep_failed and not self.run.remote:
            try:
                kernel_backend(self.run.kernel).cleanup_run(self.run.kernel, self.run.run_id)
            except EngineUnavailable:
                pass  # no engine: nothing can be left on it
            except InfrastructureError as exc:  # the reports come first
                self.warn(
                    f"pytest-super: {exc}; `pytest-super cleanup --backend {self.run.kernel.backend} "
                    f"--run {self.run.run_id}` "
                    "removes what is left"
                )
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


def engine_down(run: SuperRun, error: EngineUnavailable) -> None:
    """The Docker engine stopped answering a task: no other task of the run starts (one message,
    not an error per task); said once, by the first process that found it."""
    flag = run.run_dir / ENGINE_DOWN_FILE
    if down_message(flag) is None:
        atomic.write_atomically(flag, f"the Docker engine stopped answering ({error})")


# -- the properties of a task's record, the same from pytest and from run_tasks --------------------
def known_properties(run: SuperRun, task: Task, repeat: int | None) -> dict[str, Any]:
    """What is known of a task before its episode, so one that errors is still filed under its
    set and agent."""
    return {
        "set": task.set,
        "category": task.category,
        "agent": run.agent,
        "model": run.settings.model or "",
        **({"repeat": repeat} if repeat else {}),
        "image": kernel_settings_for(run, task).image or "",
        **run.settings.options.prompts.properties(),
    }


def result_properties(run: SuperRun, result: TaskResult) -> dict[str, Any]:
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


def error_properties(run: SuperRun, name: str, error: BaseException) -> dict[str, Any]:
    """What an errored task's record says of its episode: the error's text (`detail`), and when
    the episode got as far as a trajectory, its path (the notebook's when written, relative to
    the report folder's parent as a finished task's), its steps and the tokens and cost spent."""
    properties: dict[str, Any] = {"detail": redaction.redact(f"{type(error).__name__}: {error}")}
    properties["detail"] = properties["detail"][:DETAIL_CHARS]
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


def retried_property(retried: list[str]) -> dict[str, str]:
    """One `retried_after` holding every earlier attempt's error, one per line."""
    return {"retried_after": "\n".join(retried)} if retried else {}


# -- running tasks without pytest ------------------------------------------------------------------
def run_tasks(
    tasks: Iterable[Task],
    run: SuperRun,
    *,
    kernels: KernelSource | None = None,
    deadline_s: float | None = None,
) -> list[TaskResult]:
    """Run each task (`run.repeat` times) with `run_one_task`, one after the other, and record
    the run in `run.run_dir` as a pytest run does: results.jsonl as each task ends, summary.md
    and index.html at the end (`pytest-super html` renders it again; `--super-resume` carries
    on from it). With `run.resume`, tasks with a final result in an earlier run are not run
    again: their result is carried into this run's record. An infrastructure or task error is
    recorded as the task's error and the next task runs; Ctrl-C stops after recording.
    `deadline_s` bounds each task's episode as pytest-timeout's timeout does under pytest (the
    same mechanism as a Ray node's, `deadlines.enforce`; the main thread only): a task past it
    is recorded as an error with the exit status "timeout"."""
    if not run.agent:
        raise ValueError("run_tasks needs an agent: SuperRun.resolve(agent='gold', ...)")
    record = RunRecord(run)
    record.cleanup_dead_runs()
    finished = _finished(run)
    results: list[TaskResult] = []
    try:
        for task in tasks:
            for name, repeat in _items(task, run.repeat):
                if name in finished:
                    _carry(record, name, *finished[name])
                    continue
                result = _run_and_record(record, task, run, name, repeat, kernels, deadline_s)
                if result is not None:
                    results.append(result)
    finally:
        record.finish()
    return results


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


def _run_and_record(
    record: RunRecord,
    task: Task,
    run: SuperRun,
    name: str,
    repeat: int | None,
    kernels: KernelSource | None,
    deadline_s: float | None = None,
) -> TaskResult | None:
    known = known_properties(run, task, repeat)
    try:
        with enforce(deadline_s):
            result = run_one_task(task, run, name=name, kernels=kernels)
    except DeadlineExpired as expired:
        record.add(name, "error", {**known, "exit_status": ExitStatus.TIMEOUT.value})
        record.warn(f"pytest-super: {name}: its deadline of {expired.seconds:g} s passed")
        return None
    except (InfrastructureError, TaskSetupError) as exc:
        status = {**retried_property(retried_of(exc)), "exit_status": exit_status_of(exc).value}
        record.add(name, "error", {**known, **error_properties(run, name, exc), **status})
        record.warn(f"pytest-super: {name}: {type(exc).__name__}: {exc}")
        return None
    outcome = "passed" if result.passed else "failed"
    record.add(name, outcome, {**known, **result_properties(run, result)})
    return result
