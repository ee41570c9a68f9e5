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


DEVIATIONS: tuple[Deviation, ...] = (
    Deviation(
        name="wait-without-running-cell",
        cause=(
            "the reference's kernel client returned a cell's output after 153 s although the "
            "cell went on running (a message it took for the end), so the model's next "
            "`continue_wait` waited on it; our cell had finished as recorded, and our ReAct "
            "agent takes `continue_wait` only while a cell runs: a format error"
        ),
        run="gpt-4o-2024-08-06_react-super_masked",
        episodes=("colbert_data",),
    ),
)


def documented_for(run: str, task_id: str) -> list[str]:
    """The names of the deviations documented for episode `task_id` of `run`."""
    return [d.name for d in DEVIATIONS if d.run == run and task_id in d.episodes]


def documented_table() -> list[tuple[str, str, str]]:
    """(name, run, episodes joined by ", ") per deviation: the rows docs/fidelity.md shows."""
    return [(d.name, d.run, ", ".join(d.episodes)) for d in DEVIATIONS]
