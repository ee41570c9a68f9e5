"""One call runs one task, with or without pytest: `run_one_task`.

Given a task and the run's settings (`SuperRun`), it loads the agent, opens the model client,
gets a fresh kernel for each attempt, runs the episode with `--super-retries` attempts after a
retryable infrastructure error (waiting 2 s, 4 s, 8 s, ... between them), scores it, and returns the
`TaskResult` with its trajectory written. Every exit path closes the model client and the kernel
(`runner.run_episode` closes or keeps the kernel; a fault propagates after the trajectory is saved).

`outcome_of` is the same call returning the task's `TaskOutcome` (outcome.py: its result, or the
error that ended it, or its deadline passed) instead of raising: what an executor's future gives
(executors/local.py), what `run_tasks` records and the `super_result` fixture turns into pytest's
outcome. A Ray node calls `run_one_task` for the tasks it is given; a script may call either:

    from pytest_super import SuperRun, run_one_task
    from pytest_super.tasks import load_yaml_task

    result = run_one_task(load_yaml_task(Path("tasks/x.yaml")), SuperRun(agent="gold"))
    print(result.exit_status, result.accuracy, result.trajectory)
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from pathlib import Path

from pytest_super import redaction
from pytest_super.deadlines import DeadlineExpired, enforce
from pytest_super.errors import InfrastructureError, TaskSetupError
from pytest_super.kernels.base import Kernel, KernelSettings
from pytest_super.names import file_stem
from pytest_super.outcome import TaskError, TaskOutcome, retried_of
from pytest_super.runner import TaskResult, run_episode
from pytest_super.settings import SuperRun
from pytest_super.tasks import Task
from pytest_super.trajectory import Step

__all__ = [
    "KernelSource",
    "kernel_settings_for",
    "needs_own_image",
    "outcome_of",
    "retried_of",
    "retry_backoff_s",
    "run_one_task",
    "trajectory_path",
]

#: --super-retries waits 2 s, 4 s, 8 s, ... (at most 60 s) before each new attempt: an engine
#: restarting (`systemctl restart docker`, measured 2-5 s here) or a registry hiccup gets time to
#: pass, where three attempts at once against a missing engine took 1 s and all failed.
RETRY_BACKOFF_BASE_S = 2.0
RETRY_BACKOFF_CAP_S = 60.0

#: where a task's kernel comes from: (kernel settings, task id) -> a fresh kernel
KernelSource = Callable[[KernelSettings, str], Kernel]


def retry_backoff_s(attempt: int) -> float:
    """Seconds to wait before attempt `attempt + 2` (attempt counts from 0)."""
    return min(RETRY_BACKOFF_CAP_S, RETRY_BACKOFF_BASE_S * 2.0**attempt)


def kernel_settings_for(run: SuperRun, task: Task, *, prepare: bool = False) -> KernelSettings:
    """The kernel settings of one task: the run's, with the image the run's backend gives the
    task's profile (`kernels.settings_for_task`; docker: its tag, or the run's --super-image).
    A task with an image of its own (`task.image_spec`, not overridden by --super-image) has no
    image until `prepare` has the backend make it (`kernels.prepare_task_image`: built once,
    cached by content), which only the process that runs the task asks."""
    from pytest_super.kernels import needs_own_image, prepare_task_image, settings_for_task

    if prepare and task.image_spec is not None and needs_own_image(run.kernel, task.image_spec):
        return prepare_task_image(run.kernel, task.image_spec)
    return settings_for_task(run.kernel, task.image, task.image_spec)


def needs_own_image(run: SuperRun, task: Task) -> bool:
    """Whether `task` runs in an image made for it (its folder's Dockerfile, no --super-image)."""
    from pytest_super.kernels import needs_own_image as needs

    return needs(run.kernel, task.image_spec)


def trajectory_path(run: SuperRun, name: str) -> Path:
    """Where the trajectory of the item or task `name` is written in the run's folder."""
    return run.run_dir / "trajectories" / f"{file_stem(name)}.json"


def _provision(settings: KernelSettings, task_id: str) -> Kernel:
    from pytest_super.kernels import provision_kernel

    return provision_kernel(settings, task_id=task_id)


def run_one_task(
    task: Task,
    run: SuperRun,
    *,
    name: str | None = None,
    kernels: KernelSource | None = None,
    on_step: Callable[[Step], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> TaskResult:
    """Run `task` once as `run` says, with its retries, and return its scored result.

    `name` is the item's name (the task id, or `<id>[repeatN]`): it names the trajectory file and
    the kernel's container. `kernels` gives each attempt its kernel (default: a fresh one from the
    run's backend). `on_step` sees each step as it is recorded.

    Raises `InfrastructureError` (the engine, the kernel, the endpoint failed on the last attempt
    or in a way not worth retrying), `TaskSetupError` (the task itself is broken) or `HarnessError`
    (a bug of ours); the attempts before it are in the error's `retried` list. The trajectory is
    saved on every path.
    """
    from pytest_super.agents import load_agent
    from pytest_super.llm import LLMClient

    if not run.agent:
        raise ValueError("run_one_task needs an agent: SuperRun(agent='gold', ...)")
    name = name or task.id
    agent = load_agent(run.agent)
    provision = kernels or _provision
    llm = None
    if run.llm_settings is not None:
        redaction.register(run.llm_settings.api_key)
        llm = LLMClient(run.llm_settings)
    judge = None if run.judge_settings is None else LLMClient(run.judge_settings)
    retried: list[str] = []  # why each earlier attempt failed
    try:
        for attempt in range(run.retries + 1):
            try:  # a task's own image is made here: a fault of the engine is retried too
                settings = kernel_settings_for(run, task, prepare=True)
                result = run_episode(
                    task,
                    agent,
                    functools.partial(provision, settings, name),
                    run.settings,
                    trajectory_path(run, name),
                    llm=llm,
                    on_step=on_step,
                    judge=judge,
                )
            except InfrastructureError as exc:
                if not exc.retryable or attempt == run.retries:
                    raise
                wait = retry_backoff_s(attempt)
                retried.append(
                    f"attempt {attempt + 1}: {type(exc).__name__}: {exc}"[:500]
                    + f" (retried after {wait:g} s)"
                )
                sleep(wait)
            else:
                result.retried = retried
                if needs_own_image(run, task):
                    result.image = settings.image or ""
                return result
    except BaseException as exc:  # pytest-timeout's failure and Ctrl-C carry the attempts too
        exc.retried = retried  # type: ignore[attr-defined]
        raise
    finally:
        for client in (llm, judge):
            if client is not None:
                client.close()
    raise AssertionError("unreachable: the last attempt returns or raises")


def outcome_of(
    task: Task,
    run: SuperRun,
    *,
    name: str | None = None,
    deadline_s: float | None = None,
    kernels: KernelSource | None = None,
    on_step: Callable[[Step], None] | None = None,
    error_of: Callable[[BaseException], TaskError] = TaskError.of,
) -> TaskOutcome:
    """`run_one_task` within `deadline_s` (`deadlines.enforce`: on the main thread; inside an
    earlier deadline, as pytest's timer of a task item, that one holds), as a `TaskOutcome`: its
    result, the infrastructure or task error that ended it, or its deadline passed. Anything
    else (Ctrl-C, a bug of ours) propagates. `error_of` says the error as data (default: what
    it says of itself, `TaskError.of`; a Ray node's also names the node and tells its engine's
    failure, executors/ray/node.py)."""
    name = name or task.id
    try:
        with enforce(deadline_s):
            result = run_one_task(task, run, name=name, kernels=kernels, on_step=on_step)
    except DeadlineExpired as expired:
        return TaskOutcome.timed_out(name, expired.seconds, retried=retried_of(expired))
    except (InfrastructureError, TaskSetupError) as exc:
        return TaskOutcome.failed(name, error_of(exc), retried=retried_of(exc))
    return TaskOutcome.finished(name, result)
