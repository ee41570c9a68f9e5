"""The local backend: an ipykernel subprocess on this machine, in a fresh temporary directory.

`LocalBox` is the *deployment* half (start, restart, remove the process); `JupyterKernel` in
`runtime.py` runs the cells. The local backend isolates nothing: the agent's code runs as the
user who runs pytest, with their files and network. It exists for development and for machines
without Docker. What it does keep from the kernel: every environment variable whose name holds
KEY, TOKEN, SECRET or PASSWORD (so the LLM API key never reaches agent code).
"""

from __future__ import annotations

import atexit
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
import weakref
from collections.abc import Mapping
from pathlib import Path

from pytest_super.errors import KernelStartError
from pytest_super.kernels.base import (
    BackendBase,
    BackendResources,
    ImageSpec,
    Kernel,
    KernelSettings,
    TaskImageUnsupported,
    console_command,
)
from pytest_super.kernels.jupyter.runtime import JupyterKernel

SECRET_NAME_PARTS = ("KEY", "TOKEN", "SECRET", "PASSWORD")
#: the ports of a kernel's connection file
PORT_NAMES = ("shell", "iopub", "stdin", "control", "hb")

_LIVE_BOXES: weakref.WeakSet[LocalBox] = weakref.WeakSet()
_warned = False


def git_mirror_env(git_mirrors: Mapping[str, str]) -> dict[str, str]:
    """Git configuration, as environment variables, that makes clones of each URL prefix come
    from its directory: `url.file:///DIR/.insteadOf=PREFIX/`, plus `safe.directory=*` (mirrors
    may belong to another user) and `protocol.file.allow=always` (for mirrored submodules).

    Both sides are taken to name directories: `https://github.com/org` and `/m` turn
    `git clone https://github.com/org/foo` into a clone of `/m/foo`.
    """
    pairs = [("safe.directory", "*"), ("protocol.file.allow", "always")]
    for prefix, directory in git_mirrors.items():
        target = "file://" + str(Path(directory).resolve()).rstrip("/") + "/"
        pairs.append((f"url.{target}.insteadOf", prefix.rstrip("/") + "/"))
    env = {"GIT_CONFIG_COUNT": str(len(pairs))}
    for i, (key, value) in enumerate(pairs):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    return env


def kernel_environment(
    host_env: Mapping[str, str], git_mirrors: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The host's environment minus secret-looking names, plus the git mirror configuration."""
    env = {
        name: value
        for name, value in host_env.items()
        if not any(part in name.upper() for part in SECRET_NAME_PARTS)
        and not name.startswith("GIT_CONFIG_")
    }
    # ipykernel's debugger prints a warning about frozen modules at start-up without it
    env.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    if git_mirrors:
        env.update(git_mirror_env(git_mirrors))
    return env


class LocalBox:
    """An ipykernel subprocess (its own session and process group) in a temporary directory.

    The connection file (fresh HMAC key each start) lives in a separate 0700 directory, mode 0600;
    the kernel's stderr goes to `kernel.log` beside it. Its ports are 0: the kernel binds ports of
    its own choosing and writes them into the file (`connection_info` waits for them). Ports chosen
    here were closed until the kernel bound them, free for any process to take in between: an
    outgoing connection's ephemeral port took one in a fresh clone's `make test` (the kernel's log:
    "zmq.error.ZMQError: Address already in use").
    """

    def __init__(
        self,
        *,
        task_id: str = "adhoc",
        git_mirrors: Mapping[str, str] | None = None,
        python: str = sys.executable,
        startup_timeout_s: float = 60.0,
    ) -> None:
        safe_id = re.sub(r"[^A-Za-z0-9_.-]+", "-", task_id)[:60]
        self.work_dir = tempfile.mkdtemp(prefix=f"pytest-super-{safe_id}-")
        self._private_dir = tempfile.mkdtemp(prefix="pytest-super-local-conn-")
        self.connection_file = os.path.join(self._private_dir, "kernel.json")
        self.log_file = os.path.join(self._private_dir, "kernel.log")
        self._python = python
        self._startup_timeout_s = startup_timeout_s
        self._env = kernel_environment(os.environ, git_mirrors)
        self._proc: subprocess.Popen[bytes] | None = None
        self._info: dict[str, object] = {}
        self._removed = False
        self.description = f"local kernel in {self.work_dir}"
        _LIVE_BOXES.add(self)
        try:
            self._launch()
        except BaseException:
            self.remove()
            raise

    def _launch(self) -> None:
        # every port 0, written as is (jupyter_client's writer would choose them)
        self._info = {f"{name}_port": 0 for name in PORT_NAMES}
        self._info.update(
            ip="127.0.0.1",
            transport="tcp",
            key=secrets.token_hex(32),
            signature_scheme="hmac-sha256",
            kernel_name="",
        )
        if os.path.exists(self.connection_file):
            os.unlink(self.connection_file)  # a restart: the last kernel's ports
        fd = os.open(self.connection_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            json.dump(self._info, out)
        with open(self.log_file, "ab") as log:
            self._proc = subprocess.Popen(
                [
                    self._python,
                    "-m",
                    "ipykernel_launcher",
                    "-f",
                    self.connection_file,
                    "--HistoryManager.hist_file=:memory:",
                    "--IPKernelApp.log_level=ERROR",  # its warnings would bury the real error
                ],
                cwd=self.work_dir,
                env=self._env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,  # ipykernel echoes fd-level output here: not needed
                stderr=log,
                start_new_session=True,
            )
        self.description = f"local kernel pid {self._proc.pid} in {self.work_dir}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def connection_info(self) -> dict[str, object]:
        """The kernel's connection info, once it has written the ports it bound into its file."""
        deadline = time.monotonic() + self._startup_timeout_s
        while not all(self._info.get(f"{name}_port") for name in PORT_NAMES):
            if not self.is_alive():
                reason = self.death_reason() or "reason unknown"
                raise KernelStartError(
                    f"the kernel in {self.description} exited before it answered ({reason}); "
                    "check that ipykernel is installed where the kernel runs and look at the "
                    "kernel's log"
                )
            if time.monotonic() >= deadline:
                raise KernelStartError(
                    f"the kernel in {self.description} did not write the ports it bound into "
                    f"{self.connection_file} within {self._startup_timeout_s:g} s; raise the "
                    "startup timeout on a slow machine and look at the kernel's log"
                )
            time.sleep(0.02)
            try:
                with open(self.connection_file) as written:
                    self._info = json.load(written)
            except (OSError, ValueError):  # caught while the kernel writes it
                continue
        return dict(self._info)

    def is_alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def restart(self) -> dict[str, object]:
        self._kill()
        self._launch()
        return self.connection_info()

    def check_limits(self) -> None:
        """No limits are watched on this host's processes."""

    def death_reason(self) -> str:
        code = self._proc.poll() if self._proc else None
        if code is None:
            return ""
        if code >= 0:
            last = self._last_log_line()
            return f"exit code {code}" + (f"; the kernel's log ends with: {last}" if last else "")
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        if -code == signal.SIGKILL:
            return f"killed by {name}, perhaps by the out-of-memory killer"
        return f"killed by {name}"

    def _last_log_line(self) -> str:
        try:
            with open(self.log_file, "rb") as log:
                log.seek(max(os.path.getsize(self.log_file) - 4096, 0))
                lines = log.read().decode("utf-8", "replace").strip().splitlines()
        except OSError:
            return ""
        return lines[-1].strip() if lines else ""

    def detach(self) -> str:
        _LIVE_BOXES.discard(self)
        return (
            f"{self.description} left running (pid {self.pid}).\n"
            f"  connect:  {console_command(self.connection_file)}\n"
            f"  files:    cd {self.work_dir}\n"
            f"  stop:     kill -9 -{self.pid}; rm -rf {self.work_dir} {self._private_dir}"
        )

    def remove(self) -> None:
        if self._removed:
            return
        self._removed = True
        _LIVE_BOXES.discard(self)
        self._kill()
        shutil.rmtree(self.work_dir, ignore_errors=True)
        shutil.rmtree(self._private_dir, ignore_errors=True)

    def _kill(self) -> None:
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the kernel and the commands it started
        except (ProcessLookupError, PermissionError):
            proc.kill()
        proc.wait()


@atexit.register
def _remove_leftover_boxes() -> None:
    for box in list(_LIVE_BOXES):
        box.remove()


def start_local_kernel(settings: KernelSettings, *, task_id: str) -> JupyterKernel:
    """Start an ipykernel subprocess for `task_id` and return it ready, cwd a fresh temp dir."""
    global _warned
    if not _warned:
        _warned = True
        warnings.warn(
            "pytest-super: the local backend isolates nothing: agent code runs on this machine "
            "as you, with your files and network. Use the docker backend for isolation.",
            UserWarning,
            stacklevel=2,
        )
    box = LocalBox(
        task_id=task_id,
        git_mirrors=settings.git_mirrors,
        startup_timeout_s=settings.startup_timeout_s,
    )
    return JupyterKernel(
        box,
        output_cap_bytes=settings.output_cap_bytes,
        startup_timeout_s=settings.startup_timeout_s,
    )


class LocalBackend(BackendBase):
    """The local backend: an ipykernel subprocess per kernel. Its boxes are removed when the
    process that made them exits (`_remove_leftover_boxes`), so no later cleanup finds any.
    No image to prepare, nothing held to shut down, no bound on a kernel (`describe`), no engine
    (`BackendBase`'s defaults)."""

    #: kernels start when a task asks for one: a subprocess, nothing worth making ahead
    warm_pool = False
    #: what the conformance suite must not ask (`base.CAPABILITIES`)
    unsupported = {
        "leftovers": "a local kernel is a subprocess removed when the process that made it "
        "exits; `cleanup_run` has nothing to find",
    }

    def provision(self, settings: KernelSettings, *, task_id: str) -> Kernel:
        return start_local_kernel(settings, task_id=task_id)

    def image_for(self, settings: KernelSettings, profile: str) -> str:
        """No image: a subprocess of this machine's Python (`base.ImageBackend`)."""
        return "(local kernel)"

    def prepare_image(self, settings: KernelSettings, spec: ImageSpec) -> str:
        """Not supported (`base.TaskImageBackend`): a local kernel runs in this machine's Python,
        never in an image; the error says what to do."""
        raise TaskImageUnsupported(
            f"not supported: this task needs an image (the Dockerfile {spec.dockerfile!r} in "
            f"{spec.context}) and the local backend runs kernels in this machine's Python, not in "
            "images: run it with --super-backend=docker"
        )

    def cleanup_run(self, settings: KernelSettings, run_id: str) -> list[str]:
        return []

    def cleanup_dead_runs(self, settings: KernelSettings) -> list[str]:
        return []

    def describe(self, settings: KernelSettings) -> BackendResources:
        """No bound: a subprocess of this machine, sharing its memory and CPUs."""
        return BackendResources(where="an ipykernel subprocess on this machine")
