"""Ctrl-C on a slow engine (issue 20): the first Ctrl-C is answered at once and says what it is
doing, progress shows while containers are removed, a second Ctrl-C exits within 2 s and prints
the `pytest-super cleanup --run <id>` command, and that command removes what was left.

The slow engine is the real one behind a proxy on a unix socket of the test's own, which holds
every `DELETE /containers/...` for a minute (as an engine under load or a hung storage driver
would)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.support.projects import (
    PytestRun,
    containers,
    make_project,
    run_pytest,
    sleep_then_answer,
    task_yaml,
    wait_for_container,
)

pytestmark = pytest.mark.docker

ENGINE_SOCKET = "/var/run/docker.sock"
DELETE_DELAY_S = 60.0


class SlowDeleteProxy:
    """A unix-socket proxy to the engine that, once `armed`, delays each `DELETE` request of a
    container by `delay_s`."""

    def __init__(self, path: Path, delay_s: float) -> None:
        self.path = path
        self.delay_s = delay_s
        self.armed = False
        self.deletes = 0
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(str(path))
        self._server.listen(64)
        self._closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            upstream.connect(ENGINE_SOCKET)
            threading.Thread(target=self._pipe, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, False), daemon=True).start()

    def _pipe(self, source: socket.socket, target: socket.socket, requests: bool) -> None:
        with contextlib.suppress(OSError):
            while chunk := source.recv(65536):
                delete = chunk.startswith(b"DELETE /") and b"/containers/" in chunk[:200]
                if requests and self.armed and delete:
                    self.deletes += 1
                    if self._closed.wait(self.delay_s):
                        return
                target.sendall(chunk)
        for end in (source, target):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._closed.set()
        self._server.close()


def _wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def test_ctrl_c_on_a_slow_engine_says_what_it_does_and_a_second_one_exits_at_once(
    project_dir: Path, engine, tmp_path_factory: pytest.TempPathFactory
) -> None:
    sock_dir = tmp_path_factory.mktemp("proxy")  # short enough for a unix socket path
    proxy = SlowDeleteProxy(sock_dir / "engine.sock", DELETE_DELAY_S)
    make_project(project_dir, {"expert/zlong": task_yaml("zlong", sleep_then_answer(120))})
    run = PytestRun(
        project_dir,
        "tasks",
        "--super-agent=gold",
        f"--super-docker-host=unix://{proxy.path}",
        "-p",
        "no:randomly",
    )
    try:
        box = wait_for_container(engine, project_dir, "zlong")  # this run's, not another test's
        run_id = box.labels["pytest-super.run"]
        proxy.armed = True
        os.kill(run.pid, signal.SIGINT)
        first = time.monotonic()
        # bounds well under the engine's DELETE_DELAY_S, none near what the steps take (issue 42:
        # the machine's load decides those): what is checked is that the run never waits for it
        _wait_for(lambda: f"stopping run {run_id}" in run.output(), 20, "the stopping line")
        # the removal hangs on the engine: the user sees that it is still going on
        _wait_for(lambda: proxy.deletes >= 1, 20, "the container's removal to start")
        _wait_for(lambda: "still stopping" in run.output(), 20, "a progress line")
        assert run.proc.poll() is None  # still removing, as the engine is slow
        os.kill(run.pid, signal.SIGINT)
        second = time.monotonic()
        code = run.proc.wait(timeout=DELETE_DELAY_S / 4)
        assert time.monotonic() - second < DELETE_DELAY_S / 4  # at once, not after the removal
        assert time.monotonic() - first < DELETE_DELAY_S  # it never waited for the engine
    finally:
        proxy.close()
        run.kill_group()
    out = run.output()
    assert code == 2, out
    command = re.search(r"pytest-super cleanup --run (\S+)", out)
    assert command is not None and command.group(1) == run_id, out
    left = containers(engine, run_id=run_id)
    assert left, "the interrupted removal left the container: what the command is for"
    done = subprocess.run(
        [str(Path(sys.executable).parent / "pytest-super"), "cleanup", "--run", run_id],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert containers(engine, run_id=run_id) == []


#: appended to a project's conftest: how many objects the garbage collector had frozen when pytest
#: ended (`interrupts._QuickInterruptEnd` freezes the heap of an interrupted run)
FREEZE_PROBE = """

def pytest_unconfigure(config):
    import gc
    pathlib.Path(str(config.rootpath), "frozen.txt").write_text(str(gc.get_freeze_count()))
"""


#: appended to a project's conftest: `{statement}` run at the hook `{hook}` in a frame at an
#: instruction of no source line (`tb_lineno` None, Python 3.11+), made certain by a code object
#: without a line table
LINELESS = """

import types

import pytest


def _raise():
    {statement}


@pytest.hookimpl(tryfirst=True)
def {hook}(item):
    types.FunctionType(_raise.__code__.replace(co_linetable=b""), {{"pytest": pytest}})()
"""
LINELESS_INTERRUPT = LINELESS.format(
    statement="raise KeyboardInterrupt", hook="pytest_runtest_setup"
)


@pytest.mark.parametrize("full_trace", [False, True], ids=["default", "full-trace"])
def test_an_interrupt_where_python_knows_no_line_ends_the_run_as_interrupted(
    project_dir: Path, engine, full_trace: bool
) -> None:
    """A signal may interrupt a frame where Python knows no source line (in a fresh clone's
    `make test` SIGINT did so, in the --full-trace case below): pytest cannot format that
    entry, and the run ended with pytest's own TypeError and exit status 1. The entry is left
    out; the run ends as interrupted, exit status 2, the traceback shown as usual."""
    make_project(project_dir, {"expert/zlong": task_yaml("zlong", sleep_then_answer(120))})
    with (project_dir / "conftest.py").open("a") as conftest:
        conftest.write(LINELESS_INTERRUPT)
    args = ["tasks", "--super-agent=gold", "-p", "no:randomly"]
    code, out = run_pytest(project_dir, *args, *(["--full-trace"] if full_trace else []))
    assert code == 2, out
    assert "unsupported operand" not in out and "Traceback (most recent call last)" not in out, out
    assert re.search(r"^\S+:\d+: KeyboardInterrupt", out, re.MULTILINE), out
    pytest_frames = re.findall(r"_pytest[/\\]\w+\.py:\d+", out)
    assert (len(pytest_frames) > 3) if full_trace else (pytest_frames == []), out


#: pytest-timeout's failure (its signal method raises it in whatever frame runs), so raised
LINELESS_TIMEOUT = LINELESS.format(
    statement='pytest.fail("Timeout (>1.0s from pytest-timeout).")', hook="pytest_runtest_call"
)


def test_a_tasks_failure_raised_where_python_knows_no_line_is_reported_not_an_internal_error(
    project_dir: Path, engine
) -> None:
    """The same entry in a task's failure (pytest-timeout's signal method fails the task in
    whatever frame runs): pytest's report of it raised TypeError, an INTERNALERROR that ended
    the session. The task is reported as failed, with the failure's message."""
    make_project(project_dir, {"expert/quick": task_yaml("quick", sleep_then_answer(0))})
    with (project_dir / "conftest.py").open("a") as conftest:
        conftest.write(LINELESS_TIMEOUT)
    code, out = run_pytest(project_dir, "tasks", "--super-agent=gold", "-p", "no:randomly")
    assert code == 1, out
    assert "INTERNALERROR" not in out and "unsupported operand" not in out, out
    assert "Timeout (>1.0s from pytest-timeout)." in out and "1 failed" in out, out


@pytest.mark.parametrize("full_trace", [False, True], ids=["default", "full-trace"])
def test_an_interrupted_run_prints_the_one_traceback_line_and_leaves_its_heap_uncollected(
    project_dir: Path, engine, full_trace: bool
) -> None:
    """What an interrupted run spends nothing on (`_QuickInterruptEnd`): the traceback pytest
    does not print is not formatted, and the heap is left out of the garbage collections of the
    process's end; `--full-trace` shows the whole traceback and leaves the collector as it was."""
    make_project(project_dir, {"expert/zlong": task_yaml("zlong", sleep_then_answer(120))})
    with (project_dir / "conftest.py").open("a") as conftest:
        conftest.write(FREEZE_PROBE)
    args = ["tasks", "--super-agent=gold", "-p", "no:randomly"]
    run = PytestRun(project_dir, *args, *(["--full-trace"] if full_trace else []))
    try:
        wait_for_container(engine, project_dir, "zlong")  # this run's: the other worker's may run
        os.kill(run.pid, signal.SIGINT)
        code = run.proc.wait(timeout=60)
    finally:
        run.kill_group()
    out = run.output()
    assert code == 2, out
    frozen = int((project_dir / "frozen.txt").read_text())
    pytest_frames = re.findall(r"_pytest[/\\]\w+\.py:\d+", out)
    if full_trace:
        assert frozen == 0, out
        assert len(pytest_frames) > 3, out  # the whole traceback, pytest's own frames included
    else:
        assert frozen > 10_000, out  # the heap of a run with Docker's and Jupyter's clients
        assert pytest_frames == [], out
        assert re.search(r"^\S+:\d+: KeyboardInterrupt", out, re.MULTILINE), out
        assert "use --full-trace" in out, out
