"""The kernel interface: one Jupyter kernel that runs notebook cells for one task.

A backend (`KernelBackend`: docker, local) provisions a kernel and returns an object that
satisfies `Kernel`, and removes what runs left behind.
Provisioning (starting a box) and running cells in it are different jobs: see `docker.py` and
`local.py` for the former, `runtime.py` for the latter.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

CellStatus = Literal["ok", "error", "timeout", "died"]


@dataclass
class CellResult:
    """What one cell produced.

    `output` is the raw text (stream, execute_result and display_data text/plain, errors as
    `ename: evalue` plus traceback), ANSI codes kept: landmarks are matched against it.
    `status` is "timeout" when the timeout expired; then `still_running` says whether the cell
    is still running (execute(..., interrupt_on_timeout=False)) or was interrupted.
    "died" means the kernel process died during the cell; the kernel has been restarted.
    """

    output: str
    status: CellStatus
    duration_s: float
    truncated: bool = False
    still_running: bool = False


@dataclass
class KernelSettings:
    """How to provision kernels; built once per run from the pytest options."""

    backend: Literal["docker", "local"] = "docker"
    image: str | None = None  # None: the default image of `pytest-super image build`
    docker_host: str | None = None  # None: DOCKER_HOST or the local socket
    mem: str = "4g"
    cpus: float = 2.0
    pids_limit: int = 1024
    network: Literal["bridge", "none"] = "bridge"
    git_mirrors: dict[str, str] = field(default_factory=dict)  # URL prefix -> host directory
    pip_cache: str | None = None  # docker volume name shared by task containers for pip's cache
    #: how the controller reaches a kernel's sockets: "mount" (a host folder bind-mounted into the
    #: box; the engine must share this host's filesystem), "relay" (through the engine's own
    #: connection), "auto" (relay for an engine on another machine, else mount)
    channel: Literal["auto", "mount", "relay"] = "auto"
    #: bound on what one box may write (bytes); None: unbounded. See docs/security.md.
    disk_bytes: int | None = None
    run_id: str = "adhoc"
    worker: str = "main"
    output_cap_bytes: int = 10_000_000
    startup_timeout_s: float = 60.0


@runtime_checkable
class Kernel(Protocol):
    """One live Jupyter kernel. Cells have IPython semantics (`!cmd`, `%cd`, `%%writefile`)."""

    @property
    def description(self) -> str:
        """A short human description, e.g. "docker container super-foo-gw0 (abc123)"."""
        ...

    def execute(
        self, code: str, timeout: float, *, interrupt_on_timeout: bool = True
    ) -> CellResult:
        """Run one cell. On timeout, interrupt it (default) or leave it running."""
        ...

    def wait(self, timeout: float) -> CellResult:
        """Keep collecting the output of a cell left running by a timeout (`continue_wait`)."""
        ...

    def interrupt(self) -> CellResult:
        """Interrupt the running cell and return the rest of its output. State survives."""
        ...

    def restart(self) -> None:
        """Restart the kernel process (state is lost, the box and its files stay)."""
        ...

    def read_file(self, path: str) -> str:
        """Read a text file, relative paths resolved against the kernel's current directory."""
        ...

    def write_file(self, path: str, text: str) -> None:
        """Write a text file, relative paths resolved against the kernel's current directory."""
        ...

    def read_bytes(self, path: str) -> bytes:
        """Read a file's bytes, relative paths resolved against the kernel's current directory."""
        ...

    def write_bytes(self, path: str, data: bytes) -> None:
        """Write a file's bytes, relative paths resolved against the kernel's current directory."""
        ...

    def check_limits(self) -> None:
        """Measure the kernel's box against its limits now (the disk, when watched); raise the
        `EpisodeEnd` of a limit it went over (`DiskLimitExceeded`). The runner calls it when an
        episode ends: a limit watched in the background may not have been measured since."""
        ...

    def is_alive(self) -> bool:
        """Is the kernel process still running in its box? (One engine call: the pool asks it of
        a kernel made ahead before handing it to its task.)"""
        ...

    def detach(self) -> str:
        """Stop talking to the kernel but leave its box running (`--super-keep`).

        Returns how a person gets in: the `docker exec` command and the connection file for
        `jupyter console --existing`.
        """
        ...

    def close(self) -> None:
        """Shut the kernel down and remove its box. Safe to call twice."""
        ...


@runtime_checkable
class KernelBackend(Protocol):
    """One way of running kernels, with its whole lifecycle (as inspect_ai's sandbox providers):
    provisioning a kernel for a task, and removing what runs left behind."""

    def provision(self, settings: KernelSettings, *, task_id: str) -> Kernel:
        """Start a fresh kernel for one task; it is ready to execute."""
        ...

    def cleanup_run(self, settings: KernelSettings, run_id: str) -> list[str]:
        """Remove what run `run_id` left behind (e.g. the boxes of killed workers); return their
        names. Raises `InfrastructureError` if the backend cannot be reached."""
        ...

    def cleanup_dead_runs(self, settings: KernelSettings) -> list[str]:
        """Remove what runs whose controller died left behind; return the names removed.
        Raises `InfrastructureError` if the backend cannot be reached."""
        ...


def console_command(connection_file: str) -> str:
    """The command that opens a console on a kept kernel: the `jupyter` of this Python's
    environment (jupyter_console is a dependency), so it works whichever venv is active."""
    jupyter = Path(sys.executable).parent / "jupyter"
    program = str(jupyter) if jupyter.exists() else "jupyter"
    return f"{program} console --existing {connection_file}"
