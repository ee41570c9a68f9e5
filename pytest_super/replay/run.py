"""`pytest-super replay-run`: our agents, closed-loop, against every episode of a published run.

For each episode (`script.episode_script`), our agent of the episode's kind runs through the
ordinary runner (`runner.run_episode`: prefix replay, limits, scoring) with the reference's limits,
its model calls going to the replay endpoint (a real HTTP server, `endpoint.ReplayEndpoint`) and
its cells and tools to the replay kernel (`kernel.ReplayKernel`). Then what it did is compared
with the episode, step by step (`compare`): the action (kind and content), the number of steps,
the exit status, the submitted answer and the scores the published `metrics.json` holds that can
be computed without the task's gold data (submitted, script-executed). Differences an episode is
documented to have (`deviations.DEVIATIONS`, the table of docs/fidelity.md) are accepted.

Given the reference agent's requests (`expected`: `expected.read_expected` of a file
scripts/reference-requests.py wrote), the endpoint also compares each request our agent sends with
the reference's at that turn; the first that differs ends the episode and is its first
difference (`request N: message M (role), character C: ours ..., reference ...`). Every request
our agent sent is kept in the comparison (`requests`, written by `--json`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TypedDict

from pytest_super import defaults, scoring
from pytest_super.agents import load_agent
from pytest_super.agents.history import AUTO_INTERRUPT_THOUGHT
from pytest_super.environment import AgentOptions
from pytest_super.errors import LLMError
from pytest_super.kernels.base import Kernel, KernelSettings
from pytest_super.llm import LLMClient, LLMSettings
from pytest_super.names import file_stem
from pytest_super.prompts import PromptSet, ours
from pytest_super.published_runs import Metrics, PublishedEpisode, episode_folders, exit_status_of
from pytest_super.replay.deviations import documented_for
from pytest_super.replay.endpoint import ReplayEndpoint
from pytest_super.replay.expected import ExpectedRequests, Request
from pytest_super.replay.imported import is_imported_run, read_episodes
from pytest_super.replay.kernel import (
    ReplayBackend,
    ReplayKernel,
    _same_content,
    is_swe_wait_cell,
)
from pytest_super.replay.limits import at_step_limit, expected_at_step_limit
from pytest_super.replay.reference_set import for_prompt_set
from pytest_super.replay.script import (
    REFERENCE_STEPS,
    EpisodeScript,
    agent_for,
    episode_script,
)
from pytest_super.runner import EpisodeSettings, TaskResult, run_episode
from pytest_super.scratch import scratch_folder
from pytest_super.strictjson import JSON
from pytest_super.trajectory import NOT_ACTIONS, Action, Step


@dataclass
class Difference:
    """One way our agent's episode differs from the published one."""

    # action, steps, exit status, submission, submitted, script-executed, kernel, request
    what: str
    ours: str
    published: str
    step: int | None = None  # the notebook's step number, when it is about a step
    where: str = ""  # for a request: its turn, message and character offset

    def line(self, task_id: str) -> str:
        if self.what == "request":
            return f"{task_id}: {self.where}: ours {self.ours}, reference {self.published}"
        where = f"step {self.step}" if self.step is not None else self.what
        return f"{task_id}: {where}: ours {self.ours}, published {self.published}"


class OurSummary(TypedDict):
    """How our replay of an episode ended (`EpisodeComparison.ours`)."""

    steps: int
    exit_status: str
    error: str
    submission: JSON
    submitted: bool | None
    script_executed: float | None
    prompt_tokens: int | None


class PublishedSummary(TypedDict):
    """How the published episode ended (`EpisodeComparison.published`)."""

    steps: int
    exit_status: str
    metrics: Metrics


@dataclass
class EpisodeComparison:
    """Our replay of one episode beside the episode."""

    run: str
    task_id: str
    agent: str
    ours: OurSummary
    published: PublishedSummary
    differences: list[Difference] = field(default_factory=list)
    deviations: list[str] = field(default_factory=list)  # documented deviations of the episode
    kernel_notes: list[str] = field(default_factory=list)
    #: every request our agent sent: messages, stop, temperature, top_p, max_tokens
    requests: list[Request] = field(default_factory=list)
    #: of those, the number compared with the reference's and found equal (None: not compared)
    requests_identical: int | None = None
    requests_expected: int = 0

    @property
    def identical(self) -> bool:
        return not self.differences

    @property
    def documented(self) -> bool:
        """Differs, and every difference is one docs/fidelity.md lists for this episode."""
        return bool(self.differences) and bool(self.deviations)

    def as_json(self) -> dict[str, object]:
        data = asdict(self)
        data["identical"] = self.identical
        return data


@dataclass
class RunReplay:
    run: str
    episodes: list[EpisodeComparison] = field(default_factory=list)
    #: one line for each episode that could not be read or replayed
    errors: list[str] = field(default_factory=list)
    #: the run's episode folders without a notebook (metrics.json only): named, not replayed
    unreplayed: list[str] = field(default_factory=list)
    folders: int = 0  # episode folders in the run (imported runs: trajectories)

    @property
    def identical(self) -> int:
        return sum(e.identical for e in self.episodes)

    @property
    def requests(self) -> tuple[int, int]:
        """(requests identical to the reference's, requests the reference sent) over the
        episodes whose requests were compared."""
        compared = [e for e in self.episodes if e.requests_identical is not None]
        return sum(e.requests_identical or 0 for e in compared), sum(
            e.requests_expected for e in compared
        )

    @property
    def undocumented(self) -> list[EpisodeComparison]:
        return [e for e in self.episodes if not e.identical and not e.documented]


def _shown(text: object, limit: int = 100) -> str:
    one_line = " ".join(str(text).split())
    one_line = one_line if len(one_line) <= limit else one_line[: limit - 3] + "..."
    return f"`{one_line}`"


def _step_text(step: Step) -> str:
    if step.action == Action.FORMAT_ERROR:
        return "format_error"
    return f"{step.action} {_shown(step.content)} (thought {_shown(step.thought, 40)})"


def _same_step(ours: Step, published: Step) -> bool:
    if is_swe_wait_cell(str(ours.action), str(published.action), published.content):
        return ours.thought.strip() == published.thought.strip()  # a documented deviation
    if str(ours.action) != str(published.action):
        return False
    if ours.action == Action.FORMAT_ERROR:
        return True  # the published notebooks do not keep a malformed reply's text
    if ours.action == Action.SUBMIT:
        return _submitted_value(ours.content) == _submitted_value(published.content)
    if ours.thought.strip() != published.thought.strip():
        return False  # the thought the model gave, as our parser read it
    if ours.action in (Action.WAIT, Action.INTERRUPT):
        return True  # their content is not an action's (the notebooks show `<content>` or "")
    return _same_content(str(ours.action), ours.content, published.content)


def _submitted_value(text: str) -> object:
    read = scoring.read_submission(text)
    return read.value if read.problem == "" else text.strip()


def agent_steps(steps: list[Step]) -> list[Step]:
    """The steps the model chose: not pre-executed, not the harness's automatic interrupt, not the
    limit that ended the episode."""
    return [s for s in steps if is_agent_step(s)]


def is_agent_step(step: Step) -> bool:
    return (
        not step.pre_executed
        and step.thought != AUTO_INTERRUPT_THOUGHT
        and (step.action not in NOT_ACTIONS or step.action == Action.FORMAT_ERROR)
    )


def compare(
    script: EpisodeScript, ours_steps: list[Step], result: TaskResult | None, error: str
) -> list[Difference]:
    """Every difference between our episode and the published one (see the module docstring)."""
    episode = script.episode
    theirs = [(n, s) for n, s in enumerate(episode.steps, start=1) if is_agent_step(s)]
    mine = agent_steps(ours_steps)
    differences: list[Difference] = []
    for i in range(max(len(mine), len(theirs))):
        ours = mine[i] if i < len(mine) else None
        published = theirs[i][1] if i < len(theirs) else None
        number = theirs[i][0] if i < len(theirs) else len(episode.steps) + 1 + i - len(theirs)
        if ours is not None and published is not None and _same_step(ours, published):
            continue
        differences.append(
            Difference(
                "action",
                _step_text(ours) if ours else "(no step)",
                _step_text(published) if published else "(no step)",
                number,
            )
        )
        break  # the steps after the first different one follow from it
    if len(mine) != len(theirs):
        differences.append(Difference("steps", str(len(mine)), str(len(theirs))))
    published_exit = exit_status_of(episode)
    ours_exit = result.exit_status.value if result else f"error ({error})"
    if ours_exit != published_exit:
        differences.append(Difference("exit status", ours_exit, published_exit))
    differences += _score_differences(episode, ours_steps, result)
    return differences


def _score_differences(
    episode: PublishedEpisode, ours_steps: list[Step], result: TaskResult | None
) -> list[Difference]:
    if result is None:
        return []
    found = []
    metrics = episode.metrics
    if "submitted" in metrics and bool(metrics["submitted"]) != result.submitted:
        found.append(
            Difference("submitted", str(result.submitted), str(bool(metrics["submitted"])))
        )
    final = episode.final_action
    theirs = final.content if final is not None and final.action == Action.SUBMIT else None
    ours = next((s.content for s in reversed(ours_steps) if s.action == Action.SUBMIT), None)
    if None not in (theirs, ours) and _submitted_value(str(theirs)) != _submitted_value(str(ours)):
        found.append(Difference("submission", _shown(ours), _shown(theirs)))
    elif theirs is not None and result.submitted:
        read = scoring.read_submission(str(theirs))  # what the reference scored
        if read.problem == "" and json.dumps(result.submission) != json.dumps(read.value):
            shown = (_shown(result.submission), _shown(read.value))
            found.append(Difference("scored submission", *shown))
    published = metrics.get("entrypoint")
    if published is not None and result.script_executed not in (None, float(published)):
        found.append(
            Difference("script-executed", str(result.script_executed), str(float(published)))
        )
    return found


def replay_episode(
    script: EpisodeScript,
    endpoint: ReplayEndpoint,
    backend: ReplayBackend,
    work: Path,
    *,
    run: str = "",
    llm: LLMClient | None = None,
    prompts: PromptSet | None = None,
    expected: list[Request] | None = None,
    steps: int | None = None,
) -> tuple[EpisodeComparison, list[list[object]]]:
    """Run our agent against one episode; its comparison and the requests our agent sent.
    `llm`: a client of `endpoint` (default: one made, and closed, for this episode); `prompts`:
    the agent's prompt set (default: ours); `expected`: the reference agent's requests of the
    episode; `steps`: the run's step limit (default: see `_under_settings`)."""
    script, expected = _under_settings(script, expected, prompts, steps)
    episode = script.episode
    backend.register([script])
    kernels: list[ReplayKernel] = []

    def diverged() -> str | None:  # the first thing the kernel was asked otherwise
        return next((note for k in kernels for note in k.differences), None)

    endpoint.play(script.replies, expected, diverged)

    def new_kernel() -> Kernel:
        kernel = backend.provision(KernelSettings(backend="replay"), task_id=script.task.id)
        assert isinstance(kernel, ReplayKernel)
        kernels.append(kernel)
        return kernel

    name = agent_for(episode)
    settings = EpisodeSettings(  # a run's settings as ours make them (the reference's)
        agent=name,
        model=episode.model,
        token_budget=None,  # our default: 400k on Masked, 600k otherwise
        compute_limit_s=defaults.COMPUTE_LIMIT_S,
        cell_timeout_s=defaults.CELL_TIMEOUT_S,
        steps=steps or defaults.STEPS,
        options=AgentOptions(prompts=prompts or ours()),
    )
    client = llm or endpoint_client(endpoint, episode.model)
    taken: list[Step] = []
    result: TaskResult | None = None
    error = ""
    try:
        result = run_episode(
            script.task,
            load_agent(name),
            new_kernel,
            settings,
            work / f"{file_stem(script.task.id)}.json",
            llm=client,
            on_step=taken.append,
        )
    except LLMError as exc:
        error = str(exc).split("\n", 1)[0]
    finally:
        if llm is None:
            client.close()
    comparison = EpisodeComparison(
        run=run or episode.folder.parent.name,
        task_id=episode.task_id,
        agent=name,
        ours=_summary_of_ours(taken, result, error),
        published=_summary_of_published(episode),
        differences=_in_order(
            _request_differences(endpoint, expected) + compare(script, taken, result, error),
            _kernel_differences(kernels),
            endpoint,
        ),
        kernel_notes=[note for k in kernels for note in k.differences],
        requests=list(endpoint.sent),
    )
    _count_requests(comparison, endpoint, expected)
    if comparison.differences:
        pinned = bool(prompts and prompts.pinned)  # replayed with the reference's own files
        comparison.deviations = documented_for(comparison.run, episode.task_id, pinned=pinned)
    return comparison, list(endpoint.requests)


def _under_settings(
    script: EpisodeScript,
    expected: list[Request] | None,
    prompts: PromptSet | None,
    steps: int | None,
) -> tuple[EpisodeScript, list[Request] | None]:
    """The episode and the reference's requests as the run's settings make them: the requests
    for the prompt set (`reference_set.for_prompt_set`), the episode cut at the step limit
    (`limits.at_step_limit`; by default the reference's)."""
    expected = for_prompt_set(expected, prompts, script.episode)
    limited = at_step_limit(script, steps or REFERENCE_STEPS)
    if limited is None:
        return script, expected
    return limited, expected_at_step_limit(expected, steps or REFERENCE_STEPS)


def _count_requests(
    comparison: EpisodeComparison, endpoint: ReplayEndpoint, expected: list[Request] | None
) -> None:
    """The requests of ours equal to the reference's (those before the first that differs)."""
    if expected is None:
        return
    comparison.requests_expected = len(expected)
    parted = endpoint.difference
    same = len(endpoint.sent) if parted is None else parted.turn - 1
    comparison.requests_identical = min(same, len(expected))


def _in_order(
    ours: list[Difference], kernel: list[Difference], endpoint: ReplayEndpoint
) -> list[Difference]:
    """The request and step differences, then the kernel's; the kernel's first when they stopped
    the episode (what the requests and steps then show follows from it)."""
    return kernel + ours if endpoint.parted is not None else ours + kernel


def _request_differences(
    endpoint: ReplayEndpoint, expected: list[Request] | None
) -> list[Difference]:
    """The request that parted from the reference's, or a request the reference sent and we did
    not (our episode ended early)."""
    found = endpoint.difference
    if found is not None:
        where = found.line().split(": ours ", 1)[0]
        return [Difference("request", found.ours, found.expected, where=where)]
    if expected is not None and len(endpoint.sent) < len(expected):
        turn = len(endpoint.sent) + 1
        return [Difference("request", "(none)", "a request", where=f"request {turn}")]
    return []


def _kernel_differences(kernels: list[ReplayKernel]) -> list[Difference]:
    """What the replayed kernel saw otherwise than the episode recorded: a cell, wait or tool call
    it did not record (the prefix's too), or recorded ones nobody asked for."""
    found = [Difference("kernel", note, "(as recorded)") for k in kernels for note in k.differences]
    left = kernels[-1].remaining if kernels else []
    if left:
        found.append(
            Difference(
                "kernel",
                "(not asked)",
                f"{len(left)} more recorded kernel steps from step {left[0].step}",
            )
        )
    return found


def endpoint_client(endpoint: ReplayEndpoint, model: str) -> LLMClient:
    """Our model client, pointed at the replay endpoint (which takes any key), never retrying:
    a request the episode has no reply for is answered at once."""
    settings = LLMSettings(
        model=model, base_url=endpoint.base_url, api_key="replay-takes-any-key", max_retries=0
    )
    return LLMClient(settings)


def _summary_of_ours(steps: list[Step], result: TaskResult | None, error: str) -> OurSummary:
    return {
        "steps": len(agent_steps(steps)),
        "exit_status": result.exit_status.value if result else "error",
        "error": error,
        "submission": result.submission if result else None,
        "submitted": result.submitted if result else None,
        "script_executed": result.script_executed if result else None,
        "prompt_tokens": result.prompt_tokens if result else None,
    }


def _summary_of_published(episode: PublishedEpisode) -> PublishedSummary:
    return {
        "steps": len(agent_steps(episode.steps)),
        "exit_status": exit_status_of(episode),
        "metrics": episode.metrics,
    }


def replay_run(
    run_dir: Path,
    *,
    work: Path | None = None,
    prompts: PromptSet | None = None,
    expected: ExpectedRequests | None = None,
    only: set[str] | None = None,
    steps: int | None = None,
) -> RunReplay:
    """Replay every episode of the published (or imported) run folder `run_dir` (see the module
    docstring) with the agents' prompt set `prompts` (default: ours), comparing each request with
    `expected`'s, if given; `only`: the task ids to replay (default: all); `steps`: the run's
    step limit (default: ours). An episode that cannot
    be read or replayed is named in `errors`, and the others are replayed."""
    run_dir = Path(run_dir)
    found = read_episodes(run_dir)
    if found.episodes:
        agent_for(found.episodes[0])  # a run of an agent we have not: an error of the run
    replay = RunReplay(run=run_dir.name, errors=list(found.errors), folders=len(found.episodes))
    if not is_imported_run(run_dir):
        folders = episode_folders(run_dir)
        replay.folders = len(folders)
        replay.unreplayed = [f.name for f in folders if not (f / "history.ipynb").is_file()]
    backend = ReplayBackend()
    with scratch_folder("pytest-super-replay-") as scratch:
        folder = Path(work) if work is not None else scratch
        folder.mkdir(parents=True, exist_ok=True)
        with ReplayEndpoint() as endpoint:
            model = found.episodes[0].model if found.episodes else "replay"
            llm = endpoint_client(endpoint, model)  # one client: one connection for the run
            try:
                for episode in found.episodes:
                    if only is not None and episode.task_id not in only:
                        continue
                    try:
                        script = episode_script(episode)
                        comparison, _ = replay_episode(
                            script,
                            endpoint,
                            backend,
                            folder,
                            run=replay.run,
                            llm=llm,
                            prompts=prompts,
                            expected=_expected_of(expected, episode.task_id),
                            steps=steps,
                        )
                    except Exception as exc:  # noqa: BLE001 - named, and the others go on
                        replay.errors.append(
                            f"{episode.folder}: not replayed ({type(exc).__name__}: "
                            f"{str(exc)[:200]})"
                        )
                        continue
                    replay.episodes.append(comparison)
            finally:
                llm.close()
    return replay


def _expected_of(expected: ExpectedRequests | None, task_id: str) -> list[Request] | None:
    """The reference's requests of one episode; none known for an episode of a compared run: an
    empty list (its first request is then a difference)."""
    if expected is None:
        return None
    return expected.episodes.get(task_id, [])


def report_lines(replay: RunReplay) -> list[str]:
    """One line per episode that differs (its first difference), then the count."""
    lines = []
    for episode in replay.episodes:
        if episode.identical:
            continue
        note = f" [documented: {', '.join(episode.deviations)}]" if episode.documented else ""
        lines.append(episode.differences[0].line(episode.task_id) + note)
    lines += [f"error: {line}" for line in replay.errors]
    if replay.unreplayed:
        count = len(replay.unreplayed)
        has = "has" if count == 1 else "have"
        names = ", ".join(replay.unreplayed)
        lines.append(
            f"{count} of {replay.folders} folders {has} no notebook: not replayed ({names})"
        )
    lines.append(f"{replay.identical} of {len(replay.episodes)} episodes identical")
    if replay.errors:
        lines.append(f"{len(replay.errors)} episodes could not be replayed (named above)")
    same, total = replay.requests
    if any(e.requests_identical is not None for e in replay.episodes):
        lines.append(f"{same} of {total} requests identical to the reference agent's")
    return lines


def write_json(replays: list[RunReplay], path: Path) -> None:
    data = [
        {"run": r.run, "episodes": [e.as_json() for e in r.episodes], "errors": r.errors}
        for r in replays
    ]
    path.write_text(json.dumps(data, indent=1, default=str), encoding="utf-8")
