"""The history as SUPER's own ReAct agent shows it, for the ReAct agents run with its prompt.yaml.

With the reference's prompts (`PromptSet.reference`), what the model is shown of its past follows
the reference's agent rather than ours, so a real model sees the paper's requests:

- each reply as the reference reads it (`reference_view`): the text stripped, the thought all
  that follows `Thought: ` before the first `Action: ` (its line breaks kept), the action name the
  rest of that line, the content the lines after it without the `<content>` tags (a
  `continue_wait` cut after `<content>` shows `<content>`), a submission as the Python text of
  the JSON it parsed;
- a reply it cannot read shows an empty thought and action with the correction as its
  observation; a reply naming an action it does not know shows its thought, that name and its
  content, observed as the unknown-action note; a submission that is not JSON shows as a step of
  the reference's own action name for it, content kept;
- a cell still running after its timeout is observed as its output followed by the still-running
  note, an `interrupt` as the interrupt note, a `continue_wait` with no cell running as what the
  kernel answered; the automatic interrupt before the next action is not shown (the reference
  interrupts silently).

The words come from the set's protocol strings (`PromptSet.protocol`, a protocol.yaml beside the
prompt.yaml); without them our notes stand in.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from pytest_super.agents.cleaning import clean_observation
from pytest_super.kernels.base import CellResult
from pytest_super.trajectory import Action

_THOUGHT = "Thought: "
_ACTION = "Action: "


@dataclass(frozen=True)
class View:
    """A reply as the reference's agent reads it."""

    thought: str
    action: str
    content: str


def reference_view(text: str, protocol: Mapping[str, str] | None = None) -> View | None:
    """How the reference's agent reads a reply (see the module docstring); None: it cannot. A
    submission that is not JSON is, with `protocol`, a step of its own action name, content kept."""
    parts = text.strip().split(_ACTION)
    if len(parts) < 2:
        return None
    thought_part = parts[0].strip()
    if _THOUGHT not in thought_part:
        return None
    lines = parts[1].strip().split("\n")
    name = lines[0].strip()
    content = "\n".join(lines[1:]).removeprefix("<content>\n").removesuffix("\n</content>")
    if name == Action.SUBMIT:
        try:
            content = str(json.loads(content))
        except ValueError:
            if protocol is None or "invalid_submission_action" not in protocol:
                return None  # the pinned agent's parser refuses it: a format error
            name = protocol["invalid_submission_action"]
    return View(thought_part[len(_THOUGHT) :], name, content)


def cell_observation(
    result: CellResult,
    action: Action | str,
    protocol: Mapping[str, str] | None,
    *,
    cell_timeout_s: float,
) -> str | None:
    """What the reference's agent is shown of a cell, a wait or an interrupt; None: no protocol
    strings, our notes stand in."""
    if protocol is None:
        return None
    if action == Action.INTERRUPT:
        return protocol["interrupted"]
    output = result.output
    if result.status == "timeout" and result.still_running:
        output += protocol["timeout"].replace("{seconds}", f"{cell_timeout_s:g}")
    return clean_observation(output)


def unknown_action_observation(name: str, protocol: Mapping[str, str] | None) -> str | None:
    """What the reference shows for a reply naming `name`, an action it does not take."""
    if protocol is None:
        return None
    if name == protocol.get("invalid_submission_action"):
        return protocol["invalid_submission"]
    return protocol["invalid_action"] + name
