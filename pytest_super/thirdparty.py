"""The one adapter to other plugins' internals: everything of pytest-xdist, pytest-timeout and
pytest's capture plugin the package uses that is neither a hook nor documented API.

The rest of the package calls only the small functions here; each private name it touches is
named next to its use with the versions checked (the pins of pyproject.toml: pytest-xdist>=3.3,
pytest-timeout>=2.4; checked against pytest-xdist 3.8.0, pytest-timeout 2.4.0, pytest 9).
tests/test_thirdparty.py asserts that the installed versions are in that range and that every
name here still exists with the shape used, and names the attribute and the version when one
moved. Every attribute xdist sets is read here too, documented or not (`config.workerinput`,
`workeroutput`, the options `numprocesses`, `dist`, `maxschedchunk`; tests/test_layers.py checks
that no other module reads one). pytest-timeout is read through `get_env_settings` (not in its
`__all__`) and its documented `timeout` marker; its hooks and xdist's stay where they are used.
"""

from __future__ import annotations

import math
import queue
import subprocess
from dataclasses import dataclass
from typing import Any

import pytest
import pytest_timeout  # type: ignore[import-untyped]

#: the versions checked (the lower bounds are pyproject.toml's pins; tests/test_thirdparty.py)
XDIST_CHECKED = "3.8.0"
TIMEOUT_CHECKED = "2.4.0"

# -- pytest-timeout ---------------------------------------------------------------------------

_DEADLINE = pytest.StashKey["_Deadline"]()


@dataclass(frozen=True)
class _Deadline:
    marker: pytest.Mark | None  # the closest `timeout` marker the value was read with
    seconds: float | None


def _marker_seconds(marker: pytest.Mark | None) -> float | None:
    """The seconds a `timeout` marker gives (None: none); ValueError when they do not read."""
    if marker is None:
        return None
    value = marker.args[0] if marker.args else marker.kwargs.get("timeout")
    return None if value is None else float(value)


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

    The marker is read by its documented form (pytest-timeout's README: `timeout(seconds)` or
    `timeout(timeout=seconds)`, with `method` and `func_only`); one that gives no seconds, or
    seconds it cannot read (its own error when the test runs), leaves the timeout for every
    test, as pytest-timeout's own reading does (tests/test_thirdparty.py compares the two)."""
    marker = item.get_closest_marker("timeout")
    cached = item.stash.get(_DEADLINE, None)
    if cached is not None and cached.marker is marker:
        return cached.seconds
    seconds = _read_item_deadline_s(item, marker)
    item.stash[_DEADLINE] = _Deadline(marker, seconds)
    return seconds


def _read_item_deadline_s(item: pytest.Item, marker: pytest.Mark | None) -> float | None:
    if not timeout_plugin_active(item.config):
        return None
    try:
        timeout = _marker_seconds(marker)
        if timeout is None:
            timeout = configured_timeout_s(item.config)
    except (TypeError, ValueError):
        try:
            timeout = configured_timeout_s(item.config)
        except ValueError:
            return None
    if timeout is None:
        return None
    seconds = float(timeout)
    return seconds if seconds > 0 and not math.isnan(seconds) else None


# -- pytest-xdist -----------------------------------------------------------------------------
#: the attributes xdist sets on pytest's config, its options and its worker nodes, read only here
#: (`config.workerinput`, `workeroutput` on a worker: its README's "Identifying the worker
#: process during a test" and "Sending data from workers"; `-n`, `--dist`, `--maxschedchunk`)
XDIST_ATTRIBUTES = ("workerinput", "workeroutput", "numprocesses", "dist", "maxschedchunk")


def worker_input(config: pytest.Config) -> dict[str, Any] | None:  # Any: xdist
    """What the controller handed this xdist worker (`workerid`, `workercount`, and what
    `pytest_configure_node` adds); None in the controller or without xdist."""
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)  # Any: xdist
    return workerinput


def is_worker(config: pytest.Config) -> bool:
    """Whether this process is an xdist worker (not the controller, not a run without xdist)."""
    return worker_input(config) is not None


def worker_output(config: pytest.Config) -> dict[str, Any] | None:  # Any: xdist
    """What this xdist worker hands back to the controller (`node.workeroutput` there, read by
    `node_output`); None in the controller or without xdist."""
    workeroutput: dict[str, Any] | None = getattr(config, "workeroutput", None)  # Any: xdist
    return workeroutput


def node_input(node: Any) -> dict[str, Any]:  # Any: xdist
    """In the controller (`pytest_configure_node`): what is handed to the worker `node`."""
    workerinput: dict[str, Any] = node.workerinput  # Any: xdist
    return workerinput


def node_output(node: Any) -> dict[str, Any]:  # Any: xdist
    """In the controller (`pytest_testnodedown`): what the worker `node` handed back ({} when
    it died before it could)."""
    workeroutput: dict[str, Any] = getattr(node, "workeroutput", {})  # Any: xdist
    return workeroutput


def requested_workers(config: pytest.Config) -> int | None:
    """`-n`'s number of workers as the controller reads it (None: no `-n`, or xdist not
    loaded); read on a worker, it is the worker's own option, not the run's."""
    workers = getattr(config.option, "numprocesses", None)
    return workers if isinstance(workers, int) else None


def distribution(config: pytest.Config) -> tuple[str, int | None]:
    """(`--dist`, `--maxschedchunk`) as the controller hands out items ("load", None without
    xdist); a worker's own `--dist` reads "no", so the controller hands them on (plugin.py)."""
    return getattr(config.option, "dist", "load"), getattr(config.option, "maxschedchunk", None)


def undispatched_worker_events(
    config: pytest.Config,
) -> queue.Queue[tuple[str, dict[str, Any]]] | None:  # Any: xdist
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


def worker_process(node: Any) -> subprocess.Popen[bytes] | None:  # Any: xdist
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


def junit_writer(config: pytest.Config) -> Any | None:  # Any: LogXML, private
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
