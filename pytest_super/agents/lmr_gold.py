"""The gold agent on an LMR task: the golden function, or the golden method of `class_name`, put
in place of the masked one in the box's goal file. The golden file is read on the host (it never
enters the box); the unit test after the episode decides, as for any agent."""

from __future__ import annotations

from pathlib import Path

from pytest_super.environment import AgentResult, Environment
from pytest_super.errors import ExitStatus, TaskSetupError
from pytest_super.lmr.golden import put_golden
from pytest_super.tasks import LmrTask
from pytest_super.trajectory import Action, Step

GOLD_THOUGHT = "[gold: the golden {what} put in place]"


def place_golden(env: Environment, task: LmrTask) -> AgentResult:
    golden_path = Path(task.folder) / task.golden_file
    try:
        golden = golden_path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskSetupError(f"{task.source}: cannot read {golden_path}: {exc}") from None
    goal = f"{env.workdir}/{task.goal_file}"
    masked = env.kernel.read_file(goal)
    placed = put_golden(
        masked,
        golden,
        task.goal_function,
        task.class_name,
        where=(f"{task.id}: {task.goal_file} in the box", str(golden_path)),
    )
    env.kernel.write_file(goal, placed)
    what = f"method {task.class_name}.{task.goal_function}" if task.class_name else "function"
    if not task.class_name:
        what += f" {task.goal_function}"
    env.record(
        Step(
            thought=GOLD_THOUGHT.format(what=what),
            action=Action.EDIT,
            content=task.goal_file,
            observation=f"{task.goal_file}: the golden {what} is in place",
        )
    )
    env.record(Step(thought="", action=Action.SUBMIT, content=""))
    return AgentResult(ExitStatus.SUBMITTED)
