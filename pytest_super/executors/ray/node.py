"""The node's side of `--super-executor=ray`: what a Ray worker runs for one task
(`run_on_node`), for a clean-up (`cleanup_on_node`) and for an image build (`_build_here`), and the
`NodeOutcome` it sends back: the task's `TaskOutcome`, made
by `execute.outcome_of` as a local run makes it, with what only the dispatcher uses. Nothing here imports pytest: a node has none.

What a task leaves on its node goes when it ends, is cancelled (Ray's cancel raises in the worker)
or fails: its folder and, when no other task of the run on the node uses it, the run's start-lock
folder (nodefiles.py). A worker killed (Ray's force-cancel, a crash, its raylet or head lost)
leaves them, and the task's watchdog (watchdog.py) removes them once it is gone; with the dead
man's switch off, the next run's start-up clean-up on the node (`cleanup_on_node(run, None)`)
removes those whose worker is provably gone, or no task holds, and `pytest-super cleanup --run
ID` removes the run's.

The node's kernel backend failing (an error its contract calls an engine fault,
`kernels.is_engine_fault`, or an engine that no longer answers after an infrastructure error,
`kernels.engine_problem`) is the node's fault, not the task's: its error is an `EngineUnavailable` (whose
fault: "engine"), the outcome says `engine_failed`, and the controller tries the task elsewhere. Nothing here knows which backend runs the kernels:
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
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from pytest_super.errors import EngineUnavailable, InfrastructureError, SuperError, TaskFileError
from pytest_super.execute import outcome_of, trajectory_path
from pytest_super.executors.ray import nodefiles, watchdog
from pytest_super.kernels.base import Kernel, KernelSettings
from pytest_super.outcome import TaskError, TaskOutcome, retried_of
from pytest_super.settings import SuperRun
from pytest_super.tasks import Task
from pytest_super.trajectory import Action, Step

if TYPE_CHECKING:
    from ray import ObjectRef
    from ray.util.queue import Queue


@dataclass
class NodeOutcome:
    """What a node sends back for one task: the task's `TaskOutcome` (outcome.py), made here by
    `execute.outcome_of` as a local run makes it (its error as data: `TaskError`, with its exit
    status, retryability and whose fault it is), and beside it what only the dispatcher and the
    controller use: the trajectory's files to write into the run's folder, the kernel image
    made present, the task's times on the node, whether the node's engine failed.

    A wrapper, not fields of `TaskOutcome`: those are what every executor's future gives and
    `RunRecord` records; these are bytes in transit and the dispatcher's bookkeeping."""

    outcome: TaskOutcome
    trajectory: bytes = b""
    notebook: bytes = b""
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

    @property
    def name(self) -> str:
        return self.outcome.name

    @property
    def node(self) -> str:
        """The node's host name and Ray node id ("(none)": no node took the task)."""
        return self.outcome.node

    @property
    def error(self) -> TaskError | None:
        return self.outcome.error


def no_outcome(name: str, node: str) -> TaskOutcome:
    """What a node's task says until its episode ends (a worker cancelled says nothing)."""
    error = TaskError.of_class(InfrastructureError, f"on node {node}: the node sent no outcome")
    return TaskOutcome.failed(name, error, node=node)


def _node_name() -> str:
    node_id = ""
    with contextlib.suppress(Exception):
        import ray

        if ray.is_initialized():  # else Ray's runtime context starts a local cluster to ask
            node_id = ray.get_runtime_context().get_node_id()[:12]
    return f"{platform.node()}/{node_id}" if node_id else platform.node()


def _ensure_image(run: SuperRun, task: Task, sent: NodeOutcome) -> None:
    """Make the task's kernel image present on this node (`kernels.prepare_kernel_image`: for
    Docker, pulled from --super-registry when one is given, else, or when the pull fails, built
    when it is our own; concurrent tasks on the node wait for one). What was done is put in
    `sent`. A task with an image of its own has it made when it runs."""
    from pytest_super.execute import kernel_settings_for, needs_own_image
    from pytest_super.kernels import prepare_kernel_image

    if needs_own_image(run, task):
        return
    prepared = prepare_kernel_image(kernel_settings_for(run, task), task.image)
    if prepared is None:
        return
    sent.pull_failed = prepared.note
    if prepared.how == "pulled":
        sent.pulled_image, sent.pull_s = prepared.image, prepared.seconds
    elif prepared.how == "built":
        sent.built_image, sent.build_s = prepared.image, prepared.seconds


def _node_kernels(lock_dir: Path) -> Callable[[KernelSettings, str], Kernel]:
    """Kernels for the tasks of one run on this node: one container start at a time among them
    (the start lock xdist workers share on one machine, here in the run's folder on the node)."""
    from pytest_super.kernels import provision_kernel
    from pytest_super.kernels.slots import start_lock

    def provision(settings: KernelSettings, name: str) -> Kernel:
        with start_lock(lock_dir):
            return provision_kernel(settings, task_id=name)

    return provision


def _engine_failed(
    sent: NodeOutcome, exc: BaseException, kernel: KernelSettings
) -> TaskError | None:
    """The engine's failure as the task's error, `sent` marked so, when `exc` is one
    (`kernels.is_engine_fault`), or when after an infrastructure error (or a harness one) the
    engine no longer answers (`kernels.engine_problem`); None when the engine is fine."""
    from pytest_super import redaction
    from pytest_super.kernels import backend_resources, engine_problem, is_engine_fault

    why = f"{type(exc).__name__}: {exc}" if is_engine_fault(kernel, exc) else ""
    if not why and (isinstance(exc, InfrastructureError) or not isinstance(exc, SuperError)):
        why = engine_problem(kernel)
    if not why:
        return None
    sent.engine_failed = True
    where = backend_resources(kernel).where or f"the {kernel.backend} backend"
    message = redaction.redact(f"{where} on node {sent.node} failed: {why}")
    return TaskError.of_class(EngineUnavailable, message)


def _error_of(sent: NodeOutcome, kernel: KernelSettings) -> Callable[[BaseException], TaskError]:
    """How this node says the error that ended a task (`execute.outcome_of`'s `error_of`): its
    engine's failure (`_engine_failed`), else what the error says of itself (`TaskError.of`),
    its message naming the node and redacted. A task file's error is the node's copy breaking
    (the controller read the file): an infrastructure error, under its own name."""

    def error_of(exc: BaseException) -> TaskError:
        from pytest_super import redaction

        engine = _engine_failed(sent, exc, kernel)
        if engine is not None:
            return engine
        if isinstance(exc, TaskFileError):
            error = TaskError.of_class(InfrastructureError, str(exc), kind=type(exc).__name__)
        else:
            error = TaskError.of(exc)
        message = redaction.redact(f"on node {sent.node}: {error.message}")
        return dataclasses.replace(error, message=message)

    return error_of


def _with_key(run: SuperRun, secrets: list[ObjectRef[str]]) -> SuperRun:
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


class StepFields(TypedDict):
    """A live step as a node sends it (`dataclasses.asdict` of its `trajectory.Step`, which the
    controller makes again with `Step(**fields)`): Step's fields, each with its type there."""

    thought: str
    action: Action | str
    content: str
    observation: str
    output: str
    code: str | None
    cell_status: str | None
    duration_s: float
    prompt_tokens: int
    cached_prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    attempt: int
    pre_executed: bool


def _live(name: str, steps: Queue | None) -> Callable[[Step], None] | None:
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
    secrets: list[ObjectRef[str]],
    steps: Queue | None,
    options: Mapping[str, object] | None = None,
) -> NodeOutcome:
    """One task on this node (the body of the Ray task): the kernel image made present first
    (not charged to the deadline), then the episode within `deadline_s` with the kernel on this
    node's engine, the trajectory in a folder of this node's own, returned with the result.
    `options`: the backend's options the controller gives its nodes (`kernels.node_options`),
    added to the run's kernel settings here."""
    run = _with_key(run, secrets)
    node = _node_name()
    sent = NodeOutcome(no_outcome(name, node), started_at=time.time())
    folder = nodefiles.task_folder(run.run_id)
    guard: watchdog.Watchdog | None = None
    run = dataclasses.replace(
        run,
        report_dir=folder,
        kernel=dataclasses.replace(
            run.kernel,
            worker=f"ray-{os.getpid()}",
            options={**run.kernel.options, **(options or {})},
        ),
    )
    try:  # from the folder on: a cancel (Ray raises in the worker) may come at any line
        guard = watchdog.start(folder, run.kernel.backend)  # the folders' dead man's switch
        with nodefiles.run_lock_folder(run.run_id) as lock_dir:
            _run_episode(task, run, name, deadline_s, sent, _live(name, steps), lock_dir)
    finally:
        path = trajectory_path(run, name)
        with contextlib.suppress(OSError):
            sent.trajectory = path.read_bytes()
        with contextlib.suppress(OSError):
            sent.notebook = path.with_suffix(".ipynb").read_bytes()
        shutil.rmtree(folder, ignore_errors=True)
        if guard is not None and sent.engine_failed:
            guard.keep()  # its containers may still be on the engine: gone once this worker is
        elif guard is not None:
            guard.release()
        sent.ended_at = time.time()
    return sent


def _run_episode(
    task: Task,
    run: SuperRun,
    name: str,
    deadline_s: float | None,
    sent: NodeOutcome,
    on_step: Callable[[Step], None] | None,
    lock_dir: Path,
) -> None:
    """The image, then the episode under the task's deadline (`execute.outcome_of`, as a local
    run): its `TaskOutcome` put in `sent`. A bug of ours (an error no `SuperError`) that is not
    the engine's failure propagates: the controller reports the Ray task's failure."""
    error_of = _error_of(sent, run.kernel)
    try:
        _ensure_image(run, task, sent)  # a build or pull here is the node's, not the task's
        outcome = outcome_of(
            task,
            run,
            name=name,
            deadline_s=deadline_s,
            kernels=_node_kernels(lock_dir),
            on_step=on_step,
            error_of=error_of,
        )
    except SuperError as exc:  # the image's, or one `outcome_of` leaves (a task file's)
        outcome = TaskOutcome.failed(name, error_of(exc), retried=retried_of(exc))
    except Exception as exc:
        engine = _engine_failed(sent, exc, run.kernel)
        if engine is None:
            raise
        outcome = TaskOutcome.failed(name, engine, retried=retried_of(exc))
    sent.outcome = dataclasses.replace(outcome, node=sent.node)


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
