"""The agent interface and the environment an agent acts in.

An agent is anything with `name` and `run(env) -> AgentResult`. It reads the task from `env.task`,
runs cells through `env.execute`, records each step with `env.record`, asks the model through
`env.llm`, and ends by returning a result or by letting one of the `EpisodeEnd` exceptions below
propagate (limits are exceptions, as in mini-swe-agent). The runner turns either into an exit status.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pytest_super.kernels.base import CellResult, Kernel
from pytest_super.tasks import Task
from pytest_super.trajectory import Step, Trajectory

if TYPE_CHECKING:
    from pytest_super.agents.llm import LLMClient


class ExitStatus(str, Enum):
    """How an episode ended."""

    SUBMITTED = "submitted"
    NO_SUBMISSION = "no_submission"
    BUDGET_EXCEEDED = "budget_exceeded"
    STEP_LIMIT = "step_limit"
    COMPUTE_LIMIT = "compute_limit"
    FORMAT_ERRORS = "format_errors"
    LLM_ERROR = "llm_error"
    KERNEL_ERROR = "kernel_error"
    AGENT_ERROR = "agent_error"  # no longer given: read in results of older runs
    HARNESS_ERROR = "harness_error"  # our own code raised (a bug): a pytest error
    TASK_ERROR = "task_error"  # a pre-executed cell failed
    DISK_LIMIT = "disk_limit"  # the task wrote more than --super-disk


class EpisodeEnd(Exception):
    """Raised to end an episode early; carries the exit status."""

    status: ExitStatus = ExitStatus.NO_SUBMISSION


class BudgetExceeded(EpisodeEnd):
    status = ExitStatus.BUDGET_EXCEEDED


class StepLimitReached(EpisodeEnd):
    status = ExitStatus.STEP_LIMIT


class DiskLimitExceeded(EpisodeEnd):
    """The task's box wrote more than its disk limit and was stopped (raised by the backend)."""

    status = ExitStatus.DISK_LIMIT


class ComputeLimitReached(EpisodeEnd):
    status = ExitStatus.COMPUTE_LIMIT


class FormatErrorsExceeded(EpisodeEnd):
    status = ExitStatus.FORMAT_ERRORS


@dataclass
class AgentResult:
    """What an agent hands back when it stops on its own."""

    exit_status: ExitStatus
    submission: str | None = None  # the submitted text (JSON), unparsed


@dataclass(frozen=True)
class EpisodeLimits:
    """The limits in force for one episode, resolved from task and options."""

    steps: int = 100
    token_budget: int = 600_000
    compute_s: float = 1800.0
    cell_timeout_s: float = 300.0
    format_errors: int | None = None  # malformed replies in a row that end it; None: no cap


@runtime_checkable
class Agent(Protocol):
    """An agent. Third-party agents implement this (see README, "Writing an agent")."""

    name: str

    def run(self, env: Environment) -> AgentResult: ...


class Environment:
    """Everything an agent may touch for one task: kernel, limits, model, trajectory.

    Compute time of every cell (prefix cells, waits, interrupts and the SWE-agent's viewer helpers
    included) is summed. As in the reference, a cell always gets its full cell timeout; once the
    sum is strictly above the limit, the episode ends before the next model call (`ask_model`)
    or the next cell, with `ComputeLimitReached`, so the cell that crossed it finishes and its
    result is recorded, but nothing is submitted after it.
    """

    def __init__(
        self,
        task: Task,
        kernel: Kernel,
        trajectory: Trajectory,
        limits: EpisodeLimits,
        *,
        llm: LLMClient | None = None,
        new_kernel: Callable[[], Kernel] | None = None,
        on_step: Callable[[Step], None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> None:
        self.task = task
        self.kernel = kernel
        self.trajectory = trajectory
        self.limits = limits
        self.llm = llm
        self.options = options or {}
        self.attempt = 1
        self.compute_used_s = 0.0
        self.prompt_tokens = 0
        self.cached_prompt_tokens = 0  # of prompt_tokens, served from the provider's cache
        self.completion_tokens = 0
        self.cost_usd = 0.0
        self.started = time.monotonic()
        self._new_kernel = new_kernel
        self._on_step = on_step
        self._prefix_steps: list[Step] = []

    # -- cells -------------------------------------------------------------------------------
    def execute(
        self,
        code: str,
        *,
        interrupt_on_timeout: bool = True,
        timeout_s: float | None = None,
        check_limit: bool = True,
    ) -> CellResult:
        """Run one cell with the per-cell timeout (or `timeout_s`), counting its time against the
        compute limit. `check_limit=False`: run even past the limit (pre-executed cells, which
        the reference never stops)."""
        if check_limit:
            self.check_compute()
        timeout = self.limits.cell_timeout_s if timeout_s is None else timeout_s
        result = self.kernel.execute(code, timeout, interrupt_on_timeout=interrupt_on_timeout)
        self.compute_used_s += result.duration_s
        return result

    def wait(self, *, check_limit: bool = True) -> CellResult:
        """`continue_wait`: wait one more cell timeout for a cell left running."""
        if check_limit:
            self.check_compute()
        result = self.kernel.wait(self.limits.cell_timeout_s)
        self.compute_used_s += result.duration_s
        return result

    def interrupt(self) -> CellResult:
        result = self.kernel.interrupt()
        self.compute_used_s += result.duration_s
        return result

    def check_compute(self) -> None:
        """Raise `ComputeLimitReached` if cell time is strictly above the compute limit."""
        if self.compute_used_s > self.limits.compute_s:
            raise ComputeLimitReached(
                f"compute limit exceeded: {self.compute_used_s:.0f} s of cell time used, the "
                f"limit is {self.limits.compute_s:.0f} s"
            )

    # -- model -------------------------------------------------------------------------------
    def count_tokens(
        self,
        prompt_tokens: int,
        completion_tokens: int,
        cost_usd: float,
        cached_prompt_tokens: int = 0,
    ) -> None:
        """Add one model call's usage (the budget is checked by `check_budget`)."""
        self.prompt_tokens += prompt_tokens
        self.cached_prompt_tokens += cached_prompt_tokens
        self.completion_tokens += completion_tokens
        self.cost_usd += cost_usd

    @property
    def tokens_left(self) -> int:
        return self.limits.token_budget - self.prompt_tokens

    def check_budget(self, budget: int | None = None) -> None:
        """Raise `BudgetExceeded` if the prompt tokens used are strictly above `budget` (default:
        the task's), the reference's test before each model call."""
        budget = self.limits.token_budget if budget is None else budget
        if self.prompt_tokens > budget:
            raise BudgetExceeded(
                f"token budget exceeded: {self.prompt_tokens} prompt tokens used, the budget is "
                f"{budget}"
            )

    # -- record ------------------------------------------------------------------------------
    def record(self, step: Step) -> None:
        """Append a step to the trajectory (saved at once) and show it live if asked."""
        step.attempt = self.attempt
        self.trajectory.append(step)
        if self._on_step is not None:
            self._on_step(step)

    @property
    def prefix_steps(self) -> list[Step]:
        """The pre-executed steps of the current attempt (shown to the model as history)."""
        return list(self._prefix_steps)

    def set_prefix_steps(self, steps: list[Step]) -> None:
        self._prefix_steps = list(steps)

    # -- attempts ----------------------------------------------------------------------------
    def new_attempt(self) -> None:
        """Start over in a fresh kernel (a new container) with the prefix cells replayed."""
        if self._new_kernel is None:
            raise RuntimeError("this environment cannot start a new attempt")
        self.kernel.close()
        self.attempt += 1
        self.kernel = self._new_kernel()
        from pytest_super.runner import replay_prefix_cells

        replay_prefix_cells(self)
