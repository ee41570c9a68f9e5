"""SIGTERM ends a run the way Ctrl-C does.

A CI cancel, `timeout` or `kill` sends SIGTERM, whose default action ends the process at once: no
JUnit file, no summary, containers and key folders left. With a run going (`--super-agent`), the
controller and each xdist worker turn the first SIGTERM into KeyboardInterrupt, so pytest's own
interrupt path runs: tasks' fixtures remove their containers, reports are written. Later SIGTERMs
are ignored while that clean-up runs (SIGKILL stays the hard stop), and so is one that arrives once
the session is finishing (`ignore_while_finishing`): the tasks are done, and an interrupt inside
the writing of the reports would only lose them. A handler someone else installed is left alone.

Ctrl-C (SIGINT) is answered at once (`stop_on_ctrl_c`). The controller's first Ctrl-C prints what
it is doing, passes the interrupt on to its xdist workers (a `kill -INT` of the controller alone
reached none of them, and their tasks ran on) and goes on as pytest's KeyboardInterrupt: tasks are
interrupted, their containers removed, partial results written; while that takes time (a slow
engine), a line every few seconds says so. A second Ctrl-C stops the controller at once (exit
status 2) and prints the `pytest-super cleanup --run <id>` command that removes what is left.
A worker takes its first SIGINT as KeyboardInterrupt and ignores later ones, so its clean-up is
not cut short by the controller passing on an interrupt the terminal already sent it.

`finish_worker_reports`: an interrupted xdist controller stops reading its workers' events at
once; tasks a worker finished just before or after the signal would be lost. It reads what the
workers still send, for a short grace, before the reports are written. Interrupted before any
task started (a large collection), no report can come: it waits only `COLLECTING_WAIT_S` for
the workers to end their sessions, and ends (SIGKILL) each one still collecting then, as xdist's
own teardown would only after 10 s (`NodeManager.EXIT_TIMEOUT`): a worker that does not stop on
its interrupt made the run end 10 s later (18 s before the grace was left out in that case, the
18.2 s of issue 41 cause 9). Nothing is lost: no task ran, so no container, key folder or result
is the worker's. Which workers are up it knows from xdist's documented hooks (`Workers`); the
events themselves only xdist's private queue holds (`thirdparty.undispatched_worker_events`:
thirdparty.py is the one adapter to other plugins' internals).
"""

from __future__ import annotations

import contextlib
import gc
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

import pytest

from pytest_super import progress, thirdparty, tracebacks
from pytest_super.process_identity import child_pids
from pytest_super.scratch import remove_left

#: a signal's handler as `signal.signal` takes and gives it back
_Handler = Callable[[int, FrameType | None], object] | int | signal.Handlers | None

_PREVIOUS = pytest.StashKey[_Handler]()
_PREVIOUS_SIGINT = pytest.StashKey[_Handler]()
#: whether a task started in this run (on the controller of xdist: a worker said so)
_TASK_STARTED = pytest.StashKey[bool]()
#: seconds between the lines that say the controller is still stopping
PROGRESS_EVERY_S = 3.0
#: seconds an interrupted controller keeps reading its workers' events: a worker's interrupted
#: task removes its container (measured 0.3-1.5 s on the test engine) before it reports and exits
WORKER_GRACE_S = 8.0
#: seconds an interrupted controller, no task started, waits for its workers to end their
#: sessions before it ends them: a worker's interrupt took 0.05-1.2 s here (load 20-34) from
#: the signal to its session's end
COLLECTING_WAIT_S = 3.0
#: seconds an interrupted controller waits for the workers it ended with SIGKILL to be gone: the
#: run's clean-up removes a box folder whose maker is gone, not one still dying (issue 42)
KILLED_WAIT_S = 10.0


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


class Workers:
    """The controller's xdist workers as xdist's documented hooks tell of them (the recorder
    passes them on): each worker set up (`pytest_configure_node`, a crashed worker's
    replacement too) and each one down (`pytest_testnodedown`); and the collection errors
    already reported (xdist reports each once, however many workers met it)."""

    def __init__(self) -> None:
        #: xdist's WorkerControllers (only told apart here, and handed to thirdparty)
        self.nodes: set[object] = set()
        self.down: set[object] = set()
        self.collect_errors: set[str] = set()

    def started(self, node: object) -> None:
        self.nodes.add(node)

    def went_down(self, node: object) -> None:
        self.down.add(node)

    def any_up(self) -> bool:
        return bool(self.nodes - self.down)

    def first_collect_error(self, report: pytest.CollectReport) -> bool:
        """Whether `report` is a failed collection not reported before (and remember it)."""
        if not report.failed:
            return False
        key = str(report.longrepr)
        first = key not in self.collect_errors
        self.collect_errors.add(key)
        return first


def finish_worker_reports(
    config: pytest.Config,
    workers: Workers,
    grace_s: float = WORKER_GRACE_S,
    collecting_s: float = COLLECTING_WAIT_S,
) -> int:
    """In an interrupted xdist controller: pass on the reports the workers still send until
    every worker is down or `grace_s` passed; return how many reports. Before any task started,
    `collecting_s` instead, and the workers still up then are ended (`_end_collecting_workers`).

    A test report goes to pytest's own `pytest_runtest_logreport` (with the `node` attribute
    xdist documents on reports), a collection error to `pytest_collectreport`, as xdist's loop
    would have; a worker's end only marks it down (no replacement worker is started). Without
    xdist's queue (no xdist, or another version) it does nothing.
    """
    events = thirdparty.undispatched_worker_events(config)
    if events is None:
        return 0
    handled = 0
    begun = time.monotonic()
    started = config.stash.get(_TASK_STARTED, False)
    while workers.any_up() and time.monotonic() < begun + (
        grace_s if started else min(grace_s, collecting_s)
    ):
        try:
            name, kwargs = events.get(timeout=0.1)
        except queue.Empty:
            continue
        started = started or name == "logstart"
        handled += _pass_on(config, workers, name, kwargs)
    _end_workers_still_up(config, workers, started, grace_s)
    return handled


def _pass_on(
    config: pytest.Config,
    workers: Workers,
    name: str,
    kwargs: dict[str, Any],  # Any: xdist (its events' reports and WorkerControllers are untyped)
) -> int:
    """One event of xdist's queue handled as its loop would have; 1 for a report passed on."""
    if name in ("workerfinished", "errordown"):  # down for good: never replaced now
        workers.went_down(kwargs.get("node"))
    elif name == "testreport":
        report = kwargs["rep"]
        report.node = kwargs.get("node")
        config.hook.pytest_runtest_logreport(report=report)
        return 1
    elif name == "collectreport" and workers.first_collect_error(kwargs["rep"]):
        config.hook.pytest_collectreport(report=kwargs["rep"])
        return 1
    return 0


def _end_workers_still_up(
    config: pytest.Config, workers: Workers, started: bool, grace_s: float
) -> None:
    """SIGKILL each worker still up once the wait is over, as xdist's teardown would after
    waiting 10 s more (`NodeManager.EXIT_TIMEOUT`): with no task started it holds nothing of the
    run's; with tasks started, the controller's end-of-run clean-up removes the kernels of the
    tasks it was running (a worker killed with SIGKILL, KernelBackend's contract). A worker that
    ignores its interrupt once its tasks ran (issue 42: 18 s, the grace then xdist's wait) is
    ended at the grace's end."""
    left = [thirdparty.worker_process(node) for node in workers.nodes - workers.down]
    running = [process for process in left if process is not None and process.poll() is None]
    if not running:
        return
    if started:
        what = (
            f"still running {grace_s:g} s after the interrupt: ended (the run's clean-up removes "
        )
        what += "their kernels)"
    else:
        what = f"still collecting {COLLECTING_WAIT_S:g} s after the interrupt (no task had started)"
        what += ": ended"
    say(config, f"pytest-super: {len(running)} xdist worker(s) {what}")
    for process in running:
        with contextlib.suppress(OSError):
            process.kill()
    # reaped before the clean-up: a worker killed while it started a box left its folder, whose
    # owner file names it; the clean-up removes that folder only once its maker is gone
    deadline = time.monotonic() + KILLED_WAIT_S
    for process in running:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(max(0.0, deadline - time.monotonic()))


def say(config: pytest.Config, line: str) -> None:
    """Write `line` to the terminal, past pytest's output capture (the status line of
    --super-progress cleared and stopped first: it never shares a line with this)."""
    status = progress.progress_of(config)
    if status is not None:
        status.end(wait=False)
    with contextlib.suppress(OSError):
        os.write(thirdparty.terminal_fd(config), (line + "\n").encode("utf-8", "replace"))


class _CtrlC:
    """The SIGINT handler of one process (see the module's docstring)."""

    def __init__(
        self, config: pytest.Config, run_id: str, controller: bool, where: str = ""
    ) -> None:
        self.config = config
        self.run_id = run_id
        #: what `pytest-super cleanup --run ID` needs besides to reach the run's tasks (a cluster)
        self.where = where
        self.controller = controller
        self.count = 0
        self.started = 0.0
        self.done = threading.Event()

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1
        if not self.controller:
            if self.count == 1:
                raise KeyboardInterrupt("SIGINT received")
            return  # the clean-up of the first goes on
        if self.count == 1:
            self.started = time.monotonic()
            self.say(
                f"\npytest-super: stopping run {self.run_id}: interrupting its tasks and removing "
                "their containers ... (Ctrl-C again to stop at once)"
            )
            _interrupt_children()
            threading.Thread(target=self._progress, daemon=True).start()
            raise KeyboardInterrupt("SIGINT received")
        self.say(
            f"pytest-super: stopped at once; remove what is left of run {self.run_id} with:\n"
            f"    pytest-super cleanup --run {self.run_id}{self.where}"
        )
        os._exit(2)  # pytest's exit status for an interrupted run

    def _progress(self) -> None:
        while not self.done.wait(PROGRESS_EVERY_S):
            elapsed = time.monotonic() - self.started
            self.say(
                f"pytest-super: still stopping run {self.run_id} ({elapsed:.0f} s): removing "
                "containers (Ctrl-C again to stop at once)"
            )

    def say(self, line: str) -> None:
        say(self.config, line)


def _interrupt_children() -> None:
    """SIGINT to this process's direct children (the xdist workers), read from /proc (Linux;
    elsewhere nothing: the terminal's Ctrl-C reaches the whole process group anyway)."""
    for child in child_pids(os.getpid()):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(child, signal.SIGINT)


def stop_on_ctrl_c(
    config: pytest.Config, run_id: str, *, controller: bool, where: str = ""
) -> None:
    """Install the Ctrl-C handler of this process (main thread, and only over Python's default
    handler: one someone else installed is left alone), and make the interrupted run's end
    quick (`_QuickInterruptEnd`)."""
    if not config.pluginmanager.has_plugin(_QUICK_END):
        config.pluginmanager.register(_QuickInterruptEnd(config), _QUICK_END)
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return
    config.stash[_PREVIOUS_SIGINT] = signal.signal(
        signal.SIGINT, _CtrlC(config, run_id, controller, where)
    )


_QUICK_END = "pytest-super-quick-interrupt-end"


class _QuickInterruptEnd:
    """What an interrupted run (Ctrl-C, SIGTERM) spends on nothing the user sees, left out.

    - The traceback is cut to the entry pytest shows. At an interrupt pytest's terminal reporter
      formats the whole traceback of the KeyboardInterrupt at once (`excinfo.getrepr(funcargs=
      True)`: each frame's source, its AST, its arguments), and without `--full-trace` prints
      only the line of the last visible entry. Measured with a cluster run's Ctrl-C: 0.97 s of
      the 2.1 s from the signal to the end, for seven entries of pytest's and pluggy's own
      frames. Cut to that last entry first, the line printed is the same; with `--full-trace`
      the traceback is left whole.
    - The heap is frozen (`gc.freeze`): what the process holds at the interrupt is left out of
      every later garbage collection, pytest's own at its end (`unraisableexception`: 0.13-0.22
      s) and the interpreter's last one after `atexit` (about 1.1 s with Ray's modules loaded:
      `py-spy dump` showed `gc_collect_main` alone), since the process is about to end and
      freeing it to the system changes nothing. Objects still go when their last reference
      does (files are closed, containers removed as before); a cycle among them is no longer
      looked for, so an unraisable exception in one is not reported on an interrupted run.
      With `--full-trace`, left as it was."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_runtest_logstart(self, nodeid: str, location: object) -> None:
        self.config.stash[_TASK_STARTED] = True  # see finish_worker_reports

    @pytest.hookimpl(tryfirst=True)
    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        with contextlib.suppress(Exception):  # the interrupt's path must never fail here
            tracebacks.leave_out_lineless_entries(excinfo)  # pytest could not format it
        if self.config.option.fulltrace:
            return
        gc.freeze()
        with contextlib.suppress(Exception):  # the interrupt's path must never fail here
            entries = excinfo.traceback
            shown = [entry for entry in entries if not entry.ishidden(excinfo)][-1:]
            if shown and len(entries) > 1:
                excinfo.traceback = type(entries)(shown)


class Stopped(KeyboardInterrupt):
    """A command outside pytest was stopped by `signum` (SIGINT or SIGTERM)."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"{signal.Signals(signum).name} received")
        self.signum = signum


@contextlib.contextmanager
def quiet_interrupts() -> Iterator[None]:
    """For a command outside pytest (`pytest-super replay-run`): the first SIGINT or SIGTERM
    raises `Stopped` in the main thread, so the command's `with` blocks remove their scratch
    folders as it unwinds (and `scratch.remove_left` those whose removal it cut); later ones are
    ignored while that runs (SIGKILL stays the hard stop).
    The handlers before are put back at the end."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: FrameType | None) -> None:
        for number in (signal.SIGINT, signal.SIGTERM):
            signal.signal(number, signal.SIG_IGN)
        raise Stopped(signum)

    previous = {number: signal.signal(number, stop) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    except Stopped:
        remove_left()  # a scratch folder whose removal it cut (further signals are ignored now)
        raise
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def restore_ctrl_c(config: pytest.Config) -> None:
    previous = config.stash.get(_PREVIOUS_SIGINT, None)
    if previous is None or threading.current_thread() is not threading.main_thread():
        return
    handler = signal.getsignal(signal.SIGINT)
    if isinstance(handler, _CtrlC):
        handler.done.set()
    signal.signal(signal.SIGINT, previous)
    del config.stash[_PREVIOUS_SIGINT]
