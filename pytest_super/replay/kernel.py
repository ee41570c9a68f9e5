"""The replay kernel backend (`--super-backend=replay`): a published episode's kernel, played back.

`ReplayKernel` answers each cell, wait, interrupt and tool call (edit, SWE-agent's viewer) with the
episode's recorded observation and reports the recorded duration (`CellResult.duration_s`,
`ToolResult.duration_s`), so the compute limit and the cell timeout protocol fall where they fell:
time is simulated, nothing sleeps. A recorded observation that ends with the reference's
still-running note is a cell that timed out (`status="timeout"`, left running unless asked to
interrupt). No Docker, no process, no network, no files.

When the agent sends something the episode did not record at that point (another cell, another
edit), the kernel answers with a note saying so, takes no time, and remembers the difference
(`ReplayKernel.differences`); it never raises. An interrupt the episode did not record (the
reference interrupted a still-running cell silently before the next action) answers empty; with
no cell left running by a timeout, it is a difference too, as is a cell sent while one is left
running (the reference interrupts it first).

`ReplayBackend` provisions a kernel for a task id from the episodes registered with it
(`register`, what `pytest-super replay-run` does), or from the published run folder that the
environment variable `PYTEST_SUPER_REPLAY_RUN` names.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from pathlib import Path

from pytest_super.edit import EditFormatError, parse_edit
from pytest_super.errors import InfrastructureError
from pytest_super.kernels.base import (
    BackendBase,
    CellResult,
    CellStatus,
    ImageSpec,
    Kernel,
    KernelSettings,
    ToolResult,
)
from pytest_super.replay.script import (
    REFERENCE_CWD,
    EpisodeScript,
    Recorded,
    directory_after,
    episode_script,
)
from pytest_super.trajectory import Action

#: the environment variable naming a published run folder whose episodes the backend serves
RUN_VARIABLE = "PYTEST_SUPER_REPLAY_RUN"


def _same_content(action: str, ours: str, recorded: str) -> bool:
    """Whether two contents are the same action: cells equal but for trailing whitespace (it
    changes nothing a cell does), edits equal as requests (file, before, after); a wait or an
    interrupt has no content (the notebooks show `<content>` or nothing)."""
    if action in (Action.WAIT, Action.INTERRUPT) or ours.rstrip() == recorded.rstrip():
        return True
    if action != Action.EDIT:
        return False
    try:
        a, b = parse_edit(ours), parse_edit(recorded)
    except EditFormatError:
        return False
    return (a.file, a.before.strip("\n"), a.after.strip("\n")) == (
        b.file,
        b.before.strip("\n"),
        b.after.strip("\n"),
    )


#: the SWE-agent's wait command, which SUPER's SWE-agent ran as a notebook cell
SWE_WAIT_CELL = "continue_wait"


def is_swe_wait_cell(ours: str, recorded: str, recorded_content: str) -> bool:
    """A documented deviation (docs/fidelity.md, "Held-out differences"): SUPER's SWE-agent sent
    a `continue_wait` command to the kernel as a cell (the samples show its `NameError`), where
    our SWE-agent waits for the cell left running. The replay takes our wait as that step."""
    return (
        ours == Action.WAIT
        and recorded == Action.EXECUTE
        and recorded_content.strip() == SWE_WAIT_CELL
    )


def recorded_duration(recorded: Recorded) -> float:
    """The recorded duration with its planned fraction of a second (replay/compute_plan.py)."""
    return recorded.duration_s + recorded.fraction


def _short(text: str, limit: int = 80) -> str:
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= limit else one_line[: limit - 3] + "..."


class ReplayKernel:
    """One published episode's kernel (see the module docstring)."""

    def __init__(self, script: EpisodeScript) -> None:
        self.script = script
        self._queue: list[Recorded] = list(script.kernel)
        self._next = 0
        self._closed = False
        self._running = False  # a recorded cell that timed out is left running
        self.differences: list[str] = []

    # -- the cursor ------------------------------------------------------------------------------
    @property
    def description(self) -> str:
        return f"replay of {self.script.episode.folder}"

    @property
    def remaining(self) -> list[Recorded]:
        """What the episode recorded that nobody asked for (yet)."""
        return self._queue[self._next :]

    def _take(self, action: str, content: str) -> Recorded | None:
        """The next recorded step if it is `action` with `content`; else None, the difference
        noted. The cursor moves on either way, so one different step costs one step."""
        if self._next >= len(self._queue):
            self.differences.append(
                f"the agent sent {action} `{_short(content)}` after the episode's last recorded "
                "kernel step"
            )
            return None
        recorded = self._queue[self._next]
        self._next += 1
        if recorded.action == action and _same_content(action, content, recorded.content):
            return recorded
        if self.script.swe and is_swe_wait_cell(action, recorded.action, recorded.content):
            return recorded
        self.differences.append(
            f"step {recorded.step}: the agent sent {action} `{_short(content)}`, the episode "
            f"recorded {recorded.action} `{_short(recorded.content)}`"
        )
        return None

    def _note(self, recorded_action: str) -> str:
        return (
            f"[replay: the published episode recorded no such {recorded_action} here; see "
            f"{self.description}]"
        )

    def _cell(self, recorded: Recorded | None, action: str, *, interrupt: bool) -> CellResult:
        self._running = recorded is not None and recorded.timed_out and not interrupt
        if recorded is None:
            return CellResult(output=self._note(action), status="error", duration_s=0.0)
        if recorded.timed_out:
            return CellResult(
                output=recorded.output,
                status="timeout",
                duration_s=recorded_duration(recorded),
                still_running=not interrupt,
            )
        status: CellStatus = "error" if action == Action.INTERRUPT else "ok"
        return CellResult(
            output=recorded.output, status=status, duration_s=recorded_duration(recorded)
        )

    # -- Kernel ----------------------------------------------------------------------------------
    def execute(
        self, code: str, timeout: float, *, interrupt_on_timeout: bool = True
    ) -> CellResult:
        if self._running:  # the reference interrupts a cell left running before the next one
            upcoming = self._queue[self._next] if self._next < len(self._queue) else None
            where = f"before step {upcoming.step}" if upcoming else "after the last step"
            self.differences.append(f"{where}: a cell ran while one was left running")
        recorded = self._take(Action.EXECUTE, code)
        return self._cell(recorded, Action.EXECUTE, interrupt=interrupt_on_timeout)

    def wait(self, timeout: float) -> CellResult:
        return self._cell(self._take(Action.WAIT, ""), Action.WAIT, interrupt=False)

    def interrupt(self) -> CellResult:
        upcoming = self._queue[self._next] if self._next < len(self._queue) else None
        if upcoming is None or upcoming.action != Action.INTERRUPT:
            # the reference stopped a cell left running before the next action without a step;
            # with no cell left running, the episode recorded no interrupt here
            if not self._running:
                where = f"before step {upcoming.step}" if upcoming else "after the last step"
                self.differences.append(
                    f"{where}: an interrupt the episode did not record, with no cell left running"
                )
            self._running = False
            return CellResult(output="", status="error", duration_s=0.0)
        return self._cell(
            self._take(Action.INTERRUPT, upcoming.content), Action.INTERRUPT, interrupt=True
        )

    def run_tool(self, action: str, content: str) -> ToolResult | None:
        if action == "cwd":  # SWE-agent's state prompt: the reference's directory
            return ToolResult(self.working_dir(), True, 0.0)
        recorded = self._take(str(action), content)
        if recorded is None:
            return ToolResult(self._note(str(action)), False, 0.0)
        ok = not recorded.observation.startswith(("Edit failed", "Error", "Your proposed edit"))
        if action == Action.EDIT and not self.script.swe:
            ok = recorded.observation.startswith("Edit was successful")
        return ToolResult(recorded.observation, ok, recorded_duration(recorded))

    def working_dir(self) -> str:
        """The directory the reference's kernel was in after the steps taken so far."""
        where = REFERENCE_CWD
        for recorded in self._queue[: self._next]:
            where = directory_after(recorded, where)
        return where

    def restart(self) -> None:
        pass  # the recorded observations already show what a restart did

    def read_file(self, path: str) -> str:
        raise FileNotFoundError(f"{path}: a replayed kernel has no files (tools are replayed)")

    def write_file(self, path: str, text: str) -> None:
        raise OSError(f"{path}: a replayed kernel has no files (tools are replayed)")

    def read_bytes(self, path: str) -> bytes:
        raise FileNotFoundError(f"{path}: a replayed kernel has no files (tools are replayed)")

    def write_bytes(self, path: str, data: bytes) -> None:
        raise OSError(f"{path}: a replayed kernel has no files (tools are replayed)")

    def check_limits(self) -> None:
        pass

    def is_alive(self) -> bool:
        return not self._closed

    def detach(self) -> str:
        self._closed = True
        return f"{self.description} (nothing runs: a replayed kernel has no box)"

    def close(self) -> None:
        self._closed = True


class ReplayBackend(BackendBase):
    """Provisions `ReplayKernel`s for the episodes registered with it (see the module docstring).
    Made once per process without arguments; reaches nothing."""

    #: what the conformance suite must not ask (`kernels.base.CAPABILITIES`): a replayed kernel
    #: runs nothing
    unsupported = {
        name: "the replay backend answers only the cells its published episode recorded; it runs "
        "no code, and provisions only the tasks of registered episodes"
        for name in ("code", "timeout", "interrupt", "death", "restart", "files", "leftovers")
    }

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._scripts: dict[str, EpisodeScript] = {}

    def register(self, scripts: Iterable[EpisodeScript]) -> None:
        with self._lock:
            for script in scripts:
                self._scripts[script.task.id] = script

    def prepare_image(self, settings: KernelSettings, spec: ImageSpec) -> str:
        """A replayed episode runs no code: a task's own image is not made (`base.TaskImageBackend`)."""
        return "(replayed episode: no image)"

    def provision(self, settings: KernelSettings, *, task_id: str) -> Kernel:
        with self._lock:
            script = self._scripts.get(task_id)
        if script is None:
            script = self._from_environment(task_id)
        return ReplayKernel(script)

    def _from_environment(self, task_id: str) -> EpisodeScript:
        from pytest_super.published_runs import EpisodeFormatError, parse_run_name, read_episode

        run = os.environ.get(RUN_VARIABLE)
        if not run:
            raise InfrastructureError(
                f"replay backend: no published episode registered for task {task_id!r}; run "
                f"`pytest-super replay-run RUN_FOLDER`, or set {RUN_VARIABLE} to a published run "
                "folder (<model>_<agent>_<set>/<task_id>/history.ipynb)"
            )
        folder = Path(run) / task_id  # this task's episode alone: another's cannot fail it
        if folder.parent != Path(run) or not os.path.lexists(folder / "history.ipynb"):
            raise InfrastructureError(
                f"replay backend: {RUN_VARIABLE}={run} holds no episode of task {task_id!r}"
            )
        model, agent, set_name = parse_run_name(Path(run).name)
        try:
            episode = read_episode(folder, model=model, agent=agent, set_name=set_name)
        except EpisodeFormatError as exc:
            raise InfrastructureError(f"replay backend: {exc}") from None
        script = episode_script(episode)
        self.register([script])
        return script

    def cleanup_run(self, settings: KernelSettings, run_id: str) -> list[str]:
        return []  # nothing outlives a replayed kernel

    def cleanup_dead_runs(self, settings: KernelSettings) -> list[str]:
        return []
