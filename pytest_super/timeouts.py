"""pytest-timeout, through what it exposes: whether the user set a timeout for every test, and
whether a failure is pytest-timeout stopping the test.

What pytest-timeout makes public: `__all__` is `Settings` and `is_debugging`; its README documents
the hooks `pytest_timeout_set_timer` / `pytest_timeout_cancel_timer`, `Settings`, `is_debugging`
and the ways to set a timeout (from low to high priority: ini `timeout`, the `PYTEST_TIMEOUT`
environment variable, `--timeout`, a `timeout` marker). It has no documented failure constant
(`TIMEOUT_DESC` is the `--timeout` help text). What it does not document is reached only through
thirdparty.py (the one adapter to other plugins' internals, with its pinned test):

- the user's timeout is what `get_env_settings(config)` resolves (option, then environment, then
  ini), an item's deadline what pytest-timeout applies to it (`thirdparty.item_deadline_s`);
- its failure is told by `PYTEST_FAILURE_MESSAGE`, the module constant (since 2.4.0) its signal
  method passes to `pytest.fail`: the failure is matched against that template, never against a
  fragment of text, so a new wording of it is followed.
"""

from __future__ import annotations

import math
import os

import pytest

from pytest_super import thirdparty
from pytest_super.deadlines import MAX_TIMER_S
from pytest_super.thirdparty import item_deadline_s

__all__ = [
    "FAILURE_TEMPLATE",
    "MAX_TIMER_S",
    "check_user_timeout",
    "configured_timeout_s",
    "failure_message",
    "failure_pattern",
    "is_timeout",
    "item_deadline_s",
    "user_timeout_configured",
]

#: the text pytest-timeout's signal method fails a test with (`%s`: the seconds); versions before
#: 2.4.0 had no constant and wrote "Timeout >%ss"
FAILURE_TEMPLATE: str = thirdparty.TIMEOUT_FAILURE_TEMPLATE
failure_pattern = thirdparty.timeout_failure_pattern
is_timeout = thirdparty.is_timeout_failure
failure_message = thirdparty.timeout_failure_message


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
