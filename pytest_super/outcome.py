"""What became of one task, as one record: `TaskOutcome`.

Every executor's future gives one (executors/), `execute.outcome_of` returns one, `RunRecord`
records one (`run_record.outcome_record`: the one mapping to a results.jsonl record), and the
`super_result` fixture turns one into pytest's outcome (plugin.py: the one place). It is plain
data: a dataclass of strings, numbers and a `TaskResult`, which crosses a process or a cluster
as it is (pickled), with no class looked up by its name to raise it again.

A task ends in exactly one of three ways:

- a result (`result`: the scored episode, passed or failed);
- an error (`error`: a `TaskError`, what the exception that ended it said of itself: its class's
  name, its message, its exit status, whether running it again may help, and whose fault it was);
- its deadline passed (`timed_out_after_s`).

`retried` says why each earlier attempt failed; `node` where it ran ("" on this machine).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pytest_super.errors import (
    EngineUnavailable,
    ExitStatus,
    InfrastructureError,
    SuperError,
    TaskFileError,
    TaskSetupError,
)
from pytest_super.runner import TaskResult, exit_status_of

#: whose fault an error is: the kernels' engine stopped answering ("engine"), other machinery
#: failed (the kernel, the image, the model endpoint, a cluster's node: "infrastructure"), a bug
#: of ours ("harness"), or the task itself is broken ("task")
Whose = Literal["engine", "infrastructure", "harness", "task"]


@dataclass(frozen=True)
class TaskError:
    """The error that ended a task, as data."""

    kind: str  #: the exception's class name ("EngineUnavailable"), as reports show it
    message: str
    exit_status: ExitStatus
    retryable: bool
    whose: Whose

    @classmethod
    def of(cls, exc: BaseException) -> TaskError:
        """What `exc` says of itself (its class declares its exit status and retryability)."""
        return cls(
            kind=type(exc).__name__,
            message=str(exc),
            exit_status=exit_status_of(exc) if isinstance(exc, Exception) else _HARNESS,
            retryable=isinstance(exc, InfrastructureError) and exc.retryable,
            whose=whose_fault(exc),
        )

    @classmethod
    def of_class(
        cls, error: type[SuperError], message: str, *, kind: str | None = None
    ) -> TaskError:
        """An error of class `error` with `message`, without making one; shown as `kind` when
        given (an error of the Ray dispatcher's own, "NodeLost", is an `InfrastructureError`)."""
        retryable = issubclass(error, InfrastructureError) and bool(error.retryable)
        status, whose = error.exit_status, _whose_class(error)
        return cls(kind or error.__name__, message, status, retryable, whose)

    def shown(self) -> str:
        """As a report shows it: "EngineUnavailable: no Docker engine answers ..."."""
        return f"{self.kind}: {self.message}"


_HARNESS = ExitStatus.HARNESS_ERROR


def whose_fault(exc: BaseException) -> Whose:
    """Whose fault the error `exc` is (see `Whose`)."""
    if isinstance(exc, SuperError):
        return _whose_class(type(exc))
    return "harness"


def _whose_class(error: type[SuperError]) -> Whose:
    if issubclass(error, TaskSetupError | TaskFileError):
        return "task"
    if issubclass(error, EngineUnavailable):
        return "engine"
    if error.exit_status is ExitStatus.HARNESS_ERROR:
        return "harness"
    return "infrastructure"


@dataclass(frozen=True)
class TaskOutcome:
    """One task's outcome (see the module's docstring). Made by `finished`, `failed` or
    `timed_out`."""

    name: str  #: the item's name: the task id, or `<id>[repeatN]`
    exit_status: ExitStatus
    result: TaskResult | None = None
    error: TaskError | None = None
    retried: list[str] = field(default_factory=list)
    node: str = ""
    timed_out_after_s: float | None = None

    @classmethod
    def finished(cls, name: str, result: TaskResult, *, node: str = "") -> TaskOutcome:
        return cls(name, result.exit_status, result=result, retried=list(result.retried), node=node)

    @classmethod
    def failed(
        cls, name: str, error: TaskError, *, retried: list[str] | None = None, node: str = ""
    ) -> TaskOutcome:
        return cls(name, error.exit_status, error=error, retried=list(retried or []), node=node)

    @classmethod
    def of_error(cls, name: str, exc: BaseException, *, node: str = "") -> TaskOutcome:
        """The outcome of a task `exc` ended, with the attempts before it (`exc.retried`)."""
        return cls.failed(name, TaskError.of(exc), retried=retried_of(exc), node=node)

    @classmethod
    def timed_out(
        cls, name: str, seconds: float, *, retried: list[str] | None = None, node: str = ""
    ) -> TaskOutcome:
        return cls(
            name,
            ExitStatus.TIMEOUT,
            retried=list(retried or []),
            node=node,
            timed_out_after_s=seconds,
        )


def retried_of(exc: BaseException) -> list[str]:
    """Why each attempt before the one that raised `exc` failed (empty: it was the first)."""
    return list(getattr(exc, "retried", []))


class OutcomeError(SuperError):
    """An error outcome raised where a caller wants an exception (the `super_result` fixture):
    its text is the error's message, `error` the whole `TaskError`, `retried` the attempts
    before it. Reports show it as `error.shown()`, under the error's own class name."""

    def __init__(self, error: TaskError, retried: list[str]) -> None:
        super().__init__(error.message)
        self.error = error
        self.retried = list(retried)


__all__ = [
    "OutcomeError",
    "TaskError",
    "TaskOutcome",
    "Whose",
    "retried_of",
    "whose_fault",
]
