"""LMR-Bench's no-agent baseline (`--super-agent=noagent`): one model call that returns the goal
function, written in place, as upstream's `generation/noagent` does it (shuoYan97/LMR-Bench at
da757c9, `base_agent_generation_openai.py`).

The one message holds what upstream's holds, in our words (`TEMPLATE`): the
whole masked goal file as the box holds it, the paper (`paper.json`, as JSON with an indent of
2), the instruction, and the files the implementation names for retrieval. The reply is cut as
upstream cuts it (a code fence on its first or last line dropped) and its definition of the goal
function (or, when the reply is the whole class, the class's method) replaces the masked one in
the box's goal file; unlike upstream's `ast.unparse` of the whole file, the rest of the file is
kept as it was, comments included. A reply that is not Python, or defines no such function, is
written nowhere: the masked function stays and the unit test fails it, the agent's failure (as
upstream logs the exception and moves on). The unit test after the episode decides, as for any
agent. Upstream reads only `retrieval_content`; both spellings are read here.
"""

from __future__ import annotations

import json

from pytest_super.agents.history import ask_model, record_with_usage
from pytest_super.environment import AgentResult, Environment
from pytest_super.errors import ExitStatus, TaskSetupError
from pytest_super.lmr.golden import function_text, put_function
from pytest_super.tasks import LmrTask
from pytest_super.trajectory import Action, Step

#: the one message, in our words; upstream's (its `prompt_parts`) asks for the same things in
#: the same order: the definition alone, the whole file, the paper as JSON, the instruction, the
#: related code
TEMPLATE = """\
You are helping to reproduce a research paper in code. In the Python file below, the body of the function or method `{function}` has been removed; its signature, docstring and return statement were kept.
Write that one definition and nothing else: answer with its `def` line and its indented body, without code fences and without any explanation.

--- file {goal_file} ---
{source}
--- end of file {goal_file} ---

The paper (paper.json):
{paper}

What to implement:
{instruction}
{related}
"""
THOUGHT = "[noagent: the model's one reply, put in place of the masked {what}]"


def prompt(task: LmrTask, source: str) -> str:
    """The one message: the masked file, the paper, the instruction, the related files."""
    paper_path = task.repo_path / "paper.json"
    try:
        paper = json.dumps(json.loads(paper_path.read_text(encoding="utf-8")), indent=2)
    except (OSError, ValueError):
        paper = "(the repository has no readable paper.json)"
    related = []
    for name in task.retrieval:
        path = task.repo_path / name
        if path.is_file():
            related.append(f"# Path: {name}\n{path.read_text(encoding='utf-8', errors='replace')}")
    return TEMPLATE.format(
        function=task.goal_function,
        goal_file=task.goal_file,
        source=source.rstrip(),
        paper=paper,
        instruction=task.instruction.strip(),
        related=("\nRelated code:\n" + "\n".join(related) + "\n") if related else "",
    )


def cut_reply(text: str) -> str:
    """The reply without the code fence upstream drops (a first or last line starting with
    three backticks)."""
    lines = text.strip().splitlines()
    if lines and lines[0].strip().startswith("```"):
        lines.pop(0)
    if lines and lines[-1].strip().startswith("```"):
        lines.pop()
    return "\n".join(lines) + "\n"


def definition(reply: str, task: LmrTask) -> str:
    """The goal's definition in the reply: a function at its top level, else the method of the
    class it returned whole. `TaskSetupError` saying why there is none."""
    try:
        return function_text(reply, task.goal_function, None, "the model's reply")
    except TaskSetupError:
        if not task.class_name:
            raise
    return function_text(reply, task.goal_function, task.class_name, "the model's reply")


class NoAgent:
    """One model call; its function written in place of the masked one."""

    name = "noagent"

    def run(self, env: Environment) -> AgentResult:
        task = env.task
        if not isinstance(task, LmrTask):
            raise TaskSetupError(
                f"task {task.id}: the noagent baseline answers LMR-Bench tasks (a masked "
                "function) only; run SUPER's tasks with another agent"
            )
        goal = f"{env.workdir}/{task.goal_file}"
        masked = env.kernel.read_file(goal)
        completion = ask_model(env, [{"role": "user", "content": prompt(task, masked)}])
        what = f"method {task.class_name}.{task.goal_function}" if task.class_name else "function"
        if not task.class_name:
            what += f" {task.goal_function}"
        step = Step(thought=THOUGHT.format(what=what), action=Action.EDIT, content=completion.text)
        try:
            text = definition(cut_reply(completion.text), task)
        except TaskSetupError as exc:
            step.observation = f"nothing written: {exc}; the {what} stays masked"
            record_with_usage(env, step, completion)
            return AgentResult(ExitStatus.NO_SUBMISSION)
        placed = put_function(
            masked,
            text,
            task.goal_function,
            task.class_name,
            where=f"{task.id}: {task.goal_file} in the box",
        )
        env.kernel.write_file(goal, placed)
        step.observation = f"{task.goal_file}: the model's {what} is in place"
        record_with_usage(env, step, completion)
        env.record(Step(thought="", action=Action.SUBMIT, content=""))
        return AgentResult(ExitStatus.SUBMITTED)
