"""The exceptions that cross module lines, and what each one means to a user.

`InfrastructureError` and its subclasses become pytest *errors* (not failures): they say that the
machinery (Docker engine, image, kernel, LLM endpoint) broke, not that the agent did badly.
`EpisodeEnd` and its subclasses end an episode with an `ExitStatus` (limits are exceptions, as in
mini-swe-agent); kernels raise them too (`DiskLimitExceeded`), so they live here, below both.
Every error that ends an episode or a task carries its `ExitStatus` as a class attribute
(`exit_status`; `status` for `EpisodeEnd`), so the status is read, never worked out.
"""

from __future__ import annotations

from enum import Enum
from typing import ClassVar


class ExitStatus(str, Enum):
    """How an episode ended: the `exit_status` of results.jsonl, JUnit and trajectories.

    A member is equal to its value and `str()` gives the value, so it is written as the bare
    string it names (results of older runs compare equal to it too).
    """

    SUBMITTED = "submitted"
    NO_SUBMISSION = "no_submission"
    BUDGET_EXCEEDED = "budget_exceeded"
    STEP_LIMIT = "step_limit"
    COMPUTE_LIMIT = "compute_limit"
    FORMAT_ERRORS = "format_errors"
    LLM_ERROR = "llm_error"
    KERNEL_ERROR = "kernel_error"
    AGENT_ERROR = "agent_error"  # never given; results.jsonl of earlier versions hold it
    HARNESS_ERROR = "harness_error"  # our own code raised (a bug): a pytest error
    TASK_ERROR = "task_error"  # a pre-executed cell failed, or the task file did not load
    DISK_LIMIT = "disk_limit"  # the task wrote more than --super-disk
    TIMEOUT = "timeout"  # pytest-timeout stopped the episode
    WORKER_CRASHED = "worker_crashed"  # the xdist worker running the task died
    NETWORK_ERROR = "network_error"  # the network or an outside service failed inside the task
    ENVIRONMENT_ERROR = "environment_error"  # the gold solution failed: the environment broke

    def __str__(self) -> str:
        return self.value


class SuperError(Exception):
    """Base class of every error pytest-super raises on purpose.

    `exit_status` is the status of an episode or a task this error ends; a subclass declares its
    own (the most specific class's wins). An error no subclass gives a status ends an episode as
    a fault of the harness, as the runner reports any exception it did not expect.
    """

    exit_status: ClassVar[ExitStatus] = ExitStatus.HARNESS_ERROR


class TaskFileError(SuperError):
    """A task file is malformed. The message names the file, the field, the value and a fix."""

    exit_status = ExitStatus.TASK_ERROR

    def __init__(
        self,
        path: str,
        message: str,
        *,
        field: str | None = None,
        value: object = None,
        line: int | None = None,
        hint: str | None = None,
    ) -> None:
        self.path = str(path)
        self.field = field
        self.value = value
        self.line = line
        self.hint = hint
        where = self.path if line is None else f"{self.path}:{line}"
        parts = [f"{where}: {message}"]
        if field is not None:
            shown = repr(value)
            if len(shown) > 200:
                shown = shown[:200] + "..."
            parts.append(f"field {field!r} = {shown}")
        if hint:
            parts.append(hint)
        super().__init__("; ".join(parts))


class InfrastructureError(SuperError):
    """The harness could not do its job (engine, image, kernel, endpoint). Reported as a pytest error.

    `retryable` says whether running the task again may help (`--super-retries`).
    """

    exit_status = ExitStatus.KERNEL_ERROR
    retryable = True


class ReportWriteError(InfrastructureError):
    """A file of the run's reports (a trajectory) could not be written: a full or read-only
    report folder. Running the task again would not help."""

    exit_status = ExitStatus.HARNESS_ERROR
    retryable = False

    def __init__(self, path: object, error: OSError) -> None:
        super().__init__(
            f"cannot write {path}: {error.strerror or error}; free space in the report folder "
            "or give another with --super-report-dir"
        )


class EngineUnavailable(InfrastructureError):
    """No Docker engine answers at the configured address."""


class ImageMissing(InfrastructureError):
    """The kernel image does not exist on the engine."""

    retryable = False


class KernelStartError(InfrastructureError):
    """A kernel was started but never became ready."""


class LLMError(InfrastructureError):
    """The LLM endpoint failed for good (after retries), or refused the key or the model."""

    exit_status = ExitStatus.LLM_ERROR


class LLMRefused(LLMError):
    """The endpoint refused the key, the access or the model (401/403/404): retrying won't help."""

    retryable = False


class HarnessError(InfrastructureError):
    """Our own code raised an exception it did not mean to during an episode (a bug of the harness
    or of an agent's implementation, not a choice of the model). Reported as a pytest error."""

    exit_status = ExitStatus.HARNESS_ERROR
    retryable = False


class EnvironmentFault(InfrastructureError):
    """The task's environment broke, not the agent: the expert solution, known to work, failed
    under the gold agent. Reported as a pytest error (netfaults.py)."""

    exit_status = ExitStatus.ENVIRONMENT_ERROR


class NetworkFault(EnvironmentFault):
    """The network or an outside service failed inside the task (DNS, a refused or reset
    connection, TLS, an HTTP 5xx of a package index, Git host or dataset hub; netfaults.py)."""

    exit_status = ExitStatus.NETWORK_ERROR


class TaskSetupError(SuperError):
    """The task itself is broken: a pre-executed (prefix) cell failed. Reported as a pytest error."""

    exit_status = ExitStatus.TASK_ERROR


class SuperWarning(UserWarning):
    """Something a user should fix that does not stop the run (shown in pytest's warnings)."""


class EpisodeEnd(Exception):
    """Raised to end an episode early; carries the exit status.

    A subclass declares its status as the class attribute `status` (agents of other projects
    may define their own); `exit_status` reads it, as for the errors of `SuperError`.
    """

    status: ExitStatus = ExitStatus.NO_SUBMISSION

    @property
    def exit_status(self) -> ExitStatus:
        return self.status


class BudgetExceeded(EpisodeEnd):
    status = ExitStatus.BUDGET_EXCEEDED


class StepLimitReached(EpisodeEnd):
    status = ExitStatus.STEP_LIMIT


class DiskLimitExceeded(EpisodeEnd):
    """The task's box wrote more than its disk limit and was stopped (raised by the backend)."""

    status = ExitStatus.DISK_LIMIT


class KernelBroken(EpisodeEnd):
    """The kernel would not start again after the task had run code in it (the task broke its
    own kernel: ipykernel removed, the launcher overwritten): the task's outcome, `kernel_error`,
    never retried (a new attempt would pay the model again for the same end)."""

    status = ExitStatus.KERNEL_ERROR


class ComputeLimitReached(EpisodeEnd):
    status = ExitStatus.COMPUTE_LIMIT


class FormatErrorsExceeded(EpisodeEnd):
    status = ExitStatus.FORMAT_ERRORS
