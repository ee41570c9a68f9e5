"""What an executor is (`Executor`: see executors/__init__.py for what each part means) and
how the run's is made (`make_executor`). No pytest here."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from typing import Protocol, runtime_checkable

from pytest_super.executors import _REGISTRY
from pytest_super.kernels.base import KernelSettings
from pytest_super.outcome import TaskOutcome
from pytest_super.settings import SuperRun
from pytest_super.tasks import Task
from pytest_super.trajectory import Step

_NEEDS = (
    "the attributes `remote` and `pytest_loop` and the methods `start`, `submit`, `stop` and "
    "`cleanup` (see Executor)"
)


@runtime_checkable
class Executor(Protocol):
    """Where tasks run (see the module's docstring)."""

    remote: bool
    pytest_loop: str

    def start(self, run: SuperRun) -> None: ...

    def submit(
        self,
        task: Task,
        run: SuperRun,
        *,
        name: str,
        deadline_s: float | None,
        on_step: Callable[[Step], None] | None = None,
    ) -> Future[TaskOutcome]: ...

    def stop(self) -> list[str]: ...

    def cleanup(self, run: SuperRun) -> None: ...


@runtime_checkable
class WarmsAhead(Protocol):
    """An executor that can make the kernel of the task it runs next while one runs (the local
    executor's pool): `warm_next` is told it before a task is submitted."""

    def warm_next(self, upcoming: tuple[KernelSettings, str] | None) -> None: ...


def make_executor(spec: str) -> Executor:
    """A new instance of the executor `spec` names; ValueError if it names none, or something
    that is not an executor."""
    made: Executor = _REGISTRY.make(spec, Executor, _NEEDS)
    return made


__all__ = ["Executor", "WarmsAhead", "make_executor"]
