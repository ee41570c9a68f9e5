"""The order tasks start in (issue 33): longest first from known durations, or collection order.

With slots that free one after another (xdist's `load` and `worksteal`, the Ray executor, a
simulated cluster), the order the items are handed out in is the order they start in; a long task
listed last sets the wall time. Longest first (LPT list scheduling) starts it at once.

Pure functions on ids and durations: the pytest glue (plugin.py), the Ray executor and
benchmarks/bench_cluster_sim.py all use these, so the simulation schedules what the run does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")

LONGEST = "longest"
COLLECTION = "collection"
ORDERS = (LONGEST, COLLECTION)


def longest_first(items: Sequence[T], duration: Callable[[T], float | None]) -> list[T]:
    """`items` longest first; an item of unknown duration (None) goes before every known one
    (it might be long); equals keep their collection order (the sort is stable)."""

    def key(item: T) -> tuple[int, float]:
        seconds = duration(item)
        return (0, 0.0) if seconds is None else (1, -seconds)

    return sorted(items, key=key)


def in_order(items: Sequence[T], duration: Callable[[T], float | None], order: str) -> list[T]:
    """`items` in `order`: "longest" (longest_first) or "collection" (as given)."""
    if order == LONGEST:
        return longest_first(items, duration)
    if order == COLLECTION:
        return list(items)
    raise ValueError(f"unknown order {order!r}; use one of {', '.join(ORDERS)}")


def first_blocks(count: int, workers: int, dist: str, maxschedchunk: int | None) -> list[int]:
    """The sizes of the runs of consecutive items pytest-xdist first hands each of `workers` workers
    (its schedulers, xdist 3.x): `worksteal` splits all `count` items into one run per worker;
    `load` sends each a chunk of max(2, min(count // workers // 4, --maxschedchunk)), or deals
    one item at a time round robin below two items a worker. Other modes: none (a run per item)."""
    if workers < 2 or count == 0:
        return []
    if dist == "worksteal":
        sizes, left = [], count
        for i in range(workers):
            sizes.append(left // (workers - i))
            left -= sizes[-1]
        return sizes
    if dist == "load" and count >= 2 * workers:
        chunk = max(
            2, min(count // workers // 4, count if maxschedchunk is None else maxschedchunk)
        )
        return [chunk] * workers
    return []


def dealt(ordered: Sequence[T], sizes: Sequence[int]) -> list[T]:
    """`ordered` (longest first) dealt round robin into runs of `sizes` (the workers' first runs:
    the k-th longest task heads worker k's run), the rest after them in order. So under xdist
    the W longest tasks start first, one per worker, not one after another on worker 0."""
    runs: list[list[T]] = [[] for _ in sizes]
    rest = list(ordered[sum(sizes) :])
    open_runs = [i for i, size in enumerate(sizes) if size > 0]
    for item in ordered[: sum(sizes)]:
        i = open_runs.pop(0)
        runs[i].append(item)
        if len(runs[i]) < sizes[i]:
            open_runs.append(i)
    return [item for run in runs for item in run] + rest


def for_xdist(
    ordered: Sequence[T], workers: int, dist: str, maxschedchunk: int | None = None
) -> list[T]:
    """The collection order that makes xdist's `dist` scheduler start `ordered` longest first."""
    return dealt(ordered, first_blocks(len(ordered), workers, dist, maxschedchunk))


def choose_order(requested: str | None, *, any_known: bool, one_process: bool) -> str:
    """The order a run uses: the one asked for; else longest when any duration is known and the
    run hands tasks to several slots (xdist, Ray), collection order otherwise (a run on one
    process ends at the same time in any order, so its order is left alone)."""
    if requested is not None:
        if requested not in ORDERS:
            raise ValueError(f"unknown order {requested!r}; use one of {', '.join(ORDERS)}")
        return requested
    return LONGEST if any_known and not one_process else COLLECTION
