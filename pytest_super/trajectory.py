"""Trajectories: the steps of one episode, saved as JSON after every step and as a notebook at the end.

The JSON file is rewritten atomically after each step, so a crash or a timeout leaves a readable
file. The notebook (nbformat v4) shows the query and thoughts as markdown and the actions as code
cells with their outputs, then the submission and the scores.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import nbformat
from nbformat import v4

from pytest_super.atomic import write_atomically


@dataclass
class Step:
    """One step of an episode: what the agent thought and did, and what came back."""

    thought: str
    action: str  # execute, edit, submit, continue_wait, interrupt, or an agent's own command
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
    info: dict[str, Any] = field(default_factory=dict)  # exit status, submission, scores

    def append(self, step: Step) -> None:
        self.steps.append(step)
        self.save()

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = {
            "task_id": self.task_id,
            "agent": self.agent,
            "model": self.model,
            "query": self.query,
            "info": self.info,
            "steps": [asdict(s) for s in self.steps],
        }
        write_atomically(self.path, json.dumps(data, indent=1, default=str))

    @property
    def notebook_path(self) -> Path:
        return self.path.with_suffix(".ipynb")

    def save_notebook(self) -> Path:
        """Write the episode as a Jupyter notebook beside the JSON file and return its path."""
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
        nb.cells.append(v4.new_markdown_cell(f"# {self.task_id}\n\n**Query**\n\n{self.query}"))
        count = 0
        for step in self.steps:
            who = "pre-executed" if step.pre_executed else f"attempt {step.attempt}"
            if step.thought:
                nb.cells.append(
                    v4.new_markdown_cell(f"*{who}* · **{step.action}**\n\n{step.thought}")
                )
            if step.code is not None:
                count += 1
                cell = v4.new_code_cell(step.code, execution_count=count)
                if step.output:
                    cell.outputs.append(v4.new_output("stream", name="stdout", text=step.output))
                nb.cells.append(cell)
            elif step.action != "execute":
                text = f"`{step.action}`\n\n```\n{step.content}\n```"
                if step.observation:
                    text += f"\n\n```\n{step.observation[-5000:]}\n```"
                nb.cells.append(v4.new_markdown_cell(text))
        summary = json.dumps(self.info, indent=2, default=str)
        nb.cells.append(v4.new_markdown_cell(f"## Result\n\n```json\n{summary}\n```"))
        nbformat.validate(nb)
        write_atomically(self.notebook_path, nbformat.writes(nb))
        return self.notebook_path


def load_trajectory(path: str | os.PathLike[str]) -> Trajectory:
    """Read a trajectory JSON file written by `Trajectory.save` (for replay and re-scoring)."""
    data = json.loads(Path(path).read_text())
    return Trajectory(
        path=Path(path),
        task_id=data["task_id"],
        query=data.get("query", ""),
        agent=data.get("agent", ""),
        model=data.get("model"),
        steps=[Step(**s) for s in data.get("steps", [])],
        info=data.get("info", {}),
    )
