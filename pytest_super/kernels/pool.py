"""Warm kernels and background teardown: the harness's time around a task, off its critical path.

One `KernelPool` per pytest process (one per xdist worker) owns:

- **one warm kernel at most**: while a task runs, `warm(settings, next_task_id)` provisions the next
  task's kernel in a background thread, so that task's `take` gets a kernel that is ready. A warm
  kernel is exactly what `provision(settings, task_id=...)` would have made when the task asked,
  only earlier: same container name and labels, same image, network, mounts, limits, environment,
  and it has run nothing. It is handed only to a task of the same key (`kernel_key`: every field of
  `KernelSettings` plus the task id, so a field added to the settings is part of the key by
  construction). A warm kernel whose task does not come next (stolen by another worker, skipped,
  the run stopped) is removed when another is warmed, or at the end.
- **the reaper**: a kernel the pool handed out comes wrapped (`PooledKernel`), and its `close()`
  returns at once while a reaper thread removes the container. `close()` of the pool (end of the
  session, whatever ended it) removes the unused warm kernel, waits for every removal and returns
  the ones that failed.

Naming: a kernel made ahead is the next task's own container from the start: `provision_kernel`
names and labels it for that task (`super-<task>-<worker>-<hex>`, the run, worker, task and
controller pid labels, the lease of this process), so every cleanup finds it as it finds any
task container: the end-of-run cleanup by run id (a killed worker's), the next run's cleanup of
dead leases (a killed controller's), `pytest-super cleanup --run <id>`.

Slots (`--super-max-containers`): every container holds a slot from before it is created until its
removal has finished, warm ones too. A warm kernel takes only a slot that is free and that no task
waits for (`slots.take_slot(wait=False)`): a task of another worker waiting for a slot must not
lose it to a kernel that is only wanted later. Warm starts hold the run's start lock too.

Only for a backend that declares `warm_pool = True` (`KernelBackend`: its kernels may be made ahead
of the task that uses them; docker does). For the others (`--super-backend=local`: a subprocess per
kernel, nothing to make ahead) the plugin turns warming off; their kernels start when a task asks.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Hashable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for_futures
from pathlib import Path
from typing import Protocol

from pytest_super.kernels import slots
from pytest_super.kernels.base import CellResult, Kernel, KernelSettings

#: threads removing containers: one keeps up with a task a second at -n 1 (a removal takes
#: 0.2-0.4 s here); a second absorbs bursts (a Reflexion attempt and its task ending together).
REAPER_THREADS = 2


class Provision(Protocol):
    """How kernels are made: `kernels.provision_kernel`."""

    def __call__(self, settings: KernelSettings, *, task_id: str) -> Kernel: ...


def kernel_key(settings: KernelSettings, task_id: str) -> Hashable:
    """Everything that makes two kernels differ: every settings field, and the task they are for."""
    return (task_id, _frozen(settings))


def _frozen(value: object) -> Hashable:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return tuple((f.name, _frozen(getattr(value, f.name))) for f in dataclasses.fields(value))
    if isinstance(value, dict):
        return tuple(sorted((str(k), _frozen(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, (set, frozenset)):
        return tuple(sorted(repr(_frozen(v)) for v in value))
    return value


class Reaper:
    """Removes kernels (`Kernel.close`) in background threads; frees each one's slot after."""

    def __init__(self, threads: int = REAPER_THREADS) -> None:
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix="pytest-super-reaper")
        self._lock = threading.Lock()
        self._pending: set[Future[None]] = set()
        self._failures: list[str] = []

    def remove(self, kernel: Kernel, slot: slots.Slot) -> None:
        """Queue the removal and return at once."""
        future = self._executor.submit(self._remove, kernel, slot)
        with self._lock:
            self._pending.add(future)
        future.add_done_callback(self._forget)

    def busy(self) -> bool:
        with self._lock:
            return bool(self._pending)

    def wait(self) -> None:
        """Until every removal queued so far has finished."""
        with self._lock:
            pending = list(self._pending)
        wait_for_futures(pending)

    def failures(self) -> list[str]:
        """The removals that failed since the last call, one line each (container and reason)."""
        with self._lock:
            failed, self._failures = self._failures, []
        return failed

    def _remove(self, kernel: Kernel, slot: slots.Slot) -> None:
        try:
            kernel.close()
        except Exception as exc:  # reported at the end of the session; the run's cleanup retries
            with self._lock:
                self._failures.append(f"{kernel.description}: {type(exc).__name__}: {exc}")
        finally:
            slot.release()

    def _forget(self, future: Future[None]) -> None:
        with self._lock:
            self._pending.discard(future)


class PooledKernel:
    """A kernel the pool handed out. Everything goes to the kernel itself (each call of the
    protocol, and by `__getattr__` a method a backend adds) but `detach` and `close`: `close`
    hands the removal to the reaper (or, with the pool off, removes at once) and frees the
    container's slot when it is gone."""

    def __init__(self, kernel: Kernel, slot: slots.Slot, reaper: Reaper | None) -> None:
        self.kernel = kernel
        self._slot = slot
        self._reaper = reaper
        self._closed = False

    @property
    def description(self) -> str:
        return self.kernel.description

    def __getattr__(self, name: str) -> object:  # what a backend adds to its kernels
        return getattr(self.kernel, name)

    # the Kernel protocol, each call the kernel's own
    def execute(
        self, code: str, timeout: float, *, interrupt_on_timeout: bool = True
    ) -> CellResult:
        return self.kernel.execute(code, timeout, interrupt_on_timeout=interrupt_on_timeout)

    def wait(self, timeout: float) -> CellResult:
        return self.kernel.wait(timeout)

    def interrupt(self) -> CellResult:
        return self.kernel.interrupt()

    def restart(self) -> None:
        self.kernel.restart()

    def read_file(self, path: str) -> str:
        return self.kernel.read_file(path)

    def write_file(self, path: str, text: str) -> None:
        self.kernel.write_file(path, text)

    def read_bytes(self, path: str) -> bytes:
        return self.kernel.read_bytes(path)

    def write_bytes(self, path: str, data: bytes) -> None:
        self.kernel.write_bytes(path, data)

    def check_limits(self) -> None:
        self.kernel.check_limits()

    def is_alive(self) -> bool:
        return self.kernel.is_alive()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._reaper is not None:
            self._reaper.remove(self.kernel, self._slot)
            return
        try:
            self.kernel.close()
        finally:
            self._slot.release()

    def detach(self) -> str:
        """`--super-keep`: the container stays, but no longer counts as one of the run's."""
        self._closed = True
        try:
            return self.kernel.detach()
        finally:
            self._slot.release()


@dataclasses.dataclass
class _Warm:
    key: Hashable
    future: Future[PooledKernel | None]  # None: no slot was free, nothing was made


class KernelPool:
    """The kernels of one process's tasks: taken warm when one was made ahead, removed in the
    background. `warm=False` (`--no-super-pool`): every kernel is made when its task asks and
    removed before `close()` returns, as without a pool."""

    def __init__(
        self,
        provision: Provision,
        *,
        lock_dir: Path,
        max_containers: int | None = None,
        warm: bool = True,
    ) -> None:
        self._provision_kernel = provision
        self._lock_dir = lock_dir
        self._max_containers = max_containers
        self.enabled = warm
        self._reaper = Reaper()
        self._warmer = ThreadPoolExecutor(1, thread_name_prefix="pytest-super-warm")
        self._warm: _Warm | None = None

    def take(self, settings: KernelSettings, task_id: str) -> Kernel:
        """A fresh kernel for `task_id`: the warm one if it was made for this key, else a new one
        (waiting for a slot under `--super-max-containers`). Raises what provisioning raises.

        A warm kernel of another key stays warm: it is for the next task, and this may be the
        current task asking again (a Reflexion attempt, a retry)."""
        warm = self._warm
        if warm is not None and warm.key == kernel_key(settings, task_id):
            kernel = _made(warm.future)  # usually ready; if still starting, this waits for it
            self._warm = None  # only now: an interrupted wait leaves it for close() to remove
            if kernel is not None:
                if _alive(kernel):
                    return kernel
                kernel.close()  # died while it waited (killed, out of memory): made anew below
        kernel = self._provision(settings, task_id, wait_for_slot=True)
        assert kernel is not None  # waiting for a slot always ends with one
        return kernel

    def warm(self, settings: KernelSettings, task_id: str) -> None:
        """Start making `task_id`'s kernel in the background (no-op when the pool is off or that
        kernel is warm already). A warm kernel of another key is removed: its task is not next."""
        key = kernel_key(settings, task_id)
        if not self.enabled or (self._warm is not None and self._warm.key == key):
            return
        self._discard_warm()
        future = self._warmer.submit(self._provision_spare, settings, task_id)
        self._warm = _Warm(key, future)

    def close(self) -> list[str]:
        """End of the session: remove the warm kernel no task took and wait for every removal.
        Returns the removals that failed, one line each."""
        self._discard_warm()
        self._warmer.submit(lambda: None).result()  # the warm thread has done all it was given
        self._reaper.wait()
        return self._reaper.failures()

    def _discard_warm(self) -> None:
        """Hand the warm kernel to the reaper once it is made, on the warm thread (so the caller
        never waits for a kernel that is still starting)."""
        warm, self._warm = self._warm, None
        if warm is not None:
            self._warmer.submit(_remove_made, warm.future)

    def _provision_spare(self, settings: KernelSettings, task_id: str) -> PooledKernel | None:
        kernel = self._provision(settings, task_id, wait_for_slot=False)
        if kernel is None and self._reaper.busy():
            self._reaper.wait()  # the slot of this process's last kernel is about to be free
            kernel = self._provision(settings, task_id, wait_for_slot=False)
        return kernel

    def _provision(
        self, settings: KernelSettings, task_id: str, *, wait_for_slot: bool
    ) -> PooledKernel | None:
        slot = slots.take_slot(self._lock_dir, self._max_containers, wait=wait_for_slot)
        if slot is None:
            return None
        try:
            with slots.start_lock(self._lock_dir):
                kernel = self._provision_kernel(settings, task_id=task_id)
        except BaseException:
            slot.release()
            raise
        return PooledKernel(kernel, slot, self._reaper if self.enabled else None)


def _remove_made(future: Future[PooledKernel | None]) -> None:
    kernel = _made(future)
    if kernel is not None:
        kernel.close()


def _alive(kernel: PooledKernel) -> bool:
    """A warm kernel's liveness; an engine fault counts as dead (the new kernel meets it)."""
    try:
        return kernel.kernel.is_alive()
    except Exception:
        return False


def _made(future: Future[PooledKernel | None]) -> PooledKernel | None:
    """The warm kernel, or None when none was made. A failure to make one is not reported here:
    the task then provisions its own kernel and meets the same fault as its own error."""
    try:
        return future.result()
    except Exception:
        return None
