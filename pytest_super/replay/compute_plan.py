"""The durations the replay kernel reports, planned so the compute limit falls where it fell.

The notebooks write each step's duration cut to whole seconds ("(duration: 4 seconds)"): a step
took between that and one second more. The replay kernel reports the recorded duration plus a
fraction of a second (`Recorded.fraction`), the middle of the cut second (`TRUNCATED_SECOND`)
unless that would move the compute limit: the reference checked the compute time before each
model call (`sum > limit` ends the episode), so

- in an episode the compute limit ended, the time before its last refused call is above the
  limit, and the time before each call it made is not;
- in any other episode, the time before each call is not above it.

Where the middle of each second breaks one of these (a compute-limit episode whose cut durations
sum to just under the limit, so our agent would ask for a reply the episode never received),
`planned_fractions` moves the fractions within their second: raised from the last step back for
the end, lowered from the first step on for the calls made. Where no fractions can satisfy both,
the middle stays and the replay shows the difference. Like the planned token usage
(`script.usage_plan`), this is how the recording is completed, not how our agent is judged: the
limit check itself is our agent's (`Environment.check_compute`).
"""

from __future__ import annotations

from collections.abc import Sequence

#: the fraction of a second a recorded duration is taken to have lost, by default
TRUNCATED_SECOND = 0.5
#: the largest fraction: just under the next whole second
MAX_FRACTION = 0.999


def planned_fractions(
    durations: Sequence[float],
    checks: Sequence[int],
    limit: float,
    *,
    ends_by_compute: bool,
) -> list[float]:
    """The fraction to add to each of `durations` (the kernel's recorded steps, in order).
    `checks`: for each model call the episode made, how many of those steps came before it;
    `ends_by_compute`: the episode ended by the compute limit after all of them."""
    fractions = [TRUNCATED_SECOND] * len(durations)
    if not _fit_calls(durations, fractions, checks, limit):
        return [TRUNCATED_SECOND] * len(durations)
    if ends_by_compute and not _total(durations, fractions, len(durations)) > limit:
        for i in reversed(range(len(durations))):
            room = min(
                (limit - _total(durations, fractions, c) for c in checks if c > i),
                default=MAX_FRACTION,
            )
            fractions[i] = max(fractions[i], min(MAX_FRACTION, fractions[i] + room))
            if _total(durations, fractions, len(durations)) > limit:
                break
        else:
            return [TRUNCATED_SECOND] * len(durations)  # cannot: the replay shows it
    return fractions


def _fit_calls(
    durations: Sequence[float], fractions: list[float], checks: Sequence[int], limit: float
) -> bool:
    """Lower fractions from the first step on until no call the episode made is refused."""
    for i in range(len(durations)):
        if all(_total(durations, fractions, c) <= limit for c in checks):
            return True
        fractions[i] = 0.0
    return all(_total(durations, fractions, c) <= limit for c in checks)


def _total(durations: Sequence[float], fractions: Sequence[float], count: int) -> float:
    """The compute time of the first `count` steps."""
    return sum(durations[:count]) + sum(fractions[:count])
