"""The longest deadline a timer takes, and deadlines computed from limits clamped to it (a
foundation: the environment, the runner and the pytest-timeout glue all clamp the same way)."""

from __future__ import annotations

import math
import threading

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
