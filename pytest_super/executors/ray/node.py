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

The node's Docker engine failing (a connection error of docker/requests or `EngineUnavailable`
from the kernel backend, the image's provisioning, the lease or the clean-up, or an engine that no
longer answers its ping after an infrastructure error) is the node's fault, not the task's: the
outcome says `engine_failed` and the controller tries the task elsewhere."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import platform
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_super.deadlines import DeadlineExpired, enforce
from pytest_super.errors import EngineUnavailable, InfrastructureError, SuperError
from pytest_super.execute import run_one_task, trajectory_path
from pytest_super.executors.ray import nodefiles, watchdog
from pytest_super.kernels.base import Kernel, KernelSettings
from pytest_super.runner import TaskResult
from pytest_super.settings import SuperRun
from pytest_super.tasks import Task
from pytest_super.trajectory import Step

#: seconds the engine's ping may take when an infrastructure error asks whether it still answers
ENGINE_PING_S = 10


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


def _ensure_image(run: SuperRun, task: Task, outcome: NodeOutcome) -> None:
    """Make the task's kernel image present on this node's engine when it lacks it: pulled from
    --super-registry when one is given, else (or when the pull fails) built, our own default
    images only; concurrent tasks on the node wait for one pull or build (the build lock), the
    others find it made. A named image (--super-image) is pulled, never built. What was done is
    put in `outcome`."""
    from pytest_super.execute import kernel_settings_for, needs_own_image
    from pytest_super.kernels.docker.registry import own_profile, provide_image

    if needs_own_image(run, task):  # the task's own image: made on this node when it runs
        return
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


def _node_kernels(lock_dir: Path) -> Callable[[KernelSettings, str], Kernel]:
    """Kernels for the tasks of one run on this node: one container start at a time among them
    (the start lock xdist workers share on one machine, here in the run's folder on the node)."""
    from pytest_super.kernels import provision_kernel
    from pytest_super.kernels.slots import start_lock

    def provision(settings: KernelSettings, name: str) -> Kernel:
        with start_lock(lock_dir):
            return provision_kernel(settings, task_id=name)

    return provision


def _engine_fault(exc: BaseException) -> bool:
    """Is `exc` (or an error it came from) the Docker engine not answering: `EngineUnavailable`,
    a connection error or timeout of requests (docker's transport), docker's own "Error while
    fetching server API version"? An engine that answered with an HTTP error did not fail."""
    import docker.errors
    import requests.exceptions

    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, EngineUnavailable | requests.exceptions.ConnectionError):
            return True
        if isinstance(cause, requests.exceptions.Timeout):
            return True
        if (
            isinstance(cause, docker.errors.DockerException)
            and not isinstance(cause, docker.errors.APIError)
            and ("server API version" in str(cause) or "Connection" in str(cause))
        ):
            return True
        cause = cause.__cause__ or cause.__context__
    return False


def _engine_answers() -> str:
    """Why this node's Docker engine does not answer a ping; "" when it does."""
    import docker

    try:
        client = docker.DockerClient(base_url=_engine(), timeout=ENGINE_PING_S)
    except Exception as exc:  # noqa: BLE001 - any failure to reach it is the answer
        return f"{type(exc).__name__}: {exc}"
    try:
        client.ping()
    except Exception as exc:  # noqa: BLE001
        return f"{type(exc).__name__}: {exc}"
    finally:
        client.close()
    return ""


def _engine() -> str:
    from pytest_super.kernels.docker.engine import engine_address

    return engine_address(None)


def _engine_failed(outcome: NodeOutcome, exc: BaseException) -> bool:
    """Put the engine's failure in `outcome` when `exc` is one, or when after an infrastructure
    error (or a harness one) the engine no longer answers; False when the engine is fine."""
    from pytest_super import redaction

    why = f"{type(exc).__name__}: {exc}" if _engine_fault(exc) else ""
    if not why and (isinstance(exc, InfrastructureError) or not isinstance(exc, SuperError)):
        why = _engine_answers()
    if not why:
        return False
    outcome.engine_failed = True
    outcome.result = None
    outcome.error = (
        "EngineUnavailable",
        redaction.redact(f"the Docker engine of node {outcome.node} ({_engine()}) failed: {why}"),
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
    trusted: list[tuple[str, str]] | None = None,
) -> NodeOutcome:
    """One task on this node (the body of the Ray task): the kernel image made present first
    (not charged to the deadline), then the episode within `deadline_s` with the kernel on this
    node's engine, the trajectory in a folder of this node's own, returned with the result.
    `trusted`: the (tag, image id) pairs the controller trusts, which a pull here may match."""
    run = _with_key(run, secrets)
    if trusted:
        from pytest_super.kernels.docker import trust

        for tag, image_id in trusted:
            trust.record(tag, image_id)
    outcome = NodeOutcome(name=name, node=_node_name(), started_at=time.time())
    folder = nodefiles.task_folder(run.run_id)
    guard: watchdog.Watchdog | None = None
    run = dataclasses.replace(
        run,
        report_dir=folder,
        kernel=dataclasses.replace(run.kernel, docker_host=None, worker=f"ray-{os.getpid()}"),
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
        if not _engine_failed(outcome, exc):
            outcome.error = (type(exc).__name__, redaction.redact(str(exc)))
    except Exception as exc:
        if not _engine_failed(outcome, exc):
            raise  # our own bug: the controller reports the Ray task's failure


def cleanup_on_node(
    run: SuperRun, run_id: str | None, every: bool = False
) -> tuple[str, list[str]]:
    """Remove the run's containers from this node's engine and its folders here (`run_id` None:
    what runs whose controller or Ray worker died left behind; `every`: every container of ours
    on the engine, as `pytest-super cleanup --all`, docker only). Returns (the node, the names
    of the containers removed)."""
    return _node_name(), nodefiles.cleanup_here(run.kernel, run_id, every=every)


def _build_here(profile: str, base: str | None, offline: bool, tag: str | None) -> tuple[str, str]:
    from pytest_super.kernels.docker.image import build_image

    return _node_name(), build_image(
        profile=profile, base=base, offline=offline, tag=tag, log=lambda line: None
    )
