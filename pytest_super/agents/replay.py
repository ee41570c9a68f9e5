"""The replay agent ("replay"): re-runs the actions of a saved trajectory, for debugging and re-scoring.

`env.options.replay_path` names a trajectory JSON file, or a directory holding
`<task_id>.json`. The agent's own actions (not the pre-executed ones, which the runner replays) of
the trajectory's last attempt are run again in order: execute, edit, continue_wait, interrupt,
submit. A SWE-agent trajectory (ours or a published one, imported by `pytest-super
import-trajectories`) also replays its file viewer commands (open, goto, edit <n>:<m>, ...), through
the same viewer. Other recorded steps (format errors, reflections, limits) are skipped.
New steps are recorded with 0 tokens; no model is asked.
"""

from __future__ import annotations

from pathlib import Path

from pytest_super.agents.base import AgentResult, Environment, ExitStatus
from pytest_super.agents.history import AUTO_INTERRUPT_THOUGHT, RunningCell, step_for_cell
from pytest_super.agents.swe_commands import (
    SPECIAL_COMMANDS,
    CommandFormatError,
    FileViewer,
    parse_command,
)
from pytest_super.edit import edit_action
from pytest_super.names import file_stem
from pytest_super.trajectory import Action, Step, Trajectory, load_trajectory

REPLAYED = (Action.EXECUTE, Action.EDIT, Action.WAIT, Action.INTERRUPT, Action.SUBMIT)


def find_trajectory(path: str | Path, task_id: str) -> Path:
    """The trajectory file for `task_id`: `path` itself, or `path/<task_id>.json` (the id made a
    safe file name by `file_stem`, as runs and `import-trajectories` write them)."""
    path = Path(path)
    if path.is_dir():
        candidate = path / f"{file_stem(task_id)}.json"
        if not candidate.is_file():
            raise FileNotFoundError(
                f"replay: no trajectory {candidate.name} in {path} for task {task_id!r}; "
                "point --super-replay at a trajectory file or a folder of <task_id>.json files"
            )
        return candidate
    if not path.is_file():
        raise FileNotFoundError(f"replay: trajectory {path} does not exist (--super-replay)")
    return path


def is_swe_trajectory(trajectory: Trajectory) -> bool:
    """Whether the trajectory's `edit` and viewer steps are SWE-agent commands."""
    return "swe" in trajectory.agent.lower()


def replayed_steps(trajectory: Trajectory) -> list[Step]:
    """The steps to re-run: the agent's replayable actions in the trajectory's last attempt."""
    own = [s for s in trajectory.steps if not s.pre_executed]
    if not own:
        return []
    last = max(s.attempt for s in own)
    replayed = set(REPLAYED) | (SPECIAL_COMMANDS if is_swe_trajectory(trajectory) else set())
    return [s for s in own if s.attempt == last and s.action in replayed]


class ReplayAgent:
    """Replays a saved trajectory's actions in a fresh kernel."""

    name = "replay"
    needs_llm = False

    def run(self, env: Environment) -> AgentResult:
        source = env.options.replay_path
        if not source:
            raise ValueError("the replay agent needs a trajectory: give --super-replay PATH")
        path = find_trajectory(source, env.task.id)
        saved = load_trajectory(path)
        if saved.task_id != env.task.id:
            raise ValueError(
                f"replay: {path} is a trajectory of task {saved.task_id!r}, not {env.task.id!r}"
            )
        cell = RunningCell()
        viewer = FileViewer(env.kernel) if is_swe_trajectory(saved) else None
        for old in replayed_steps(saved):
            interrupted = cell.interrupt_before(env, old.action)
            if interrupted is not None:
                env.record(interrupted)
            thought = old.thought
            if old.action == Action.SUBMIT:
                env.record(Step(thought=thought, action=Action.SUBMIT, content=old.content))
                return AgentResult(ExitStatus.SUBMITTED, old.content)
            if viewer is not None and old.action in SPECIAL_COMMANDS:
                env.record(self._viewer(viewer, old))
            elif old.action == Action.EDIT:
                env.record(self._edit(env, old))
            elif old.action == Action.EXECUTE:
                result = cell.run(env, old.content)
                env.record(
                    step_for_cell(thought, Action.EXECUTE, old.content, old.content, result, env)
                )
            elif cell.running:  # continue_wait or interrupt of a cell that still runs
                waiting = old.action == Action.WAIT
                result = cell.wait(env) if waiting else cell.interrupt(env)
                env.record(
                    step_for_cell(
                        thought, old.action, old.content, None, result, env, interrupted=not waiting
                    )
                )
            else:
                env.record(
                    Step(
                        thought=thought,
                        action=old.action,
                        content=old.content,
                        observation="[skipped in replay: no cell was running]",
                    )
                )
        if cell.running:  # the trajectory ended with a cell still running: stop it
            result = cell.interrupt(env)
            env.record(
                step_for_cell(
                    AUTO_INTERRUPT_THOUGHT,
                    Action.INTERRUPT,
                    "",
                    None,
                    result,
                    env,
                    interrupted=True,
                )
            )
        return AgentResult(ExitStatus.NO_SUBMISSION)

    @staticmethod
    def _viewer(viewer: FileViewer, old: Step) -> Step:
        """A SWE-agent file viewer command, run again through the viewer."""
        try:
            observation = viewer.run(parse_command(old.content))
        except (CommandFormatError, ValueError) as exc:
            observation = f"[not replayed: {exc}]"
        return Step(
            thought=old.thought, action=old.action, content=old.content, observation=observation
        )

    @staticmethod
    def _edit(env: Environment, old: Step) -> Step:
        outcome = edit_action(env.kernel, old.content)
        return Step(
            thought=old.thought,
            action=Action.EDIT,
            content=old.content,
            observation=outcome.message,
            cell_status="ok" if outcome.ok else "error",
        )
