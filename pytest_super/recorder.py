"""The controller's record of a run under pytest: the pytest hooks above run_record.py's
`RunRecord`, which writes results.jsonl as tasks finish, the summary and HTML report at the end,
and has the run's executor remove what the run left (the same object `run_tasks` uses without
pytest).
"""

from __future__ import annotations

import os
import shlex
import warnings
from pathlib import Path
from typing import Any, cast

import pytest

from pytest_super import collect, html, interrupts, redaction, sinks, thirdparty
from pytest_super import report as reports
from pytest_super.errors import ExitStatus, SuperError
from pytest_super.executors.base import Executor
from pytest_super.junit import JunitShaper
from pytest_super.kernels.jupyter.output import console_text
from pytest_super.options import SuperRun
from pytest_super.paths import shown_path
from pytest_super.run_record import RunFolderError, RunRecord, run_properties, stop_message
from pytest_super.tasks import category_suffix, infer_set, load_yaml_task


class RecordHooks:
    """The run record's pytest hooks: results.jsonl as tasks finish, the summary at the end.

    Registered only in the controlling process (never in xdist workers), so each task is written
    exactly once however many workers ran it.
    """

    def __init__(self, run: SuperRun, rootpath: Path, executor: Executor) -> None:
        self.run = run
        self.rootpath = rootpath
        self.phases: dict[str, list[pytest.TestReport]] = {}
        self.crashes: dict[str, pytest.TestReport] = {}  # xdist: the report of a worker's death
        self.workers = interrupts.Workers()
        self.junit: JunitShaper | None = None  # with --junitxml: its file shaped (junit.py)
        try:  # before any container starts: a usage error, not a crash
            self.record = RunRecord(run, executor, warn=lambda m: warnings.warn(m, stacklevel=1))
        except RunFolderError as exc:
            raise pytest.UsageError(str(exc)) from None

    @property
    def records(self) -> dict[str, reports.TaskRecord]:
        return self.record.records

    @property
    def html(self) -> Path | None:
        return self.record.html

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        writer = thirdparty.junit_writer(session.config)
        if writer is not None:
            self.junit = JunitShaper(writer, self._html_page)

    # -- xdist, through its documented hooks (optional: a run without xdist has none) ------------
    @pytest.hookimpl(optionalhook=True, tryfirst=True)  # firstresult: before any that answers
    def pytest_handlecrashitem(self, crashitem: str, report: pytest.TestReport) -> None:
        """The worker running `crashitem` died. xdist then passes `report` (its failure) to
        pytest_runtest_logreport, once every plugin handled the crash: a plugin that runs the
        item again sets its outcome to "rerun" (the hook's documented use)."""
        self.crashes[crashitem] = report

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:  # Any: xdist's WorkerController
        self.workers.started(node)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object | None) -> None:  # Any: xdist
        self.workers.went_down(node)

    @pytest.hookimpl(tryfirst=True)  # before junitxml reads the report
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        outcome, properties = self._record(report)
        if self.junit is not None:
            self.junit.shape(report, outcome, properties)

    def _record(self, report: pytest.TestReport) -> tuple[str | None, dict[str, object]]:
        """Record the task of `report` once its last report came; (its outcome, its record's
        properties) then (a resumed task's JUnit keeps `resumed_outcome`, its results.jsonl
        line the outcome), (None, the properties so far) before, (None, {}) for no task."""
        phases = self.phases.setdefault(report.nodeid, [])
        phases.append(report)
        if self.crashes.get(report.nodeid) is report:  # its worker died while running it
            del self.crashes[report.nodeid]
            self.phases.pop(report.nodeid, None)
            if _rerun(report) or not self._is_task(report.nodeid, phases):
                return None, {}
            properties = {
                **self._known_facts(report.nodeid),
                **reports.strip_prefix(p for ph in phases for p in ph.user_properties),
                "exit_status": ExitStatus.WORKER_CRASHED.value,
            }
            self._write(report.nodeid, "error", properties)
            return "error", properties
        properties = reports.strip_prefix(report.user_properties)
        if report.when != "teardown":
            return None, properties
        del self.phases[report.nodeid]
        outcome = _outcome(phases)
        if "resumed_outcome" in properties:
            recorded = dict(properties)
            self._write(report.nodeid, cast(str, recorded.pop("resumed_outcome")), recorded)
            return outcome, properties
        if outcome == "skipped" or not properties:
            return None, {}  # not a task item, or a task that never ran
        self._write(report.nodeid, outcome, properties)
        return outcome, properties

    def _html_page(self, case_name: str) -> str:
        """A task's HTML page relative to the report folder's parent (as its trajectory)."""
        page = self.run.run_dir / html.page_name(case_name)
        return os.path.relpath(page, self.run.report_dir.parent)

    def _known_facts(self, nodeid: str) -> dict[str, object]:
        """What the controller can say of a task whose worker died before reporting anything
        (under xdist the controller collected nothing, so it reads the task file)."""
        facts: dict[str, object] = run_properties(self.run)
        path = self.rootpath / nodeid.split("::")[0]
        try:
            if path.suffix in (".yaml", ".yml"):
                task = load_yaml_task(path)
                facts.update(set=task.set, category=task.category)
            else:
                task_id = reports.base_task_id(nodeid.rsplit("::", 1)[-1])
                set_name = infer_set(path)
                category = category_suffix(task_id) if set_name == "masked" else ""
                facts.update(set=set_name, category=category)
        except SuperError:
            pass
        return facts

    def _is_task(self, nodeid: str, phases: list[pytest.TestReport]) -> bool:
        path = nodeid.split("::")[0]
        return path.endswith(collect.TASK_SUFFIXES) or any(
            k.startswith("super.") for p in phases for k, _ in p.user_properties
        )

    def _write(self, nodeid: str, outcome: str, properties: dict[str, object]) -> None:
        self.record.add(nodeid, outcome, properties)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        """A task file (or JSONL line) that failed to load is an error of the run, recorded
        once (under xdist every worker reports it)."""
        self.workers.first_collect_error(report)  # remembered: passed on once after an interrupt
        if not report.failed or not report.nodeid.split("::")[0].endswith(collect.TASK_SUFFIXES):
            return
        if report.nodeid in self.records:
            return
        path = self.rootpath / report.nodeid.split("::")[0]
        detail = str(report.longrepr).strip().splitlines()
        self.record.add(
            report.nodeid,
            "error",
            {
                "set": infer_set(path) or "",
                **run_properties(self.run),
                "exit_status": ExitStatus.TASK_ERROR.value,
                "load_error": detail[0][:1000] if detail else "",
            },
            task_id=report.nodeid,
        )

    @pytest.hookimpl(tryfirst=True)  # before junitxml writes its file
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if exitstatus == pytest.ExitCode.INTERRUPTED:
            interrupts.finish_worker_reports(session.config, self.workers)
        self.record.finish()

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        self._say_if_stopped(terminalreporter)
        if not self.records:
            return
        terminalreporter.section(
            sinks.terminal(f"SUPER summary (run {self.run.run_id}, agent {self.run.agent})")
        )
        table = self.record.table()
        terminalreporter.write_line(console_text(table))  # names read back from earlier runs
        images = self.record.images()
        if images:
            terminalreporter.write_line(console_text(images))
        # the report folder's name is the user's (--super-report-dir): shown escaped
        terminalreporter.write_line(sinks.terminal(f"reports: {shown_path(self.run.run_dir)}"))
        if self.html is not None:
            terminalreporter.write_line(sinks.terminal(f"HTML report: {shown_path(self.html)}"))

    def _say_if_stopped(self, terminalreporter: pytest.TerminalReporter) -> None:
        """The endpoint or the engine stopped the run: why, and the command that runs the rest."""
        message = stop_message(self.run)
        if message is None:
            return
        config = terminalreporter.config
        args = [a for a in config.invocation_params.args if a != "--super-resume"]
        command = redaction.redact(  # a base URL's credentials are the run's secrets
            " ".join(shlex.quote(a) for a in ["pytest", *args, "--super-resume"])
        )
        terminalreporter.section("SUPER run stopped", red=True)
        terminalreporter.write_line(
            console_text(
                f"pytest-super: {message}. No new task started; the tasks that had not "
                f"finished are not in this run's results. Once it is back, run the rest "
                f"with:\n    {command}"
            )
        )


def _rerun(report: pytest.TestReport) -> bool:
    """A report pytest-rerunfailures will run again: it sets `outcome` to "rerun", a value outside
    the `Literal` pytest types the field with."""
    outcome: str = report.outcome
    return outcome == "rerun"


def _outcome(phases: list[pytest.TestReport]) -> str:
    if any(p.skipped for p in phases):
        return "skipped"
    if any(p.failed for p in phases if p.when != "call"):
        return "error"
    call = next((p for p in phases if p.when == "call"), None)
    if call is None:
        return "error"
    return "failed" if call.failed else "passed"
