"""The environment an agent acts in, and what the runner and the agents share about it.

`Environment` is everything an agent may touch for one task: the kernel, the limits, the model,
the trajectory. An agent runs cells through `env.execute`, records each step with `env.record`,
asks the model through `env.llm`, and ends by returning an `AgentResult` or by letting an
`EpisodeEnd` (errors.py) propagate. `run_task_cell` runs one cell of a task file (a prefix cell or
a gold solution cell) and `replay_prefix_cells` replays a masked task's prefix: the runner does it
before the agent acts, and `Environment.new_attempt` after a fresh kernel. This module sits below
both the runner and the agents, so neither reaches back into the other.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pytest_super import defaults
from pytest_super.deadlines import timer_seconds
from pytest_super.edit import EditRequest, edit_file, format_edit
from pytest_super.errors import BudgetExceeded, ComputeLimitReached, ExitStatus
from pytest_super.kernels.base import CellResult, Kernel, ToolKernel, ToolResult
from pytest_super.llm import LLMClient
from pytest_super.lmr import box as lmr_box
from pytest_super.prompts import PromptSet
from pytest_super.prompts import ours as ours_prompts
from pytest_super.tasks import Cell, LmrTask, Task
from pytest_super.trajectory import Action, Step, Trajectory

#: the thought of the steps the harness takes for the user (the reference's words, as the
#: published episodes show them): a pre-executed cell, and the one wait after a pre-executed
#: cell that ran out of time
PRE_EXECUTED_THOUGHT = "[pre-executed by user]"
CONTINUED_THOUGHT = "[continued after timeout]"


@dataclass
class AgentResult:
    """What an agent hands back when it stops on its own."""

    exit_status: ExitStatus
    submission: str | None = None  # the submitted text (JSON), unparsed


@dataclass(frozen=True)
class EpisodeLimits:
    """The limits in force for one episode, resolved from task and options."""

    steps: int = defaults.STEPS
    token_budget: int = 600_000
    compute_s: float = defaults.COMPUTE_LIMIT_S
    cell_timeout_s: float = defaults.CELL_TIMEOUT_S
    format_errors: int | None = None  # malformed replies in a row that end it; None: no cap


@dataclass(frozen=True)
class AgentOptions:
    """The run's options for agents that take some: Reflexion's attempts (--super-attempts), the
    replay agent's saved trajectory (--super-replay), the prompts (--super-prompts)."""

    attempts: int = defaults.ATTEMPTS
    replay_path: str | None = None
    prompts: PromptSet = field(default_factory=ours_prompts)


class Environment:
    """Everything an agent may touch for one task: kernel, limits, model, trajectory.

    Compute time of every cell (prefix cells, waits, interrupts and the SWE-agent's viewer helpers
    included) and of every edit (`run_tool`) is summed, each as its kernel result reports it
    (`CellResult.duration_s`, `ToolResult.duration_s`: the replay backend reports recorded
    times). As in the reference, a cell always gets its full cell timeout; once the
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
        options: AgentOptions | None = None,
    ) -> None:
        self.task = task
        self.kernel = kernel
        self.trajectory = trajectory
        self.limits = limits
        self.llm = llm
        self.options = options or AgentOptions()
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
        #: the folder the task's files were put in (an LMR task's repository), "" if none
        self.workdir = ""

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
        timeout = timer_seconds(self.limits.cell_timeout_s if timeout_s is None else timeout_s)
        result = self.kernel.execute(code, timeout, interrupt_on_timeout=interrupt_on_timeout)
        self.compute_used_s += result.duration_s
        return result

    def wait(self, *, check_limit: bool = True) -> CellResult:
        """`continue_wait`: wait one more cell timeout for a cell left running."""
        if check_limit:
            self.check_compute()
        result = self.kernel.wait(timer_seconds(self.limits.cell_timeout_s))
        self.compute_used_s += result.duration_s
        return result

    def interrupt(self) -> CellResult:
        result = self.kernel.interrupt()
        self.compute_used_s += result.duration_s
        return result

    def run_tool(
        self,
        action: str,
        content: str,
        run: Callable[[], tuple[str, bool]],
        *,
        timed: bool = True,
    ) -> ToolResult:
        """Run one of the agents' tools (`run`: the tool itself, returning its observation and
        whether it succeeded) and count its time against the compute limit, as the reference
        counts every step's time. `timed=False`: the tool's own cells count themselves (the
        SWE-agent's viewer snippets). A kernel that answers tools itself (`ToolKernel`: the
        replay backend) gives the observation and the duration instead."""
        kernel = self.kernel
        answer = kernel.run_tool(action, content) if isinstance(kernel, ToolKernel) else None
        if answer is None:
            started = time.monotonic()
            observation, ok = run()
            elapsed = time.monotonic() - started if timed else 0.0
            answer = ToolResult(observation, ok, elapsed)
        self.compute_used_s += answer.duration_s
        return answer

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
        replay_prefix_cells(self)


def replay_prefix_cells(env: Environment) -> list[Step]:
    """Run a masked task's pre-executed cells, recorded as steps the user took.

    As in the reference, a cell that fails (an error, an edit that is not applied, a dead kernel)
    is recorded as it is and the next cell runs: the agent starts from whatever state the prefix
    left. A cell that runs out of its cell timeout is waited on once more (a `continue_wait` step,
    thought "[continued after timeout]"); if it is still running then, it is interrupted and the
    next cell runs. Prefix cells are never stopped by the compute limit, but their time counts.
    Only faults of the harness (`InfrastructureError`: the kernel would not start, the engine is
    gone) propagate.
    """
    if isinstance(env.task, LmrTask):  # the masked repository into this attempt's box
        env.workdir = lmr_box.prepare(env.task, env.kernel)
    steps: list[Step] = []
    for cell in env.task.pre_executed:
        step = run_task_cell(env, cell, thought=PRE_EXECUTED_THOUGHT, pre_executed=True)
        env.record(step)
        steps.append(step)
        if step.cell_status == "timeout":  # left running: wait once more
            wait = _wait_once(env)
            env.record(wait)
            steps.append(wait)
    env.set_prefix_steps(steps)
    return steps


def _wait_once(env: Environment) -> Step:
    """The one wait for a pre-executed cell that ran out of time; stops it if it still runs."""
    result = env.wait(check_limit=False)
    if result.still_running:
        rest = env.interrupt()
        result = CellResult(
            output=result.output + rest.output,
            status="timeout",  # it ran out of time again, and was then interrupted
            duration_s=result.duration_s + rest.duration_s,
            truncated=result.truncated or rest.truncated,
        )
    return Step(
        thought=CONTINUED_THOUGHT,
        action=Action.WAIT,
        content="",
        observation=result.output,
        output=result.output,
        cell_status=result.status,
        duration_s=result.duration_s,
        pre_executed=True,
    )


def run_task_cell(
    env: Environment, cell: Cell, *, thought: str, pre_executed: bool = False
) -> Step:
    """Run one cell of a task file (prefix or gold solution) and return its step, unrecorded.

    Execute cells run as code; edit cells go through the edit tool, relative to the kernel's
    current directory. A failed edit gives cell_status "error". A pre-executed cell that runs out
    of time is left running (status "timeout"), for the one wait of `replay_prefix_cells`.
    """
    if cell.kind == "execute":
        result = env.execute(
            cell.code, interrupt_on_timeout=not pre_executed, check_limit=not pre_executed
        )
        return Step(
            thought=thought,
            action=Action.EXECUTE,
            content=cell.code,
            observation=result.output,
            output=result.output,
            code=cell.code,
            cell_status=result.status,
            duration_s=result.duration_s,
            pre_executed=pre_executed,
        )
    request = EditRequest(
        file=cell.file, before=cell.before, after=cell.after, context=cell.context
    )
    content = format_edit(request)

    def edit() -> tuple[str, bool]:
        outcome = edit_file(env.kernel, request)
        return outcome.message, outcome.ok

    answer = env.run_tool(Action.EDIT, content, edit)
    return Step(
        thought=thought,
        action=Action.EDIT,
        content=content,
        observation=answer.observation,
        output=answer.observation,
        cell_status="ok" if answer.ok else "error",
        duration_s=answer.duration_s,
        pre_executed=pre_executed,
    )
