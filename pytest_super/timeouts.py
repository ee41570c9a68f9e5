"""pytest-timeout, through what it exposes: whether the user set a timeout for every test, and
whether a failure is pytest-timeout stopping the test.

What pytest-timeout makes public: `__all__` is `Settings` and `is_debugging`; its README documents
the hooks `pytest_timeout_set_timer` / `pytest_timeout_cancel_timer`, `Settings`, `is_debugging`
and the ways to set a timeout (from low to high priority: ini `timeout`, the `PYTEST_TIMEOUT`
environment variable, `--timeout`, a `timeout` marker). It has no documented failure constant
(`TIMEOUT_DESC` is the `--timeout` help text). So:

- the user's timeout is read by `get_env_settings(config)`, the function pytest-timeout itself
  resolves option, then environment, then ini with (same name and `Settings` result since 2.x);
- its failure is told by `PYTEST_FAILURE_MESSAGE`, the module constant (since 2.4.0) its signal
  method passes to `pytest.fail`: the failure is matched against that template, never against a
  fragment of text, so a new wording of it is followed.
"""

from __future__ import annotations

import math
import os
import re

import pytest
import pytest_timeout  # type: ignore[import-untyped]

from pytest_super.deadlines import MAX_TIMER_S

#: the text pytest-timeout's signal method fails a test with (`%s`: the seconds); versions before
#: 2.4.0 had no constant and wrote "Timeout >%ss"
FAILURE_TEMPLATE: str = getattr(pytest_timeout, "PYTEST_FAILURE_MESSAGE", "Timeout >%ss")


def failure_pattern(template: str) -> re.Pattern[str]:
    """The failure messages a `%s`-template gives, for any number of seconds."""
    head, sep, tail = template.partition("%s")
    if not sep:
        return re.compile(re.escape(template))
    return re.compile(re.escape(head) + r"[^\s)]+" + re.escape(tail))


_FAILURE = failure_pattern(FAILURE_TEMPLATE)


def is_timeout(exc: BaseException) -> bool:
    """Whether `exc` is pytest-timeout stopping a test: the `pytest.fail` its signal method
    raises, with its failure message. (Its thread method kills the process: no exception.)"""
    return isinstance(exc, pytest.fail.Exception) and _FAILURE.fullmatch(str(exc)) is not None


def user_timeout_configured(config: pytest.Config) -> bool:
    """Whether the user set a timeout for every test: `--timeout`, else `PYTEST_TIMEOUT`, else
    the ini key `timeout`, as pytest-timeout resolves them. A `timeout` marker beats all three,
    so a default marker must not be added when this is true.

    0 is pytest-timeout's "no timeout", its default: it counts as not set. Without pytest-timeout
    (`-p no:timeout`) nothing is set.
    """
    if not config.pluginmanager.hasplugin("timeout"):
        return False
    timeout = pytest_timeout.get_env_settings(config).timeout
    return timeout is not None and timeout > 0


def configured_timeout_s(config: pytest.Config) -> float | None:
    """The user's timeout for every test (`--timeout`, `PYTEST_TIMEOUT`, ini `timeout`) in
    seconds, None when none is set (a task run on a Ray node gets it as its deadline there)."""
    if not user_timeout_configured(config):
        return None
    return float(pytest_timeout.get_env_settings(config).timeout)


def check_user_timeout(config: pytest.Config) -> None:
    """Refuse a timeout for every test that no timer takes: `--timeout=inf` or `1e300` (also
    `PYTEST_TIMEOUT`, ini `timeout`) overflowed pytest-timeout's own timer, an INTERNALERROR when
    the first test started, and NaN set no timeout at all. A usage error naming where it came
    from; a value pytest-timeout cannot read is left to pytest-timeout, which says so."""
    if not config.pluginmanager.hasplugin("timeout"):
        return
    try:
        seconds = pytest_timeout.get_env_settings(config).timeout
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


def failure_message(seconds: float) -> str:
    """pytest-timeout's own failure text for a deadline of `seconds` (a task stopped at its
    deadline elsewhere, on a Ray node, reads as pytest-timeout stopping it here)."""
    return FAILURE_TEMPLATE % f"{seconds:g}"
