"""The Reflexion agent of SUPER ("reflexion"): ReAct-SUPER with k attempts and reflections.

Each attempt is a ReAct-SUPER episode with 1/k of the token budget (counted from the attempt's
start). After an attempt that did not submit, the model writes a short plan about what went wrong;
the next attempt starts in a fresh kernel (`env.new_attempt()`: new container, prefix replayed) with
all plans so far in its prompt. A submission ends the episode; if no attempt submits, the last
attempt's ending (budget, steps, format errors) is the episode's.
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_super.agents.base import (
    AgentResult,
    BudgetExceeded,
    Environment,
    EpisodeEnd,
    ExitStatus,
    FormatErrorsExceeded,
    StepLimitReached,
)
from pytest_super.agents.history import ask_model
from pytest_super.agents.react import ReActSuperAgent, history_entries, render_history
from pytest_super.prompts import ours
from pytest_super.trajectory import Action, Step

DEFAULT_ATTEMPTS = 3

#: our reflection prompt (prompts/reflexion_system.txt); a run takes its prompt set's
REFLECTION_PROMPT = ours().reflection()


def parse_plan(text: str) -> str:
    """The plan in a reflection reply: after `Plan:` (if present), up to `[END]`."""
    text = text.split("[END]", 1)[0]
    head, sep, tail = text.partition("Plan")
    plan = tail.lstrip(":* \n") if sep else head
    return plan.strip() or "(no plan given)"


class ReflexionAgent:
    """k attempts of ReAct-SUPER (env.options.attempts, default 3), reflecting in between."""

    name = "reflexion"

    def __init__(self) -> None:
        self.actor = ReActSuperAgent()

    def run(self, env: Environment) -> AgentResult:
        attempts = _attempts(env)
        per_attempt = env.limits.token_budget // attempts
        reflections: list[str] = []
        ending: EpisodeEnd | None = None
        for attempt in range(1, attempts + 1):
            if attempt > 1:
                env.new_attempt()
            first = len(env.trajectory.steps)
            budget = min(env.prompt_tokens + per_attempt, env.limits.token_budget)
            try:
                result = self.actor.run_attempt(env, reflections=reflections, budget=budget)
            except (BudgetExceeded, StepLimitReached, FormatErrorsExceeded) as end:
                ending = end
            else:
                if result.exit_status is ExitStatus.SUBMITTED:
                    return result
            if attempt < attempts:
                reflections.append(self.reflect(env, env.trajectory.steps[first:], ending))
        if ending is not None:
            raise ending
        return AgentResult(ExitStatus.NO_SUBMISSION)

    def reflect(self, env: Environment, steps: Sequence[Step], ending: EpisodeEnd | None) -> str:
        """Ask the model what went wrong in `steps`; record and return its plan."""
        own = [s for s in steps if not s.pre_executed]
        record = render_history(history_entries(env, own))
        why = str(ending) if ending is not None else "it ended without a submission"
        messages = [
            {"role": "system", "content": env.options.prompts.reflection()},
            {
                "role": "user",
                "content": f"Query: {env.task.query}\n\nThe earlier try:\n{record}\n"
                f"How it ended: {why}.\n\nNow write your plan.",
            },
        ]
        completion = ask_model(env, messages, stop=["[END]"])
        plan = parse_plan(completion.text)
        env.record(
            Step(
                thought="",
                action=Action.REFLECTION,
                content=plan,
                prompt_tokens=completion.prompt_tokens,
                cached_prompt_tokens=completion.cached_prompt_tokens,
                completion_tokens=completion.completion_tokens,
                cost_usd=completion.cost_usd,
            )
        )
        return plan


def _attempts(env: Environment) -> int:
    value = env.options.attempts
    try:
        attempts = int(value)
    except (TypeError, ValueError):
        attempts = 0
    if attempts < 1:
        raise ValueError(f"reflexion: option attempts = {value!r}; give a whole number >= 1")
    return attempts
