"""The gold agent: replays a task's expert solution and submits what its last cell prints.

It never reads the stored answer: the submission is the JSON printed by the solution's last cell,
so a gold run is a real reproduction check of the task (the SUPER paper ran its gold trajectories
three times to check they score perfectly).
"""

from __future__ import annotations

import json

from pytest_super.agents.base import AgentResult, Environment, ExitStatus
from pytest_super.edit import EditRequest, edit_file
from pytest_super.trajectory import Step

GOLD_THOUGHT = "[gold solution cell {n}]"


class GoldAgent:
    """Runs `task.solution` cell by cell; submits the last JSON value printed by the last cell."""

    name = "gold"

    def run(self, env: Environment) -> AgentResult:
        solution = env.task.solution
        if not solution:
            env.record(
                Step(thought="", action="submit", content="", observation="task has no solution")
            )
            return AgentResult(ExitStatus.NO_SUBMISSION)
        last_output = ""
        for n, cell in enumerate(solution, start=1):
            thought = GOLD_THOUGHT.format(n=n)
            if cell.kind == "edit":
                request = EditRequest(cell.file, cell.before, cell.after, cell.context)
                outcome = edit_file(env.kernel, request)
                env.record(
                    Step(
                        thought=thought,
                        action="edit",
                        content=cell.file,
                        observation=outcome.message,
                        output=outcome.message,
                        cell_status="ok" if outcome.ok else "error",
                    )
                )
                continue
            result = env.execute(cell.code)
            last_output = result.output
            env.record(
                Step(
                    thought=thought,
                    action="execute",
                    content=cell.code,
                    observation=result.output,
                    output=result.output,
                    code=cell.code,
                    cell_status=result.status,
                    duration_s=result.duration_s,
                )
            )
        submission = last_json_line(last_output)
        if submission is None:
            env.record(
                Step(
                    thought="",
                    action="submit",
                    content="",
                    observation="the last solution cell printed no JSON value",
                )
            )
            return AgentResult(ExitStatus.NO_SUBMISSION)
        env.record(
            Step(thought="submit what the last cell printed", action="submit", content=submission)
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
