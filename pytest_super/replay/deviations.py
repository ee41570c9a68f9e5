"""The documented deviations of the closed-loop replay: where our agents knowingly act otherwise
than the reference did in a published episode, each with its cause and the episodes it touches.

docs/fidelity.md ("Closed-loop replay") shows the same table; tests/test_replay_run.py checks that
the two agree and that the shipped runs differ only where this table says.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Deviation:
    name: str
    cause: str
    run: str  # the published run folder's name
    episodes: tuple[str, ...]  # task ids
    #: True: only when replayed with the reference's own files (`--prompts reference`)
    pinned: bool = False


#: every shipped episode replays identically with the runs' prompts; with the reference's own
#: files at the pinned commit (`--prompts reference`), one episode differs, for the cause given
DEVIATIONS: tuple[Deviation, ...] = (
    Deviation(
        "pinned-invalid-submission",
        "the published runs' agent recorded a submission that is not JSON as a step of its own "
        "(`submit_invalid_json`, observed as `Invalid json format for submission.`); the agent "
        "at the pinned commit has no such step: its parser refuses the submission, a format "
        "error, which is what our agent shows with `--prompts reference`",
        "gpt-4o-2024-08-06_react-super_masked",
        ("safetybench_configuration,cpu",),
        pinned=True,
    ),
)


def documented_for(run: str, task_id: str, *, pinned: bool = False) -> list[str]:
    """The names of the deviations documented for episode `task_id` of `run`, replayed with the
    reference's own files (`pinned`) or not."""
    return [
        d.name
        for d in DEVIATIONS
        if d.run == run and task_id in d.episodes and (not d.pinned or pinned)
    ]


def documented_table() -> list[tuple[str, str, str]]:
    """(name, run, episodes joined by ", ") per deviation: the rows docs/fidelity.md shows."""
    return [(d.name, d.run, ", ".join(d.episodes)) for d in DEVIATIONS]
