"""The SWE-agent (name "swe"), adapted to SUPER's notebook as in the SUPER paper.

Each model reply is a DISCUSSION (free text) followed by exactly one command in a ``` fenced block:
a file viewer command of `swe_commands` (open, goto, scroll_up, scroll_down, create, edit,
search_dir, search_file, find_file), `submit <json>`, `continue_wait` / `interrupt` for a cell
left running by a timeout, or anything else, which runs as a notebook cell (`!bash`, Python,
magics). The conversation is SWE-agent's: system prompt with the command docs and a worked
example, the task as the first user message, then one assistant reply and one observation per
step, every observation ending with the state prompt `(Open file: ...)`, `(Current directory:
...)`, `In [ ]`; an empty observation is SWE-agent's no-output message. The history is SWE-agent's
at v0.6.1 (commit 5f42dc84, the version the paper ran; docs/fidelity.md): the task message and the
last five observation messages whole, each earlier observation message replaced by a line count
(its `Last5Observations`), no other cut; no stop strings. With the reference's protocol strings
(`PromptSet.protocol`), a cell's output is shown as the kernel printed it, a timeout's note and an
interrupt in the reference's words, and an automatic interrupt adds nothing, as in the published
episodes (tests/data/super-reference/requests/, scripts/reference-requests-swe.py).

Shared rules with ReAct (the helpers of `history`): at most `env.limits.steps` replies; a
malformed reply stays in the conversation with a correction as its observation and ends the
episode only with `--super-format-errors`; the token budget and the compute limit checked before
every call (`ask_model`); the cell-timeout protocol of `RunningCell`; every step recorded. The file
viewer's helper snippets run through the environment (their time counts), and output they catch
that is not theirs (late output of an earlier cell) is recorded with the next step. `run_attempt` takes a budget and
earlier plans, as ReAct's does, so Reflexion could drive this agent too.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from pytest_super.agents.base import AgentResult, Environment, ExitStatus, StepLimitReached
from pytest_super.agents.history import (
    FormatErrors,
    RunningCell,
    ask_model,
    clean_observation,
    format_error_step,
    record_with_usage,
    require_llm,
    step_for_cell,
)
from pytest_super.agents.swe_commands import (
    END_OF_EDIT,
    FILE_HEADER,
    WINDOW,
    Command,
    CommandFormatError,
    FileViewer,
    KernelSnippetError,
    command_docs,
    parse_command,
)
from pytest_super.edit import AFTER_MARKER, BEFORE_MARKER
from pytest_super.environment import CONTINUED_THOUGHT, PRE_EXECUTED_THOUGHT
from pytest_super.kernels.base import CellResult
from pytest_super.prompts import ours
from pytest_super.tasks import Cell
from pytest_super.trajectory import Action, Step

#: SWE-agent's model call sends no stop strings
STOP_STRINGS: list[str] | None = None
#: SWE-agent's history processor (`Last5Observations` at v0.6.1): the last this many observation
#: messages are shown whole; each earlier one (but the task's) as `OMITTED` with its line count
SHOWN_OBSERVATIONS = 5
OMITTED = "Old output omitted ({lines} lines)"
#: the notebook's directory when a task starts (the kernel image's working directory)
START_DIR = "/content"
#: the thought SWE-agent's Masked notebooks give a pre-executed edit
EDITED_THOUGHT = "EXECUTED BY USER"
#: the steps that run a notebook cell (the rest are the file viewer's, edits, submissions)
KERNEL_ACTIONS = frozenset({Action.EXECUTE, Action.WAIT, Action.INTERRUPT})
#: SWE-agent's message for a command that printed nothing (its `next_step_no_output_template`)
NO_OUTPUT = "Your command ran successfully and did not produce any output."

_FENCE = re.compile(r"^[ \t]*```[^\n`]*\n(.*?)^[ \t]*```[ \t]*$", re.MULTILINE | re.DOTALL)
_DISCUSSION = re.compile(r"^\s*DISCUSSION\s*:?\s*\n?", re.IGNORECASE)


#: the published SWE-agent episodes' system prompt structure, in our words: setting, the
#: notebook's three kinds of cells, the command list (docstring, signature, arguments), the
#: indentation warning, the response format, one command per reply; no demonstrations. Our
#: templates; a run takes them from its prompt set (`env.options.prompts`, --super-prompts)
SYSTEM_PROMPT = ours().templates["swe_system"]
INSTANCE_PROMPT = ours().templates["swe_instance"]

FORMAT_CORRECTION = """\
Your reply could not be run: {problem}
Reply with a DISCUSSION and then exactly ONE command in a ``` block, for example:

DISCUSSION
I'll check which files are here.
```
!ls
```"""


@dataclass
class _Turn:
    """One exchange shown to the model: its reply and what came back."""

    reply: str  # assistant text (a pre-executed step's in the same layout)
    observation: str
    state: str  # the state prompt after it


class SWEAgent:
    """SWE-agent: file viewer and edit commands plus notebook cells, one command per reply."""

    name = "swe"

    def __init__(self, *, window: int = WINDOW) -> None:
        self.window = window

    def run(self, env: Environment) -> AgentResult:
        return self.run_attempt(env)

    def run_attempt(
        self, env: Environment, *, reflections: Sequence[str] = (), budget: int | None = None
    ) -> AgentResult:
        """Act until a submission or a limit. `budget`: the prompt-token mark that ends it
        (default: the task's); `reflections`: plans from earlier attempts, shown with the task."""
        require_llm(env, self.name)
        viewer = FileViewer(
            env.kernel,
            window=self.window,
            run_cell=lambda code, timeout: env.execute(code, timeout_s=timeout, check_limit=False),
        )
        running = RunningCell()
        errors = FormatErrors(env.limits.format_errors)
        turns = _prefix_turns(env)
        cwd = _current_dir(env, viewer, "?")
        if turns:  # the state after the pre-executed steps, as the kernel has it
            turns[-1].state = _state_prompt(viewer.open_file, cwd)
        # the task's message keeps the state at the start (before any pre-executed step)
        opening = _state_prompt(None, START_DIR if turns else cwd)
        taken = 0
        while True:
            if taken >= env.limits.steps:
                raise StepLimitReached(f"step limit of {env.limits.steps} steps reached")
            taken += 1
            viewer.kernel = env.kernel  # a new attempt may have started a new kernel
            state = _state_prompt(viewer.open_file, cwd)
            messages = self._messages(env, turns, state, opening, reflections)
            completion = ask_model(env, messages, stop=STOP_STRINGS, budget=budget)
            try:
                thought, command = parse_reply(completion.text)
            except CommandFormatError as exc:
                note = FORMAT_CORRECTION.format(problem=exc)
                record_with_usage(env, format_error_step(completion.text, note), completion)
                turns.append(_Turn(completion.text, note, state))
                errors.failed(str(exc))
                continue
            errors.passed()
            notes: list[str] = []
            interrupted = running.interrupt_before(env, command.name)
            if interrupted is not None:
                record_with_usage(env, interrupted, None)
                if env.options.prompts.protocol is None:  # the reference shows nothing of it
                    notes.append(interrupted.observation)
            stray = viewer.take_stray_output()
            if command.name == Action.SUBMIT:
                step = Step(thought=thought, action=Action.SUBMIT, content=command.body)
                record_with_usage(env, _with_stray(step, stray), completion)
                return AgentResult(ExitStatus.SUBMITTED, command.body)
            step, shown = self._act(env, viewer, running, thought, command)
            stray += viewer.take_stray_output()
            step = _with_stray(step, stray)
            record_with_usage(env, step, completion)
            if not running.running:  # a running cell keeps the kernel busy: keep the last cwd
                cwd = _current_dir(env, viewer, cwd)
            notes.append(step.observation if stray else shown)
            turns.append(
                _Turn(completion.text, "\n".join(notes), _state_prompt(viewer.open_file, cwd))
            )

    def _act(
        self,
        env: Environment,
        viewer: FileViewer,
        running: RunningCell,
        thought: str,
        command: Command,
    ) -> tuple[Step, str]:
        """Run one command (not submit): its step, not yet recorded, and what the model is shown
        of it."""
        if command.name in (Action.WAIT, Action.INTERRUPT):
            if not running.running:
                step = Step(
                    thought=thought,
                    action=command.name,
                    content="",
                    observation=f"No cell is running, so there is nothing to {command.name}.",
                )
                return step, step.observation
            result = running.wait(env) if command.name == Action.WAIT else running.interrupt(env)
            step = step_for_cell(thought, command.name, "", None, result, env)
            return step, _shown_cell(env, result, step)
        if command.name == Action.EXECUTE:
            result = running.run(env, command.body)
            step = step_for_cell(thought, Action.EXECUTE, command.body, command.body, result, env)
            return step, _shown_cell(env, result, step)
        # Viewer commands are not notebook cells: their text (file contents, search hits) is the
        # observation only, so reading a file never counts as reaching a landmark. Their snippets
        # count their own time (`run_cell`).
        answer = env.run_tool(
            command.name, command.text, lambda: (viewer.run(command), True), timed=False
        )
        shown = FILE_HEADER.search(answer.observation)
        if shown is not None:  # the file the window shows is the open one (a replayed viewer)
            viewer.open_file = shown[1]
        step = Step(
            thought=thought,
            action=command.name,
            content=command.text,
            observation=answer.observation,
            duration_s=answer.duration_s,
        )
        return step, step.observation

    def _messages(
        self,
        env: Environment,
        turns: list[_Turn],
        state: str,
        opening: str,
        reflections: Sequence[str],
    ) -> list[dict[str, str]]:
        prompts = env.options.prompts
        docs = command_docs(edit_doc=prompts.swe_edit_doc(end_of_edit=END_OF_EDIT))
        system = prompts.swe_system(window=self.window, command_docs=docs)
        instance = prompts.swe_instance(
            query=env.task.query.strip(),
            cell_timeout=f"{env.limits.cell_timeout_s:.0f}",
            interrupt=Action.INTERRUPT,
            wait=Action.WAIT,
        )
        if reflections:
            plans = "\n\n".join(f"Attempt {i}:\n{r}" for i, r in enumerate(reflections, start=1))
            instance += (
                "\nYou tried this task before and did not finish it. The notebook has been reset "
                f"(pre-executed steps were run again). Your plans from those attempts:\n{plans}\n"
            )
        messages = [{"role": "system", "content": system}]
        messages.append({"role": "user", "content": f"{instance}\n{opening}"})
        for turn in turns:
            messages.append({"role": "assistant", "content": turn.reply})
            observation = turn.observation if turn.observation.strip() else NO_OUTPUT
            messages.append({"role": "user", "content": f"{observation}\n{turn.state}"})
        return last_observations(messages)


def last_observations(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    """SWE-agent's history processor: the first user message (the task's) and the last
    `SHOWN_OBSERVATIONS` user messages whole, every other user message as `OMITTED`."""
    users = [i for i, m in enumerate(messages) if m["role"] == "user"]
    kept = set(users[:1] + users[-SHOWN_OBSERVATIONS:])
    return [
        m
        if m["role"] != "user" or i in kept
        else {"role": "user", "content": OMITTED.format(lines=len(m["content"].splitlines()))}
        for i, m in enumerate(messages)
    ]


def _shown_cell(env: Environment, result: CellResult, step: Step) -> str:
    """What the model is shown of a cell, a wait or an interrupt (`step`): given the reference's
    protocol strings, the output as the kernel printed it (SWE-agent cleans nothing) and their
    note; without them, the step's observation (our cleaned output and notes)."""
    protocol = env.options.prompts.protocol
    if protocol is None:
        return step.observation
    if step.action == Action.INTERRUPT:
        return protocol["interrupted"]
    if result.status == "timeout" and result.still_running:
        return result.output + protocol["timeout"].replace(
            "{seconds}", f"{env.limits.cell_timeout_s:g}"
        )
    return result.output


def parse_reply(reply: str) -> tuple[str, Command]:
    """Split a reply into its discussion and its one command. Raises CommandFormatError."""
    blocks = list(_FENCE.finditer(reply))
    if not blocks:
        if "```" in reply:
            raise CommandFormatError("the ``` block of the command is not closed.")
        raise CommandFormatError("there is no command in a ``` block.")
    # as the paper's SWE-agent: the last block is the command, the rest of the reply (earlier
    # blocks included) its discussion
    last = blocks[-1]
    discussion = reply[: last.start()] + reply[last.end() :]
    thought = _DISCUSSION.sub("", discussion, count=1).strip()
    return thought, parse_command(last[1])


def _with_stray(step: Step, stray: str) -> Step:
    """`step` with the output a viewer snippet caught that was not its own (late output of an
    earlier cell) put first: in its output (landmarks see it) and its observation."""
    if stray:
        step.output = stray + step.output
        step.observation = f"{clean_observation(stray).rstrip()}\n{step.observation}".rstrip("\n")
    return step


#: the state prompt's directory is asked of the kernel as a tool (a replayed kernel answers it)
CWD_TOOL = "cwd"


def _current_dir(env: Environment, viewer: FileViewer, fallback: str) -> str:
    def ask() -> tuple[str, bool]:
        try:
            return viewer.cwd(), True
        except KernelSnippetError:  # e.g. the kernel died and is restarting: show the last known
            return fallback, False

    return env.run_tool(CWD_TOOL, "", ask, timed=False).observation


def _state_prompt(open_file: str | None, cwd: str) -> str:
    return f"(Open file: {open_file or 'n/a'})\n(Current directory: {cwd})\nIn [ ]"


def _prefix_turns(env: Environment) -> list[_Turn]:
    """The pre-executed steps as turns of the history, as SUPER's SWE-agent had them (derived
    from its Masked notebooks, docs/fidelity.md): each the notebook's thought and cell in a
    reply's layout, its observation and the state prompt after it; the last one's state is the
    live one (`run_attempt`)."""
    cells = iter(env.task.pre_executed)
    protocol = env.options.prompts.protocol
    open_file, cwd = "n/a", START_DIR
    turns = []
    for step in env.prefix_steps:
        cell = None if step.action == Action.WAIT else next(cells, None)
        thought, command = _prefix_command(step, cell)
        observation = step.observation or step.output
        if protocol is not None and step.cell_status == "timeout":
            timeout = f"{env.limits.cell_timeout_s:g}"
            observation = step.output + protocol["timeout"].replace("{seconds}", timeout)
        elif protocol is None:
            observation = clean_observation(observation)
        open_file, cwd = open_file_after(step, open_file), directory_after(step, cwd)
        reply = f"DISCUSSION\n{thought}\n\n```\n{command}\n```"
        turns.append(_Turn(reply, observation, _state_prompt(open_file, cwd)))
    return turns


def _prefix_command(step: Step, cell: Cell | None) -> tuple[str, str]:
    """A pre-executed step's thought and command as SWE-agent's Masked notebooks show them: a
    cell as it ran, the runner's wait as `continue_wait`, an edit as `EDITING ...` (the task's
    text, blank lines included) with the thought `EXECUTED BY USER`."""
    if step.action == Action.WAIT:
        return step.thought or CONTINUED_THOUGHT, Action.WAIT.value
    if step.action != Action.EDIT:
        return step.thought or PRE_EXECUTED_THOUGHT, step.content
    source = cell.source if cell is not None and cell.source else step.content
    file, _, rest = source.partition(f"\n{BEFORE_MARKER}\n")
    before, _, after = rest.partition(f"{AFTER_MARKER}\n")
    return EDITED_THOUGHT, f"EDITING `{file}. CHANGING:\n\n\n{before}\n\nTO:\n\n\n{after}"


class _Recorded(Protocol):
    """A recorded step (`Step`, or the replay's `Recorded`)."""

    @property
    def action(self) -> str: ...
    @property
    def content(self) -> str: ...
    @property
    def observation(self) -> str: ...


def open_file_after(step: _Recorded, current: str) -> str:
    """The open file of SWE-agent's state prompt after a recorded step: a viewer command or an
    edit shows the file it has open in its answer's header; a cell changes nothing."""
    if step.action in KERNEL_ACTIONS:
        return current
    found = FILE_HEADER.search(step.observation)
    return found[1] if found is not None else current


def directory_after(step: _Recorded, current: str) -> str:
    """The kernel's working directory after a recorded step: a `%cd` cell prints the directory
    it moved to (a failed one prints an error first and leaves it)."""
    if step.action != Action.EXECUTE or not step.content.lstrip().startswith("%cd"):
        return current
    first = step.observation.split("\n", 1)[0].strip()
    return first if first.startswith("/") else current
