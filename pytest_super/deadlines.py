"""The longest deadline a timer takes, deadlines computed from limits clamped to it (a
foundation: the environment, the runner and the pytest-timeout glue all clamp the same way), and
the one timer that enforces a task's deadline everywhere: `enforce` below pytest (a Ray node's
task, `run_record.run_tasks`), and under pytest the same `Alarm` started and cancelled through
pytest-timeout's documented hooks (timeouts.py's `TaskTimer`)."""

from __future__ import annotations

import contextlib
import math
import signal
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType
from typing import TypeAlias

#: the longest deadline handed to a timer: one year, and never more than `threading.TIMEOUT_MAX`
#: (pytest-timeout's thread method, a kernel's waits; 49 days on Windows). `signal.setitimer`
#: (its signal method) overflows from 1e10 s: a deadline above it was an INTERNALERROR.
MAX_TIMER_S: float = min(365 * 24 * 3600.0, threading.TIMEOUT_MAX)

#: what `signal.signal` returns and takes: a handler, SIG_DFL/SIG_IGN, or None
SignalHandler: TypeAlias = (
    "signal.Handlers | int | Callable[[int, FrameType | None], object] | None"
)


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


class Alarm:
    """A deadline on SIGALRM and the real-time timer, as pytest-timeout's signal method keeps one:
    `start()` makes `expired(seconds)` raised in the main thread `seconds` from now, whatever it
    waits in; `cancel()` turns it off and puts the earlier SIGALRM handler back. On the main
    thread only (a signal is handled there): elsewhere, and without seconds, it does nothing."""

    def __init__(
        self, seconds: float | None, expired: Callable[[float], BaseException] = DeadlineExpired
    ) -> None:
        self.seconds = timer_seconds(seconds) if seconds and seconds > 0 else 0.0
        self._expired = expired
        self._previous: SignalHandler = None
        self._running = False

    def start(self) -> bool:
        """Whether the alarm was set (False off the main thread or without seconds)."""
        if not self.seconds or threading.current_thread() is not threading.main_thread():
            return False

        def expire(signum: int, frame: FrameType | None) -> None:
            raise self._expired(self.seconds)

        self._previous = signal.signal(signal.SIGALRM, expire)
        signal.setitimer(signal.ITIMER_REAL, self.seconds)
        self._running = True
        return True

    def cancel(self) -> None:
        if not self._running:
            return
        self._running = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, self._previous)


@contextlib.contextmanager
def enforce(seconds: float | None) -> Iterator[None]:
    """Raise `DeadlineExpired` in this thread `seconds` from now (None or 0: no deadline), the
    deadline of a task below pytest (an `Alarm`, as under pytest): it reaches into any wait of
    Python's. On the main thread only (a signal is handled there): elsewhere the block runs
    without one. Inside a block with an earlier deadline, the earlier one holds; the outer timer
    goes on afterwards with what was left of it."""
    alarm = Alarm(seconds)
    if not alarm.seconds or threading.current_thread() is not threading.main_thread():
        yield
        return
    left, _ = signal.getitimer(signal.ITIMER_REAL)
    if left and left <= alarm.seconds:  # an outer deadline comes first: it holds
        yield
        return
    started = time.monotonic()
    alarm.start()
    try:
        yield
    finally:
        alarm.cancel()
        if left:  # the outer deadline, with what was left of it
            signal.setitimer(signal.ITIMER_REAL, max(left - (time.monotonic() - started), 1e-3))
