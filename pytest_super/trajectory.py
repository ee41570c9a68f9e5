"""Trajectories: the steps of one episode, saved as JSON after every step and as a notebook at the end.

The JSON file is one object whose `steps` list holds a step per line and whose `info` (exit status,
submission, scores) comes last. A new step is written over the old trailer (`], "info": ...}`)
followed by a fresh trailer, so saving costs what the step costs, not the whole episode again:
writing a trajectory is linear in its size. The file is complete JSON at every moment, even when
the process is killed while it writes (a SIGKILL cuts a large write at a page boundary): a step is
written into a private twin of the file (`.<name>.next`), the twin is renamed over the file, and the
step is then written into the old file too, which becomes the next twin. Each step is so written
twice and nothing is ever copied whole. `save` rewrites the file whole (atomically, step by step,
never the whole text in memory at once); the runner does so at the start and end.
The notebook (nbformat v4) shows the query and thoughts as markdown and the actions as code cells
with their outputs, then the submission and the scores.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

import nbformat
from nbformat import v4

from pytest_super import strictjson
from pytest_super.atomic import replacing
from pytest_super.errors import ReportWriteError


class Action(str, Enum):
    """The names of what a `Step` records: the actions of our agents, the SWE-agent's commands,
    and the steps that record something else (`NOT_ACTIONS`).

    A member is equal to its value (and hashes as it does) and `str()` gives the value, so a
    trajectory is written with the bare names, and the steps of a trajectory read back, whose
    actions are plain strings, compare equal to the members.
    """

    EXECUTE = "execute"  # a notebook cell
    EDIT = "edit"  # SUPER's edit tool (ReAct-SUPER, a task's edit cell), or SWE-agent's edit
    SUBMIT = "submit"
    WAIT = "continue_wait"  # wait once more for a cell left running by its timeout
    INTERRUPT = "interrupt"  # stop that cell
    # SWE-agent's file viewer commands (`edit` and `submit` are above)
    OPEN = "open"
    GOTO = "goto"
    SCROLL_UP = "scroll_up"
    SCROLL_DOWN = "scroll_down"
    CREATE = "create"
    SEARCH_DIR = "search_dir"
    SEARCH_FILE = "search_file"
    FIND_FILE = "find_file"
    # steps that are not actions (`NOT_ACTIONS`)
    FORMAT_ERROR = "format_error"  # a reply that was not in the reply format
    BUDGET = "budget_exceeded"  # the token budget was used up before a model call
    COMPUTE = "compute_limit"  # the compute limit was used up before a model call
    REFLECTION = "reflection"  # Reflexion's plan between attempts
    LIMIT = "limit"  # a published episode's limit ending (`exception`, SWE-agent's `exit_*`)

    def __str__(self) -> str:
        return self.value


#: steps that record something other than an action in the kernel or the file viewer: they do
#: not count as steps, and landmarks are not looked for in them
NOT_ACTIONS = frozenset(
    {Action.FORMAT_ERROR, Action.BUDGET, Action.COMPUTE, Action.REFLECTION, Action.LIMIT}
)


@dataclass
class Step:
    """One step of an episode: what the agent thought and did, and what came back.

    `action` is an `Action`, or any other name: an agent of another project may record its own
    commands, and a trajectory read back holds plain strings (equal to the members they name).
    """

    thought: str
    action: Action | str
    content: str
    observation: str = ""  # what the model was shown (cleaned, possibly cut)
    output: str = ""  # raw cell output, for landmarks
    code: str | None = None  # the code the kernel ran for this step, if any
    cell_status: str | None = None  # ok, error, timeout, died
    duration_s: float = 0.0
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0  # of prompt_tokens, served from the provider's cache
    completion_tokens: int = 0
    cost_usd: float = 0.0
    attempt: int = 1
    pre_executed: bool = False


@dataclass
class Trajectory:
    """The record of one episode, written to `path` (JSON) as it grows."""

    path: Path
    task_id: str
    query: str
    agent: str
    model: str | None = None
    steps: list[Step] = field(default_factory=list)
    info: dict[str, object] = field(default_factory=dict)  # exit status, submission, scores

    # where the trailer starts in the file, once `save` has written it
    _trailer_at: int | None = field(default=None, init=False, repr=False)

    def append(self, step: Step) -> None:
        """Add a step and write it (see `_append`); a write error is a `ReportWriteError`."""
        try:
            self._append(step)
        except OSError as exc:
            raise ReportWriteError(self.path, exc) from None

    def _append(self, step: Step) -> None:
        """Add a step and write it at the end of the file (the steps before are not rewritten).

        A write in place can be cut by a signal (a SIGKILL while a 23 MB step was written left
        invalid JSON), so the step goes into the twin first, the twin replaces the file, and the
        old file, brought up to date the same way, is the next twin."""
        self.steps.append(step)
        if self._trailer_at is None or not self.path.exists():
            self._save()
            return
        data = (",\n" if len(self.steps) > 1 else "\n") + _step_json(step)
        encoded = data.encode("utf-8")
        tail = encoded + self._trailer()
        twin, spare = self._twin_paths()
        if not twin.exists():  # after `save`: a copy of the file while it is still small
            shutil.copyfile(self.path, twin)
        _write_at(twin, self._trailer_at, tail)  # private: a cut write harms nothing
        spare.unlink(missing_ok=True)
        try:
            os.link(self.path, spare)  # the file as it was, kept
        except OSError:  # a file system without hard links: one atomic rewrite instead
            twin.unlink(missing_ok=True)
            self._save()
            return
        os.replace(twin, self.path)  # a reader sees the file before the step or after it
        _write_at(spare, self._trailer_at, tail)
        os.replace(spare, twin)
        self._trailer_at += len(encoded)

    def _twin_paths(self) -> tuple[Path, Path]:
        return (
            self.path.with_name(f".{self.path.name}.next"),
            self.path.with_name(f".{self.path.name}.prev"),
        )

    def save(self) -> None:
        """Rewrite the whole file (atomically): the steps so far and the current `info`."""
        try:
            self._save()
        except OSError as exc:
            raise ReportWriteError(self.path, exc) from None

    def _save(self) -> None:
        with replacing(self.path) as f:
            head = {k: getattr(self, k) for k in ("task_id", "agent", "model", "query")}
            f.write(strictjson.dumps(head)[:-1] + ', "steps": [')
            for number, step in enumerate(self.steps):
                f.write((",\n" if number else "\n") + _step_json(step))
            f.flush()
            trailer_at = f.buffer.tell()
            f.write(self._trailer().decode("utf-8"))
        self._trailer_at = trailer_at
        for stale in self._twin_paths():  # the twin of the file before this rewrite
            stale.unlink(missing_ok=True)

    def _trailer(self) -> bytes:
        return ('\n], "info": ' + strictjson.dumps(self.info) + "}\n").encode("utf-8")

    @property
    def notebook_path(self) -> Path:
        return self.path.with_suffix(".ipynb")

    def save_notebook(self) -> Path:
        """Write the episode as a Jupyter notebook beside the JSON file and return its path."""
        try:
            return self._save_notebook()
        except OSError as exc:
            raise ReportWriteError(self.notebook_path, exc) from None

    def _save_notebook(self) -> Path:
        nb = v4.new_notebook()
        nb.metadata["pytest_super"] = {
            "task_id": self.task_id,
            "agent": self.agent,
            "model": self.model,
        }
        nb.metadata["kernelspec"] = {
            "name": "python3",
            "display_name": "Python 3",
            "language": "python",
        }
        nb.cells.append(_markdown(f"# {self.task_id}\n\n**Query**\n\n{self.query}"))
        count = 0
        for step in self.steps:
            who = "pre-executed" if step.pre_executed else f"attempt {step.attempt}"
            if step.thought:
                nb.cells.append(_markdown(f"*{who}* · **{step.action}**\n\n{step.thought}"))
            if step.code is not None:
                count += 1
                nb.cells.append(_code(step.code, count, step.output))
            elif step.action != Action.EXECUTE:
                text = f"`{step.action}`\n\n```\n{step.content}\n```"
                if step.observation:
                    text += f"\n\n```\n{step.observation[-5000:]}\n```"
                nb.cells.append(_markdown(text))
        summary = strictjson.dumps(self.info, indent=2)
        nb.cells.append(_markdown(f"## Result\n\n```json\n{summary}\n```"))
        nbformat.validate(nb)  # once for the notebook, not again for each cell as it is made
        # written cell by cell: nbformat.writes would hold the notebook's text, and a copy of it
        # split into lines, in memory at once (180 MB more for 21 cells of 5 MB, measured)
        with replacing(self.notebook_path) as f:
            f.write('{\n "cells": [')
            for number, cell in enumerate(nb.cells):
                f.write(("," if number else "") + "\n" + _notebook_json(cell))
            rest = {key: value for key, value in nb.items() if key != "cells"}
            f.write("\n ]," + _notebook_json(rest)[1:] + "\n")
        return self.notebook_path


def _markdown(source: str) -> dict[str, object]:
    """nbformat's markdown cell, not validated on its own (`v4.new_markdown_cell` validates
    each cell it makes: a fifth of a replay's CPU time; the notebook is validated whole)."""
    return {"id": _cell_id(), "cell_type": "markdown", "source": source, "metadata": {}}


def _code(source: str, count: int, output: str) -> dict[str, object]:
    """nbformat's code cell with its output as one stdout stream, validated with the notebook."""
    outputs = [{"output_type": "stream", "name": "stdout", "text": output}] if output else []
    return {
        "id": _cell_id(),
        "cell_type": "code",
        "metadata": {},
        "execution_count": count,
        "source": source,
        "outputs": outputs,
    }


def _cell_id() -> str:
    return uuid.uuid4().hex[:8]


def _write_at(path: Path, offset: int, data: bytes) -> None:
    """Write `data` at `offset` of `path` and cut the file there."""
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)
        f.truncate()


def _notebook_json(value: object) -> str:
    return strictjson.dumps(value, indent=1, sort_keys=True, ensure_ascii=False)


def _step_json(step: Step) -> str:
    return strictjson.dumps(asdict(step))


_TRAILER = '], "info": '


def read_trajectory_data(
    path: str | os.PathLike[str],
    shrink: Callable[[dict[str, Any]], dict[str, Any]] | None = None,  # Any: json.loads (as below)
) -> dict[str, Any]:  # Any: json.loads (a file as read: callers catch what a wrong shape raises)
    """The JSON object of a trajectory file, read a step at a time.

    A file laid out by `Trajectory.save` (the head, a step per line, the trailer) is parsed line by
    line, and `shrink` may cut each step down before the next is read: memory holds one step and
    what `shrink` kept (a 210 MB trajectory took 700 MB to parse whole). Any other JSON (a
    hand-edited file) is parsed whole. Raises OSError or ValueError for what cannot be read.
    """
    keep = shrink or (lambda step: step)
    with open(path, encoding="utf-8") as f:
        first = f.readline()
        if not first.rstrip("\n").endswith('"steps": ['):
            data: dict[str, Any] = json.loads(first + f.read())  # Any: json.loads (as above)
            data["steps"] = [keep(s) for s in data.get("steps") or []]
            return data
        data = json.loads(first.rstrip("\n")[: -len(', "steps": [')] + "}")
        steps: list[dict[str, Any]] = []  # Any: json.loads (as above)
        for line in f:
            if line.startswith(_TRAILER):
                data["info"] = json.loads(line[len(_TRAILER) :].rstrip().removesuffix("}"))
                break
            if line.strip():
                steps.append(keep(json.loads(line.rstrip().removesuffix(","))))
        else:
            raise ValueError(f"{path}: the trajectory ends before its info (a run cut short?)")
        data["steps"] = steps
        return data


def load_trajectory(path: str | os.PathLike[str]) -> Trajectory:
    """Read a trajectory JSON file written by `Trajectory.save` (for replay and re-scoring)."""
    data = read_trajectory_data(path)
    return Trajectory(
        path=Path(path),
        task_id=data["task_id"],
        query=data.get("query", ""),
        agent=data.get("agent", ""),
        model=data.get("model"),
        steps=[Step(**s) for s in data.get("steps", [])],
        info=data.get("info", {}),
    )
