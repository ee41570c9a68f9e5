"""The pytest side of the run's executor (executors/__init__.py: the executors themselves know
no pytest): choosing it and checking pytest's options against it, starting it (an executor that
runs tasks elsewhere takes over pytest's run-test loop with its `pytest_loop`), and the outcome
of a task item: the future its loop submitted, or one submitted now (the local executor: the
task runs here, its kernel from the process's pool, the next item's kernel made meanwhile).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from importlib import import_module

import pytest

from pytest_super import collect, live, thirdparty
from pytest_super.execute import kernel_settings_for, needs_own_image
from pytest_super.executors.base import Executor, WarmsAhead, make_executor
from pytest_super.kernels.base import KernelSettings
from pytest_super.outcome import TaskOutcome
from pytest_super.settings import SuperRun
from pytest_super.tasks import Task
from pytest_super.trajectory import Step

EXECUTOR_KEY = pytest.StashKey[Executor]()
#: a task item's future, when the executor's loop submitted it ahead of the item's protocol
FUTURE_KEY = pytest.StashKey[Future[TaskOutcome]]()
#: the item this process runs after this one (pytest_runtest_protocol's `nextitem`)
NEXT_ITEM_KEY = pytest.StashKey["pytest.Item | None"]()


def choose(config: pytest.Config, run: SuperRun) -> Executor:
    """The run's executor, made once per process and checked against pytest's options: one
    that runs tasks elsewhere (`remote`) submits them all from one pytest process, so xdist's
    workers (each would submit every task) are refused."""
    try:
        executor = make_executor(run.executor)
    except ValueError as exc:
        raise pytest.UsageError(f"--super-executor: {exc}") from None
    if executor.remote and thirdparty.requested_workers(config):
        raise pytest.UsageError(
            f"--super-executor={run.executor} runs many tasks from one pytest process: drop -n "
            "(pytest-xdist)"
        )
    config.stash[EXECUTOR_KEY] = executor
    return executor


def executor_of(config: pytest.Config) -> Executor:
    """The executor `choose` made for this process."""
    return config.stash[EXECUTOR_KEY]


def start(config: pytest.Config, run: SuperRun, executor: Executor) -> None:
    """Before any task, on the controller: the executor's pytest loop (`pytest_loop`), which
    starts it, or the executor started here (a failure is a usage error saying why)."""
    if executor.pytest_loop:
        module, _, function = executor.pytest_loop.partition(":")
        getattr(import_module(module), function)(config, run, executor)
        return
    executor.start(run)


def outcome_for(config: pytest.Config, run: SuperRun, item: pytest.Item, task: Task) -> TaskOutcome:
    """The outcome of the task item `item`: its loop's future's, or the task submitted now
    within the item's deadline (the item's own timer, pytest-timeout's hooks, holds it:
    timeouts.py), its steps shown with --super-live."""
    future = item.stash.get(FUTURE_KEY, None)
    if future is None:
        executor = executor_of(config)
        if isinstance(executor, WarmsAhead):
            executor.warm_next(_upcoming_task(run, item))
        future = executor.submit(
            task,
            run,
            name=item.name,
            deadline_s=thirdparty.item_deadline_s(item),
            on_step=_live(config, run, task),
        )
    return future.result()


def _live(config: pytest.Config, run: SuperRun, task: Task) -> Callable[[Step], None] | None:
    return live.live_printer(config, task.id) if run.live else None


def _upcoming_task(run: SuperRun, item: pytest.Item) -> tuple[KernelSettings, str] | None:
    """The kernel settings and task id of the task this process runs next, if it is a task
    that will ask for a kernel (not skipped)."""
    upcoming = item.stash.get(NEXT_ITEM_KEY, None)
    if not isinstance(upcoming, collect.SuperTaskItem):
        return None
    if upcoming.get_closest_marker("skip") or upcoming.get_closest_marker("skipif"):
        return None
    if needs_own_image(run, upcoming.task):  # its image is made when it runs, not ahead
        return None
    return kernel_settings_for(run, upcoming.task), upcoming.name
