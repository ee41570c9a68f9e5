"""Running one task: replay the prefix cells, let the agent act, score what it left behind.

This is the story of one test item, told without pytest: `run_episode` takes a task, a way to get a
kernel, an agent and the run's settings, and returns a `TaskResult` with every number the reports
need. The pytest glue (plugin.py) only calls it and turns its result into a pass, a failure or an error.
"""

from __future__ import annotations

import contextlib
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pytest_super import defaults, scoring
from pytest_super.agents.base import Agent
from pytest_super.deadlines import timer_seconds
from pytest_super.environment import (
    AgentOptions,
    AgentResult,
    Environment,
    EpisodeLimits,
    replay_prefix_cells,
)
from pytest_super.errors import (
    EpisodeEnd,
    ExitStatus,
    HarnessError,
    InfrastructureError,
    ReportWriteError,
    SuperError,
    TaskSetupError,
)
from pytest_super.kernels.base import Kernel
from pytest_super.llm import LLMClient
from pytest_super.lmr.judge import JudgeOutcome, judge_task
from pytest_super.lmr.unit_tests import UnitTestOutcome, run_unit_test
from pytest_super.netfaults import world_fault
from pytest_super.strictjson import JSON
from pytest_super.tasks import LmrTask, Task
from pytest_super.trajectory import NOT_ACTIONS, Step, Trajectory

PASS_METRICS = ("accuracy", "landmarks", "script-executed", "unit-tests")


@dataclass(frozen=True)
class EpisodeSettings:
    """The run-wide settings that shape one episode (built from pytest options)."""

    agent: str = "gold"
    model: str | None = None
    tolerance: float = scoring.DEFAULT_TOLERANCE
    pass_metric: str | None = None  # None: accuracy for expert/masked, script-executed for auto
    pass_threshold: float = 1.0
    token_budget: int | None = None  # None: 600k expert/auto, 400k masked
    compute_limit_s: float = defaults.COMPUTE_LIMIT_S
    cell_timeout_s: float = defaults.CELL_TIMEOUT_S
    steps: int = defaults.STEPS
    # --super-format-errors: malformed replies in a row that end an episode (None: no cap)
    format_errors: int | None = None
    keep_failed: bool = False  # --super-keep: leave a failing task's container running
    #: --super-network-faults: an LLM agent's episode the network broke is scored or an error
    network_faults: str = "score"
    #: what agents that take options read (env.options): Reflexion's attempts, replay's source
    options: AgentOptions = field(default_factory=AgentOptions)


@dataclass
class TaskResult:
    """Everything known about one finished episode."""

    task: Task
    agent: str
    model: str | None
    exit_status: ExitStatus
    submission: JSON = None  # the submitted value, parsed
    submitted: bool = False
    accuracy: float | None = None
    landmarks: float | None = None
    script_executed: float | None = None
    comparisons: list[scoring.Comparison] = field(default_factory=list)
    landmarks_missed: list[str] = field(default_factory=list)
    steps: int = 0
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    duration_s: float = 0.0
    trajectory: str = ""
    detail: str = ""  # why the episode ended, when it is not obvious
    last_observation: str = ""
    pass_metric: str = "accuracy"
    pass_threshold: float = 1.0
    kept: str = ""  # how to get into a kept container (--super-keep)
    retried: list[str] = field(default_factory=list)  # why each earlier attempt failed
    unit_test: UnitTestOutcome | None = None  # an LMR task's unit test (lmr/unit_tests.py)
    judge: JudgeOutcome | None = None  # an LMR task's judge grade (--super-judge-model)
    image: str = ""  # the image made for the task (its own Dockerfile), when it has one

    @property
    def metric_value(self) -> float | None:
        return {
            "accuracy": self.accuracy,
            "landmarks": self.landmarks,
            "script-executed": self.script_executed,
            "unit-tests": None if self.unit_test is None else float(self.unit_test.passed),
        }[self.pass_metric]

    @property
    def passed(self) -> bool:
        value = self.metric_value
        return value is not None and value >= self.pass_threshold

    def junit_properties(self) -> dict[str, object]:
        """The `super.*` JUnit properties (names are a public interface: keep them); the
        record of a finished task (`report.TaskRecord.properties`) holds them without `super.`."""
        return {
            "super.set": self.task.set,
            "super.category": self.task.category,
            "super.agent": self.agent,
            "super.model": self.model or "",
            "super.accuracy": _empty_if_none(self.accuracy),
            "super.landmarks": _empty_if_none(self.landmarks),
            "super.submitted": self.submitted,
            "super.script_executed": _empty_if_none(self.script_executed),
            "super.exit_status": self.exit_status.value,
            "super.steps": self.steps,
            "super.prompt_tokens": self.prompt_tokens,
            "super.cached_prompt_tokens": self.cached_prompt_tokens,
            "super.completion_tokens": self.completion_tokens,
            "super.cost_usd": round(self.cost_usd, 6),
            "super.duration_s": round(self.duration_s, 3),
            "super.trajectory": self.trajectory,
            **(self.unit_test.properties() if self.unit_test else {}),
            **(self.judge.properties() if self.judge else {}),
            **({"super.image": self.image} if self.image else {}),
        }


def _judge(task: LmrTask, env: Environment, judge: LLMClient) -> JudgeOutcome:
    """`judge`'s grade of the function the episode left in the box's goal file; a goal file
    that cannot be read is the judge's error too (the unit test decides the task)."""
    try:
        source = env.kernel.read_file(f"{env.workdir}/{task.goal_file}")
    except Exception as exc:  # the judge's fault is recorded, never the task's
        return JudgeOutcome(judge.settings.model, error=f"the goal file is unreadable: {exc}")
    return judge_task(
        task, source, lambda messages: judge.complete(messages).text, judge.settings.model
    )


def _empty_if_none(score: float | None) -> float | str:
    """A score that does not apply to the task is empty in JUnit (not the string "None")."""
    return "" if score is None else score


def default_pass_metric(task: Task) -> str:
    if isinstance(task, LmrTask):
        return "unit-tests"
    return "script-executed" if task.set == "auto" else "accuracy"


def episode_limits(task: Task, settings: EpisodeSettings) -> EpisodeLimits:
    """The limits for one task: the task's own overrides win over the run's options."""
    budget = settings.token_budget or (400_000 if task.set == "masked" else 600_000)
    lim = task.limits
    return EpisodeLimits(
        steps=lim.steps or settings.steps,
        token_budget=lim.token_budget or budget,
        compute_s=lim.compute_s or settings.compute_limit_s,
        cell_timeout_s=lim.cell_timeout_s or settings.cell_timeout_s,
        format_errors=settings.format_errors,
    )


def task_timeout_s(task: Task, settings: EpisodeSettings, *, uses_model: bool) -> float:
    """The default pytest-timeout of a task: its compute limit plus a margin for provisioning,
    prefix replay and, for LLM agents, a minute of model latency per allowed step; never more
    than a timer takes (`deadlines.timer_seconds`: the limits are checked when read, but a Task
    made in Python is not)."""
    limits = episode_limits(task, settings)
    margin = 300.0 + (60.0 * limits.steps if uses_model else 0.0)
    return timer_seconds(limits.compute_s + margin)


def run_episode(
    task: Task,
    agent: Agent,
    new_kernel: Callable[[], Kernel],
    settings: EpisodeSettings,
    trajectory_path: Path,
    *,
    llm: LLMClient | None = None,
    on_step: Callable[[Step], None] | None = None,
    judge: LLMClient | None = None,
) -> TaskResult:
    """Run one episode of `task` with `agent` and score it (an LMR task's function graded by
    `judge` too, when given: lmr/judge.py).

    Infrastructure faults (`InfrastructureError`) and task faults (`TaskSetupError`) propagate after
    the trajectory is saved: they are the harness's or the task's fault, not the agent's. So does any
    other exception our code raises (a bug), as `HarnessError`. The ways an episode really ends
    (`EpisodeEnd`: a submission, a limit, too many format errors) become an exit status.
    """
    started = time.monotonic()
    trajectory = Trajectory(
        path=trajectory_path,
        task_id=task.id,
        query=task.query,
        agent=agent.name,
        model=settings.model,
    )
    trajectory.save()
    kernel = new_kernel()
    env = Environment(
        task,
        kernel,
        trajectory,
        episode_limits(task, settings),
        llm=llm,
        new_kernel=new_kernel,
        on_step=on_step,
        options=settings.options,
    )
    try:
        outcome, detail = _run_agent(agent, env, trajectory)
        try:
            result = score_episode(task, env, outcome, settings)
            if isinstance(task, LmrTask):  # its unit test, in the same box, after the episode
                result.unit_test = run_unit_test(task, env.kernel, env.workdir)
                if judge is not None:
                    result.judge = _judge(task, env, judge)
        except InfrastructureError as exc:  # the box failed the unit test's run
            _record_fault(trajectory, exc)
            raise
        except Exception as exc:  # scoring is ours: a bug here is the harness's fault
            fault = harness_error(exc)
            _record_fault(trajectory, fault)
            raise fault from exc
        _raise_world_fault(agent.name, env, result, settings)
    except BaseException:
        env.kernel.close()
        raise
    if settings.keep_failed and not result.passed:
        result.kept = env.kernel.detach()
    else:
        env.kernel.close()
    result.detail = detail or result.detail
    result.duration_s = time.monotonic() - started
    trajectory.info.update(
        exit_status=result.exit_status.value,
        detail=detail,
        submission=result.submission,
        accuracy=result.accuracy,
        landmarks=result.landmarks,
        script_executed=result.script_executed,
        prompt_tokens=result.prompt_tokens,
        cached_prompt_tokens=result.cached_prompt_tokens,
        completion_tokens=result.completion_tokens,
        cost_usd=result.cost_usd,
        **scoring_details(task, result, trajectory.steps),
    )
    trajectory.save()
    result.trajectory = str(trajectory.save_notebook())
    return result


def _raise_world_fault(
    agent: str, env: Environment, result: TaskResult, settings: EpisodeSettings
) -> None:
    """The world's faults of the episode (netfaults.py): raised as an environment or network
    error with its trajectory saved, or named in a scored episode's detail. With --super-keep,
    the box of such an error stays, as a failing task's does, and the error says how to get in."""
    trajectory = env.trajectory
    fault = world_fault(agent, trajectory.steps, result, settings.network_faults)
    if isinstance(fault, str):
        result.detail = fault
    elif fault is not None:
        if settings.keep_failed:
            fault = type(fault)(f"{fault}\n{env.kernel.detach()}")
        _record_fault(trajectory, fault)
        raise fault


def scoring_details(task: Task, result: TaskResult, steps: list[Step]) -> dict[str, object]:
    """What the reports show of the scoring: the expected answer key by key beside the
    submission, and each landmark with the step and excerpt that matched it."""
    return {
        "expected": task.answer,
        "comparisons": [
            {
                "path": c.path,
                "expected": c.expected,
                "submitted": None if c.submitted is scoring.MISSING else c.submitted,
                "missing": c.submitted is scoring.MISSING,
                "score": c.score,
            }
            for c in result.comparisons
        ],
        "landmark_matches": [
            {"regex": m.regex, "step": m.step, "excerpt": m.excerpt}
            for m in scoring.match_landmarks(task.landmarks, _landmark_texts(steps))
        ],
    }


def _landmark_texts(steps: list[Step]) -> list[str]:
    """What landmarks are searched in, one text per step (so a match's index is its step): every
    action's observation, "" for steps that are not actions. The score and the reports' excerpts
    read the same texts."""
    texts = scoring.observed_texts(steps)
    return [t if s.action not in NOT_ACTIONS else "" for s, t in zip(steps, texts, strict=True)]


def _run_agent(agent: Agent, env: Environment, trajectory: Trajectory) -> tuple[AgentResult, str]:
    """Replay the prefix and let the agent act; map every ending to an exit status."""
    try:
        replay_prefix_cells(env)
        try:
            result, detail = agent.run(env), ""
        except EpisodeEnd as end:
            result, detail = AgentResult(end.status), str(end)
        if result.exit_status is not ExitStatus.DISK_LIMIT:
            env.kernel.check_limits()  # a limit the episode went over since the last poll
        return result, detail
    except EpisodeEnd as end:
        return AgentResult(end.status), str(end)
    except (InfrastructureError, TaskSetupError) as exc:
        _record_fault(trajectory, exc)
        raise
    except Exception as exc:  # our own code broke (agents are ours too): never the model's doing
        fault = harness_error(exc)
        _record_fault(trajectory, fault)
        raise fault from exc


def harness_error(exc: Exception) -> HarnessError:
    """`exc`, raised by our own code during an episode, as a pytest error naming where it came from."""
    where = "".join(traceback.format_exception(exc))[-4000:]
    return HarnessError(
        f"pytest-super itself failed during the episode ({type(exc).__name__}: {exc}); this is a "
        f"bug of the harness, not a failure of the agent: please report it with this traceback:\n"
        f"{where}"
    )


def _record_fault(trajectory: Trajectory, exc: Exception) -> None:
    """The fault in the trajectory's info, and the partial episode saved with its notebook (the
    HTML page and the error's record link both)."""
    trajectory.info.update(exit_status=exit_status_of(exc).value, detail=str(exc))
    with contextlib.suppress(ReportWriteError, OSError, ValueError):  # the fault is reported
        trajectory.save()
        trajectory.save_notebook()


def exit_status_of(exc: Exception) -> ExitStatus:
    """The exit status of an episode or a task that `exc` ended: the one its class declares
    (errors.py); any other exception is a fault of the harness, as `harness_error` reports it."""
    if isinstance(exc, SuperError | EpisodeEnd):
        return exc.exit_status
    return ExitStatus.HARNESS_ERROR


def score_episode(
    task: Task, env: Environment, outcome: AgentResult, settings: EpisodeSettings
) -> TaskResult:
    """Turn what the episode left behind into scores (pure: reads only the trajectory)."""
    steps = env.trajectory.steps
    submission = None
    submitted = False
    status = outcome.exit_status
    detail = ""
    if outcome.exit_status is ExitStatus.SUBMITTED and outcome.submission is not None:
        read = scoring.read_submission(outcome.submission)
        submission, submitted, detail = read.value, read.submitted, read.problem
    accuracy = None
    comparisons: list[scoring.Comparison] = []
    if not submitted:
        submission = None  # the reference scores an empty submission as none
    if task.answer is not None:
        accuracy = scoring.score_accuracy(task.answer, submission, settings.tolerance)
        comparisons = scoring.compare_answer(task.answer, submission, settings.tolerance)
    landmarks, missed = scoring.check_landmarks(task.landmarks, _landmark_texts(steps))
    cells = scoring.executed_cells(steps)
    last = next(
        (s.observation or s.output for s in reversed(steps) if s.observation or s.output), ""
    )
    return TaskResult(
        task=task,
        agent=env.trajectory.agent,
        model=settings.model,
        exit_status=status,
        submission=submission,
        submitted=submitted,
        accuracy=accuracy,
        landmarks=landmarks,
        script_executed=scoring.score_script_executed(task.entrypoint, cells),
        comparisons=comparisons,
        landmarks_missed=missed,
        steps=sum(1 for s in steps if not s.pre_executed and s.action not in NOT_ACTIONS),
        prompt_tokens=env.prompt_tokens,
        cached_prompt_tokens=env.cached_prompt_tokens,
        completion_tokens=env.completion_tokens,
        cost_usd=env.cost_usd,
        detail=detail,
        last_observation=last,
        pass_metric=settings.pass_metric or default_pass_metric(task),
        pass_threshold=settings.pass_threshold,
    )
