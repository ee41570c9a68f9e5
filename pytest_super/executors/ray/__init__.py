"""The `ray` executor (`--super-executor=ray`): each task runs whole on a node of a Ray cluster
(cluster.py), driven by the run's Ray driver in a process of its own (driver.py); many tasks are
in flight at once. No pytest here: `run_tasks` submits to it as the plugin does, and its pytest
side (the session loop that reports each task item as its outcome comes back) is
pytest_loop.py. Ray itself is imported only in the driver's process and on the nodes: a node
imports `cluster.py`, and so this package, where no pytest runs.

The futures `submit` returns are completed by `pump`: a thread of the executor's own calls it
(a script's `run_tasks`), or the pytest loop does, between the items it reports
(`pump_in_background = False`).
"""

from __future__ import annotations

import contextlib
import shutil
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING

from pytest_super.errors import InfrastructureError
from pytest_super.executors.ray import settings as _settings
from pytest_super.outcome import TaskOutcome
from pytest_super.settings import SuperRun
from pytest_super.tasks import Task
from pytest_super.trajectory import Step

if TYPE_CHECKING:
    from pytest_super.executors.ray.driver import DriverProcess
    from pytest_super.kernels.base import KernelSettings

#: seconds of one wait on the driver (a pump's step)
PUMP_WAIT_S = 0.2


class RayExecutor:
    """Tasks run on a Ray cluster's nodes; their outcomes come back to this process."""

    remote = True
    pytest_loop = "pytest_super.executors.ray.pytest_loop:start"
    #: --super-ray-address, --super-ray-concurrency (executors/ray/settings.py), and the header's
    #: words on the cluster
    settings = _settings.SETTINGS
    describe = staticmethod(_settings.describe)
    cleanup_options = staticmethod(_settings.cleanup_options)

    def __init__(self) -> None:
        self.driver: DriverProcess | None = None
        self.run: SuperRun | None = None
        #: whether a thread of the executor's own completes the futures (else: `pump`'s caller)
        self.pump_in_background = True
        #: whether a finished task's slot goes to the next at once (else: at `release`)
        self.release_when_done = True
        #: (start, end) on its node (wall clock) of each finished task, by name
        self.timing: dict[str, tuple[float, float]] = {}
        #: what `cleanup` removed from the nodes ("node: name") and the driver's end-of-run lines
        self.removed: list[str] = []
        self.end_lines: list[str] = []
        self._futures: dict[str, Future[TaskOutcome]] = {}
        self._on_step: dict[str, Callable[[Step], None]] = {}
        self._lock = threading.Lock()
        self._pump: threading.Thread | None = None
        self._stopping = threading.Event()
        self._done = False

    # -- the Executor --------------------------------------------------------------------------
    def start(self, run: SuperRun) -> None:
        """Start the run's driver and join the cluster (`RayUnavailable` when no cluster
        answers, or it has no node for a task); what dead runs left on the nodes goes."""
        from pytest_super.executors.ray.driver import DriverProcess

        self.run = run
        driver = DriverProcess(run, live=run.live)
        driver.start()  # its process ended when it fails: nothing to clean up then
        self.driver = driver

    def submit(
        self,
        task: Task,
        run: SuperRun,
        *,
        name: str,
        deadline_s: float | None,
        on_step: Callable[[Step], None] | None = None,
    ) -> Future[TaskOutcome]:
        """Queue the task on the cluster (it starts when a slot is free); its future is done
        when its node's outcome is back. `ClusterLost` when the driver is gone."""
        driver = self._driver()
        future: Future[TaskOutcome] = Future()
        with self._lock:
            self._futures[name] = future
            if on_step is not None:
                self._on_step[name] = on_step
        driver.submit(name, task, deadline_s)
        if self.pump_in_background and self._pump is None:
            self._pump = threading.Thread(
                target=self._pump_loop, name="pytest-super-ray-pump", daemon=True
            )
            self._pump.start()
        return future

    def stop(self) -> list[str]:
        """Nothing of this process's own to end before the run's clean-up."""
        return []

    def cleanup(self, run: SuperRun) -> None:
        """Tasks still queued or in flight cancelled; every live node removes the run's
        containers and folders (unless --super-keep); the driver leaves the cluster. With the
        head lost, this machine's own share of the run goes (the nodes' at their next run's
        start). `InfrastructureError` naming the nodes not cleaned and the command that does."""
        driver = self.driver
        if driver is None or self._done:
            return
        self._done = True
        self._stop_pump()
        keep = run.settings.keep_failed
        try:
            if driver.busy and not driver.lost:  # a script's Ctrl-C; pytest's loop cancels first
                driver.cancel(None if keep else run.run_id)
            if driver.lost:
                self._forget_nodes(run)
            elif not keep:
                self._clean_nodes(run, driver)
        finally:
            self.end_lines = driver.end_lines()
            driver.stop()

    # -- the Ray executor's own ------------------------------------------------------------------
    def pump(self, timeout_s: float = PUMP_WAIT_S) -> list[str]:
        """One wait on the driver: the live steps shown, each finished task's future given its
        outcome (the trajectory written into the run's folder); the names that finished.
        `ClusterLost` when the head or the driver is gone."""
        from pytest_super.executors.ray.outcomes import task_outcome

        driver, run = self._driver(), self.run
        assert run is not None
        names = driver.wait(timeout_s)
        for name, fields in driver.drain_steps():
            show = self._on_step.get(name)
            if show is not None:
                with contextlib.suppress(Exception):  # the live view must never end a task
                    show(Step(**fields))
        for name in names:
            node_outcome = driver.outcome(name)
            if node_outcome.started_at:
                self.timing[name] = (node_outcome.started_at, node_outcome.ended_at)
            outcome = task_outcome(run, node_outcome)
            with self._lock:
                future = self._futures.pop(name, None)
                self._on_step.pop(name, None)
            if self.release_when_done:
                driver.release(name)
            if future is not None:
                future.set_result(outcome)
        return names

    def release(self, name: str) -> None:
        """Task `name` is reported: its slot goes to the next queued task."""
        self._driver().release(name)

    def disconnect(self) -> None:
        """The driver leaves the cluster, whatever was cleaned (the end of a pytest process)."""
        self._stop_pump()
        if self.driver is not None:
            self.driver.stop()

    def _driver(self) -> DriverProcess:
        if self.driver is None:
            raise RuntimeError("the Ray executor was asked before `start`")
        return self.driver

    def _pump_loop(self) -> None:
        while not self._stopping.is_set():
            with self._lock:
                waiting = bool(self._futures)
            if not waiting:
                self._stopping.wait(0.05)
                continue
            try:
                self.pump()
            except BaseException as exc:  # noqa: BLE001 - the waiting futures say it
                self._fail_waiting(exc)
                return

    def _fail_waiting(self, exc: BaseException) -> None:
        with self._lock:
            waiting, self._futures = list(self._futures.values()), {}
        for future in waiting:
            future.set_exception(exc)

    def _stop_pump(self) -> None:
        self._stopping.set()
        if self._pump is not None and self._pump is not threading.current_thread():
            self._pump.join(PUMP_WAIT_S * 10)

    def _clean_nodes(self, run: SuperRun, driver: DriverProcess) -> None:
        from pytest_super.executors import read_cleanup_entries

        try:
            cleaned, missed = read_cleanup_entries(driver.cleanup_on_nodes(run.run_id))
        except Exception as exc:  # noqa: BLE001 - said with the command that cleans up
            cleaned, missed = {}, [str(exc)]
        self.removed = [f"{node}: {name}" for node, names in cleaned.items() for name in names]
        if missed:
            raise InfrastructureError(
                f"the Ray nodes could not all be cleaned up ({'; '.join(missed)}); run "
                f"`{_settings.cleanup_command(run)}`"
            )

    def _forget_nodes(self, run: SuperRun) -> None:
        """The head is gone: no node can be asked to clean up. This machine's own share of the
        run (its start lock folder, when it is also a node) goes."""
        from pytest_super.executors.ray.nodefiles import run_lock_dir

        shutil.rmtree(run_lock_dir(run.run_id), ignore_errors=True)

    # -- `pytest-super image build` and `cleanup` on every node -----------------------------------
    def build_on_nodes(
        self, address: str, *, profile: str, base: str | None, offline: bool, tag: str | None
    ) -> list[tuple[str, str]]:
        """`pytest-super image build --executor ray`: built on every live node's engine."""
        from pytest_super.executors.ray.commands import build_on_nodes

        return build_on_nodes(address, profile=profile, base=base, offline=offline, tag=tag)

    def cleanup_on_nodes(
        self, address: str, settings: KernelSettings, run_id: str | None, *, every: bool = False
    ) -> list[str]:
        """`pytest-super cleanup --executor ray`: on every live node, its own engine's."""
        from pytest_super.executors.ray.commands import cleanup_nodes

        return cleanup_nodes(address, settings, run_id, every)
