"""What LLM agents show the model of their past: cleaned, truncated observations and cell notes.

Shared by the ReAct family and the SWE-agent. Owns: `clean_observation` (the reference's noise
rules, `agents/cleaning.py`), `truncate_history` (SUPER's rule: earlier observations keep their
last 500 characters, the latest its last 50,000, each behind the reference's marker),
`cell_observation` (what a cell's result looks like to the model: an empty output is shown empty,
as in the published episodes; the still-running note of the timeout protocol), `RunningCell` (the
protocol itself: after a cell times out and keeps running, the model may answer `continue_wait`
or `interrupt`; any other action interrupts it first), and the model-call plumbing every LLM
agent shares: `ask_model` (limits checked before the call, as the reference does, then the call
and its usage), `FormatError` and `FormatErrors` (an optional cap on malformed replies in a row,
off unless `--super-format-errors` sets it).

Cleaning applies only to what the model sees; landmarks are matched against the raw output.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pytest_super.agents.cleaning import clean_observation as clean_observation
from pytest_super.environment import Environment
from pytest_super.errors import BudgetExceeded, EpisodeEnd, FormatErrorsExceeded
from pytest_super.kernels.base import CellResult
from pytest_super.llm import Completion, LLMClient
from pytest_super.trajectory import Action, Step

#: the reference's markers: an earlier observation cut to its last 500 characters starts with
#: the first, the latest cut to its last 50,000 with the second
TRUNCATED = "(truncated) ... "
TRUNCATED_LATEST = "... (truncated) ..."
EARLIER_CHARS = 500
LATEST_CHARS = 50_000
AUTO_INTERRUPT_THOUGHT = "[the running cell was interrupted before the next action]"


def truncate_observation(text: str, limit: int, marker: str = TRUNCATED_LATEST) -> str:
    """The last `limit` characters of `text`, behind `marker` if anything was cut."""
    if len(text) <= limit:
        return text
    return marker + text[-limit:]


def truncate_history(observations: list[str]) -> list[str]:
    """SUPER's rule: earlier observations to their last 500 characters, the latest to 50,000."""
    last = len(observations) - 1
    return [
        truncate_observation(obs, LATEST_CHARS)
        if i == last
        else truncate_observation(obs, EARLIER_CHARS, TRUNCATED)
        for i, obs in enumerate(observations)
    ]


def cell_observation(
    result: CellResult, *, cell_timeout_s: float, interrupted: bool = False
) -> str:
    """What the model is told about a cell: its cleaned output and a note on how it ended.

    `interrupted`: the result is that of an interrupt the agent asked for (or that came before
    its next action), not of a cell that hit the time limit.
    """
    text = clean_observation(result.output)
    if interrupted and result.status in ("timeout", "error"):
        note = "[The cell was interrupted; the kernel's variables are kept.]"
    elif result.status == "timeout" and result.still_running:
        note = (
            f"[The cell is still running after {result.duration_s:.0f} s. Answer with the action "
            f"`{Action.WAIT}` to wait up to {cell_timeout_s:.0f} s more, or `{Action.INTERRUPT}` "
            "to stop it (variables are kept). Any other action interrupts it first.]"
        )
    elif result.status == "timeout":
        note = f"[The cell was interrupted after {result.duration_s:.0f} s: it hit the time limit.]"
    elif result.status == "died":
        note = (
            "[The kernel died while running this cell and was restarted: variables and imports "
            "are lost, files on disk are kept.]"
        )
    else:
        return text  # as printed; an empty output is shown empty, as in the published episodes
    text = text.rstrip()
    return f"{text}\n{note}" if text else note


def step_for_cell(
    thought: str,
    action: Action | str,
    content: str,
    code: str | None,
    result: CellResult,
    env: Environment,
    *,
    interrupted: bool = False,
) -> Step:
    """A trajectory step for a cell the agent ran (`code`), or waited on or interrupted (None)."""
    observation = cell_observation(
        result, cell_timeout_s=env.limits.cell_timeout_s, interrupted=interrupted
    )
    return Step(
        thought=thought,
        action=action,
        content=content,
        observation=truncate_observation(observation, LATEST_CHARS),
        output=result.output,
        code=code,
        cell_status=result.status,
        duration_s=result.duration_s,
    )


@dataclass
class RunningCell:
    """The timeout protocol: remembers the cell left running by a timeout, if any."""

    code: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def running(self) -> bool:
        return self.code is not None

    def track(self, code: str, result: CellResult) -> None:
        """Remember `code` if `result` says it is still running, else forget any cell."""
        self.code = code if result.status == "timeout" and result.still_running else None

    def run(self, env: Environment, code: str) -> CellResult:
        """Execute a cell, leaving it running on timeout (the model then decides)."""
        result = env.execute(code, interrupt_on_timeout=False)
        self.track(code, result)
        return result

    def wait(self, env: Environment) -> CellResult:
        """`continue_wait`: collect more output of the running cell (the kernel answers at once
        when none runs; a replayed one may still say the cell runs, as the reference's did)."""
        result = env.wait()
        self.track(self.code or "", result)
        return result

    def interrupt(self, env: Environment) -> CellResult:
        """`interrupt`: stop the running cell and collect the rest of its output."""
        result = env.interrupt()
        self.code = None
        return result

    def interrupt_before(self, env: Environment, action: Action | str) -> Step | None:
        """Before any action but `continue_wait`/`interrupt`, stop a running cell; returns its step.

        The step (action `interrupt`, recorded by the caller) keeps the cell's last output for
        landmarks and tells the model what happened.
        """
        if not self.running or action in (Action.WAIT, Action.INTERRUPT):
            return None
        result = self.interrupt(env)
        return step_for_cell(
            AUTO_INTERRUPT_THOUGHT, Action.INTERRUPT, "", None, result, env, interrupted=True
        )


# -- model calls and format errors ----------------------------------------------------------------


class FormatError(ValueError):
    """A model reply that does not follow the agent's reply format; the message says why."""


@dataclass
class FormatErrors:
    """Counts malformed replies in a row. With a `limit` (`--super-format-errors`), the `limit`-th
    ends the episode (`FormatErrorsExceeded`); without one (the default, as in the published
    runs) they never end it by themselves: the step limit and the token budget still do."""

    limit: int | None
    in_a_row: int = 0

    def failed(self, problem: str) -> None:
        self.in_a_row += 1
        if self.limit is not None and self.in_a_row >= self.limit:
            raise FormatErrorsExceeded(
                f"{self.in_a_row} replies in a row were not in the reply format; last: {problem}"
            )

    def passed(self) -> None:
        self.in_a_row = 0


def require_llm(env: Environment, agent: str) -> LLMClient:
    """The environment's model client; a clear error when the run has none."""
    if env.llm is None:
        raise ValueError(
            f"agent {agent!r} talks to a model but the run has none: name one with --super-model "
            "(and --super-base-url for endpoints other than OpenAI's)"
        )
    return env.llm


def ask_model(
    env: Environment,
    messages: list[dict[str, str]],
    *,
    stop: list[str] | None = None,
    budget: int | None = None,
) -> Completion:
    """One model call, after the reference's checks (`budget`: an absolute prompt-token mark).

    Before the call: prompt tokens strictly above the budget, or cell time strictly above the
    compute limit, end the episode (`BudgetExceeded`, `ComputeLimitReached`) with a step saying
    so. Nothing is checked after the call: the reply that crossed a limit is acted on, and the
    next call ends the episode. `LLMError` propagates (an infrastructure error).
    """
    llm = require_llm(env, env.trajectory.agent)
    try:
        env.check_compute()
        env.check_budget(budget)
    except EpisodeEnd as end:  # recorded as the reference's `exception` step
        action = Action.BUDGET if isinstance(end, BudgetExceeded) else Action.COMPUTE
        env.record(Step(thought="", action=action, content="", observation=str(end)))
        raise
    completion = llm.complete(messages, stop=stop)
    env.count_tokens(
        completion.prompt_tokens,
        completion.completion_tokens,
        completion.cost_usd,
        completion.cached_prompt_tokens,
    )
    return completion


def record_with_usage(env: Environment, step: Step, completion: Completion | None) -> None:
    """Record a step with the usage of the model call that chose it (none for automatic ones)."""
    if completion is not None:
        step.prompt_tokens = completion.prompt_tokens
        step.cached_prompt_tokens = completion.cached_prompt_tokens
        step.completion_tokens = completion.completion_tokens
        step.cost_usd = completion.cost_usd
    env.record(step)


def format_error_step(reply: str, note: str) -> Step:
    """The step recorded for a malformed reply: the reply is kept in the trajectory, the model is
    shown `note` as the step's observation from then on (the published episodes keep such steps
    in the history, with an empty thought and action)."""
    return Step(thought="", action=Action.FORMAT_ERROR, content=reply, observation=note)
