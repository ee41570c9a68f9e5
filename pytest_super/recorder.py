"""The controller's record of a run: results.jsonl as tasks finish, the summary at the end, and
the removal of containers that killed processes left behind.
"""

from __future__ import annotations

import contextlib
import warnings
from pathlib import Path
from typing import Any

import pytest

from pytest_super import collect, html, interrupts
from pytest_super import report as reports
from pytest_super.errors import EngineUnavailable, ExitStatus, InfrastructureError, SuperError
from pytest_super.kernels import kernel_backend
from pytest_super.kernels.jupyter.output import console_text
from pytest_super.options import SuperRun
from pytest_super.paths import shown_path
from pytest_super.tasks import category_suffix, infer_set, load_yaml_task


class RunRecorder:
    """The controller's record of the run: results.jsonl as tasks finish, the summary at the end.

    Registered only in the controlling process (never in xdist workers), so each task is written
    exactly once however many workers ran it.
    """

    def __init__(self, run: SuperRun, rootpath: Path) -> None:
        self.run = run
        self.rootpath = rootpath
        self.phases: dict[str, list[pytest.TestReport]] = {}
        self.records: dict[str, reports.TaskRecord] = {}
        self.html: Path | None = None
        self.write_failure: str | None = None  # why results.jsonl stopped being written
        self.crashes: dict[str, pytest.TestReport] = {}  # xdist: the report of a worker's death
        self.workers = interrupts.Workers()
        try:
            run.run_dir.mkdir(parents=True, exist_ok=True)
            self.writer = reports.ResultsWriter(run.run_dir / "results.jsonl")
        except OSError as exc:  # before any container starts: a usage error, not a crash
            raise pytest.UsageError(
                f"pytest-super: cannot write the run's reports in {shown_path(run.run_dir)}: "
                f"{exc.strerror or exc}; give a writable folder with --super-report-dir (or the "
                "ini key super_report_dir)"
            ) from None

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        # what runs whose controller died (kill -9) left behind goes when the next run starts; with
        # no engine each task will report the engine as an error of its own. On a Ray cluster
        # each node does this for its own engine (ray_backend.py).
        if self.run.remote:
            return
        with contextlib.suppress(InfrastructureError):
            kernel_backend(self.run.kernel).cleanup_dead_runs(self.run.kernel)

    # -- xdist, through its documented hooks (optional: a run without xdist has none) ------------
    @pytest.hookimpl(optionalhook=True, tryfirst=True)  # firstresult: before any that answers
    def pytest_handlecrashitem(self, crashitem: str, report: pytest.TestReport) -> None:
        """The worker running `crashitem` died. xdist then passes `report` (its failure) to
        pytest_runtest_logreport, once every plugin handled the crash: a plugin that runs the
        item again sets its outcome to "rerun" (the hook's documented use)."""
        self.crashes[crashitem] = report

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        self.workers.started(node)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object | None) -> None:
        self.workers.went_down(node)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        phases = self.phases.setdefault(report.nodeid, [])
        phases.append(report)
        if self.crashes.get(report.nodeid) is report:  # its worker died while running it
            del self.crashes[report.nodeid]
            self.phases.pop(report.nodeid, None)
            if not _rerun(report) and self._is_task(report.nodeid, phases):
                self._write(
                    report.nodeid,
                    "error",
                    {
                        **self._known_facts(report.nodeid),
                        **reports.strip_prefix(p for ph in phases for p in ph.user_properties),
                        "exit_status": ExitStatus.WORKER_CRASHED.value,
                    },
                )
            return
        if report.when != "teardown":
            return
        del self.phases[report.nodeid]
        outcome = _outcome(phases)
        properties = reports.strip_prefix(report.user_properties)
        if "resumed_outcome" in properties:
            outcome = properties.pop("resumed_outcome")
        elif outcome == "skipped" or not properties:
            return  # not a task item, or a task that never ran
        self._write(report.nodeid, outcome, properties)

    def _known_facts(self, nodeid: str) -> dict[str, Any]:
        """What the controller can say of a task whose worker died before reporting anything
        (under xdist the controller collected nothing, so it reads the task file)."""
        facts: dict[str, Any] = {
            "agent": self.run.agent,
            "model": self.run.settings.model or "",
            **self.run.settings.options.prompts.properties(),
        }
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

    def _write(self, nodeid: str, outcome: str, properties: dict[str, Any]) -> None:
        record = reports.TaskRecord(
            task_id=nodeid.rsplit("::", 1)[-1], outcome=outcome, properties=properties
        )
        self.records[nodeid] = record
        if self.write_failure is None:
            try:
                self.writer.write(record)
            except OSError as exc:
                self._stop_writing(exc)

    def _stop_writing(self, exc: OSError) -> None:
        """The report folder took no more (a full disk): said once; the run goes on, the tasks'
        results still reach JUnit and the terminal, and results.jsonl keeps its whole lines."""
        self.write_failure = f"{exc.strerror or exc}"
        warnings.warn(
            f"pytest-super: results.jsonl in {shown_path(self.run.run_dir)} could not be written "
            f"({self.write_failure}); it holds the tasks recorded before this one (a cut last "
            "line is skipped by readers). The run goes on; JUnit and the summary below have "
            "every task.",
            stacklevel=1,
        )

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
        record = reports.TaskRecord(
            task_id=report.nodeid,
            outcome="error",
            properties={
                "set": infer_set(path) or "",
                "agent": self.run.agent,
                "model": self.run.settings.model or "",
                **self.run.settings.options.prompts.properties(),
                "exit_status": ExitStatus.TASK_ERROR.value,
                "load_error": detail[0][:1000] if detail else "",
            },
        )
        self.records[report.nodeid] = record
        self.writer.write(record)

    @pytest.hookimpl(tryfirst=True)  # before junitxml writes its file
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if exitstatus == pytest.ExitCode.INTERRUPTED:
            interrupts.finish_worker_reports(session.config, self.workers)
        try:
            self.writer.close()
        except OSError as exc:
            if self.write_failure is None:
                self._stop_writing(exc)
        if not self.run.settings.keep_failed and not self.run.remote:  # killed workers' leftovers
            try:
                kernel_backend(self.run.kernel).cleanup_run(self.run.kernel, self.run.run_id)
            except EngineUnavailable:
                pass  # no engine: nothing can be left on it
            except InfrastructureError as exc:  # the reports come first
                warnings.warn(
                    f"pytest-super: {exc}; `pytest-super cleanup --run {self.run.run_id}` "
                    "removes what is left",
                    stacklevel=1,
                )
        if self.records:
            self._write_summary_and_html()

    def _write_summary_and_html(self) -> None:
        """summary.md, then index.html. Neither may cost the run its other reports (JUnit is
        written after this hook)."""
        table = reports.format_table({self.run.agent or "run": self._rows()}, markdown=True)
        images = reports.images_line(self.records.values())
        try:
            (self.run.run_dir / "summary.md").write_text(
                f"# pytest-super run {self.run.run_id}\n\nagent: {self.run.agent}, model: "
                f"{self.run.settings.model or '-'}\n\n{table}\n"
                + (f"\n{images}\n" if images else "")
            )
            self.html = self._write_html()
        except OSError as exc:  # a full disk must not cost the run its other reports
            warnings.warn(
                f"pytest-super: the summary and HTML report were not written: {exc}",
                stacklevel=1,
            )

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
            warnings.warn(
                f"pytest-super: the HTML report was not written ({type(exc).__name__}: {exc}); "
                f"`pytest-super html {shown_path(self.run.run_dir)}` tries again",
                stacklevel=1,
            )
            return None

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.records:
            return
        terminalreporter.section(f"SUPER summary (run {self.run.run_id}, agent {self.run.agent})")
        table = reports.format_table({self.run.agent or "run": self._rows()})
        terminalreporter.write_line(console_text(table))  # names read back from earlier runs
        images = reports.images_line(self.records.values())
        if images:
            terminalreporter.write_line(console_text(images))
        terminalreporter.write_line(f"reports: {shown_path(self.run.run_dir)}")
        if self.html is not None:
            terminalreporter.write_line(f"HTML report: {shown_path(self.html)}")

    def _rows(self) -> list[reports.SummaryRow]:
        return reports.summarize(self.records.values())


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
