"""SIGTERM ends a run the way Ctrl-C does.

A CI cancel, `timeout` or `kill` sends SIGTERM, whose default action ends the process at once: no
JUnit file, no summary, containers and key folders left. With a run going (`--super-agent`), the
controller and each xdist worker turn the first SIGTERM into KeyboardInterrupt, so pytest's own
interrupt path runs: tasks' fixtures remove their containers, reports are written. Later SIGTERMs
are ignored while that clean-up runs (SIGKILL stays the hard stop), and so is one that arrives once
the session is finishing (`ignore_while_finishing`): the tasks are done, and an interrupt inside
the writing of the reports would only lose them. A handler someone else installed is left alone.

`finish_worker_reports`: an interrupted xdist controller stops reading its workers' events at
once; tasks a worker finished just before or after the signal would be lost. It reads what the
workers still send, for a short grace, before the reports are written.
"""

from __future__ import annotations

import queue
import signal
import threading
import time
from types import FrameType
from typing import Any

import pytest

_PREVIOUS = pytest.StashKey[Any]()
#: seconds an interrupted controller keeps reading its workers' events: a worker's interrupted
#: task removes its container (measured 0.3-1.5 s on the test engine) before it reports and exits
WORKER_GRACE_S = 8.0


def stop_on_sigterm(config: pytest.Config) -> None:
    """Make the first SIGTERM a KeyboardInterrupt in this process (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return
    config.stash[_PREVIOUS] = signal.signal(signal.SIGTERM, _interrupt)


def ignore_while_finishing(config: pytest.Config) -> None:
    """From the start of `pytest_sessionfinish` on, SIGTERM is ignored (if ours is installed)."""
    if _PREVIOUS in config.stash and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


def restore_sigterm(config: pytest.Config) -> None:
    previous = config.stash.get(_PREVIOUS, None)
    if previous is not None and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, previous)
        del config.stash[_PREVIOUS]


def _interrupt(signum: int, frame: FrameType | None) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # let the clean-up finish
    raise KeyboardInterrupt(f"{signal.Signals(signum).name} received")


def finish_worker_reports(config: pytest.Config, grace_s: float = WORKER_GRACE_S) -> int:
    """In an interrupted xdist controller: pass on the reports the workers still send until
    every worker is down or `grace_s` passed; return how many reports.

    Reads xdist's `DSession.queue` and hands test and collection reports to its own
    `worker_testreport` / `worker_collectreport` (what its loop does); a worker's end only marks
    it down (no replacement worker is started). Without them (another xdist) it does nothing.
    """
    dsession = config.pluginmanager.getplugin("dsession")
    events = getattr(dsession, "queue", None)
    active = getattr(dsession, "_active_nodes", None)
    if events is None or active is None:
        return 0
    handled = 0
    deadline = time.monotonic() + grace_s
    while active and time.monotonic() < deadline:
        try:
            name, kwargs = events.get(timeout=0.1)
        except queue.Empty:
            continue
        if name in ("workerfinished", "errordown"):  # down for good: never replaced now
            active.discard(kwargs.get("node"))
        elif name in ("testreport", "collectreport"):
            getattr(dsession, f"worker_{name}")(**kwargs)
            handled += 1
    return handled
