"""The one adapter to other plugins' internals: everything of pytest-xdist, pytest-timeout and
pytest's capture plugin the package uses that is neither a hook nor documented API.

The rest of the package calls only the small functions here; each private name it touches is
named next to its use with the versions checked (the pins of pyproject.toml: pytest-xdist>=3.3,
pytest-timeout>=2.4; checked against pytest-xdist 3.8.0, pytest-timeout 2.4.0, pytest 9).
tests/test_thirdparty.py asserts that the installed versions are in that range and that every
name here still exists with the shape used, and names the attribute and the version when one
moved. Documented API stays where it is used: xdist's hooks, `config.workerinput` /
`workeroutput`, pytest-timeout's `Settings`, its hooks and its `timeout` marker.
"""

from __future__ import annotations

import math
import queue
import re
import subprocess
from dataclasses import dataclass
from typing import Any

import pytest
import pytest_timeout  # type: ignore[import-untyped]

#: the versions checked (the lower bounds are pyproject.toml's pins; tests/test_thirdparty.py)
XDIST_CHECKED = "3.8.0"
TIMEOUT_CHECKED = "2.4.0"

# -- pytest-timeout ---------------------------------------------------------------------------

#: pytest-timeout's failure text (`%s`: the seconds): its module constant
#: `pytest_timeout.PYTEST_FAILURE_MESSAGE` (not documented; since 2.4.0, checked 2.4.0: "Timeout
#: (>%ss) from pytest-timeout."), which its signal method passes to `pytest.fail`; versions
#: before 2.4.0 had no constant and wrote "Timeout >%ss"
TIMEOUT_FAILURE_TEMPLATE: str = getattr(pytest_timeout, "PYTEST_FAILURE_MESSAGE", "Timeout >%ss")

_DEADLINE = pytest.StashKey["_Deadline"]()


@dataclass(frozen=True)
class _Deadline:
    marker: object  # the closest `timeout` marker the value was read with (None: none)
    seconds: float | None


def timeout_plugin_active(config: pytest.Config) -> bool:
    """Whether pytest-timeout is loaded (not `-p no:timeout`)."""
    return config.pluginmanager.hasplugin("timeout")


def configured_timeout_s(config: pytest.Config) -> float | None:
    """The timeout for every test pytest-timeout resolves: `--timeout`, else `PYTEST_TIMEOUT`,
    else ini `timeout`; None when none is given or pytest-timeout is not loaded. 0 (its "no
    timeout") is returned as 0. Raises ValueError for a value pytest-timeout cannot read.

    `pytest_timeout.get_env_settings(config)` (not in its `__all__`; checked 2.4.0): returns a
    `Settings` namedtuple whose `timeout` is a float or None."""
    if not timeout_plugin_active(config):
        return None
    timeout = pytest_timeout.get_env_settings(config).timeout
    return None if timeout is None else float(timeout)


def item_deadline_s(item: pytest.Item) -> float | None:
    """The deadline pytest-timeout applies to `item`, in seconds (its `timeout` marker, else
    `--timeout`, `PYTEST_TIMEOUT`, ini `timeout`); None for no deadline (none set, 0, or
    pytest-timeout not loaded). Read once and kept on the item's stash, read again only when a
    different marker is closest (a default marker added at collection).

    `pytest_timeout._get_item_settings(item)` (private; checked 2.4.0): the very function its
    `pytest_runtest_protocol` reads the item's `Settings` with. A marker it cannot read (its own
    error when the test runs) leaves the timeout for every test."""
    marker = item.get_closest_marker("timeout")
    cached = item.stash.get(_DEADLINE, None)
    if cached is not None and cached.marker is marker:
        return cached.seconds
    seconds = _read_item_deadline_s(item, marker)
    item.stash[_DEADLINE] = _Deadline(marker, seconds)
    return seconds


def _read_item_deadline_s(item: pytest.Item, marker: object) -> float | None:
    if not timeout_plugin_active(item.config):
        return None
    try:
        if marker is None:
            timeout = configured_timeout_s(item.config)
        else:
            timeout = pytest_timeout._get_item_settings(item).timeout
    except (TypeError, ValueError):
        try:
            timeout = configured_timeout_s(item.config)
        except ValueError:
            return None
    if timeout is None:
        return None
    seconds = float(timeout)
    return seconds if seconds > 0 and not math.isnan(seconds) else None


def timeout_failure_pattern(template: str) -> re.Pattern[str]:
    """The failure messages a `%s`-template gives, for any number of seconds."""
    head, sep, tail = template.partition("%s")
    if not sep:
        return re.compile(re.escape(template))
    return re.compile(re.escape(head) + r"[^\s)]+" + re.escape(tail))


_TIMEOUT_FAILURE = timeout_failure_pattern(TIMEOUT_FAILURE_TEMPLATE)


def is_timeout_failure(exc: BaseException) -> bool:
    """Whether `exc` is pytest-timeout's signal method stopping a test: the `pytest.fail` it
    raises with `TIMEOUT_FAILURE_TEMPLATE`. (Its thread method kills the process.)"""
    return (
        isinstance(exc, pytest.fail.Exception) and _TIMEOUT_FAILURE.fullmatch(str(exc)) is not None
    )


def timeout_failure_message(seconds: float) -> str:
    """pytest-timeout's own failure text for a deadline of `seconds`."""
    return TIMEOUT_FAILURE_TEMPLATE % f"{seconds:g}"


# -- pytest-xdist -----------------------------------------------------------------------------


def undispatched_worker_events(
    config: pytest.Config,
) -> queue.Queue[tuple[str, dict[str, Any]]] | None:
    """The events xdist's workers sent that its controller has not turned into hooks yet; None
    without xdist's controller (no `-n`, a worker) or when the attribute moved.

    `DSession.queue` (private; xdist/dsession.py, checked 3.8.0; the plugin registered as
    "dsession"): a `queue.Queue` of `(name, kwargs)` filled from execnet's receiver thread
    (`WorkerController.process_from_remote`) and emptied only by `DSession.loop_once`. `testreport`
    and `collectreport` carry `node` and `rep`; `workerfinished` and `errordown` carry `node`. Once a
    KeyboardInterrupt has left that loop nothing takes them out, and xdist has no public hook or
    function for what workers send after it (interrupts.finish_worker_reports reads them)."""
    dsession = config.pluginmanager.getplugin("dsession")
    events = getattr(dsession, "queue", None)
    return events if isinstance(events, queue.Queue) else None


def active_worker_count(config: pytest.Config) -> int:
    """How many xdist workers the controller has up (0 without xdist's controller).

    `DSession._active_nodes` (private; xdist/dsession.py, checked 3.8.0): a set of the workers'
    `WorkerController`s, added at `pytest_testnodeready`, removed when one goes down."""
    dsession = config.pluginmanager.getplugin("dsession")
    return len(getattr(dsession, "_active_nodes", ()))


def worker_process(node: Any) -> subprocess.Popen[bytes] | None:
    """The local process of the xdist worker `node` (its `WorkerController`); None for a worker
    that is not a subprocess of this one (ssh, socket) or when the attributes moved.

    `WorkerController.gateway` (xdist/workermanage.py, checked 3.8.0), execnet's `Gateway._io`
    (private; execnet/gateway.py, checked 2.1.2) and its `Popen2IOMaster.popen`
    (execnet/gateway_io.py): the `subprocess.Popen` execnet started the worker with. xdist ends
    a worker through it too: `NodeManager.teardown_nodes` -> `Group.terminate(EXIT_TIMEOUT)`
    kills, after 10 s, each worker process that has not ended (`_io.kill()`)."""
    io = getattr(getattr(node, "gateway", None), "_io", None)
    popen = getattr(io, "popen", None)
    return popen if isinstance(popen, subprocess.Popen) else None


# -- pytest's capture plugin ------------------------------------------------------------------


def terminal_fd(config: pytest.Config) -> int:
    """The file descriptor of the terminal pytest writes to (fd 2 may be captured by a test).

    `CaptureManager._global_capturing.err.targetfd_save` (private; _pytest/capture.py, checked
    pytest 9): the duplicate of fd 2 made before capturing started; 2 when it is absent."""
    capman = config.pluginmanager.getplugin("capturemanager")
    capture = getattr(capman, "_global_capturing", None)
    err = getattr(capture, "err", None)
    saved = getattr(err, "targetfd_save", None)
    return saved if isinstance(saved, int) else 2


# -- pytest's junitxml plugin -----------------------------------------------------------------


def junit_writer(config: pytest.Config) -> Any | None:
    """pytest's JUnit writer of this run (`--junitxml`); None without one (no `--junitxml`, an
    xdist worker: only the controller writes the file).

    `_pytest.junitxml.xml_key` (a private module; checked pytest 9): the stash key of the
    `LogXML` that writes the file, the one pytest's own `record_testsuite_property` fixture reads.
    Used through what that fixture and `record_xml_attribute` use: `LogXML.family`,
    `LogXML.add_global_property(name, value)`, `LogXML.node_reporter(report)` and the node
    reporter's `add_attribute(name, value)` and `append(element)`."""
    from _pytest import junitxml

    key = getattr(junitxml, "xml_key", None)
    return None if key is None else config.stash.get(key, None)
