"""The node's side of `--super-executor=ray`: what a Ray worker runs for one task
(`run_on_node`), for a clean-up (`cleanup_on_node`) and for an image build (`_build_here`), and the
`NodeOutcome` it sends back. Nothing here imports pytest: a node has none."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import platform
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_super.errors import SuperError
from pytest_super.execute import run_one_task, trajectory_path
from pytest_super.kernels.base import Kernel, KernelSettings
from pytest_super.runner import TaskResult
from pytest_super.settings import SuperRun
from pytest_super.tasks import Task
from pytest_super.trajectory import Step


class TaskDeadline(BaseException):  # noqa: N818 - like KeyboardInterrupt, it is not an error
    """The task's deadline (pytest-timeout's, enforced on the node) passed. A BaseException, so
    nothing in the episode mistakes it for the agent's or the harness's error on its way out."""


@dataclass
class NodeOutcome:
    """What a node sends back for one task."""

    name: str
    node: str  # the node's host name and Ray node id
    result: TaskResult | None = None
    #: the error that ended the task: (its type's name in errors.py, its message); the
    #: controller raises the same type, which carries its exit status
    error: tuple[str, str] | None = None
    retried: list[str] = field(default_factory=list)
    trajectory: bytes = b""
    notebook: bytes = b""
    timed_out_after_s: float | None = None
    #: the kernel image this task built on its node first (a node without it), and how long
    built_image: str = ""
    build_s: float = 0.0
    #: the kernel image this task pulled from --super-registry first, and how long
    pulled_image: str = ""
    pull_s: float = 0.0
    #: why a pull from --super-registry failed (the image was built then), said once by the controller
    pull_failed: str = ""
    #: when the task began and ended on the node (wall clock: the controller measures from the
    #: end how long the outcome took to reach its report)
    started_at: float = 0.0
    ended_at: float = 0.0
    #: the task ended because this node's Docker engine failed (the node's fault, not the task's:
    #: the controller retries it on another node and stops using a node whose engine failed twice)
    engine_failed: bool = False


def _node_name() -> str:
    node_id = ""
    with contextlib.suppress(Exception):
        import ray

        node_id = ray.get_runtime_context().get_node_id()[:12]
    return f"{platform.node()}/{node_id}" if node_id else platform.node()


@contextlib.contextmanager
def _deadline(seconds: float | None) -> Iterator[None]:
    """Raise `TaskDeadline` in this (the Ray worker's main) thread after `seconds`."""
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum: int, frame: Any) -> None:
        raise TaskDeadline(seconds)

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _ensure_image(run: SuperRun, task: Task, outcome: NodeOutcome) -> None:
    """Make the task's kernel image present on this node's engine when it lacks it: pulled from
    --super-registry when one is given, else (or when the pull fails) built, our own default
    images only; concurrent tasks on the node wait for one pull or build (the build lock), the
    others find it made. A named image (--super-image) is pulled, never built. What was done is
    put in `outcome`."""
    from pytest_super.execute import kernel_settings_for
    from pytest_super.kernels.docker.registry import own_profile, provide_image

    image = kernel_settings_for(run, task).image or ""
    if run.kernel.image and not run.registry:  # named: it must be there already
        return
    provided = provide_image(
        image, registry=run.registry, profile=own_profile(image, task.image), docker_host=None
    )
    outcome.pull_failed = provided.fallback
    if provided.how == "pulled":
        outcome.pulled_image, outcome.pull_s = image, provided.seconds
    elif provided.how == "built":
        outcome.built_image, outcome.build_s = image, provided.seconds


def _node_kernels(run_id: str) -> Callable[[KernelSettings, str], Kernel]:
    """Kernels for the tasks of one run on this node: one container start at a time among them
    (the start lock xdist workers share on one machine, here in a folder of the node's)."""
    from pytest_super.kernels import provision_kernel
    from pytest_super.kernels.slots import start_lock
    from pytest_super.locks import private_dir

    lock_dir = private_dir() / f"ray-{run_id}"  # ours alone: nothing planted can block it

    def provision(settings: KernelSettings, name: str) -> Kernel:
        with start_lock(lock_dir):
            return provision_kernel(settings, task_id=name)

    return provision


def run_on_node(
    task: Task,
    run: SuperRun,
    name: str,
    deadline_s: float | None,
    secrets: list[Any],
    steps: Any,
) -> NodeOutcome:
    """One task on this node (the body of the Ray task): the kernel on this node's engine, the
    trajectory in a folder of this node's own, returned with the result."""
    from pytest_super import redaction

    if secrets and run.llm_settings is not None:
        import ray

        key = ray.get(secrets[0])
        redaction.register(key)
        run = dataclasses.replace(
            run, llm_settings=dataclasses.replace(run.llm_settings, api_key=key)
        )
    folder = Path(tempfile.mkdtemp(prefix="pytest-super-node-"))
    run = dataclasses.replace(
        run,
        report_dir=folder,
        kernel=dataclasses.replace(run.kernel, docker_host=None, worker=f"ray-{os.getpid()}"),
    )
    outcome = NodeOutcome(name=name, node=_node_name(), started_at=time.time())
    on_step = None
    if steps is not None:

        def on_step(step: Step) -> None:
            with contextlib.suppress(Exception):  # the live view must never end a task
                steps.put_nowait((name, dataclasses.asdict(step)))

    try:
        with _deadline(deadline_s):
            _ensure_image(run, task, outcome)
            outcome.result = run_one_task(
                task, run, name=name, on_step=on_step, kernels=_node_kernels(run.run_id)
            )
        outcome.retried = outcome.result.retried
    except TaskDeadline:
        outcome.timed_out_after_s = deadline_s
    except SuperError as exc:
        outcome.error = (type(exc).__name__, redaction.redact(str(exc)))
        outcome.retried = list(getattr(exc, "retried", []))
    finally:
        path = trajectory_path(run, name)
        with contextlib.suppress(OSError):
            outcome.trajectory = path.read_bytes()
        with contextlib.suppress(OSError):
            outcome.notebook = path.with_suffix(".ipynb").read_bytes()
        shutil.rmtree(folder, ignore_errors=True)
        outcome.ended_at = time.time()
    return outcome


def cleanup_on_node(run: SuperRun, run_id: str | None) -> tuple[str, list[str]]:
    """Remove the run's containers from this node's engine (`run_id` None: what runs whose
    controller died left behind). Returns (the node, the names removed)."""
    from pytest_super.kernels import kernel_backend

    settings = dataclasses.replace(run.kernel, docker_host=None)
    backend = kernel_backend(settings)
    removed = (
        backend.cleanup_run(settings, run_id) if run_id else backend.cleanup_dead_runs(settings)
    )
    if run_id:  # the run's start lock on this node
        from pytest_super.locks import private_dir

        shutil.rmtree(private_dir() / f"ray-{run_id}", ignore_errors=True)
    return _node_name(), removed


def _build_here(profile: str, base: str | None, offline: bool, tag: str | None) -> tuple[str, str]:
    from pytest_super.kernels.docker.image import build_image

    return _node_name(), build_image(
        profile=profile, base=base, offline=offline, tag=tag, log=lambda line: None
    )
