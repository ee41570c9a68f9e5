"""A published episode as a script to replay: the task, what the kernel answers, what the model says.

`episode_script(episode)` turns a `PublishedEpisode` (published_runs.py) into an `EpisodeScript`:

- `task`: a `Task` with the episode's query, its pre-executed cells (the runner replays them, as
  it does for any masked task) and the entrypoint the query names; no answer and no landmarks
  (the published runs do not hold them);
- `kernel`: every step that used the kernel or a tool, in order (`Recorded`: the action, its
  content, the recorded observation and the recorded duration), for the replay kernel;
- `replies`: the model's replies, one per step it chose, rebuilt in the format of the episode's
  agent (`react_reply`, `swe_reply`), with the usage `usage_plan` gives each.

The notebooks do not hold the raw replies of malformed steps nor any token counts: a malformed
reply is rebuilt as one our parser must refuse as the reference did (no `Action:` line, or the
action name the reference called invalid), and the usage is planned so that the token budget
falls where the episode shows it fell (docs/fidelity.md, "Closed-loop replay").
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field

from pytest_super.agents.swe import KERNEL_ACTIONS, directory_after, open_file_after
from pytest_super.edit import EditFormatError, parse_edit
from pytest_super.published_runs import (
    EpisodeFormatError,
    PublishedEpisode,
    entrypoint_from_query,
    exit_status_of,
)
from pytest_super.replay.compute_plan import TRUNCATED_SECOND, planned_fractions
from pytest_super.tasks import Cell, Task
from pytest_super.trajectory import Action, Step

#: the reference's note on a cell still running after the cell timeout (jupyter_env.py), which the
#: notebooks keep in the observation: appended to the output after two line breaks (the output's
#: own trailing line breaks stay the output's)
TIMEOUT_NOTE = re.compile(
    r"\n{0,2}Your command has already run for \d+ seconds\. It is still running\."
)
#: the reference's observation of a reply whose action it did not know
INVALID_ACTION = "Invalid action type: "
#: the observation of a submission the reference could not read as JSON (the runs' revision of its
#: agent recorded it as a step of action `submit_invalid_json`)
INVALID_SUBMISSION = "Invalid json format for submission."
#: the budget the reference gave an episode: 400k prompt tokens on Masked, 600k otherwise
REFERENCE_BUDGETS = {"masked": 400_000}
DEFAULT_BUDGET = 600_000
#: the reference's other limits (run_on_benchmark.py, jupyter_env.py)
REFERENCE_STEPS = 100
REFERENCE_COMPUTE_S = 1800.0
REFERENCE_CELL_TIMEOUT_S = 300.0
#: the actions the replay kernel answers with a recorded observation

#: the working directory the reference's kernels started in (SWE-agent's state prompt)
REFERENCE_CWD = "/content"


@dataclass(frozen=True)
class Recorded:
    """One step the kernel answers: a cell, a wait, an interrupt or a tool (edit, viewer)."""

    step: int  # 1-based, as the notebook's `### Step N`
    action: str
    content: str
    observation: str
    duration_s: float
    pre_executed: bool = False
    #: the part of a second the notebook cut from `duration_s`, as planned (compute_plan.py)
    fraction: float = TRUNCATED_SECOND

    @property
    def timed_out(self) -> bool:
        return TIMEOUT_NOTE.search(self.observation) is not None

    @property
    def output(self) -> str:
        """The observation without the reference's still-running note."""
        found = TIMEOUT_NOTE.search(self.observation)
        return self.observation if found is None else self.observation[: found.start()]


@dataclass(frozen=True)
class Reply:
    """One scripted model reply with the usage it reports."""

    step: int
    text: str
    prompt_tokens: int
    completion_tokens: int


@dataclass
class EpisodeScript:
    """What replaying one published episode needs (see the module docstring)."""

    episode: PublishedEpisode
    task: Task
    kernel: list[Recorded] = field(default_factory=list)
    replies: list[Reply] = field(default_factory=list)

    @property
    def swe(self) -> bool:
        return "swe" in self.episode.agent

    @property
    def budget(self) -> int:
        return REFERENCE_BUDGETS.get(self.episode.set, DEFAULT_BUDGET)


def agent_for(episode: PublishedEpisode) -> str:
    """Our agent of the episode's kind: `react-super`, `react` or `swe` (the run folder names
    it: react-super, react, swe-agent)."""
    kind = episode.agent.lower()
    if "swe" in kind:
        return "swe"
    if kind in ("react-super", "react"):
        return kind
    raise EpisodeFormatError(
        f"{episode.folder}: the run names the agent {episode.agent!r}, not react-super, react "
        "or swe-agent, the agents replay-run replays (<model>_<agent>_<set>, e.g. "
        "gpt-4o-2024-08-06_react-super_expert)"
    )


def episode_script(episode: PublishedEpisode) -> EpisodeScript:
    """The script of one published episode."""
    swe = "swe" in episode.agent
    prefix = [(i, s) for i, s in enumerate(episode.steps) if s.pre_executed]
    task = Task(
        id=episode.task_id,
        set=episode.set,
        query=episode.query,
        entrypoint=entrypoint_from_query(episode.query),
        pre_executed=tuple(
            c
            for c in (_prefix_cell(s, episode.edit_sources.get(i)) for i, s in prefix)
            if c is not None
        ),
        source=str(episode.folder),
    )
    script = EpisodeScript(episode=episode, task=task)
    chosen: list[tuple[int, Step]] = []
    for number, step in enumerate(episode.steps, start=1):
        if step.action in KERNEL_ACTIONS or _is_tool(step):
            script.kernel.append(
                Recorded(
                    number,
                    str(step.action),
                    step.content,
                    step.observation,
                    step.duration_s,
                    step.pre_executed,
                )
            )
        if not step.pre_executed and step.action != Action.LIMIT:
            chosen.append((number, step))
    texts = [(n, swe_reply(s) if swe else react_reply(s)) for n, s in chosen]
    usage = usage_plan(len(texts), script.budget, ends_by_budget=_ends_by_budget(episode))
    script.replies = [
        Reply(n, text, tokens, max(1, len(text) // 4))
        for (n, text), tokens in zip(texts, usage, strict=True)
    ]
    script.kernel = _with_planned_durations(script.kernel, [n for n, _ in chosen], episode)
    return script


def _with_planned_durations(
    kernel: list[Recorded], calls: list[int], episode: PublishedEpisode
) -> list[Recorded]:
    """`kernel` with the fractions of a second `compute_plan.planned_fractions` plans: `calls`
    are the notebook numbers of the steps the model chose (each made after the steps before)."""
    fractions = planned_fractions(
        [r.duration_s for r in kernel],
        [sum(r.step < call for r in kernel) for call in calls],
        REFERENCE_COMPUTE_S,
        ends_by_compute=exit_status_of(episode) == "compute_limit",
    )
    return [dataclasses.replace(r, fraction=f) for r, f in zip(kernel, fractions, strict=True)]


def _is_tool(step: Step) -> bool:
    return step.action not in KERNEL_ACTIONS and step.action not in (
        Action.SUBMIT,
        Action.FORMAT_ERROR,
        Action.LIMIT,
    )


def _prefix_cell(step: Step, source: str | None = None) -> Cell | None:
    """A pre-executed step as the task's prefix cell (its wait is the runner's own); `source`:
    an edit's text as the task gave it, if the notebook shows it."""
    if step.action == Action.EXECUTE:
        return Cell(kind="execute", code=step.content)
    if step.action == Action.EDIT:
        try:
            request = parse_edit(step.content)
        except EditFormatError:
            return None
        return Cell(
            kind="edit",
            file=request.file,
            before=request.before,
            after=request.after,
            source=source or step.content,
        )
    return None  # a wait after a cell that ran out of time: the runner takes it


def _ends_by_budget(episode: PublishedEpisode) -> bool:
    return exit_status_of(episode) == "budget_exceeded"


def usage_plan(calls: int, budget: int, *, ends_by_budget: bool) -> list[int]:
    """Prompt tokens for each of `calls` replies. The notebooks hold no token counts, so they are
    planned: for an episode the budget ended, the sum passes `budget` with the last reply (and not
    before), so the next call is refused as the reference refused it; otherwise it never passes
    it, and lands exactly on it before the last call (the reference refuses a call only above
    the budget: the boundary is tested in every such episode of two calls or more)."""
    if calls == 0:
        return []
    if ends_by_budget:
        each = math.ceil((budget + 1) / calls)
        return [each] * calls
    if calls == 1:
        return [budget // 2]
    each, left = divmod(budget, calls - 1)
    return [each + 1] * left + [each] * (calls - 1 - left) + [0]


# -- replies --------------------------------------------------------------------------------------


def react_reply(step: Step) -> str:
    """A ReAct-SUPER reply as the model wrote it, up to the stop string `</content>` (which the
    endpoint cuts, as the reference's model call did)."""
    if step.action == Action.FORMAT_ERROR:
        return _react_malformed(step)
    thought = f"Thought: {step.thought}\n"
    if step.action == Action.SUBMIT:
        return f"{thought}Action: submit\n<content>\n{step.content}\n</content>"
    return f"{thought}Action: {step.action}\n{_react_content(step.content)}"


def _react_content(content: str) -> str:
    """The content part: a reply whose content was cut right after `<content>` shows
    `<content>` as its content in the notebook, one without a tag shows nothing."""
    if content == "<content>":
        return "<content>"
    if content == "":
        return ""
    return f"<content>\n{content}\n</content>"


def _react_malformed(step: Step) -> str:
    """A reply the reference could not use. Its raw text is not in the notebook: the reference
    either named an action it did not know (`Invalid action type: X`, the name kept), submitted
    what is not JSON (the content kept), or found no `Thought:`/`Action:` at all."""
    if step.observation.startswith(INVALID_ACTION):
        name = step.observation[len(INVALID_ACTION) :].split("\n", 1)[0]
        return f"Thought: {step.thought}\nAction: {name}\n{_react_content(step.content)}"
    if step.observation == INVALID_SUBMISSION:
        return f"Thought: {step.thought}\nAction: submit\n{_react_content(step.content)}"
    return step.thought or "I will continue with the task."


def swe_reply(step: Step) -> str:
    """A SWE-agent reply: the discussion, then its one command in a ``` block (before the
    discussion's unclosed fence, if it has one: `_block_at`)."""
    if step.action == Action.SUBMIT:
        command = f"submit {step.content}"
    elif step.action == Action.FORMAT_ERROR:
        return step.thought or "I will continue with the task."
    else:
        command = step.content
    before, after = _block_at(step.thought)
    return f"DISCUSSION\n{before}```\n{command}\n```{after}"


#: a fence line of a discussion (an opening or closing ```)
_FENCE_LINE = re.compile(r"^[ \t]*```", re.M)


def _block_at(thought: str) -> tuple[str, str]:
    """Where the command block stood in the reply: SWE-agent's parser took the reply's last
    complete block as the command and the rest as the discussion, so text after the block that
    opens a fence it never closes (`\n```\n# a comment`) is in the discussion after it. Put back
    at the end, that fence would pair with the command block's opening one, and the last
    complete block would hold only the comment. The discussion is cut before its last fence line
    when its fence lines are odd in number. Returns the text before the block (ending in a line
    break) and after it (from the line break that followed it): SWE-agent's discussion is the two
    joined, so the line break that ended the text before and the one after the block both show."""
    fences = list(_FENCE_LINE.finditer(thought))
    if len(fences) % 2 == 0:
        return f"{thought}\n\n", ""
    at = fences[-1].start()
    before = thought[:at]
    return before[:-1] if before.endswith("\n\n") else before, "\n" + thought[at:]


__all__ = [
    "EpisodeScript",
    "Recorded",
    "Reply",
    "REFERENCE_CWD",
    "agent_for",
    "directory_after",
    "episode_script",
    "open_file_after",
    "usage_plan",
]
