"""The pytest side of `--super-executor=ray`: one pytest process keeps many tasks in flight on a Ray
cluster (cluster.py) and reports each task's item as its outcome comes back.

`RaySession` replaces pytest's run-test loop for the session: the items that are tasks to run are
submitted first (at most K in flight, the rest queued), the other items run here as usual, then each
task item goes through pytest's ordinary protocol (setup, call, teardown, reports, JUnit) when its
outcome arrives, in the order they finish. `-x`/`--maxfail` stop the loop and cancel the rest;
Ctrl-C and SIGTERM (which arrives as Ctrl-C) cancel every task in flight; either way, each live
node then removes the run's containers, and the outcomes already reported stay in the reports.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import shlex
import shutil
import time
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from pytest_super import collect, options, progress
from pytest_super.executors import read_cleanup_entries
from pytest_super.executors.ray import guardian
from pytest_super.executors.ray.cluster import ClusterLost, NodeOutcome
from pytest_super.executors.ray.driver import DriverProcess, wait_for
from pytest_super.executors.ray.guardian import Guardian
from pytest_super.executors.ray.settings import ray_address
from pytest_super.options import run_of
from pytest_super.settings import SuperRun
from pytest_super.thirdparty import item_deadline_s
from pytest_super.trajectory import Step

SESSION_KEY = pytest.StashKey["RaySession"]()


class RaySession:
    """Registered as a plugin on the controller of a `--super-executor=ray` run."""

    def __init__(self, config: pytest.Config, run: SuperRun) -> None:
        self.config = config
        self.run = run
        self.dispatcher = DriverProcess(run, live=run.live)
        self.dispatcher.start()
        self._printers: dict[str, Callable[[Step], None]] = {}
        self._lost_lines: list[str] = []
        #: the process that speaks for this controller should it end without ending the run
        self.guardian: Guardian | None = None
        #: seconds from each task's end on its node to its report here (benchmarks/bench_cluster.py)
        self.report_lags: list[float] = []

    def outcome(self, name: str) -> NodeOutcome:
        """The node's outcome of the task item `name` (ready when its protocol runs)."""
        return self.dispatcher.outcome(name)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool:
        if session.testsfailed and not options.continues_after_collection_errors(session.config):
            raise session.Interrupted(
                f"{session.testsfailed} error{'s' if session.testsfailed != 1 else ''} "
                "during collection"
            )
        if options.collecting_only(session.config):
            return True
        remote = {
            item.name: item
            for item in session.items
            if isinstance(item, collect.SuperTaskItem) and _runs_remotely(item)
        }
        for name, task_item in remote.items():
            self.dispatcher.submit(name, task_item.task, item_deadline_s(task_item))
        self._show_progress(remote)
        stopped: KeyboardInterrupt | None = None
        try:
            self._run_remote(session, remote)
        except ClusterLost:
            raise session.Interrupted(self._lost_message()) from None
        except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM (not -x's or --maxfail's stop)
            if isinstance(exc, session.Interrupted):
                raise
            stopped = exc
        finally:
            if self.dispatcher.busy and not self.dispatcher.lost:  # -x, --maxfail, Ctrl-C
                keep = self.run.settings.keep_failed
                self.dispatcher.cancel(None if keep else self.run.run_id)
        if stopped is not None:
            # raised again from here: pytest formats the interrupt's traceback with each frame's
            # source, and Ray's frames (ray/_private/worker.py, 3,500 lines parsed) took 1.2 s of
            # the 1.9 s from Ctrl-C to the end of a run
            raise KeyboardInterrupt(*stopped.args) from None
        return True

    def _run_remote(self, session: pytest.Session, remote: Mapping[str, pytest.Item]) -> None:
        """The other items here, then each task item as its outcome comes back."""
        for other in session.items:  # the rest: skipped tasks, ordinary tests
            if other.name not in remote:
                self._protocol(session, other)
        for name in wait_for(
            self.dispatcher,
            set(remote),
            on_steps=self._show_steps,
            on_events=self._say,
            should_stop=lambda: bool(session.shouldfail or session.shouldstop),
        ):
            self._tell_progress(remote[name])
            self._protocol(session, remote[name])
            self.dispatcher.release(name)
            ended = self.dispatcher.ended_at.pop(name, 0.0)
            if ended:
                self.report_lags.append(time.time() - ended)

    def resume_command(self) -> str:
        """The command that runs what this run did not finish."""
        args = " ".join(shlex.quote(a) for a in self.config.invocation_params.args)
        return f"pytest {args} --super-resume".replace("  ", " ")

    def cleanup_command(self) -> str:
        """The command that removes what is left of this run on the cluster's nodes."""
        return (
            f"pytest-super cleanup --executor ray --ray-address {ray_address(self.run)} "
            f"--backend {self.run.kernel.backend} --run {self.run.run_id}"
        )

    def _lost_message(self) -> str:
        """What was lost, what was not finished, and the command that runs the rest."""
        left = self.dispatcher.unfinished()
        resume = self.resume_command()
        when = self.dispatcher.back_when
        return (
            f"pytest-super: {self.dispatcher.lost}: the run ends here. {left} task"
            f"{'s' if left != 1 else ''} of this run did not finish (not in its results; the "
            f"results received are written). {when[:1].upper()}{when[1:]}, run "
            f"them with: {resume}"
        )

    def _show_progress(self, remote: Mapping[str, pytest.Item]) -> None:
        """The status line (progress.py) counts what the dispatcher runs and queues."""
        line = progress.progress_of(self.config)
        if line is None:
            return

        def in_flight() -> tuple[dict[str, float], int]:
            running, queued = self.dispatcher.in_flight()
            return {remote[n].nodeid: t for n, t in running.items() if n in remote}, queued

        line.tally.external = in_flight
        line.tally.slots = self.dispatcher.concurrency
        line.begin()

    def _tell_progress(self, item: pytest.Item) -> None:
        line = progress.progress_of(self.config)
        outcome = self.dispatcher.peek(item.name)
        if line is not None and outcome is not None:
            took = outcome.ended_at - outcome.started_at if outcome.started_at else None
            line.ran_on(item.nodeid, outcome.node, took)

    def _protocol(self, session: pytest.Session, item: pytest.Item) -> None:
        item.config.hook.pytest_runtest_protocol(item=item, nextitem=None)
        if session.shouldfail:
            raise session.Failed(session.shouldfail)
        if session.shouldstop:
            raise session.Interrupted(session.shouldstop)

    def _say(self, events: list[str]) -> None:
        """What happened to nodes, said at once (above the status line)."""
        reporter = self.config.pluginmanager.getplugin("terminalreporter")
        if reporter is None:
            return
        line = progress.progress_of(self.config)
        with line.paused() if line is not None else contextlib.nullcontext():
            for event in events:
                reporter.write_line(f"pytest-super: {event}")

    def _show_steps(self, steps: list[tuple[str, dict[str, Any]]]) -> None:
        from pytest_super.live import live_printer

        line = progress.progress_of(self.config)
        with line.paused() if line is not None else contextlib.nullcontext():
            self._print_steps(steps, live_printer)

    def _print_steps(self, steps: list[tuple[str, dict[str, Any]]], live_printer: Any) -> None:
        for name, fields in steps:
            item_task = name.split("[", 1)[0]
            printer = self._printers.get(name)
            if printer is None:
                printer = self._printers[name] = live_printer(self.config, item_task)
            printer(Step(**fields))

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Every live node removes the run's containers (also after Ctrl-C and -x), unless
        --super-keep keeps failing tasks' containers (as a local run does)."""
        if self.dispatcher.lost:
            self._forget_nodes()
            return
        if self.run.settings.keep_failed:
            return
        try:
            cleaned, missed = read_cleanup_entries(
                self.dispatcher.cleanup_on_nodes(self.run.run_id)
            )
        except Exception as exc:  # noqa: BLE001 - the reports must still be written
            cleaned, missed = {}, [str(exc)]
        if missed:
            warnings.warn(
                f"pytest-super: the Ray nodes could not all be cleaned up ({'; '.join(missed)}); "
                f"run `{self.cleanup_command()}`",
                stacklevel=1,
            )
        left = [f"{node}: {name}" for node, names in cleaned.items() for name in names]
        if left:
            reporter = session.config.pluginmanager.getplugin("terminalreporter")
            if reporter is not None:
                reporter.write_line(
                    f"pytest-super: removed {len(left)} container(s) of this run left on the "
                    "Ray nodes: " + ", ".join(left[:10])
                )

    def _forget_nodes(self) -> None:
        """The head is gone: no node can be asked to clean up. This machine's own share of the
        run (its start lock folder, when it is also a node) goes; the nodes' containers go at
        their next run's start, or with the cleanup command said here."""
        from pytest_super.executors.ray.nodefiles import run_lock_dir

        shutil.rmtree(run_lock_dir(self.run.run_id), ignore_errors=True)
        self._lost_lines = [
            self._lost_message(),
            "pytest-super: the run's containers still on the nodes go when the next run starts "
            f"on each node, or now with `{self.cleanup_command()}` {self.dispatcher.back_when}",
        ]

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        # builds, pulls, failed pulls (once each); nodes lost or left out (engine failures)
        for line in self.dispatcher.end_lines():
            terminalreporter.write_line(f"pytest-super: {line}")
        for line in self._lost_lines:
            terminalreporter.write_line(line)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self.guardian is not None:  # the run ended as it should: its reports are written
            self.guardian.release()
        self.dispatcher.stop()


def _runs_remotely(item: pytest.Item) -> bool:
    """A task item that will run (not skipped by a marker: --super-resume, -m's skips)."""
    if not isinstance(item, collect.SuperTaskItem):
        return False
    return item.get_closest_marker("skip") is None and item.get_closest_marker("skipif") is None


def start(config: pytest.Config) -> RaySession:
    """Connect to the cluster and take over the run-test loop (the controller only)."""
    run = run_of(config)
    session = config.stash[SESSION_KEY] = RaySession(config, run)
    config.pluginmanager.register(session, "pytest-super-ray")
    _find_this_module_at_once()
    session.guardian = _guard(session)
    return session


def _guard(session: RaySession) -> Guardian | None:
    """The guardian of this controller (guardian.py); None, with a warning, when it cannot start
    (the run goes on: only what a killed controller leaves would go unsaid)."""
    from pytest_super.executors.ray.nodefiles import run_lock_dir

    run = session.run
    watched = guardian.Watched(
        controller_pid=os.getpid(),
        run_id=run.run_id,
        agent=run.agent or "",
        run_dir=str(run.run_dir),
        private=str(run_lock_dir(run.run_id)),
        resume=session.resume_command(),
        cleanup=session.cleanup_command(),
    )
    try:
        return guardian.start(watched)
    except OSError as exc:
        warnings.warn(f"pytest-super: the run's guardian did not start: {exc}", stacklevel=1)
        return None


def _find_this_module_at_once() -> None:
    """At a Ctrl-C pytest shows the interrupt's last entry, the `raise` of `pytest_runtestloop`
    here, with its source; `inspect.findsource` first looks for the module of the code, and
    unless a lookup of this file filled its cache it walks every module loaded (over a thousand
    with Ray's): 0.8-0.9 s of a cluster run's Ctrl-C on a busy machine. One lookup now, while
    the run starts, fills the cache."""
    with contextlib.suppress(Exception):
        code = RaySession.pytest_runtestloop.__code__
        inspect.getmodule(code, inspect.getsourcefile(code))


def session_of(config: pytest.Config) -> RaySession:
    return config.stash[SESSION_KEY]
