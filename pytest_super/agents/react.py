"""The ReAct agents of SUPER: `ReActAgent` ("react") and `ReActSuperAgent` ("react-super").

Each reply is `Thought: ...`, then `Action: <name>` on its own line, then the action's content
between `<content>` and `</content>`. Actions: `execute` (one notebook cell) and `submit` (the
answer as JSON); react-super adds `edit` (SUPER's edit tool). `continue_wait` and `interrupt` (for a
cell that timed out and still runs) are accepted at any time, as the reference accepts them; with
no cell running the model is told so. Sampling stops at `</content>` and `Observation:`, so a
reply usually lacks the closing tag.

Each call sends the system prompt (`prompts/react_*.txt`: the reference's structure and its three
demonstrations, in our words; or those of `--super-prompts`, `env.options.prompts`), `Query: ...`
and the whole history (pre-executed steps first) as Thought / Action / Observation blocks,
observations cleaned and cut by SUPER's rules. A malformed reply stays in the history as a step
with an empty thought and action whose observation says what to fix, as in the published episodes;
it counts against the step limit and, without `--super-format-errors`, never ends the episode by
itself.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pytest_super.agents import reference as ref
from pytest_super.agents.base import AgentResult, Environment, ExitStatus, StepLimitReached
from pytest_super.agents.history import (
    LATEST_CHARS,
    FormatError,
    FormatErrors,
    RunningCell,
    ask_model,
    clean_observation,
    format_error_step,
    record_with_usage,
    step_for_cell,
    truncate_history,
    truncate_observation,
)
from pytest_super.edit import edit_action
from pytest_super.environment import CONTINUED_THOUGHT, PRE_EXECUTED_THOUGHT
from pytest_super.llm import Completion
from pytest_super.prompts import PromptSet, ours
from pytest_super.scoring import parse_submission
from pytest_super.tasks import Cell
from pytest_super.trajectory import Action, Step

STOP = ["</content>", "Observation:"]

_ACTION_LINE = re.compile(
    r"^[ \t]*\**Action\**[ \t]*:[ \t]*\**[ \t]*`?([A-Za-z_\-]*)`?\**[ \t]*(.*)$", re.M
)
_THOUGHT = re.compile(r"\**Thought\**[ \t]*:", re.I)


@dataclass(frozen=True)
class Reply:
    """One parsed model reply."""

    thought: str
    action: Action
    content: str


def parse_reply(text: str, actions: Sequence[Action]) -> Reply:
    """Parse a reply in the ReAct format; `FormatError` says what is wrong.

    The closing `</content>` is optional (it is a stop string); anything after it, or after an
    `Observation:` the model invented, is ignored. A `submit` must hold valid JSON.
    `continue_wait` and `interrupt` need no content.
    """
    text = text.split("</content>", 1)[0]
    text = re.split(r"^\s*Observation:", text, maxsplit=1, flags=re.M)[0]
    match = _ACTION_LINE.search(text)
    if match is None:
        raise FormatError("the reply has no `Action:` line")
    thought_part = text[: match.start()]
    thought_match = _THOUGHT.search(thought_part)
    if thought_match is None:
        raise FormatError("the reply has no `Thought:` before the action")
    thought = thought_part[thought_match.end() :].strip().lstrip("*").strip()
    name = match.group(1).lower()
    trailing = match.group(2).strip().strip("*`").strip()
    if trailing and not trailing.startswith("<content>"):
        # the reference takes the whole line as the action's name: `Action: Execute the script`
        # names no action (its "Invalid action type"), even though it starts with one
        name = f"{match.group(1)} {trailing}"
    if name not in actions:
        allowed = ", ".join(f"`{a}`" for a in actions)
        shown = (name or match.group(2).strip())[:60]
        raise FormatError(f"unknown action {shown!r}; the actions you can use now are {allowed}")
    action = Action(name)
    rest = text[match.start(2) :]
    start = rest.find("<content>")
    if start < 0:
        if action in (Action.WAIT, Action.INTERRUPT):
            return Reply(thought, action, "")
        raise FormatError(f"the `{action}` action has no `<content>` tag")
    content = rest[start + len("<content>") :].removeprefix("\n").rstrip("\n")
    if action == Action.SUBMIT:
        content = content.strip()
        try:
            parse_submission(content)
        except ValueError as exc:
            raise FormatError(str(exc)) from None
    elif action in (Action.EXECUTE, Action.EDIT) and not content.strip():
        raise FormatError(f"the `{action}` action has empty content")
    return Reply(thought, action, content)


def correction_message(problem: str, actions: Sequence[Action]) -> str:
    """The observation of a malformed reply: what was wrong and the format to use."""
    names = " | ".join(actions)
    return (
        f"Thought or action not in the expected format: {problem}. Reply again in exactly this "
        f"form: `Thought: ...`, then a line `Action: <{names}>`, then the action's content "
        "between <content> and </content>. A submission must be valid JSON."
    )


def system_prompt(
    *, with_edit: bool, cell_timeout_s: float, prompts: PromptSet | None = None
) -> str:
    """The system prompt of react (`with_edit=False`) and react-super from `prompts` (default:
    ours): the reference's structure, its demonstrations (the edit one for react-super only), the
    cell timeout as configured."""
    prompts = prompts or ours()
    return prompts.react_system(with_edit=with_edit, cell_timeout_s=cell_timeout_s)


@dataclass
class HistoryEntry:
    thought: str
    action: Action | str  # "" for a malformed reply
    content: str
    observation: str


#: each environment's pre-executed steps and their history entries, cleaned once, not at every
#: turn (cleaning them at each turn was a third of a replay's CPU time on SUPER's Masked set)
_PREFIX: weakref.WeakKeyDictionary[Environment, tuple[list[Step], list[HistoryEntry]]] = (
    weakref.WeakKeyDictionary()
)


def _prefix_entries(env: Environment) -> list[HistoryEntry]:
    steps = env.prefix_steps
    known = _PREFIX.get(env)
    if (  # the very same steps, not equal ones
        known is not None
        and len(known[0]) == len(steps)
        and all(a is b for a, b in zip(known[0], steps, strict=True))
    ):
        return known[1]
    cells = iter(env.task.pre_executed)
    entries = [
        _prefix_entry(env, s, None if s.thought == CONTINUED_THOUGHT else next(cells, None))
        for s in steps
    ]
    _PREFIX[env] = (steps, entries)
    return entries


def _prefix_entry(env: Environment, step: Step, cell: Cell | None) -> HistoryEntry:
    """A pre-executed step as the history shows it; as the reference's agent shows it (an edit
    as the task gave it, a cell that ran out of time with the still-running note) with its
    prompt.yaml (and protocol.yaml)."""
    content, observation = step.content, step.observation or step.output
    protocol = env.options.prompts.protocol
    if _as_reference(env):
        content = cell.source if cell is not None and cell.source else content
        if protocol is not None and step.cell_status == "timeout":
            timeout = f"{env.limits.cell_timeout_s:g}"
            observation = step.output + protocol["timeout"].replace("{seconds}", timeout)
    thought = step.thought or PRE_EXECUTED_THOUGHT
    return HistoryEntry(thought, step.action, content, clean_observation(observation))


def history_entries(
    env: Environment,
    steps: Sequence[Step],
    shown: Mapping[int, HistoryEntry | None] | None = None,
) -> list[HistoryEntry]:
    """The pre-executed steps of this attempt, then the agent's `steps`; a malformed reply shows
    as an empty thought and action with the correction as its observation. `shown`: by the id of
    a step, how the reference's agent shows it (None: not at all; see agents/reference.py)."""
    entries = list(_prefix_entries(env))
    shown = shown or {}
    for s in steps:
        if id(s) in shown:
            entry = shown[id(s)]
            if entry is not None:
                entries.append(entry)
        elif s.action == Action.FORMAT_ERROR:
            entries.append(HistoryEntry("", "", "", s.observation))
        else:
            entries.append(HistoryEntry(s.thought, s.action, s.content, s.observation))
    return entries


def render_history(entries: Sequence[HistoryEntry]) -> str:
    """The history as Thought / Action / Observation blocks, observations truncated."""
    observations = truncate_history([e.observation for e in entries])
    return "".join(
        f"Thought: {e.thought}\nAction: {e.action}\n<content>\n{e.content}\n</content>\n"
        f"Observation: ```\n{obs}\n```\n"
        for e, obs in zip(entries, observations, strict=True)
    )


class ReActAgent:
    """SUPER's ReAct agent: `execute` and `submit`."""

    name = "react"
    with_edit = False

    def run(self, env: Environment) -> AgentResult:
        return self.run_attempt(env)

    # -- one attempt (reflexion runs several) --------------------------------------------------
    def run_attempt(
        self, env: Environment, *, reflections: Sequence[str] = (), budget: int | None = None
    ) -> AgentResult:
        """Act until a submission or a limit. `budget`: the prompt-token mark that ends it."""
        cell = RunningCell()
        steps: list[Step] = []
        errors = FormatErrors(env.limits.format_errors)
        self._shown: dict[int, HistoryEntry | None] = {}
        taken = 0
        while True:
            if taken >= env.limits.steps:
                raise StepLimitReached(f"step limit of {env.limits.steps} steps reached")
            taken += 1
            actions = self.actions(cell.running)
            messages = self.messages(env, steps, reflections)
            completion = ask_model(env, messages, stop=STOP, budget=budget)
            view = _view(env, completion.text)
            try:
                reply = parse_reply(completion.text, actions)
            except FormatError as exc:
                step, entry = self._malformed(env, completion.text, str(exc), actions, view)
                self._record(env, steps, step, completion, entry)
                errors.failed(str(exc))
                continue
            errors.passed()
            interrupted = cell.interrupt_before(env, reply.action)
            if interrupted is not None:  # the reference interrupts silently: not shown
                self._record(env, steps, interrupted, None, None, hidden=_as_reference(env))
            if reply.action == Action.SUBMIT:
                step = Step(thought=reply.thought, action=Action.SUBMIT, content=reply.content)
                self._record(env, steps, step, completion)
                return AgentResult(ExitStatus.SUBMITTED, reply.content)
            step = self.act(env, reply, cell)
            entry = None if view is None else _entry(view, step.observation)
            self._record(env, steps, step, completion, entry)

    def _malformed(
        self,
        env: Environment,
        text: str,
        problem: str,
        actions: Sequence[Action],
        view: ref.View | None,
    ) -> tuple[Step, HistoryEntry | None]:
        """The step of a reply our parser refused, and how the reference shows it (None: ours)."""
        note = correction_message(problem, actions)
        if not _as_reference(env):
            return format_error_step(text, note), None
        protocol = env.options.prompts.protocol
        if view is not None and view.action not in actions:
            note = ref.unknown_action_observation(view.action, protocol) or note
            return format_error_step(text, note), _entry(view, note)
        note = protocol["format_error"] if protocol is not None else note
        return format_error_step(text, note), HistoryEntry("", "", "", note)

    def actions(self, running: bool = True) -> list[Action]:
        """The actions a reply may name. `continue_wait` and `interrupt` are taken whether or not
        a cell runs (`running`), as the reference takes them: the kernel answers (an idle one
        at once, with nothing)."""
        names = [Action.EXECUTE, *([Action.EDIT] if self.with_edit else []), Action.SUBMIT]
        return [*names, Action.WAIT, Action.INTERRUPT]

    def act(self, env: Environment, reply: Reply, cell: RunningCell) -> Step:
        """Carry out one action (not submit) and return its step."""
        if reply.action == Action.EDIT:
            return self._edit(env, reply)
        idle = not cell.running
        if reply.action == Action.WAIT:
            result, code = cell.wait(env), None
        elif reply.action == Action.INTERRUPT:
            result, code = cell.interrupt(env), None
        else:
            result, code = cell.run(env, reply.content), reply.content
        shown = None
        if _as_reference(env):
            protocol = env.options.prompts.protocol
            timeout = env.limits.cell_timeout_s
            shown = ref.cell_observation(result, reply.action, protocol, cell_timeout_s=timeout)
        elif idle and code is None and result.status == "ok" and not result.output:
            note = f"No cell is running, so there is nothing to {reply.action}."
            return Step(thought=reply.thought, action=reply.action, content="", observation=note)
        step = step_for_cell(
            reply.thought,
            reply.action,
            reply.content,
            code,
            result,
            env,
            interrupted=reply.action == Action.INTERRUPT,
        )
        if shown is not None:
            step.observation = truncate_observation(shown, LATEST_CHARS)
        return step

    def _edit(self, env: Environment, reply: Reply) -> Step:
        def edit() -> tuple[str, bool]:
            outcome = edit_action(env.kernel, reply.content)
            return outcome.message, outcome.ok

        answer = env.run_tool(Action.EDIT, reply.content, edit)
        return Step(
            thought=reply.thought,
            action=Action.EDIT,
            content=reply.content,
            observation=answer.observation,
            cell_status="ok" if answer.ok else "error",
            duration_s=answer.duration_s,
        )

    def messages(
        self, env: Environment, steps: Sequence[Step], reflections: Sequence[str] = ()
    ) -> list[dict[str, str]]:
        """System prompt, `Query: ...` (with reflections, if any), then the history."""
        messages = self.prompt_messages(
            env.options.prompts, env.task.query, env.limits.cell_timeout_s, reflections
        )
        history = render_history(history_entries(env, steps, getattr(self, "_shown", None)))
        if history:
            messages.append({"role": "assistant", "content": history})
        return messages

    def prompt_messages(
        self,
        prompts: PromptSet,
        query_text: str,
        cell_timeout_s: float,
        reflections: Sequence[str] = (),
    ) -> list[dict[str, str]]:
        """The messages before the history: the system prompt and the task's message."""
        query = prompts.react_query(query_text)
        if reflections:
            plans = "\n\n".join(f"Attempt {i}:\n{r}" for i, r in enumerate(reflections, start=1))
            query += (
                "\n\nYou tried this task before and did not finish it. The environment has been "
                "reset (any pre-executed steps were run again). Your plans from the earlier "
                f"attempts:\n{plans}"
            )
        system = prompts.react_system(with_edit=self.with_edit, cell_timeout_s=cell_timeout_s)
        return [{"role": "system", "content": system}, {"role": "user", "content": query}]

    def _record(
        self,
        env: Environment,
        steps: list[Step],
        step: Step,
        completion: Completion | None,
        entry: HistoryEntry | None = None,
        *,
        hidden: bool = False,
    ) -> None:
        """Record `step`; `entry`: how the reference shows it (None: as ours does), `hidden`: not
        shown at all."""
        record_with_usage(env, step, completion)
        steps.append(step)
        if entry is not None or hidden:
            self._shown[id(step)] = entry


def _view(env: Environment, text: str) -> ref.View | None:
    """How the reference's agent reads `text`, when the history is shown as it shows it."""
    if not _as_reference(env):
        return None
    return ref.reference_view(text, env.options.prompts.protocol)


def _as_reference(env: Environment) -> bool:
    """Whether the history is shown as the reference's agent shows it (its prompt.yaml)."""
    return env.options.prompts.reference is not None


def _entry(view: ref.View, observation: str) -> HistoryEntry:
    return HistoryEntry(view.thought, view.action, view.content, observation)


class ReActSuperAgent(ReActAgent):
    """ReAct-SUPER: ReAct plus the `edit` action with SUPER's detailed feedback."""

    name = "react-super"
    with_edit = True
