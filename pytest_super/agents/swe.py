"""The SWE-agent (name "swe"), adapted to SUPER's notebook as in the SUPER paper.

Each model reply is a DISCUSSION (free text) followed by exactly one command in a ``` fenced block:
a file viewer command of `swe_commands` (open, goto, scroll_up, scroll_down, create, edit,
search_dir, search_file, find_file), `submit <json>`, `continue_wait` / `interrupt` for a cell
left running by a timeout, or anything else, which runs as a notebook cell (`!bash`, Python,
magics). The conversation is SWE-agent's: system prompt with the command docs and a worked
example, the task as the first user message, then one assistant reply and one observation per
step, every observation ending with the state prompt `(Open file: ...)`, `(Current directory:
...)`, `In [ ]`. Earlier observations are cut as SUPER cuts them (`history.truncate_history`).

Shared rules with ReAct (the helpers of `history`): at most `env.limits.steps` actions (malformed
replies do not count), three malformed replies in a row end the episode (each gets a correction,
shown with the next call only), the prompt-token budget checked around every call (`ask_model`),
the cell-timeout protocol of `RunningCell`, every step recorded. `run_attempt` takes a budget and
earlier plans, as ReAct's does, so Reflexion could drive this agent too.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_super.agents.base import AgentResult, Environment, ExitStatus, StepLimitReached
from pytest_super.agents.history import (
    INTERRUPT_ACTION,
    WAIT_ACTION,
    FormatErrors,
    RunningCell,
    ask_model,
    clean_observation,
    format_error_turn,
    record_with_usage,
    require_llm,
    step_for_cell,
    truncate_history,
)
from pytest_super.agents.swe_commands import (
    WINDOW,
    Command,
    CommandFormatError,
    FileViewer,
    KernelSnippetError,
    command_docs,
    parse_command,
)
from pytest_super.edit import EditFormatError, parse_edit
from pytest_super.trajectory import Step

#: a model that starts writing the next state prompt itself has finished its reply
STOP_STRINGS = ["\n(Open file:", "\n(Current directory:"]

_FENCE = re.compile(r"^[ \t]*```[^\n`]*\n(.*?)^[ \t]*```[ \t]*$", re.MULTILINE | re.DOTALL)
_DISCUSSION = re.compile(r"^\s*DISCUSSION\s*:?\s*\n?", re.IGNORECASE)

SYSTEM_PROMPT = """\
SETTING: You are an autonomous programmer working in a Jupyter notebook. Besides running cells, \
you have a file viewer that shows {window} lines of a file at a time.

Every cell you send runs in the notebook's kernel:
1. Bash commands start with !, e.g. !ls -la or !pip install numpy.
2. Anything else is Python, and its variables stay defined for the next cells.
3. Magics work too, e.g. %cd <path> to change the current directory (!cd does not last).

These special commands help you read, navigate and edit files:

{command_docs}

An edit needs the right indentation: to add the line '        print(x)' write all eight spaces \
in front of print. Wrongly indented code will fail and has to be fixed before it runs.

RESPONSE FORMAT:
Your prompt looks like this:
(Open file: <path>)
(Current directory: <cwd>)
In [ ]

Every reply has two parts: a DISCUSSION, where you think about what to do next, and then exactly \
ONE command in a ``` block. For example:

DISCUSSION
I'll list the files of the current directory first to see what the repository holds.
```
!ls -a
```

Send a single command per reply and wait for its output before you write the next one. If you \
want to run two commands, send the first, read its output, then send the second.

EXAMPLES of whole tasks (not from your task):

Task: read 'data.csv' with pandas and report the names in its first 2 rows.
DISCUSSION
I'll read the file with pandas and look at the first rows.
```
import pandas as pd
pd.read_csv('data.csv').head(2)
```
(output shows the names Alice and Bob)
DISCUSSION
The first two rows hold Alice and Bob, so I submit them.
```
submit ["Alice", "Bob"]
```

Task: in config.json, change the model from 'roberta-base' to 'roberta-large'.
DISCUSSION
I'll open the file to find the line that names the model.
```
open config.json
```
(the viewer shows line 2:     "model": "roberta-base",)
DISCUSSION
Line 2 names the model; I replace it, keeping its indentation.
```
edit 2:2
    "model": "roberta-large",
end_of_edit
```
(the viewer shows the edited file)
DISCUSSION
The file now names roberta-large. There is no value to report, so I submit null.
```
submit null
```
"""

INSTANCE_PROMPT = """\
We're working on the following task in the notebook.
TASK:
{query}

INSTRUCTIONS:
Work on the task on your own, with cells and the special commands. Edit whatever files you need \
and run whatever checks you want. Send ONE command per reply and always wait for its output. \
When you have the final answer the TASK asks for, send it with the `submit` command, as JSON.
Indentation matters in edits: put the right indentation in front of every line.

TIPS:
1. If the task names a GitHub repository, start by cloning it. Read its README for how to install \
and run it; set up the Python environment with pip (not conda) before running its scripts.
2. A command that failed will fail again unless you change something: try a different one.
3. To see a line beyond the window, say line 583, use `goto 583` rather than many scroll_down.
4. Mind the open file and the current directory shown in the prompt: they may differ, and \
`create` opens the file it creates.
5. Line numbers and indentation are easy to get wrong in an edit. Read the file the edit shows \
you, and fix it with another edit if it is not what you meant.
6. A cell may run for {cell_timeout} s. Then you choose: answer `{interrupt}` if it is waiting \
for input (e.g. "Continue? [Y/n]"; run it again as echo "y" | command) or is running the wrong \
thing (a different model, too many epochs); answer `{wait}` if it is doing the right thing and \
needs more time.
"""

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
        viewer = FileViewer(env.kernel, window=self.window)
        running = RunningCell()
        errors = FormatErrors(env.limits.format_errors)
        turns = [_prefix_turn(step) for step in env.prefix_steps]
        correction: list[dict[str, str]] = []
        cwd = _current_dir(viewer, "?")
        taken = 0
        while True:
            if taken >= env.limits.steps:
                raise StepLimitReached(f"step limit of {env.limits.steps} actions reached")
            viewer.kernel = env.kernel  # a new attempt may have started a new kernel
            state = _state_prompt(viewer.open_file, cwd)
            messages = self._messages(env, turns, state, reflections) + correction
            completion = ask_model(env, messages, stop=STOP_STRINGS, budget=budget)
            try:
                thought, command = parse_reply(completion.text)
            except CommandFormatError as exc:
                note = FORMAT_CORRECTION.format(problem=exc) + f"\n{state}"
                step, correction = format_error_turn(completion.text, note)
                record_with_usage(env, step, completion)
                errors.failed(str(exc))
                continue
            errors.passed()
            correction = []
            taken += 1
            notes: list[str] = []
            interrupted = running.interrupt_before(env, command.name)
            if interrupted is not None:
                record_with_usage(env, interrupted, None)
                notes.append(interrupted.observation)
            if command.name == "submit":
                record_with_usage(
                    env, Step(thought=thought, action="submit", content=command.body), completion
                )
                return AgentResult(ExitStatus.SUBMITTED, command.body)
            step = self._act(env, viewer, running, thought, command)
            record_with_usage(env, step, completion)
            if not running.running:  # a running cell keeps the kernel busy: keep the last cwd
                cwd = _current_dir(viewer, cwd)
            notes.append(step.observation)
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
    ) -> Step:
        """Run one command (not submit) and return its step, not yet recorded."""
        if command.name in (WAIT_ACTION, INTERRUPT_ACTION):
            if not running.running:
                return Step(
                    thought=thought,
                    action=command.name,
                    content="",
                    observation=f"No cell is running, so there is nothing to {command.name}.",
                )
            result = running.wait(env) if command.name == WAIT_ACTION else running.interrupt(env)
            return step_for_cell(thought, command.name, "", None, result, env)
        if command.name == "execute":
            result = running.run(env, command.body)
            return step_for_cell(thought, "execute", command.body, command.body, result, env)
        # Viewer commands are not notebook cells: their text (file contents, search hits) is the
        # observation only, so reading a file never counts as reaching a landmark.
        return Step(
            thought=thought,
            action=command.name,
            content=command.text,
            observation=viewer.run(command),
        )

    def _messages(
        self, env: Environment, turns: list[_Turn], state: str, reflections: Sequence[str]
    ) -> list[dict[str, str]]:
        system = SYSTEM_PROMPT.format(window=self.window, command_docs=command_docs())
        instance = INSTANCE_PROMPT.format(
            query=env.task.query.strip(),
            cell_timeout=f"{env.limits.cell_timeout_s:.0f}",
            interrupt=INTERRUPT_ACTION,
            wait=WAIT_ACTION,
        )
        if reflections:
            plans = "\n\n".join(f"Attempt {i}:\n{r}" for i, r in enumerate(reflections, start=1))
            instance += (
                "\nYou tried this task before and did not finish it. The notebook has been reset "
                f"(pre-executed steps were run again). Your plans from those attempts:\n{plans}\n"
            )
        messages = [{"role": "system", "content": system}]
        if not turns:
            messages.append({"role": "user", "content": f"{instance}\n{state}"})
            return messages
        messages.append({"role": "user", "content": instance})
        observations = truncate_history([turn.observation for turn in turns])
        for turn, observation in zip(turns, observations, strict=True):
            if turn.reply:
                messages.append({"role": "assistant", "content": turn.reply})
            text = observation if not turn.state else f"{observation}\n{turn.state}"
            messages.append({"role": "user", "content": text})
        if not turns[-1].state:
            messages[-1]["content"] += f"\n{state}"
        return messages


def parse_reply(reply: str) -> tuple[str, Command]:
    """Split a reply into its discussion and its one command. Raises CommandFormatError."""
    blocks = list(_FENCE.finditer(reply))
    if not blocks:
        if "```" in reply:
            raise CommandFormatError("the ``` block of the command is not closed.")
        raise CommandFormatError("there is no command in a ``` block.")
    if len(blocks) > 1:
        raise CommandFormatError(
            f"it has {len(blocks)} ``` blocks, but each reply may hold only one command. Send "
            "the first command now and the next one after you have seen its output."
        )
    thought = _DISCUSSION.sub("", reply[: blocks[0].start()], count=1).strip()
    return thought, parse_command(blocks[0][1])


def _current_dir(viewer: FileViewer, fallback: str) -> str:
    try:
        return viewer.cwd()
    except KernelSnippetError:  # e.g. the kernel died and is restarting: show the last known
        return fallback


def _state_prompt(open_file: str | None, cwd: str) -> str:
    return f"(Open file: {open_file or 'n/a'})\n(Current directory: {cwd})\nIn [ ]"


def _prefix_turn(step: Step) -> _Turn:
    """A pre-executed step as history: a cell as the user's own reply, an edit as a note."""
    observation = clean_observation(step.observation).rstrip() or "[The cell ran without output.]"
    if step.action == "edit":
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
