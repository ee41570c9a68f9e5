"""Statistics of a run: means with 95% bootstrap intervals, pass@k and pass^k.

The unit is the task. A group's mean is the mean over its tasks of each task's mean over its
repeats (`--super-repeat N`), so a task run five times weighs as much as a task run once.

- Interval: percentile bootstrap with `BOOTSTRAP_RESAMPLES` resamples from a generator seeded with
  `BOOTSTRAP_SEED`, so the same results always give the same interval. Each resample draws the
  tasks with replacement and, when tasks have several repeats, then draws each drawn task's repeats
  with replacement (a two-level bootstrap: tasks vary, and so do runs of one task). The interval
  is the 2.5th and 97.5th percentile of the resampled means (`percentile_interval`).
- pass@k: the chance that at least one of k runs of a task passes; pass^k: the chance that all k
  pass. Both use the unbiased estimators from n >= k runs with c passes, 1 - C(n-c, k) / C(n, k)
  (Chen et al. 2021, "Evaluating Large Language Models Trained on Code") and C(c, k) / C(n, k)
  (Yao et al. 2024, "tau-bench"), averaged over the tasks.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

#: Resamples per interval. 2000 puts the 2.5% tail on 50 resamples, enough for the percentile to
#: be stable to about a percentage point on SUPER-sized groups (10-150 tasks), and a 150-task
#: group takes about 0.3 s in pure Python here.
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20240901
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Estimate:
    """A mean with its 95% interval (`low` == `high` == `mean` when nothing varies)."""

    mean: float
    low: float
    high: float


def task_means(values: Sequence[Sequence[float]]) -> list[float]:
    """Each task's mean over its repeats (tasks without values are left out)."""
    return [sum(v) / len(v) for v in values if v]


def percentile_interval(
    samples: Sequence[float], confidence: float = CONFIDENCE
) -> tuple[float, float]:
    """The central `confidence` interval of `samples` by the nearest-rank percentile method:
    with B sorted samples, the (floor(B*a)+1)-th and ceil(B*(1-a))-th, a = (1-confidence)/2."""
    ordered = sorted(samples)
    tail = (1.0 - confidence) / 2.0
    low_index = math.floor(len(ordered) * tail)
    high_index = math.ceil(len(ordered) * (1.0 - tail)) - 1
    return ordered[low_index], ordered[high_index]


def bootstrap_mean(
    values: Sequence[Sequence[float]],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> Estimate | None:
    """The mean over tasks of per-task means, with a 95% bootstrap interval.

    `values[i]` holds task i's scores, one per repeat. None when no task has a value.
    """
    tasks = [list(v) for v in values if v]
    if not tasks:
        return None
    mean = sum(task_means(tasks)) / len(tasks)
    rng = random.Random(seed)
    n = len(tasks)
    means = []
    for _ in range(resamples):
        total = 0.0
        for _ in range(n):
            runs = tasks[rng.randrange(n)]
            if len(runs) == 1:
                total += runs[0]
            else:
                total += sum(runs[rng.randrange(len(runs))] for _ in runs) / len(runs)
        means.append(total / n)
    low, high = percentile_interval(means)
    return Estimate(mean=mean, low=low, high=high)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased chance that at least one of k runs passes, from n runs with c passes."""
    _check_counts(n, c, k)
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Unbiased chance that all of k runs pass (pass^k), from n runs with c passes."""
    _check_counts(n, c, k)
    return math.comb(c, k) / math.comb(n, k)


def _check_counts(n: int, c: int, k: int) -> None:
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")


def mean_pass_at_k(outcomes: Sequence[Sequence[bool]], k: int) -> float | None:
    """pass@k averaged over tasks; `outcomes[i]` holds task i's passes, one per repeat. Tasks with
    fewer than k runs are left out (None when none has k)."""
    counts = [(len(o), sum(o)) for o in outcomes if len(o) >= k]
    if not counts:
        return None
    return sum(pass_at_k(n, c, k) for n, c in counts) / len(counts)


def mean_pass_hat_k(outcomes: Sequence[Sequence[bool]], k: int) -> float | None:
    """pass^k averaged over tasks with at least k runs (None when none has k)."""
    counts = [(len(o), sum(o)) for o in outcomes if len(o) >= k]
    if not counts:
        return None
    return sum(pass_hat_k(n, c, k) for n, c in counts) / len(counts)
