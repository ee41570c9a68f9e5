"""The longest deadline a timer takes, deadlines computed from limits clamped to it (a
foundation: the environment, the runner and the pytest-timeout glue all clamp the same way), and
the one mechanism that enforces a task's deadline below pytest (`enforce`: a Ray node's task,
`run_record.run_tasks`); under pytest, pytest-timeout enforces it."""

from __future__ import annotations

import contextlib
import math
import signal
import threading
import time
from collections.abc import Iterator
from types import FrameType

#: the longest deadline handed to a timer: one year, and never more than `threading.TIMEOUT_MAX`
#: (pytest-timeout's thread method, a kernel's waits; 49 days on Windows). `signal.setitimer`
#: (its signal method) overflows from 1e10 s: a deadline above it was an INTERNALERROR.
MAX_TIMER_S: float = min(365 * 24 * 3600.0, threading.TIMEOUT_MAX)


def timer_seconds(seconds: float) -> float:
    """A deadline computed from limits (a task's compute limit plus margins, a cell's timeout)
    as every timer takes it: at most MAX_TIMER_S (NaN or infinity too), never below 0."""
    if math.isnan(seconds) or seconds > MAX_TIMER_S:
        return MAX_TIMER_S
    return max(seconds, 0.0)


class DeadlineExpired(BaseException):  # noqa: N818 - like KeyboardInterrupt, it is not an error
    """A deadline `enforce` keeps passed. A BaseException, so nothing in the episode mistakes it
    for the agent's or the harness's error on its way out."""

    def __init__(self, seconds: float) -> None:
        super().__init__(seconds)
        self.seconds = seconds


@contextlib.contextmanager
def enforce(seconds: float | None) -> Iterator[None]:
    """Raise `DeadlineExpired` in this thread `seconds` from now (None or 0: no deadline), the
    one deadline mechanism below pytest (pytest-timeout keeps pytest's): the real-time timer
    and SIGALRM, as pytest-timeout's signal method does, so it reaches into any wait of Python's.
    On the main thread only (a signal is handled there): elsewhere the block runs without one.
    Inside a block with an earlier deadline, the earlier one holds; the outer timer goes on
    afterwards with what was left of it."""
    if not seconds or seconds <= 0 or threading.current_thread() is not threading.main_thread():
        yield
        return
    seconds = timer_seconds(seconds)
    left, _ = signal.getitimer(signal.ITIMER_REAL)
    if left and left <= seconds:  # an outer deadline comes first: it holds
        yield
        return

    def expire(signum: int, frame: FrameType | None) -> None:
        raise DeadlineExpired(seconds)

    started = time.monotonic()
    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if left:  # the outer deadline, with what was left of it
            signal.setitimer(signal.ITIMER_REAL, max(left - (time.monotonic() - started), 1e-3))
