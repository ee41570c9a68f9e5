"""`--super-progress`: where a long run stands, on the controller of a Ray or xdist run.

One status line: tasks running, queued and done, failures and errors so far, the tasks each Ray
node has finished, and an estimated end (the known durations of the tasks left, durations.py's,
else the mean of the tasks finished so far, spread over the tasks running at once):

    pytest-super: 4 running, 12 queued, 24/40 done, 1 failed, 0 errors; ETA 17:42:10 (in 3m20s)

On a terminal the line sits below pytest's own output and is redrawn in place (a carriage return,
only when stdout is a tty); it is cleared before pytest writes anything of its own and drawn again
after, so it never shares a line with pytest's output. When the output is not a terminal (CI logs)
it becomes one ordinary line every `PYTEST_SUPER_PROGRESS_INTERVAL` seconds (60 by default).
`--super-progress` is auto (the default: on for Ray and xdist runs of an agent), on (any run of an
agent, a run on one process too) or off.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

from pytest_super import thirdparty

if TYPE_CHECKING:
    from pytest_super.durations import Durations

#: seconds between two status lines when the output is not a terminal
INTERVAL_ENV = "PYTEST_SUPER_PROGRESS_INTERVAL"
DEFAULT_INTERVAL_S = 60.0
#: seconds between two redraws on a terminal when nothing happened (the ETA counts down)
TTY_TICK_S = 1.0
PREFIX = "pytest-super: "


@dataclass
class Tally:
    """Where the run stands; no pytest here. `estimate(item_id)` is a known duration or None."""

    estimate: Callable[[str], float | None] = lambda item_id: None
    ids: set[str] = field(default_factory=set)
    running: dict[str, float] = field(default_factory=dict)  # item id -> its start (monotonic)
    finished: set[str] = field(default_factory=set)
    failed: int = 0
    errors: int = 0
    took: list[float] = field(default_factory=list)
    nodes: dict[str, int] = field(default_factory=dict)  # Ray node -> tasks it finished
    #: what another scheduler says of the tasks it runs (item id -> start, monotonic) and of
    #: its queue (Ray: the dispatcher's); None: what the reports said
    external: Callable[[], tuple[dict[str, float], int]] | None = None
    slots: int = 1

    def running_now(self) -> dict[str, float]:
        return self.external()[0] if self.external is not None else self.running

    def start(self, item_id: str, now: float) -> None:
        if item_id in self.ids and item_id not in self.finished:
            self.running.setdefault(item_id, now)

    def finish(
        self, item_id: str, outcome: str, now: float, node: str = "", took: float | None = None
    ) -> None:
        if item_id not in self.ids or item_id in self.finished:
            return
        started = self.running.pop(item_id, None)
        self.finished.add(item_id)
        if took is None and started is not None and self.external is None:
            took = now - started
        if took is not None and outcome != "skipped":
            self.took.append(took)
        self.failed += outcome == "failed"
        self.errors += outcome == "error"
        if node:
            self.nodes[node] = self.nodes.get(node, 0) + 1

    def queued(self) -> int:
        return self.counts()[1]

    def _seconds(self, item_id: str) -> float | None:
        known = self.estimate(item_id)
        if known is not None:
            return known
        return sum(self.took) / len(self.took) if self.took else None

    def left_s(self, now: float) -> float | None:
        """Seconds until the end: the work left over the tasks that run at once (None: unknown)."""
        work = 0.0
        longest = 0.0
        running = self.running_now()
        for item_id in self.ids - self.finished:
            seconds = self._seconds(item_id)
            if seconds is None:
                return None
            started = running.get(item_id)
            left = max(seconds - (now - started), 0.0) if started is not None else seconds
            work += left
            longest = max(longest, left if started is not None else 0.0)
        at_once = max(self.slots, len(running), 1)
        return max(work / at_once, longest)

    def counts(self) -> tuple[int, int]:
        """Tasks running and queued, from one look at the scheduler: each task not done is
        running or queued, whichever of the scheduler's word and the reports came last. A task the
        scheduler has finished and whose report has not come yet is running (a fresh clone's
        cluster run printed "3 running, 1 queued, 2/7 done"); a task whose report came before the
        scheduler's next word is done, not running too (CI's cluster run of 2026-11-28 printed a
        line whose counts did not add up to its 7 tasks)."""
        left = len(self.ids) - len(self.finished)
        if self.external is None:
            return len(self.running), max(left - len(self.running), 0)
        running, queued = self.external()
        still = sum(item_id not in self.finished for item_id in running)
        queued = max(min(queued, left - still), 0)
        return left - queued, queued

    def line(self, now: float, wall: float) -> str:
        done = len(self.finished)
        running, queued = self.counts()
        parts = [
            f"{running} running, {queued} queued, {done}/{len(self.ids)} done, "
            f"{self.failed} failed, {self.errors} error{'s' if self.errors != 1 else ''}"
        ]
        if self.nodes:
            parts.append(", ".join(f"{node}: {n} done" for node, n in sorted(self.nodes.items())))
        left = self.left_s(now)
        if done == len(self.ids):
            parts.append("finished")
        elif left is None:
            parts.append("ETA unknown (no duration known yet)")
        else:
            end = time.strftime("%H:%M:%S", time.localtime(wall + left))
            parts.append(f"ETA {end} (in {_span(left)})")
        return PREFIX + "; ".join(parts)


def _span(seconds: float) -> str:
    seconds = math.ceil(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def interval_s() -> float:
    """Seconds between status lines in a log (`PYTEST_SUPER_PROGRESS_INTERVAL`, default 60)."""
    raw = os.environ.get(INTERVAL_ENV, "")
    try:
        value = float(raw) if raw else DEFAULT_INTERVAL_S
    except ValueError:
        raise pytest.UsageError(
            f"environment variable {INTERVAL_ENV} {raw!r}: expected seconds, e.g. 60"
        ) from None
    if not 0.1 <= value <= 86400:
        raise pytest.UsageError(
            f"environment variable {INTERVAL_ENV} {raw}: expected seconds from 0.1 to 86400"
        )
    return value


def known(
    durations: Callable[[], Durations | None], whose: tuple[str | None, str | None]
) -> Callable[[str], float | None]:
    """A task's known duration from `durations()` (durations.py's `Durations` the plugin keeps,
    looked up when asked: it is chosen at collection), when they are of the run's agent and model
    (`whose`; another agent's durations order the tasks but give no ETA, issue 44), else None."""

    def estimate(item_id: str) -> float | None:
        table = durations()
        if table is None or not table.for_eta(*whose):
            return None
        return table.get(item_id)

    return estimate


class ProgressLine:
    """The status line on the controller's terminal (or log), written through pytest's terminal
    reporter's stream; registered as a plugin by `start`. Every write holds one lock, so the
    ticking thread never writes while pytest does."""

    def __init__(self, config: pytest.Config, tally: Tally, *, every_s: float) -> None:
        self.config = config
        self.tally = tally
        self.tty = False
        self.every_s = every_s
        self.reporter: pytest.TerminalReporter | None = None  # at the session's start
        self._lock = threading.RLock()
        self._shown = False  # the tty line is on the screen
        self._started = False
        self._last = 0.0
        self._stop = threading.Event()
        self._outcome: dict[str, str] = {}
        self._node: dict[str, str] = {}
        self._took: dict[str, float] = {}
        self._thread = threading.Thread(
            target=self._tick, name="pytest-super progress", daemon=True
        )

    # -- drawing --------------------------------------------------------------------------------
    @property
    def _terminal(self) -> pytest.TerminalReporter:
        assert self.reporter is not None  # drawn only once started, which needs a reporter
        return self.reporter

    def _raw(self, text: str) -> None:
        """Escape sequences past the terminal writer's idea of its current line (pytest's
        column stays what pytest wrote)."""
        stream = self._terminal._tw._file
        with contextlib.suppress(OSError, ValueError):  # a closed or broken stream ends nothing
            stream.write(text)
            stream.flush()

    def _back(self) -> str:
        """From the line below back to the end of pytest's current line."""
        tw = self._terminal._tw
        column = tw.width_of_current_line % max(tw.fullwidth, 1)
        return "\x1b[A\r" + (f"\x1b[{column}C" if column else "")

    def draw(self) -> None:
        with self._lock:
            if not self._started:
                return
            now = time.monotonic()
            text = self.tally.line(now, time.time())
            if self.tty:
                width = max(self._terminal._tw.fullwidth - 1, 20)
                self._raw(f"\n\r\x1b[2K{text[:width]}" + self._back())
                self._shown = True
            else:
                with contextlib.suppress(OSError, ValueError):
                    if self._terminal._tw.width_of_current_line:
                        self._terminal.write("\n")  # pytest's line of letters ends here
                    self._terminal.write(text + "\n", flush=True)
            self._last = now

    def clear(self) -> None:
        with self._lock:
            if self.tty and self._shown:
                self._raw("\n\r\x1b[2K" + self._back())
                self._shown = False

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Around anything that writes to the terminal: the line cleared, then drawn again."""
        with self._lock:
            self.clear()
            try:
                yield
            finally:
                if self.tty:
                    self.draw()

    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.reporter = self.config.pluginmanager.getplugin("terminalreporter")
        if self.reporter is not None and self.reporter.isatty():
            self.tty, self.every_s = True, TTY_TICK_S

    def begin(self) -> None:
        with self._lock:
            if self.reporter is None:  # -p no:terminal: nowhere to write
                return
            if not self._started:
                self._started = True
                self._last = time.monotonic()
                self._thread.start()
                if self.tty:
                    self.draw()

    def end(self, *, wait: bool = True) -> None:
        """Clear the line for good (`wait`: until the ticking thread has ended; not in a signal
        handler, which may have interrupted this thread inside `paused`)."""
        self._stop.set()
        with self._lock:
            self.clear()
            self._started = False
        if wait and self._thread.is_alive():
            self._thread.join(timeout=5)

    def _tick(self) -> None:
        while not self._stop.wait(min(self.every_s, TTY_TICK_S)):
            with self._lock:
                if self._started and time.monotonic() - self._last >= self.every_s:
                    self.draw()

    # -- hooks: pytest's writes happen in between ----------------------------------------------
    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_logstart(self, nodeid: str, location: object) -> Iterator[None]:
        self.begin()
        with self.paused():
            self.tally.start(nodeid, time.monotonic())
            return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> Iterator[None]:
        with self.paused():
            result = yield
            if report.failed and self._outcome.get(report.nodeid) not in ("failed", "error"):
                self._outcome[report.nodeid] = "failed" if report.when == "call" else "error"
            elif report.skipped:  # its time says nothing of a task's length
                self._outcome.setdefault(report.nodeid, "skipped")
            if report.when == "teardown":
                outcome = self._outcome.pop(report.nodeid, "passed")
                node = self._node.pop(report.nodeid, "")
                took = self._took.pop(report.nodeid, None)
                self.tally.finish(report.nodeid, outcome, time.monotonic(), node, took)
        return result

    def ran_on(self, nodeid: str, node: str, took: float | None) -> None:
        """The Ray node that ran `nodeid` and how long it took there (told before its report)."""
        self._node[nodeid] = node
        if took is not None:
            self._took[nodeid] = took

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_logfinish(self, nodeid: str, location: object) -> Iterator[None]:
        with self.paused():
            return (yield)

    @pytest.hookimpl(wrapper=True, optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object) -> Iterator[None]:  # Any: xdist
        with self.paused():
            return (yield)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Iterator[None]:
        self.end()
        return (yield)

    # -- what is run ------------------------------------------------------------------------
    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(
        self, node: Any, ids: list[str]
    ) -> None:  # Any: xdist
        """xdist: every worker collects the same items; each worker runs one at a time."""
        if not self.tally.ids:
            self.tally.ids = set(ids)
        self.tally.slots = thirdparty.active_worker_count(self.config) or self.tally.slots

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if not thirdparty.is_worker(self.config) and session.items:
            self.tally.ids = {item.nodeid for item in session.items}


KEY = pytest.StashKey[ProgressLine]()


def enabled(config: pytest.Config, mode: str, remote: bool) -> bool:
    """auto: a Ray or xdist run (on the controller); on: any run; off: never."""
    if mode == "off" or thirdparty.is_worker(config):
        return False
    xdist = bool(thirdparty.requested_workers(config)) and not getattr(
        config.option, "collectonly", False
    )
    return mode == "on" or remote or xdist


def start(
    config: pytest.Config,
    mode: str,
    *,
    remote: bool,
    durations: Callable[[], Durations | None],
    whose: tuple[str | None, str | None],
) -> ProgressLine | None:
    """The status line of this run, when `mode` and the run call for one; `durations()` gives
    the known durations (or None), `whose` the run's agent and model."""
    if not enabled(config, mode, remote):
        return None
    tally = Tally(estimate=known(durations, whose))
    line = ProgressLine(config, tally, every_s=interval_s())

    config.stash[KEY] = line
    config.pluginmanager.register(line, "pytest-super-progress")
    return line


def progress_of(config: pytest.Config) -> ProgressLine | None:
    return config.stash.get(KEY, None)
