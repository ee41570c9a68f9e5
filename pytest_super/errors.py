"""The exceptions that cross module lines, and what each one means to a user.

`InfrastructureError` and its subclasses become pytest *errors* (not failures): they say that the
machinery (Docker engine, image, kernel, LLM endpoint) broke, not that the agent did badly.
"""

from __future__ import annotations


class SuperError(Exception):
    """Base class of every error pytest-super raises on purpose."""


class TaskFileError(SuperError):
    """A task file is malformed. The message names the file, the field, the value and a fix."""

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

    retryable = True


class EngineUnavailable(InfrastructureError):
    """No Docker engine answers at the configured address."""


class ImageMissing(InfrastructureError):
    """The kernel image does not exist on the engine."""

    retryable = False


class KernelStartError(InfrastructureError):
    """A kernel was started but never became ready."""


class LLMError(InfrastructureError):
    """The LLM endpoint failed for good (after retries), or refused the key or the model."""


class LLMRefused(LLMError):
    """The endpoint refused the key, the access or the model (401/403/404): retrying won't help."""

    retryable = False


class HarnessError(InfrastructureError):
    """Our own code raised an exception it did not mean to during an episode (a bug of the harness
    or of an agent's implementation, not a choice of the model). Reported as a pytest error."""

    retryable = False


class TaskSetupError(SuperError):
    """The task itself is broken: a pre-executed (prefix) cell failed. Reported as a pytest error."""


class SuperWarning(UserWarning):
    """Something a user should fix that does not stop the run (shown in pytest's warnings)."""
