"""A published episode replayed under a run's step limit (`pytest-super replay-run --steps N`).

The reference's runner asks its agent for at most `max_iterations` actions (run_on_benchmark.py:
`for i in range(max_iterations)`), a malformed reply counting as one (the runs' agent made it a
step): under a limit of N, an episode of more model calls ends after its N-th step, which is
carried out, with no submission. `at_step_limit` gives the episode as it then ends: its first N
chosen steps (the pre-executed ones before them kept), then the limit; the replies, the kernel's
recorded steps and the reference's requests cut to match; `submitted` 0 (the scores that need
the rest of the episode dropped). The published runs used the reference's 100, which none of
their episodes reaches (the longest has 73 model calls): a smaller limit is how the step-limit
check is tested on them (tests/test_replay_mutations.py).
"""

from __future__ import annotations

import dataclasses

from pytest_super.replay.expected import Request
from pytest_super.replay.script import EpisodeScript
from pytest_super.trajectory import Action, Step

#: the content of the step that ends a cut episode (published_runs.exit_status_of reads it)
STEP_LIMIT_NOTE = "step limit of {steps} steps reached"


def at_step_limit(script: EpisodeScript, steps: int) -> EpisodeScript | None:
    """The episode of `script` as it ends under a limit of `steps` model calls; None: its calls
    fit within it (the episode is as recorded)."""
    episode = script.episode
    chosen = [
        number
        for number, step in enumerate(episode.steps, start=1)
        if not step.pre_executed and step.action != Action.LIMIT
    ]
    if len(chosen) <= steps:
        return None
    last = chosen[steps - 1] if steps > 0 else 0  # the notebook number of the last step kept
    kept = [s for n, s in enumerate(episode.steps, start=1) if n <= last or s.pre_executed]
    limit = Step(thought="", action=Action.LIMIT, content=STEP_LIMIT_NOTE.format(steps=steps))
    cut = dataclasses.replace(episode, steps=[*kept, limit], metrics={"submitted": 0})
    return EpisodeScript(
        episode=cut,
        task=script.task,
        kernel=[r for r in script.kernel if r.step <= last or r.pre_executed],
        replies=[r for r in script.replies if r.step <= last],
    )


def expected_at_step_limit(expected: list[Request] | None, steps: int) -> list[Request] | None:
    """The reference agent's requests under a limit of `steps` model calls: the first `steps`."""
    return None if expected is None else expected[:steps]
