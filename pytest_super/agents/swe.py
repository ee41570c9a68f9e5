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
from pytest_super.edit import EditFormatError, parse_edit
from pytest_super.kernels.base import CellResult
from pytest_super.prompts import ours
from pytest_super.trajectory import Action, Step

#: SWE-agent's model call sends no stop strings
STOP_STRINGS: list[str] | None = None
#: SWE-agent's history processor (`Last5Observations` at v0.6.1): the last this many observation
#: messages are shown whole; each earlier one (but the task's) as `OMITTED` with its line count
SHOWN_OBSERVATIONS = 5
OMITTED = "Old output omitted ({lines} lines)"
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

    reply: str  # assistant text; "" for a turn the user took (a pre-executed edit)
    observation: str
    state: str  # the state prompt after it; "" for pre-executed turns


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
        turns = [_prefix_turn(step) for step in env.prefix_steps]
        cwd = _current_dir(env, viewer, "?")
        opening = _state_prompt(viewer.open_file, cwd)  # the task's message keeps it
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
        prefix = bool(turns) and not turns[0].state  # pre-executed turns come first
        task = instance if prefix else f"{instance}\n{opening}"
        messages.append({"role": "user", "content": task})
        for turn in turns:
            if turn.reply:
                messages.append({"role": "assistant", "content": turn.reply})
            if not turn.state:
                messages.append({"role": "user", "content": turn.observation})
                continue
            observation = turn.observation if turn.observation.strip() else NO_OUTPUT
            messages.append({"role": "user", "content": f"{observation}\n{turn.state}"})
        if turns and not turns[-1].state:
            messages[-1]["content"] += f"\n{state}"
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


def _prefix_turn(step: Step) -> _Turn:
    """A pre-executed step as history: a cell as the user's own reply, an edit or the wait after
    a cell that ran out of time as a note."""
    observation = clean_observation(step.observation)
    if step.action == Action.WAIT:
        return _Turn("", f"{step.thought}\n{observation}", "")
    if step.action == Action.EDIT:
        try:
            request = parse_edit(step.content)
            what = (
                f"in {request.file}, the lines\n{request.before}were replaced by\n{request.after}"
            )
        except EditFormatError:
            what = step.content
        return _Turn("", f"{step.thought} The user edited a file: {what}\n{observation}", "")
    reply = f"DISCUSSION\n{step.thought}\n```\n{step.content}\n```"
    return _Turn(reply, observation, "")
