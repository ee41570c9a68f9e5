"""The node's side of `--super-executor=ray`: what a Ray worker runs for one task
(`run_on_node`), for a clean-up (`cleanup_on_node`) and for an image build (`_build_here`), and the
`NodeOutcome` it sends back. Nothing here imports pytest: a node has none.

What a task leaves on its node goes when it ends, is cancelled (Ray's cancel raises in the worker)
or fails: its folder and, when no other task of the run on the node uses it, the run's start-lock
folder (nodefiles.py). A worker killed (Ray's force-cancel, a crash, its raylet or head lost)
leaves them, and the task's watchdog (watchdog.py) removes them once it is gone; with the dead
man's switch off, the next run's start-up clean-up on the node (`cleanup_on_node(run, None)`)
removes those whose worker is provably gone, or no task holds, and `pytest-super cleanup --run
ID` removes the run's.

The node's kernel backend failing (an error its contract calls an engine fault,
`kernels.is_engine_fault`, or an engine that no longer answers after an infrastructure error,
`kernels.engine_problem`) is the node's fault, not the task's: the outcome says `engine_failed`
and the controller tries the task elsewhere. Nothing here knows which backend runs the kernels:
the image is made present, the leftovers removed and the faults told through the contract
(`pytest_super.kernels`)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import platform
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_super.deadlines import DeadlineExpired, enforce
from pytest_super.errors import InfrastructureError, SuperError
from pytest_super.execute import run_one_task, trajectory_path
from pytest_super.executors.ray import nodefiles, watchdog
from pytest_super.kernels.base import Kernel, KernelSettings
from pytest_super.runner import TaskResult
from pytest_super.settings import SuperRun
from pytest_super.tasks import Task
from pytest_super.trajectory import Step


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
    #: the task ended because this node's kernel engine failed (the node's fault, not the task's:
    #: the controller retries it on another node and stops using a node whose engine failed twice)
    engine_failed: bool = False


def _node_name() -> str:
    node_id = ""
    with contextlib.suppress(Exception):
        import ray

        node_id = ray.get_runtime_context().get_node_id()[:12]
    return f"{platform.node()}/{node_id}" if node_id else platform.node()


def _ensure_image(run: SuperRun, task: Task, outcome: NodeOutcome) -> None:
    """Make the task's kernel image present on this node (`kernels.prepare_kernel_image`: for
    Docker, pulled from --super-registry when one is given, else, or when the pull fails, built
    when it is our own; concurrent tasks on the node wait for one). What was done is put in
    `outcome`. A task with an image of its own has it made when it runs."""
    from pytest_super.execute import kernel_settings_for, needs_own_image
    from pytest_super.kernels import prepare_kernel_image

    if needs_own_image(run, task):
        return
    prepared = prepare_kernel_image(kernel_settings_for(run, task), task.image)
    if prepared is None:
        return
    outcome.pull_failed = prepared.note
    if prepared.how == "pulled":
        outcome.pulled_image, outcome.pull_s = prepared.image, prepared.seconds
    elif prepared.how == "built":
        outcome.built_image, outcome.build_s = prepared.image, prepared.seconds


def _node_kernels(lock_dir: Path) -> Callable[[KernelSettings, str], Kernel]:
    """Kernels for the tasks of one run on this node: one container start at a time among them
    (the start lock xdist workers share on one machine, here in the run's folder on the node)."""
    from pytest_super.kernels import provision_kernel
    from pytest_super.kernels.slots import start_lock

    def provision(settings: KernelSettings, name: str) -> Kernel:
        with start_lock(lock_dir):
            return provision_kernel(settings, task_id=name)

    return provision


def _engine_failed(outcome: NodeOutcome, exc: BaseException, kernel: KernelSettings) -> bool:
    """Put the engine's failure in `outcome` when `exc` is one (`kernels.is_engine_fault`), or
    when after an infrastructure error (or a harness one) the engine no longer answers
    (`kernels.engine_problem`); False when the engine is fine."""
    from pytest_super import redaction
    from pytest_super.kernels import backend_resources, engine_problem, is_engine_fault

    why = f"{type(exc).__name__}: {exc}" if is_engine_fault(kernel, exc) else ""
    if not why and (isinstance(exc, InfrastructureError) or not isinstance(exc, SuperError)):
        why = engine_problem(kernel)
    if not why:
        return False
    outcome.engine_failed = True
    outcome.result = None
    where = backend_resources(kernel).where or f"the {kernel.backend} backend"
    outcome.error = (
        "EngineUnavailable",
        redaction.redact(f"{where} on node {outcome.node} failed: {why}"),
    )
    return True


def _with_key(run: SuperRun, secrets: list[Any]) -> SuperRun:
    """The run with the endpoint's key from the object store (registered for redaction)."""
    from pytest_super import redaction

    if not secrets or (run.llm_settings is None and run.judge_settings is None):
        return run
    import ray

    key = ray.get(secrets[0])
    redaction.register(key)
    llm, judge = run.llm_settings, run.judge_settings
    return dataclasses.replace(
        run,
        llm_settings=llm and dataclasses.replace(llm, api_key=key),
        judge_settings=judge and dataclasses.replace(judge, api_key=key),
    )


def _live(name: str, steps: Any) -> Callable[[Step], None] | None:
    if steps is None:
        return None

    def on_step(step: Step) -> None:
        with contextlib.suppress(Exception):  # the live view must never end a task
            steps.put_nowait((name, dataclasses.asdict(step)))

    return on_step


def run_on_node(
    task: Task,
    run: SuperRun,
    name: str,
    deadline_s: float | None,
    secrets: list[Any],
    steps: Any,
    options: Mapping[str, Any] | list[tuple[str, str]] | None = None,
) -> NodeOutcome:
    """One task on this node (the body of the Ray task): the kernel image made present first
    (not charged to the deadline), then the episode within `deadline_s` with the kernel on this
    node's engine, the trajectory in a folder of this node's own, returned with the result.
    `options`: the backend's options the controller gives its nodes (`kernels.node_options`),
    added to the run's kernel settings here."""
    run = _with_key(run, secrets)
    outcome = NodeOutcome(name=name, node=_node_name(), started_at=time.time())
    folder = nodefiles.task_folder(run.run_id)
    guard: watchdog.Watchdog | None = None
    run = dataclasses.replace(
        run,
        report_dir=folder,
        kernel=dataclasses.replace(
            run.kernel,
            worker=f"ray-{os.getpid()}",
            options={**run.kernel.options, **_given(options)},
        ),
    )
    try:  # from the folder on: a cancel (Ray raises in the worker) may come at any line
        guard = watchdog.start(folder, run.kernel.backend)  # the folders' dead man's switch
        with nodefiles.run_lock_folder(run.run_id) as lock_dir:
            _run_episode(task, run, name, deadline_s, outcome, _live(name, steps), lock_dir)
    finally:
        path = trajectory_path(run, name)
        with contextlib.suppress(OSError):
            outcome.trajectory = path.read_bytes()
        with contextlib.suppress(OSError):
            outcome.notebook = path.with_suffix(".ipynb").read_bytes()
        shutil.rmtree(folder, ignore_errors=True)
        if guard is not None and outcome.engine_failed:
            guard.keep()  # its containers may still be on the engine: gone once this worker is
        elif guard is not None:
            guard.release()
        outcome.ended_at = time.time()
    return outcome


def _given(options: Mapping[str, Any] | list[tuple[str, str]] | None) -> Mapping[str, Any]:
    """The backend's options from the controller. A list is what a controller before the
    backend contract sent (Docker's trusted images), until executors/ray/cluster.py sends
    `kernels.node_options`."""
    if isinstance(options, list):
        return {"trusted_images": options} if options else {}
    return options or {}


def _run_episode(
    task: Task,
    run: SuperRun,
    name: str,
    deadline_s: float | None,
    outcome: NodeOutcome,
    on_step: Callable[[Step], None] | None,
    lock_dir: Path,
) -> None:
    """The image, then the episode under the task's deadline; what ended it put in `outcome`."""
    from pytest_super import redaction

    try:
        _ensure_image(run, task, outcome)  # a build or pull here is the node's, not the task's
        with enforce(deadline_s):
            outcome.result = run_one_task(
                task, run, name=name, on_step=on_step, kernels=_node_kernels(lock_dir)
            )
        outcome.retried = outcome.result.retried
    except DeadlineExpired:
        outcome.timed_out_after_s = deadline_s
    except SuperError as exc:
        outcome.retried = list(getattr(exc, "retried", []))
        if not _engine_failed(outcome, exc, run.kernel):
            outcome.error = (type(exc).__name__, redaction.redact(str(exc)))
    except Exception as exc:
        if not _engine_failed(outcome, exc, run.kernel):
            raise  # our own bug: the controller reports the Ray task's failure


def cleanup_on_node(
    run: SuperRun, run_id: str | None, every: bool = False
) -> tuple[str, list[str]]:
    """Remove the run's containers from this node's engine and its folders here (`run_id` None:
    what runs whose controller or Ray worker died left behind; `every`: everything of the
    backend's, as `pytest-super cleanup --all`). Returns (the node, the names of what the
    backend removed)."""
    return _node_name(), nodefiles.cleanup_here(run.kernel, run_id, every=every)


def build_image_here(kernel: KernelSettings, profile: str) -> tuple[str, str]:
    """`pytest-super image build --ray` on this node: the kernel image of `profile` made present
    by the backend (`kernels.prepare_kernel_image`; the build's own options are the backend's,
    in `kernel.options`). Returns (the node, the image)."""
    from pytest_super.kernels import prepare_kernel_image

    prepared = prepare_kernel_image(kernel, profile)
    return _node_name(), prepared.image if prepared is not None else (kernel.image or "")


def _build_here(profile: str, base: str | None, offline: bool, tag: str | None) -> tuple[str, str]:
    """`build_image_here` as executors/ray/cluster.py calls it today: Docker's build of
    `profile` (its `base`, `offline`, `tag`)."""
    build = {"build": True, "base": base, "offline": offline}
    return build_image_here(KernelSettings(backend="docker", image=tag, options=build), profile)
