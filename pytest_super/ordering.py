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


def choose_order(requested: str | None, *, any_known: bool, one_process: bool) -> str:
    """The order a run uses: the one asked for; else longest when any duration is known and the
    run hands tasks to several slots (xdist, Ray), collection order otherwise (a run on one
    process ends at the same time in any order, so its order is left alone)."""
    if requested is not None:
        if requested not in ORDERS:
            raise ValueError(f"unknown order {requested!r}; use one of {', '.join(ORDERS)}")
        return requested
    return LONGEST if any_known and not one_process else COLLECTION
