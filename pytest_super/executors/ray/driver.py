"""The run's Ray driver in a process of its own.

The controller (the one pytest process of a `--super-executor=ray` run) never imports Ray: its
`DriverProcess` starts this module's `serve` in a child process, in a session of its own (a
terminal's Ctrl-C reaches the controller only), and asks it over a socket pair for what
`RayDispatcher` (cluster.py) does: the driver answers requests in their order, each with its
result and the dispatcher's state (`DriverState`), which the controller reads between requests.

Why a process: whatever Ray does to the process it runs in cannot end the pytest process. Ray's
C++ core ends its driver's process at once on some faults (`QuickExit` when its raylet is judged
gone; exit status 1, no Python code of ours runs) and takes 0.25-0.3 s in `ray.shutdown()`; here
the controller sees the driver's end as the cluster lost (`ClusterLost`: the run ends with its
message, the results received written, exit status 2), and at the run's end (Ctrl-C included) it
does not wait for Ray to shut down. A driver whose controller is gone (the socket closed without
`stop`: the controller killed) cancels the run's tasks, has every live node remove the run's
containers and leaves the cluster.

On the controller one thread sends the requests and another reads the answers (`_Channel`): a
Ctrl-C (KeyboardInterrupt in the main thread) stops only the wait for an answer, never a message
half written or read; the driver cuts a `wait` short when the next request comes, so a cancel is
not held up by it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import cast

from pytest_super.errors import InfrastructureError
from pytest_super.executors.ray.cluster import BACK_WHEN, ClusterLost, NodeOutcome, RayDispatcher
from pytest_super.executors.ray.connect import RayUnavailable, check_ray_installed
from pytest_super.executors.ray.node import StepFields
from pytest_super.executors.ray.settings import ray_address
from pytest_super.settings import SuperRun
from pytest_super.tasks import Task

#: seconds of one look at the tasks in flight while the driver waits (a request that comes
#: meanwhile is answered after at most this)
WAIT_SLICE_S = 0.05
#: the driver process's program: this module imported by its name (what it sends is unpickled
#: by that name; run as `__main__` it would not be)
_MAIN = "import sys; from pytest_super.executors.ray.driver import serve; serve(int(sys.argv[1]))"
#: seconds the controller waits for the driver to take its `stop` (it then leaves by itself)
STOP_ANSWER_S = 5.0
#: seconds a driver whose controller is gone gives its nodes to remove the run's containers
ORPHAN_CLEANUP_S = 60.0


@dataclass
class DriverState:
    """What the controller reads of the dispatcher between requests (sent with each answer)."""

    lost: str = ""
    back_when: str = BACK_WHEN
    busy: bool = False
    concurrency: int = 1
    peak_in_flight: int = 0
    #: the tasks running (name -> when launched, the driver's monotonic clock) and how many wait
    running: dict[str, float] = field(default_factory=dict)
    queued: int = 0
    unfinished: int = 0


@dataclass
class Finished:
    """A `wait`'s answer: the tasks that finished, their outcomes, when each ended on its node,
    and what the nodes said meanwhile."""

    names: list[str]
    outcomes: dict[str, NodeOutcome]
    ended_at: dict[str, float]
    spans: list[tuple[float, float]]
    steps: list[tuple[str, StepFields]]
    events: list[str]


# -- in the driver's process -------------------------------------------------------------------
class _Server:
    """The driver: one `RayDispatcher`, asked by the controller over `conn`."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.dispatcher: RayDispatcher | None = None
        self._spans_sent = 0
        self._stopped = False

    def serve(self) -> None:
        while not self._stopped:
            try:
                method, args = self.conn.recv()
            except (EOFError, OSError):
                self._orphaned()
                return
            self._answer(method, args)
        self._leave()

    def _answer(self, method: str, args: tuple[object, ...]) -> None:
        try:
            result = getattr(self, f"do_{method}")(*args)
            reply: tuple[str, object, DriverState] = ("ok", result, self._state())
        except BaseException as exc:  # noqa: BLE001 - every error is the controller's to say
            reply = ("error", _described(exc), self._state())
        with contextlib.suppress(OSError):
            self.conn.send(reply)

    def _state(self) -> DriverState:
        d = self.dispatcher
        if d is None:
            return DriverState()
        running, queued = d.in_flight()
        return DriverState(
            lost=d.lost,
            back_when=d.back_when,
            busy=d.busy,
            concurrency=d.concurrency,
            peak_in_flight=d.peak_in_flight,
            running=running,
            queued=queued,
            unfinished=d.unfinished(),
        )

    def _ours(self) -> RayDispatcher:
        if self.dispatcher is None:
            raise RuntimeError("the driver was asked before it started")
        return self.dispatcher

    # the requests
    def do_start(self, run: SuperRun, live: bool) -> None:
        self.dispatcher = RayDispatcher(run, live=live)
        self.dispatcher.start()

    def do_submit(self, name: str, task: Task, deadline_s: float | None) -> None:
        self._ours().submit(name, task, deadline_s)

    def do_wait(self, timeout_s: float) -> Finished:
        d = self._ours()
        end = time.monotonic() + timeout_s
        names: list[str] = []
        while True:
            names += d.wait(max(0.0, min(WAIT_SLICE_S, end - time.monotonic())))
            if names or time.monotonic() >= end or self.conn.poll(0):
                break
        spans, self._spans_sent = d.spans[self._spans_sent :], len(d.spans)
        outcomes = {n: o for n in names if (o := d.peek(n)) is not None}
        return Finished(
            names=names,
            outcomes=outcomes,
            ended_at={n: d.ended_at.pop(n) for n in names if n in d.ended_at},
            spans=spans,
            steps=d.drain_steps(),
            events=d.take_events(),
        )

    def do_release(self, name: str) -> None:
        self._ours().release(name)

    def do_cancel(self, run_id: str | None) -> None:
        self._ours().cancel(run_id)

    def do_cleanup_on_nodes(self, run_id: str | None) -> list[str]:
        return self._ours().cleanup_on_nodes(run_id)

    def do_end_lines(self) -> list[str]:
        d = self._ours()
        return d.image_lines() + d.node_lines()

    def do_stop(self) -> None:
        self._stopped = True  # answered first: the controller does not wait for Ray's shutdown

    def _leave(self) -> None:
        if self.dispatcher is not None:
            self.dispatcher.stop()

    def _orphaned(self) -> None:
        """The controller is gone without `stop`: the run's tasks cancelled, its containers
        removed from every live node (bounded), the cluster left."""
        d = self.dispatcher
        if d is None:
            return
        with contextlib.suppress(Exception):
            if not d.lost:
                keep = d.run.settings.keep_failed
                d.cancel(None if keep else d.run.run_id)
                if not keep:
                    d.cleanup_on_nodes(d.run.run_id, timeout_s=ORPHAN_CLEANUP_S)
        d.stop()


#: the errors the driver passes on as what they are (the first that fits); any other is a bug
_PASSED_ON: tuple[type[BaseException], ...] = (
    ClusterLost,
    RayUnavailable,
    InfrastructureError,
    KeyboardInterrupt,
)


def _described(exc: BaseException) -> tuple[str, str]:
    """An error sent to the controller: its kind (the class in `_PASSED_ON` it is raised again
    as) and its text."""
    kind = next((cls for cls in _PASSED_ON if isinstance(exc, cls)), None)
    if kind is None:
        return "bug", "".join(traceback.format_exception(exc)).rstrip()
    return kind.__name__, str(exc)


def serve(fd: int) -> None:
    """The driver's process: Ctrl-C is the controller's to answer (it asks for the cancel)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _Server(Connection(fd)).serve()


# -- in the controller's process ---------------------------------------------------------------
class _Channel:
    """Requests to the driver sent in order by one thread, answers read in order by another and
    matched to their requests: the caller's thread only waits (a Ctrl-C there stops its wait,
    never a message half written or read), and a request is on its way while the one before it
    is still being answered (the driver then cuts a `wait` short)."""

    def __init__(
        self,
        conn: Connection,
        on_state: Callable[[DriverState], None],
        on_gone: Callable[[], str],
    ) -> None:
        self._conn = conn
        self._on_state = on_state
        self._on_gone = on_gone
        self._outbox: queue.SimpleQueue[tuple[str, tuple[object, ...], Future[object]] | None] = (
            queue.SimpleQueue()
        )
        self._pending: deque[Future[object]] = deque()
        self._lock = threading.Lock()
        #: why no request can be answered any more (the driver gone, or stopped)
        self.dead = ""
        #: the controller asked the driver to stop: its end is no loss
        self.stopping = False
        for loop, name in ((self._send, "send"), (self._read, "read")):
            threading.Thread(target=loop, name=f"pytest-super-driver-{name}", daemon=True).start()

    def ask(self, method: str, args: tuple[object, ...]) -> Future[object]:
        answer: Future[object] = Future()
        self._outbox.put((method, args, answer))
        return answer

    def finish(self) -> None:
        """No more requests (the sending thread ends; the reading one at the driver's end)."""
        self._outbox.put(None)

    def _send(self) -> None:
        while (request := self._outbox.get()) is not None:
            method, args, answer = request
            with self._lock:
                if self.dead:
                    answer.set_exception(ClusterLost(self.dead))
                    continue
                self._pending.append(answer)
            with contextlib.suppress(OSError, ValueError):  # the reading thread says why
                self._conn.send((method, args))

    def _read(self) -> None:
        while True:
            try:
                status, value, state = self._conn.recv()
            except (EOFError, OSError):
                break
            self._on_state(state)
            with self._lock:
                answer = self._pending.popleft()
            if status == "ok":
                answer.set_result(value)
            else:
                answer.set_exception(_raised(*value))
        why = "the run's Ray driver was stopped" if self.stopping else self._on_gone()
        with self._lock:
            self.dead = why
            pending, self._pending = list(self._pending), deque()
        for answer in pending:
            answer.set_exception(ClusterLost(why))


class DriverProcess:
    """`RayDispatcher`'s methods as the controller calls them, each run in the driver's process."""

    def __init__(self, run: SuperRun, *, live: bool = False) -> None:
        self.run = run
        self._live = live
        self.state = DriverState()
        #: when each finished task ended on its node (wall clock), until the session takes it
        self.ended_at: dict[str, float] = {}
        #: (start, end) on its node of each finished task
        self.spans: list[tuple[float, float]] = []
        self._done: dict[str, NodeOutcome] = {}
        self._steps: list[tuple[str, StepFields]] = []
        self._events: list[str] = []
        self._proc: subprocess.Popen[bytes] | None = None
        self._channel: _Channel | None = None

    # -- the process ------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the driver and connect it to the cluster; its errors as `RayDispatcher.start`
        raises them. Interrupted (Ctrl-C), the driver is ended with it."""
        check_ray_installed()
        ours, theirs = socket.socketpair()
        with ours, theirs:
            self._proc = subprocess.Popen(
                [sys.executable, "-c", _MAIN, str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
            conn = Connection(ours.detach())
        self._channel = _Channel(conn, self._take_state, self._driver_gone)
        try:
            self._call("start", self.run, self._live)
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM while it joins
            self._end_process()
            raise KeyboardInterrupt(
                f"interrupted while joining the Ray cluster at {ray_address(self.run)}"
            ) from None
        except BaseException:
            self._end_process()
            raise

    def stop(self) -> None:
        """The driver leaves the cluster by itself; the controller does not wait for it."""
        channel = self._channel
        if channel is not None and not channel.dead:
            channel.stopping = True
            with contextlib.suppress(Exception):
                channel.ask("stop", ()).result(STOP_ANSWER_S)
            channel.finish()

    def _end_process(self) -> None:
        if self._channel is not None:
            self._channel.stopping = True
            self._channel.finish()
        if self._proc is not None and self._proc.poll() is None:
            with contextlib.suppress(OSError):
                self._proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(5)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    # -- requests ---------------------------------------------------------------------------------
    def _call(self, method: str, *args: object) -> object:
        """Ask the driver and wait for its answer; the driver gone: `ClusterLost`, saying so."""
        if self._channel is None:
            raise ClusterLost("the run's Ray driver was never started")
        if self._channel.dead:
            raise ClusterLost(self._channel.dead)
        return self._channel.ask(method, args).result()

    def _take_state(self, state: DriverState) -> None:
        self.state = state

    def _driver_gone(self) -> str:
        """The message, and the state, of a driver process that ended unasked."""
        code = None
        if self._proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                code = self._proc.wait(2)
        gone = (
            f"the run's Ray driver (process {self.pid}) ended unasked"
            f"{f' with exit status {code}' if code is not None else ''} (Ray ends its "
            "driver's process at once when it judges its raylet or the head gone)"
        )
        self.state = dataclasses.replace(self.state, lost=gone, busy=False)
        return gone

    # -- RayDispatcher's face ---------------------------------------------------------------------
    @property
    def lost(self) -> str:
        return self.state.lost

    @property
    def back_when(self) -> str:
        return self.state.back_when

    @property
    def busy(self) -> bool:
        return self.state.busy

    @property
    def concurrency(self) -> int:
        return self.state.concurrency

    @property
    def peak_in_flight(self) -> int:
        return self.state.peak_in_flight

    def submit(self, name: str, task: Task, deadline_s: float | None) -> None:
        self._call("submit", name, task, deadline_s)

    def wait(self, timeout_s: float = 0.2) -> list[str]:
        finished = cast(Finished, self._call("wait", timeout_s))
        self._done.update(finished.outcomes)
        self.ended_at.update(finished.ended_at)
        self.spans += finished.spans
        self._steps += finished.steps
        self._events += finished.events
        return finished.names

    def drain_steps(self) -> list[tuple[str, StepFields]]:
        steps, self._steps = self._steps, []
        return steps

    def take_events(self) -> list[str]:
        events, self._events = self._events, []
        return events

    def outcome(self, name: str) -> NodeOutcome:
        return self._done.pop(name)

    def peek(self, name: str) -> NodeOutcome | None:
        return self._done.get(name)

    def release(self, name: str) -> None:
        self._done.pop(name, None)
        self._call("release", name)

    def in_flight(self) -> tuple[dict[str, float], int]:
        """As of the last answer (a status line's thread may ask: no request is made)."""
        return dict(self.state.running), self.state.queued

    def unfinished(self) -> int:
        return self.state.unfinished

    def cancel(self, run_id: str | None = None) -> None:
        self._call("cancel", run_id)

    def cleanup_on_nodes(self, run_id: str | None) -> list[str]:
        entries = cast(list[str], self._call("cleanup_on_nodes", run_id))
        return entries

    def end_lines(self) -> list[str]:
        """The dispatcher's end-of-run lines (`image_lines`, then `node_lines`), in one request;
        none once the driver is gone."""
        with contextlib.suppress(ClusterLost):
            lines = cast(list[str], self._call("end_lines"))
            return lines
        return []


def wait_for(
    dispatcher: DriverProcess,
    names: set[str],
    *,
    on_steps: Callable[[list[tuple[str, StepFields]]], None],
    should_stop: Callable[[], bool],
    on_events: Callable[[list[str]], None] = lambda events: None,
) -> Iterator[str]:
    """Yield each of `names` as its task finishes, showing live steps and what happened to
    nodes in between."""
    left = set(names)
    while left and not should_stop():
        finished = dispatcher.wait(0.2)
        steps = dispatcher.drain_steps()
        if steps:
            on_steps(steps)
        events = dispatcher.take_events()
        if events:
            on_events(events)
        for name in finished:
            left.discard(name)
            yield name
        if not dispatcher.busy and left:  # nothing runs that could still finish them
            return


def _raised(kind: str, text: str) -> BaseException:
    """The driver's error raised again here."""
    for cls in _PASSED_ON:
        if cls.__name__ == kind:
            return cls(text)
    return RuntimeError(f"the run's Ray driver failed:\n{text}")
