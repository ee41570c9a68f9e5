"""Do our ReAct-SUPER's requests open as the paper's did? (`replay-run --check-prompts`)

Each ReAct-SUPER notebook of a published run carries the prompt its agent sent: a `### Prompt`
cell holding, as Python's repr of a list, the messages of the reference's request before the
history (its system prompt with the demonstrations, then `Query: <the task's query>`).
`check_run_prompts` builds the first request of our ReAct-SUPER for each such episode with the
agent's own message-building code (`ReActAgent.prompt_messages`, the prompt set of `--super-prompts`,
the task's query, the reference's 300 s cell timeout) and compares the two message by message.
Nothing is sent anywhere. Episodes of other agents carry prompts SUPER's prompt.yaml does not
hold (the SWE-agent's): they are not checked (`checks_prompts`).
"""

from __future__ import annotations

import ast
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import cast

from pytest_super.agents.react import ReActSuperAgent
from pytest_super.environment import EpisodeLimits
from pytest_super.prompts import PromptSet, load_prompts
from pytest_super.published_runs import parse_run_name, read_episode

PROMPT_HEADING = "### Prompt"
#: the agent whose published notebooks carry a prompt SUPER's prompt.yaml makes
CHECKED_AGENT = "react-super"
#: characters of each side shown around the first difference
SHOWN = 60


def checks_prompts(run_dir: Path) -> bool:
    """Whether `check_run_prompts` checks the episodes of this run (a ReAct-SUPER run)."""
    return parse_run_name(Path(run_dir).name)[1] == CHECKED_AGENT


def check_run_prompts(run_dir: Path, prompts: Path) -> list[str]:
    """One line per difference between the first request our ReAct-SUPER sends with `prompts`
    (SUPER's prompt.yaml, or a folder of templates) and each episode's recorded `### Prompt`;
    empty: every ReAct-SUPER episode of `run_dir` identical (a run of another agent: nothing to
    check, see `checks_prompts`). A bad prompt file raises `PromptFileError`."""
    run_dir = Path(run_dir)
    if not checks_prompts(run_dir):
        return []
    prompt_set = load_prompts(prompts)
    model, agent, set_name = parse_run_name(run_dir.name)
    lines: list[str] = []
    for notebook in sorted(run_dir.glob("*/history.ipynb")):
        task_id = notebook.parent.name
        try:
            recorded = recorded_prompt(notebook)
        except ValueError as exc:
            lines.append(f"{task_id}: {exc}")
            continue
        query = read_episode(notebook.parent, model=model, agent=agent, set_name=set_name).query
        ours = first_request(prompt_set, query)
        lines += [f"{task_id}: {line}" for line in compare_messages(ours, recorded)]
    return lines


def check_sent_prompts(
    run_dir: Path, episodes: Iterable[tuple[str, list[dict[str, object]]]], prompts: PromptSet
) -> list[str]:
    """`replay-run --check-prompts`: every request our agent sent in each replayed episode
    (`episodes`: task id and requests) must open with the episode's recorded `### Prompt`, the
    system message being the pinned prompt.yaml's when `prompts` is the reference's own
    (`replay.reference_set`). One line per episode that differs: its first differing request and
    message, and how many of its requests differ."""
    from pytest_super.replay.reference_set import reference_system

    run_dir = Path(run_dir)
    if not checks_prompts(run_dir):
        return []
    lines: list[str] = []
    for task_id, requests in episodes:
        try:
            recorded = recorded_prompt(run_dir / task_id / "history.ipynb")
        except ValueError as exc:
            lines.append(f"{task_id}: {exc}")
            continue
        if prompts.pinned is not None and prompts.reference is not None and recorded:
            recorded[0] = {
                "role": recorded[0]["role"],
                "content": reference_system(prompts.reference),
            }
        differing = [
            (turn, found)
            for turn, request in enumerate(requests, start=1)
            if (
                found := compare_messages(
                    list(cast("list[dict[str, str]]", request["messages"]))[: len(recorded)],
                    recorded,
                )
            )
        ]
        if not requests:
            lines.append(f"{task_id}: no request was sent")
        elif differing:
            turn, found = differing[0]
            lines.append(
                f"{task_id}: request {turn}: {found[0]} ({len(differing)} of {len(requests)} "
                "requests differ)"
            )
    return lines


def first_request(prompts: PromptSet, query: str) -> list[dict[str, str]]:
    """The messages before the history of our ReAct-SUPER's first request for `query`."""
    timeout = EpisodeLimits().cell_timeout_s  # the reference's 300 s
    return ReActSuperAgent().prompt_messages(prompts, query, timeout)


def recorded_prompt(notebook: Path) -> list[dict[str, str]]:
    """The messages of the `### Prompt` cell of a published notebook (ValueError: none, or not
    a list of role/content messages)."""
    try:
        cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{notebook} is not a readable notebook ({exc})") from None
    for cell in cells:
        source = cell.get("source", "")
        text = "".join(source) if isinstance(source, list) else str(source)
        if cell.get("cell_type") == "markdown" and text.startswith(PROMPT_HEADING):
            return _messages_of(text)
    raise ValueError(f"no `{PROMPT_HEADING}` cell in history.ipynb")


def _messages_of(text: str) -> list[dict[str, str]]:
    body = text[len(PROMPT_HEADING) :].strip()
    body = body.removeprefix("<details>").removesuffix("</details>").strip()
    try:
        value: object = ast.literal_eval(body)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        raise ValueError(f"the `{PROMPT_HEADING}` cell is not a list of messages") from None
    if not isinstance(value, list) or not all(
        isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
        for m in value
    ):
        raise ValueError(f"the `{PROMPT_HEADING}` cell is not a list of role/content messages")
    return [{"role": m["role"], "content": m["content"]} for m in value]


def compare_messages(ours: list[dict[str, str]], published: list[dict[str, str]]) -> list[str]:
    """`message i (role): ...` for each message that differs, and a count that does."""
    lines = []
    if len(ours) != len(published):
        lines.append(f"ours has {len(ours)} messages, published {len(published)}")
    for i, (mine, theirs) in enumerate(zip(ours, published, strict=False), start=1):
        if mine["role"] != theirs["role"]:
            lines.append(f"message {i}: role ours {mine['role']}, published {theirs['role']}")
        elif mine["content"] != theirs["content"]:
            lines.append(f"message {i} ({mine['role']}): {_first_difference(mine, theirs)}")
    return lines


def _first_difference(mine: dict[str, str], theirs: dict[str, str]) -> str:
    a, b = mine["content"], theirs["content"]
    at = len(os.path.commonprefix([a, b]))
    line = a.count("\n", 0, at) + 1
    return (
        f"differs at character {at} (line {line}): ours {a[at : at + SHOWN]!r}, "
        f"published {b[at : at + SHOWN]!r}"
    )
