"""The `local` executor (the default): each task runs in this process (or in the xdist worker
that collected it), at once, when it is submitted. It owns the process's kernel pool
(kernels/pool.py: the next task's kernel made while one runs, `--super-max-containers`), makes
the task's kernel image present first under `--super-registry`, and removes what the run left on
its backend at the end. No pytest here: the `super_result` fixture and `run_tasks` submit to it
alike."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable
from concurrent.futures import Future

from pytest_super.errors import EngineUnavailable, InfrastructureError, TaskSetupError
from pytest_super.execute import KernelSource, kernel_settings_for, needs_own_image, outcome_of
from pytest_super.kernels.base import Kernel, KernelSettings
from pytest_super.kernels.pool import KernelPool
from pytest_super.outcome import TaskOutcome
from pytest_super.run_record import engine_down
from pytest_super.settings import SuperRun
from pytest_super.tasks import Task
from pytest_super.trajectory import Step


class LocalExecutor:
    """Tasks run here, one at a time, each when it is submitted (its future is done when
    `submit` returns). `kernels` replaces the pool as the source of each attempt's kernel."""

    remote = False
    pytest_loop = ""

    def __init__(self, kernels: KernelSource | None = None) -> None:
        self._kernels = kernels
        self._pool: KernelPool | None = None
        self._upcoming: tuple[KernelSettings, str] | None = None

    def start(self, run: SuperRun) -> None:
        """What runs whose controller died (kill -9) left on the backend goes; with no engine
        each task will report the engine as an error of its own."""
        from pytest_super.kernels import kernel_backend

        with contextlib.suppress(InfrastructureError):
            kernel_backend(run.kernel).cleanup_dead_runs(run.kernel)

    def warm_next(self, upcoming: tuple[KernelSettings, str] | None) -> None:
        """The kernel settings and item name of the task this process runs after the next one
        submitted (made while that one runs), or None."""
        self._upcoming = upcoming

    def submit(
        self,
        task: Task,
        run: SuperRun,
        *,
        name: str,
        deadline_s: float | None,
        on_step: Callable[[Step], None] | None = None,
    ) -> Future[TaskOutcome]:
        """The task run now (`execute.outcome_of`); Ctrl-C and a bug of ours propagate from
        here. The Docker engine found gone stops the run's other tasks (`engine_down`)."""
        future: Future[TaskOutcome] = Future()
        outcome = self._outcome(task, run, name, deadline_s, on_step)
        if outcome.error is not None and outcome.error.whose == "engine":
            engine_down(run, outcome.error.message)
        future.set_result(outcome)
        return future

    def _outcome(
        self,
        task: Task,
        run: SuperRun,
        name: str,
        deadline_s: float | None,
        on_step: Callable[[Step], None] | None,
    ) -> TaskOutcome:
        try:  # a missing image: pulled, else built (an image of the task's own: when it runs)
            if run.registry and not needs_own_image(run, task):
                _provide_image(run, task)
        except (InfrastructureError, TaskSetupError) as exc:
            return TaskOutcome.of_error(name, exc)
        kernels = self._kernels or self._from_pool(run)
        return outcome_of(
            task, run, name=name, deadline_s=deadline_s, kernels=kernels, on_step=on_step
        )

    def _from_pool(self, run: SuperRun) -> KernelSource:
        """Each attempt's kernel from the pool, the next task's made ahead once one is taken."""
        pool = self._pool = self._pool or _kernel_pool(run)
        upcoming, self._upcoming = self._upcoming, None

        def new_kernel(settings: KernelSettings, name: str) -> Kernel:
            kernel = pool.take(settings, name)
            if upcoming is not None:  # made while this task runs
                pool.warm(*upcoming)
            return kernel

        return new_kernel

    def stop(self) -> list[str]:
        """The warm kernel no task took and every container still being removed are gone;
        the removals that failed, one line each."""
        pool, self._pool = self._pool, None
        return pool.close() if pool is not None else []

    def cleanup(self, run: SuperRun) -> None:
        """This process's pool closed, then what the run left on its backend removed (unless
        --super-keep); `InfrastructureError` naming the command that removes what is left."""
        self.stop()
        if run.settings.keep_failed:
            return
        from pytest_super.kernels import kernel_backend

        try:
            kernel_backend(run.kernel).cleanup_run(run.kernel, run.run_id)
        except EngineUnavailable:
            pass  # no engine: nothing can be left on it
        except InfrastructureError as exc:
            raise InfrastructureError(
                f"{exc}; `pytest-super cleanup --backend {run.kernel.backend} --run "
                f"{run.run_id}` removes what is left"
            ) from exc


def _kernel_pool(run: SuperRun) -> KernelPool:
    from pytest_super.kernels import kernel_backend_class, provision_kernel
    from pytest_super.kernels.base import warms_ahead

    return KernelPool(
        provision_kernel,
        lock_dir=run.run_dir / "locks",
        max_containers=run.max_containers,
        warm=run.pool and warms_ahead(kernel_backend_class(run.kernel.backend)),
    )


def _provide_image(run: SuperRun, task: Task) -> None:
    """--super-registry on this machine: the backend makes the task's kernel image present
    (`kernels.prepare_kernel_image`; Docker: pulled from the registry when the engine lacks it,
    built when the pull fails), once per image in this process; a fallback is said once."""
    from pytest_super.kernels import prepare_kernel_image

    settings = kernel_settings_for(run, task)
    key = (settings.backend, settings.image, task.image)
    if key in _PREPARED:
        return
    prepared = prepare_kernel_image(settings, task.image)
    _PREPARED.add(key)
    if prepared is not None and prepared.note and prepared.note not in _SAID:
        _SAID.add(prepared.note)
        warnings.warn(f"pytest-super: {prepared.note}", stacklevel=1)


#: the images `_provide_image` made present in this process, and the fallbacks it said
_PREPARED: set[tuple[str, str | None, str]] = set()
_SAID: set[str] = set()
