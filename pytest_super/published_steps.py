"""One step of a published notebook as our `Step`: ReAct-SUPER's `execute`/`edit`/`submit`/... and
SWE-agent's shell cells (action `None`), viewer commands, pre-executed edits, `exit_*` commands and
`submit <json>` (the shapes our agents and the runner record), so that the replay agent can re-run
them and scoring can read them. published_runs.py reads the notebooks."""

from __future__ import annotations

import ast
import json
import re
from typing import TypedDict

from pytest_super.edit import EditRequest, format_edit
from pytest_super.environment import CONTINUED_THOUGHT
from pytest_super.errors import ExitStatus
from pytest_super.trajectory import Action, Step


class _RawTimes(TypedDict, total=False):
    duration_s: float  # when the notebook gives the step's execution times


class RawStep(_RawTimes):
    """One `### Step N` of a notebook as published_runs.py reads it, before it is our `Step`."""

    thought: str
    action: str  # the action type the notebook names ("" when none)
    content: str
    observation: str


class _Common(TypedDict):
    thought: str
    duration_s: float
    pre_executed: bool


#: the thought SUPER's notebooks give the pre-executed cells of a Masked task
PUBLISHED_PRE_EXECUTED = "[pre-executed by user]"
#: the thought SWE-agent's Masked notebooks give a pre-executed edit, written as
#: "EDITING `path. CHANGING:\n\n\n<before>\n\nTO:\n\n\n<after>"
SWE_PRE_EXECUTED = "EXECUTED BY USER"
#: SWE-agent's exit commands, by the exit status of ours they stand for (an unknown `exit_*` ends
#: the episode without a submission)
SWE_EXITS = {
    "exit_context": ExitStatus.BUDGET_EXCEEDED,  # the context window (tokens) was used up
    "exit_cost": ExitStatus.BUDGET_EXCEEDED,
    "exit_max_compute_time": ExitStatus.COMPUTE_LIMIT,
    "exit_format": ExitStatus.FORMAT_ERRORS,
}
SWE_EDIT = re.compile(
    r"^EDITING `(?P<path>[^\n`]*?)`?\.? CHANGING:\n\n\n(?P<before>.*?)\n\nTO:\n\n\n(?P<after>.*)$",
    re.DOTALL,
)


def published_step(raw: RawStep, *, swe: bool, after_pre_executed: bool = False) -> Step:
    """One published step as our `Step` (the shapes our agents and the runner record)."""
    kind, content, observation = raw["action"], raw["content"], raw["observation"]
    thought = raw["thought"] if raw["thought"].strip() else ""
    duration = raw.get("duration_s", 0.0)
    if thought.strip() == CONTINUED_THOUGHT:
        # the runner's own wait for a cell that ran out of time (SWE-agent's Masked notebooks
        # write it with an empty action type and `continue_wait` as the content); it belongs to
        # the prefix when the cell it waits for does
        return Step(
            thought=thought,
            action=Action.WAIT,
            content="",
            observation=observation,
            output=observation,
            duration_s=duration,
            pre_executed=after_pre_executed,
        )
    if thought.strip() == SWE_PRE_EXECUTED:
        return _swe_pre_executed(raw, duration)
    pre_executed = thought.strip() == PUBLISHED_PRE_EXECUTED
    common: _Common = {"thought": thought, "duration_s": duration, "pre_executed": pre_executed}
    if swe and kind == "None" and content.strip().startswith("exit_"):
        return Step(action=Action.LIMIT, content=content.strip(), observation=observation, **common)
    if kind == Action.EXECUTE or (swe and kind == "None"):
        return Step(
            action=Action.EXECUTE,
            content=content,
            observation=observation,
            output=observation,
            code=content,
            **common,
        )
    if kind in (Action.WAIT, Action.INTERRUPT):
        return Step(
            action=Action(kind),
            content=content,
            observation=observation,
            output=observation,
            **common,
        )
    if kind == Action.SUBMIT:
        return Step(action=Action.SUBMIT, content=_submission_text(content, swe=swe), **common)
    if kind == Action.EDIT and not swe:
        ok = observation.startswith("Edit was successful")
        return Step(
            action=Action.EDIT,
            content=content,
            observation=observation,
            cell_status="ok" if ok else "error",
            **common,
        )
    if kind == "exception":  # ReAct-SUPER's limit ending
        return Step(action=Action.LIMIT, content=content, observation=observation, **common)
    if kind == "" or not swe:
        # a reply without a usable action ("Invalid action type" in the reference): a format
        # error step, as our agents record them
        return Step(action=Action.FORMAT_ERROR, content=content, observation=observation, **common)
    return Step(action=kind, content=content, observation=observation, **common)  # a viewer


def _swe_pre_executed(raw: RawStep, duration: float) -> Step:
    """A pre-executed step of SWE-agent's Masked notebooks: an edit written as `EDITING ...`
    (our edit step, with its file, before and after), else a pre-executed cell."""
    content, observation = raw["content"], raw["observation"]
    common: _Common = {
        "thought": PUBLISHED_PRE_EXECUTED,
        "duration_s": duration,
        "pre_executed": True,
    }
    edit = SWE_EDIT.match(content)
    if edit is None:
        return Step(
            action=Action.EXECUTE,
            content=content,
            observation=observation,
            output=observation,
            code=content,
            **common,
        )
    request = EditRequest(
        file=edit["path"].strip(),
        before=edit["before"].strip("\n"),
        after=edit["after"].strip("\n"),
    )
    ok = observation.startswith("Edit was successful")
    return Step(
        action=Action.EDIT,
        content=format_edit(request),
        observation=observation,
        cell_status="ok" if ok else "error",
        **common,
    )


def _submission_text(content: str, *, swe: bool) -> str:
    """The submitted JSON text. ReAct-SUPER's notebooks show the parsed value as Python prints it
    (`{'a': 1}`, `None`, and a JSON string without its quotes); SWE-agent's the command
    (`submit {"a": 1}`)."""
    if swe:
        text = content.strip()
        return text[len(Action.SUBMIT) :].strip() if text.startswith(Action.SUBMIT) else text
    try:
        return json.dumps(ast.literal_eval(content.strip()))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        # the reference parsed every submission as JSON, so what Python cannot read back was a
        # JSON string, printed without its quotes
        return json.dumps(content)
