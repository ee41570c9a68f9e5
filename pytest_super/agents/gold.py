"""The gold agent: replays a task's expert solution and submits what its last cell prints.

It never reads the stored answer: the submission is the JSON printed by the solution's last cell,
so a gold run is a real reproduction check of the task (the SUPER paper ran its gold trajectories
three times to check they score perfectly). Any miss of it is an error of the environment, never
a failure (netfaults.gold_miss); a task with no solution is a task error.
"""

from __future__ import annotations

import json

from pytest_super.agents.lmr_gold import place_golden
from pytest_super.environment import AgentResult, Environment, run_task_cell
from pytest_super.errors import ExitStatus, TaskSetupError
from pytest_super.tasks import LmrTask
from pytest_super.trajectory import Action, Step

GOLD_THOUGHT = "[gold solution cell {n}]"


class GoldAgent:
    """Runs `task.solution` cell by cell; submits the last JSON value printed by the last cell."""

    name = "gold"

    def run(self, env: Environment) -> AgentResult:
        if isinstance(env.task, LmrTask):  # LMR-Bench: the golden function in place
            return place_golden(env, env.task)
        solution = env.task.solution
        if not solution:
            raise TaskSetupError(
                f"{env.task.source or env.task.id}: the task has no expert solution (`solution` "
                "is empty), so the gold agent cannot run it: run it with another agent "
                "(--super-agent), or leave it out (-k, --deselect)"
            )
        last_output = ""
        for n, cell in enumerate(solution, start=1):
            step = run_task_cell(env, cell, thought=GOLD_THOUGHT.format(n=n))
            env.record(step)
            if cell.kind == "execute":
                last_output = step.output
        submission = last_json_line(last_output)
        if submission is None:
            env.record(
                Step(
                    thought="",
                    action=Action.SUBMIT,
                    content="",
                    observation="the last solution cell printed no JSON value",
                )
            )
            return AgentResult(ExitStatus.NO_SUBMISSION)
        env.record(
            Step(
                thought="submit what the last cell printed",
                action=Action.SUBMIT,
                content=submission,
            )
        )
        return AgentResult(ExitStatus.SUBMITTED, submission)


def last_json_line(output: str) -> str | None:
    """The last line of `output` that parses as a JSON object or list (the printed answer)."""
    for line in reversed(output.strip().splitlines()):
        line = line.strip()
        if not line or line[0] not in "[{":
            continue
        try:
            json.loads(line)
        except ValueError:
            continue
        return line
    return None
