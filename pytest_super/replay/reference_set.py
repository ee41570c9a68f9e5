"""The reference agent's requests for the prompt set a user runs: `--prompts reference`.

The expected requests (`expected.read_expected`) are what SUPER's agent sent in the published
runs, which used a later revision of its prompt.yaml and agent than the pinned commit
(docs/fidelity.md, "The paper's agent in one word"). `--super-prompts reference` runs the pinned
ones, so replay-run, given that set, expects the requests SUPER's agent sends with them: each
expected request with

- the system message its `_get_system_prompt` builds from the pinned prompt.yaml (the file's
  `system_prompt` with `{{commands}}` and `{{edit_demonstration}}` replaced), assembled here from
  the file's fields, not by the agent's code under test;
- the runs' format-error correction, wherever the history shows it, replaced by the pinned
  agent's (`PromptSet.protocol["format_error"]`, read from its agent.py).

Everything else (the history's layout, truncation, the notes the pinned code shares with the
runs) is compared as the runs recorded it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

from pytest_super.prompts import PromptSet
from pytest_super.published_runs import PublishedEpisode
from pytest_super.replay.expected import Request
from pytest_super.replay.script import INVALID_ACTION, INVALID_SUBMISSION
from pytest_super.trajectory import Action


def reference_system(fields: Mapping[str, str]) -> str:
    """The system message SUPER's agent builds from its prompt.yaml's fields."""
    text = fields["system_prompt"].replace("{{commands}}", fields["commands"])
    return text.replace("{{edit_demonstration}}", fields["edit_demonstration"])


def runs_format_error(episode: PublishedEpisode) -> str | None:
    """The correction the published episode shows for a reply its agent could not read."""
    return next(
        (
            s.observation
            for s in episode.steps
            if s.action == Action.FORMAT_ERROR
            and not s.observation.startswith(INVALID_ACTION)
            and s.observation != INVALID_SUBMISSION
        ),
        None,
    )


def for_prompt_set(
    expected: list[Request] | None, prompts: PromptSet | None, episode: PublishedEpisode
) -> list[Request] | None:
    """`expected` as SUPER's agent sends it with `prompts` when that set is the pinned reference
    (`PromptSet.pinned`); otherwise unchanged."""
    if expected is None or prompts is None or prompts.pinned is None:
        return expected
    if prompts.reference is None or prompts.protocol is None:
        return expected
    system = reference_system(prompts.reference)
    theirs, pinned = runs_format_error(episode), prompts.protocol["format_error"]
    translated = []
    for request in expected:
        messages = [dict(m) for m in cast("list[dict[str, str]]", request["messages"])]
        if messages and messages[0].get("role") == "system":
            messages[0]["content"] = system
        if theirs:
            for message in messages[2:]:
                message["content"] = message["content"].replace(theirs, pinned)
        translated.append({**request, "messages": messages})
    return translated
