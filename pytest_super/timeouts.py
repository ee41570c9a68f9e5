"""pytest-timeout, through what it exposes: whether the user set a timeout for every test, and
the timer of every task item.

What pytest-timeout makes public: `__all__` is `Settings` and `is_debugging`; its README documents
the hooks `pytest_timeout_set_timer` / `pytest_timeout_cancel_timer`, `Settings`, `is_debugging`
and the ways to set a timeout (from low to high priority: ini `timeout`, the `PYTEST_TIMEOUT`
environment variable, `--timeout`, a `timeout` marker). What it does not document is reached only
through thirdparty.py (the one adapter to other plugins' internals, with its pinned test): the
user's timeout is what `get_env_settings(config)` resolves (option, then environment, then ini),
an item's deadline what pytest-timeout applies to it (`thirdparty.item_deadline_s`).

The timer: a plugin that owns an item's deadline says so through pytest-timeout's hooks, and
pytest-timeout stands aside. For the items that run a task (those that use the `super_result`
fixture: every task item) the plugin's hooks start and cancel `deadlines.Alarm`, the timer a Ray
node and `run_tasks` use too, which raises `TaskTimedOut` at the deadline pytest-timeout hands
over (`--timeout`, `PYTEST_TIMEOUT`, ini `timeout`, a `timeout` marker, the default marker of
`task_timeout_s`). Every other test keeps pytest-timeout's timer, and so does a task item whose
timeout method is `thread` (the process ended with every thread's stack printed: a hang in C
code, which no signal reaches).
"""

from __future__ import annotations

import math
import os
from typing import Any

import pytest

from pytest_super import thirdparty
from pytest_super.deadlines import MAX_TIMER_S, Alarm, DeadlineExpired
from pytest_super.thirdparty import item_deadline_s

__all__ = [
    "FAILURE_TEMPLATE",
    "MAX_TIMER_S",
    "TaskTimedOut",
    "cancel_task_timer",
    "check_user_timeout",
    "configured_timeout_s",
    "failure_message",
    "item_deadline_s",
    "set_task_timer",
    "user_timeout_configured",
]

#: the failure of a task past its deadline (`%s`: the seconds): the words of pytest-timeout's
#: signal method, so a run reads the same whichever timer stopped a test
FAILURE_TEMPLATE = "Timeout (>%ss) from pytest-timeout."

_ALARM = pytest.StashKey[Alarm]()


def failure_message(seconds: float) -> str:
    return FAILURE_TEMPLATE % f"{seconds:g}"


class TaskTimedOut(pytest.fail.Exception, DeadlineExpired):  # type: ignore[misc,name-defined]
    """A task past its deadline: raised by its item's timer (`set_task_timer`), or by the
    `super_result` fixture for a task whose outcome says its deadline passed (a Ray node stopped
    it). A failure of pytest's own kind (`pytest.fail`), as pytest-timeout's signal method
    raises, and a `DeadlineExpired`: raised in a task's episode, the executor running it
    (`execute.outcome_of`) takes it as the deadline passing, and the fixture raises it again."""

    def __init__(self, seconds: float) -> None:
        pytest.fail.Exception.__init__(self, failure_message(seconds))  # and BaseException's
        self.seconds = seconds
        #: why each earlier attempt failed (`outcome.retried_of`; a Ray node's retries)
        self.retried: list[str] = []


def runs_a_task(item: object) -> bool:
    """Whether `item` runs a task's episode: it uses the `super_result` fixture (every task item
    does; a test of the user's may too)."""
    return isinstance(item, pytest.Item) and "super_result" in getattr(item, "fixturenames", ())


def set_task_timer(item: pytest.Item, settings: Any) -> bool | None:  # Any: pytest-timeout
    """pytest-timeout's `pytest_timeout_set_timer` for a task item: our `Alarm`, raising
    `TaskTimedOut` `settings.timeout` seconds from now (True: pytest-timeout sets none). None
    for any other test, for the `thread` method, and off the main thread: pytest-timeout's."""
    if not runs_a_task(item) or settings.method == "thread":
        return None
    alarm = Alarm(settings.timeout, TaskTimedOut)
    if not alarm.start():
        return None
    item.stash[_ALARM] = alarm
    return True


def cancel_task_timer(item: object) -> bool | None:
    """pytest-timeout's `pytest_timeout_cancel_timer`: the item's `Alarm` off (True), None when
    it has none (pytest-timeout's own timer, if any, is cancelled by pytest-timeout)."""
    stash = getattr(item, "stash", None)
    if stash is None or _ALARM not in stash:
        return None
    stash[_ALARM].cancel()
    del stash[_ALARM]
    return True


def user_timeout_configured(config: pytest.Config) -> bool:
    """Whether the user set a timeout for every test: `--timeout`, else `PYTEST_TIMEOUT`, else
    the ini key `timeout`, as pytest-timeout resolves them. A `timeout` marker beats all three,
    so a default marker must not be added when this is true.

    0 is pytest-timeout's "no timeout", its default: it counts as not set. Without pytest-timeout
    (`-p no:timeout`) nothing is set.
    """
    timeout = thirdparty.configured_timeout_s(config)
    return timeout is not None and timeout > 0


def configured_timeout_s(config: pytest.Config) -> float | None:
    """The user's timeout for every test (`--timeout`, `PYTEST_TIMEOUT`, ini `timeout`) in
    seconds, None when none is set (a task run on a Ray node gets it as its deadline there)."""
    if not user_timeout_configured(config):
        return None
    return thirdparty.configured_timeout_s(config)


def check_user_timeout(config: pytest.Config) -> None:
    """Refuse a timeout for every test that no timer takes: `--timeout=inf` or `1e300` (also
    `PYTEST_TIMEOUT`, ini `timeout`) overflowed pytest-timeout's own timer, an INTERNALERROR when
    the first test started, and NaN set no timeout at all. A usage error naming where it came
    from; a value pytest-timeout cannot read is left to pytest-timeout, which says so."""
    try:
        seconds = thirdparty.configured_timeout_s(config)
    except ValueError:
        return
    if seconds is None or (not math.isnan(seconds) and seconds <= MAX_TIMER_S):
        return
    if config.getvalue("timeout") is not None:
        source = "--timeout"
    elif os.environ.get("PYTEST_TIMEOUT") is not None:
        source = "environment variable PYTEST_TIMEOUT"
    else:
        source = "ini timeout" + (f" ({config.inipath.name})" if config.inipath else "")
    raise pytest.UsageError(
        f"{source} {seconds}: expected a finite number of seconds from 0 (no timeout) to "
        f"{int(MAX_TIMER_S)}, what a timer takes"
    )
