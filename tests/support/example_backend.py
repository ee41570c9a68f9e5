"""A third-party kernel backend, as another package would write one: it runs each kernel with the
local backend (an ipykernel subprocess) and records every lifecycle call it gets, one JSON line per
call, in the file the environment variable `EXAMPLE_BACKEND_LOG` names (nothing when unset).

Select it with `--super-backend=tests.support.example_backend:RecordingBackend`, or register it:

    [project.entry-points."pytest_super.backends"]
    recording = "tests.support.example_backend:RecordingBackend"

and use `--super-backend=recording`. tests/test_backends.py reads the record against the lifecycle
contract of `pytest_super.kernels.base.KernelBackend`.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any

from pytest_super.kernels.base import CellResult, Kernel, KernelSettings
from pytest_super.kernels.local import LocalBackend

LOG_VARIABLE = "EXAMPLE_BACKEND_LOG"


def record(call: str, **details: Any) -> None:
    """Append one line: the call, this process and thread, and `details`. Lines are short and
    written with O_APPEND in one write, so the processes of a run (the controller, the xdist
    workers) can share the file."""
    path = os.environ.get(LOG_VARIABLE)
    if not path:
        return
    line = {
        "call": call,
        "pid": os.getpid(),
        "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
        "thread": threading.current_thread().name,
        **details,
    }
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (json.dumps(line) + "\n").encode())
    finally:
        os.close(fd)


class RecordingBackend:
    """The local backend, with each call recorded. Made once per process, without arguments; it
    connects to nothing until asked for a kernel."""

    def __init__(self) -> None:
        self._local = LocalBackend()
        self._lock = threading.Lock()  # the contract: methods may be called from several threads
        self._made = 0
        record("init")

    def provision(self, settings: KernelSettings, *, task_id: str) -> Kernel:
        with self._lock:
            self._made += 1
            number = self._made
        record("provision", task_id=task_id, run_id=settings.run_id, kernel=number)
        return RecordingKernel(self._local.provision(settings, task_id=task_id), number)

    def cleanup_run(self, settings: KernelSettings, run_id: str) -> list[str]:
        record("cleanup_run", run_id=run_id)
        return self._local.cleanup_run(settings, run_id)

    def cleanup_dead_runs(self, settings: KernelSettings) -> list[str]:
        record("cleanup_dead_runs", run_id=settings.run_id)
        return self._local.cleanup_dead_runs(settings)


class RecordingKernel:
    """A kernel of the local backend whose `close` and `detach` are recorded; the rest is the
    local kernel's."""

    def __init__(self, kernel: Kernel, number: int) -> None:
        self._kernel = kernel
        self.number = number

    @property
    def description(self) -> str:
        return f"recorded {self._kernel.description}"

    def execute(
        self, code: str, timeout: float, *, interrupt_on_timeout: bool = True
    ) -> CellResult:
        return self._kernel.execute(code, timeout, interrupt_on_timeout=interrupt_on_timeout)

    def wait(self, timeout: float) -> CellResult:
        return self._kernel.wait(timeout)

    def interrupt(self) -> CellResult:
        return self._kernel.interrupt()

    def restart(self) -> None:
        self._kernel.restart()

    def read_file(self, path: str) -> str:
        return self._kernel.read_file(path)

    def write_file(self, path: str, text: str) -> None:
        self._kernel.write_file(path, text)

    def read_bytes(self, path: str) -> bytes:
        return self._kernel.read_bytes(path)

    def write_bytes(self, path: str, data: bytes) -> None:
        self._kernel.write_bytes(path, data)

    def check_limits(self) -> None:
        self._kernel.check_limits()

    def is_alive(self) -> bool:
        return self._kernel.is_alive()

    def detach(self) -> str:
        record("detach", kernel=self.number)
        return self._kernel.detach()

    def close(self) -> None:
        record("close", kernel=self.number)
        self._kernel.close()
