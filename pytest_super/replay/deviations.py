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


#: none at present: every shipped episode replays identically
DEVIATIONS: tuple[Deviation, ...] = ()


def documented_for(run: str, task_id: str) -> list[str]:
    """The names of the deviations documented for episode `task_id` of `run`."""
    return [d.name for d in DEVIATIONS if d.run == run and task_id in d.episodes]


def documented_table() -> list[tuple[str, str, str]]:
    """(name, run, episodes joined by ", ") per deviation: the rows docs/fidelity.md shows."""
    return [(d.name, d.run, ", ".join(d.episodes)) for d in DEVIATIONS]
