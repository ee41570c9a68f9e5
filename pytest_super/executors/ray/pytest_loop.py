"""The pytest side of `--super-executor=ray` (`RayExecutor.pytest_loop`): one pytest process keeps
many tasks in flight on a Ray cluster through the `RayExecutor` (executors/ray/__init__.py) and
reports each task's item as its outcome comes back.

`RaySession` replaces pytest's run-test loop for the session: the items that are tasks to run are
submitted to the executor first (at most K in flight, the rest queued; each item's future in its
stash, where the `super_result` fixture takes its outcome), the other items run here as usual,
then each task item goes through pytest's ordinary protocol (setup, call, teardown, reports,
JUnit) when its outcome arrives, in the order they finish. `-x`/`--maxfail` stop the loop and
cancel the rest; Ctrl-C and SIGTERM (which arrives as Ctrl-C) cancel every task in flight; either
way, each live node then removes the run's containers (`RayExecutor.cleanup`, asked by the run's
record), and the outcomes already reported stay in the reports.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import shlex
import time
import warnings
from collections.abc import Callable, Iterator, Mapping

import pytest

from pytest_super import collect, options, progress
from pytest_super.executors.base import Executor
from pytest_super.executors.pytest_side import FUTURE_KEY
from pytest_super.executors.ray import RayExecutor, guardian
from pytest_super.executors.ray.cluster import ClusterLost
from pytest_super.executors.ray.connect import RayUnavailable
from pytest_super.executors.ray.guardian import Guardian
from pytest_super.executors.ray.settings import cleanup_command
from pytest_super.settings import SuperRun
from pytest_super.thirdparty import item_deadline_s
from pytest_super.trajectory import Step

SESSION_KEY = pytest.StashKey["RaySession"]()


class RaySession:
    """Registered as a plugin on the controller of a `--super-executor=ray` run."""

    def __init__(self, config: pytest.Config, run: SuperRun, executor: RayExecutor) -> None:
        self.config = config
        self.run = run
        self.executor = executor
        executor.pump_in_background = False  # pumped here, between the items' reports
        executor.release_when_done = False  # a task's slot is held until its item is reported
        executor.start(run)
        assert executor.driver is not None
        self.dispatcher = executor.driver
        #: the process that speaks for this controller should it end without ending the run
        self.guardian: Guardian | None = None
        #: seconds from each task's end on its node to its report here (benchmarks/bench_cluster.py)
        self.report_lags: list[float] = []

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
            task_item.stash[FUTURE_KEY] = self.executor.submit(
                task_item.task,
                self.run,
                name=name,
                deadline_s=item_deadline_s(task_item),
                on_step=self._live_printer(name) if self.run.live else None,
            )
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
        for name in self._finished(session, set(remote)):
            self._tell_progress(remote[name])
            self._protocol(session, remote[name])
            self.executor.release(name)
            ended = self.dispatcher.ended_at.pop(name, 0.0)
            if ended:
                self.report_lags.append(time.time() - ended)

    def _finished(self, session: pytest.Session, names: set[str]) -> Iterator[str]:
        """Each of `names` as its task finishes (its future done), saying what happened to nodes
        in between; until none is left, the session stops, or nothing runs that could finish
        the rest."""
        left = set(names)
        while left and not (session.shouldfail or session.shouldstop):
            finished = self.executor.pump()
            events = self.dispatcher.take_events()
            if events:
                self._say(events)
            for name in finished:
                left.discard(name)
                yield name
            if not self.dispatcher.busy and left:
                return

    def resume_command(self) -> str:
        """The command that runs what this run did not finish."""
        args = " ".join(shlex.quote(a) for a in self.config.invocation_params.args)
        return f"pytest {args} --super-resume".replace("  ", " ")

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
        future = item.stash.get(FUTURE_KEY, None)
        if line is not None and future is not None and future.done():
            started, ended = self.executor.timing.get(item.name, (0.0, 0.0))
            line.ran_on(item.nodeid, future.result().node, ended - started if started else None)

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

    def _live_printer(self, name: str) -> Callable[[Step], None]:
        """Task `name`'s steps printed as the nodes send them (above the status line)."""
        from pytest_super.live import live_printer

        printer = live_printer(self.config, name.split("[", 1)[0])

        def show(step: Step) -> None:
            line = progress.progress_of(self.config)
            with line.paused() if line is not None else contextlib.nullcontext():
                printer(step)

        return show

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        left = self.executor.removed
        if left:
            terminalreporter.write_line(
                f"pytest-super: removed {len(left)} container(s) of this run left on the "
                "Ray nodes: " + ", ".join(left[:10])
            )
        # builds, pulls, failed pulls (once each); nodes lost or left out (engine failures)
        for line in self.executor.end_lines:
            terminalreporter.write_line(f"pytest-super: {line}")
        if self.dispatcher.lost:  # no node could be asked to clean up: said, with the command
            terminalreporter.write_line(self._lost_message())
            terminalreporter.write_line(
                "pytest-super: the run's containers still on the nodes go when the next run "
                f"starts on each node, or now with `{cleanup_command(self.run)}` "
                f"{self.dispatcher.back_when}"
            )

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self.guardian is not None:  # the run ended as it should: its reports are written
            self.guardian.release()
        self.executor.disconnect()


def _runs_remotely(item: pytest.Item) -> bool:
    """A task item that will run (not skipped by a marker: --super-resume, -m's skips)."""
    if not isinstance(item, collect.SuperTaskItem):
        return False
    return item.get_closest_marker("skip") is None and item.get_closest_marker("skipif") is None


def start(config: pytest.Config, run: SuperRun, executor: Executor) -> None:
    """Connect to the cluster and take over the run-test loop (the controller only); no Ray,
    no cluster or no node for a task is a usage error."""
    if not isinstance(executor, RayExecutor):
        raise TypeError(f"the Ray executor's pytest loop was given {type(executor).__name__}")
    try:
        session = RaySession(config, run, executor)
    except RayUnavailable as exc:
        raise pytest.UsageError(str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - the session must end with a sentence, not a trace
        raise pytest.UsageError(
            f"--super-executor=ray: could not start on the cluster ({type(exc).__name__}: {exc})"
        ) from exc
    config.stash[SESSION_KEY] = session
    config.pluginmanager.register(session, "pytest-super-ray")
    _find_this_module_at_once()
    session.guardian = _guard(session)


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
        cleanup=cleanup_command(run),
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
