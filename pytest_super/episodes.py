"""The paper's published episodes: read SUPER's run folders into this project's trajectories and results.

SUPER publishes each run as `<model>_<agent>_<set>/<task_id>/` holding `history.ipynb` (every step
the agent saw: a `### Step N` heading, the execution times, `**Thought**`, `**Action (type)**` and a
code cell whose source is the action's content and whose output is the observation) and
`metrics.json` (`submitted`, `output_match`, `checkpoints`, `entrypoint`). This module owns:

- `read_episode` / `read_run`: one folder / one run folder as `PublishedEpisode`s;
- the mapping of their steps to our `Step`s (ReAct-SUPER's `execute`/`edit`/`submit`/... and
  SWE-agent's shell cells (action `None`), viewer commands and `submit <json>`), so that the replay
  agent can re-run them and scoring can read them;
- `import_run`: `<out>/<run>/trajectories/<task>.json` plus `<out>/<run>/results.jsonl` with the
  published scores, so `pytest-super report` puts a run of ours next to the paper's agents;
- `entrypoint_from_query`: the script a Masked query asks to run, when the query names exactly one.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_super.agents.history import FORMAT_ERROR_ACTION, INTERRUPT_ACTION, WAIT_ACTION
from pytest_super.errors import SuperError
from pytest_super.names import file_stem
from pytest_super.report import ResultsWriter, TaskRecord
from pytest_super.scoring import SCRIPT_SUFFIXES
from pytest_super.tasks import SETS, categories_from_id, raw_category_of
from pytest_super.trajectory import Step, Trajectory

#: the agent name of imported results: never mistaken for a run of ours (`--super-resume`)
PUBLISHED_PREFIX = "published:"
#: the thought SUPER's notebooks give the pre-executed cells of a Masked task
PUBLISHED_PRE_EXECUTED = "[pre-executed by user]"
#: an `exception` action ends an episode on a limit; its content says which
LIMIT_ACTION = "limit"

_STEP_HEADING = re.compile(r"^### Step (\d+)\s*$")
_TIMES = re.compile(r"^Execution Start time: .*\(duration: (\d+(?:\.\d+)?) seconds?\)")
_ACTION = re.compile(r"^\*\*Action \((.*)\)\*\*:\s*$", re.DOTALL)
_THOUGHT = "**Thought**:"
_RUN_BLOCK = re.compile(r"successfully run\s*```(.*?)```", re.DOTALL)
_SCRIPT = re.compile(r"[\w./-]+\.(?:py|sh|bash)\b")


class EpisodeFormatError(SuperError):
    """A published episode folder this module cannot read (names the file and what is wrong)."""


@dataclass
class PublishedEpisode:
    """One published episode: its task, the run it belongs to, its steps and its scores."""

    task_id: str
    folder: Path
    model: str
    agent: str  # "react-super", "swe-agent", as the run folder names it
    set: str  # expert, masked, auto
    query: str
    steps: list[Step] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)

    @property
    def final_action(self) -> Step | None:
        return self.steps[-1] if self.steps else None


def parse_run_name(name: str) -> tuple[str, str, str]:
    """`gpt-4o-2024-08-06_react-super_masked` -> (model, agent, set)."""
    parts = name.rsplit("_", 2)
    if len(parts) != 3 or parts[2].lower() not in SETS:
        raise EpisodeFormatError(
            f"{name}: a published run folder is named <model>_<agent>_<set> with set one of "
            f"{', '.join(SETS)} (for example gpt-4o-2024-08-06_react-super_expert)"
        )
    return parts[0], parts[1], parts[2].lower()


def read_run(run_dir: Path) -> list[PublishedEpisode]:
    """Every episode folder (one holding history.ipynb) of a published run, sorted by task id."""
    run_dir = Path(run_dir)
    model, agent, set_name = parse_run_name(run_dir.name)
    folders = sorted(p.parent for p in run_dir.glob("*/history.ipynb"))
    if not folders:
        raise EpisodeFormatError(f"{run_dir}: no <task_id>/history.ipynb folders in it")
    return [read_episode(f, model=model, agent=agent, set_name=set_name) for f in folders]


def read_episode(folder: Path, *, model: str, agent: str, set_name: str) -> PublishedEpisode:
    """One published episode folder: `history.ipynb` (steps) and `metrics.json` (scores)."""
    folder = Path(folder)
    notebook = folder / "history.ipynb"
    try:
        cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise EpisodeFormatError(f"{notebook}: not a readable notebook ({exc})") from None
    metrics_path = folder / "metrics.json"
    metrics: dict[str, Any] = {}
    if metrics_path.exists():
        try:
            metrics = json.loads(metrics_path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise EpisodeFormatError(f"{metrics_path}: not JSON ({exc})") from None
    swe = "swe" in agent
    query, raw_steps = _notebook_steps(notebook, cells)
    return PublishedEpisode(
        task_id=folder.name,
        folder=folder,
        model=model,
        agent=agent,
        set=set_name,
        query=query,
        steps=[_step(raw, swe=swe) for raw in raw_steps],
        metrics=metrics,
    )


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def _output_text(cell: dict) -> str:
    parts = []
    for output in cell.get("outputs") or []:
        data = output.get("data", {}).get("text/plain", output.get("text", ""))
        parts.append("".join(data) if isinstance(data, list) else str(data))
    return "".join(parts)


def _notebook_steps(notebook: Path, cells: list[dict]) -> tuple[str, list[dict[str, Any]]]:
    """The query and, per `### Step N`, its thought, action type, content, observation, duration."""
    query = ""
    steps: list[dict[str, Any]] = []
    for cell in cells:
        text = _source(cell)
        if cell.get("cell_type") == "markdown":
            if text.startswith("### Query"):
                query = text[len("### Query") :].strip("\n")
            elif _STEP_HEADING.match(text):
                steps.append({"thought": "", "action": "", "content": "", "observation": ""})
            elif steps and (times := _TIMES.match(text)):
                steps[-1]["duration_s"] = float(times.group(1))
            elif steps and text.startswith(_THOUGHT):
                steps[-1]["thought"] = text[len(_THOUGHT) :].strip()
            elif steps and (action := _ACTION.match(text)):
                steps[-1]["action"] = action.group(1)
        elif cell.get("cell_type") == "code" and steps:
            steps[-1]["content"] = _source(cell)
            steps[-1]["observation"] = _output_text(cell)
    if not steps:
        raise EpisodeFormatError(f"{notebook}: no `### Step N` cells in it")
    return query, steps


def _step(raw: dict[str, Any], *, swe: bool) -> Step:
    """One published step as our `Step` (the shapes our agents record)."""
    kind, content, observation = raw["action"], raw["content"], raw["observation"]
    thought = raw["thought"]
    pre_executed = thought == PUBLISHED_PRE_EXECUTED
    duration = raw.get("duration_s", 0.0)
    common = {"thought": thought, "duration_s": duration, "pre_executed": pre_executed}
    if kind == "execute" or (swe and kind == "None"):
        return Step(
            action="execute",
            content=content,
            observation=observation,
            output=observation,
            code=content,
            **common,
        )
    if kind in (WAIT_ACTION, INTERRUPT_ACTION):
        return Step(
            action=kind, content=content, observation=observation, output=observation, **common
        )
    if kind == "submit":
        return Step(action="submit", content=_submission_text(content, swe=swe), **common)
    if kind == "edit" and not swe:
        ok = observation.startswith("Edit was successful")
        return Step(
            action="edit",
            content=content,
            observation=observation,
            cell_status="ok" if ok else "error",
            **common,
        )
    if kind == "exception":
        return Step(action=LIMIT_ACTION, content=content, observation=observation, **common)
    if kind == "" or not swe:
        # a reply without a usable action ("Invalid action type" in the reference): a format
        # error step, as our agents record them
        return Step(action=FORMAT_ERROR_ACTION, content=content, observation=observation, **common)
    return Step(action=kind, content=content, observation=observation, **common)  # a viewer


def _submission_text(content: str, *, swe: bool) -> str:
    """The submitted JSON text. ReAct-SUPER's notebooks show the parsed value as Python prints it
    (`{'a': 1}`, `None`, and a JSON string without its quotes); SWE-agent's the command
    (`submit {"a": 1}`)."""
    if swe:
        text = content.strip()
        return text[len("submit") :].strip() if text.startswith("submit") else text
    try:
        return json.dumps(ast.literal_eval(content.strip()))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        # the reference parsed every submission as JSON, so what Python cannot read back was a
        # JSON string, printed without its quotes
        return json.dumps(content)


def entrypoint_from_query(query: str) -> str | None:
    """The script a Masked query asks to run ("... your goal is to successfully run ```...```"),
    when that block names exactly one .py/.sh/.bash file; None otherwise."""
    block = _RUN_BLOCK.search(query)
    if block is None:
        return None
    names = {Path(name).name for name in _SCRIPT.findall(block.group(1))}
    names = {n for n in names if n.endswith(SCRIPT_SUFFIXES)}
    return names.pop() if len(names) == 1 else None


# -- writing --------------------------------------------------------------------------------------


def published_agent(episode: PublishedEpisode) -> str:
    return f"{PUBLISHED_PREFIX}{episode.agent}"


def _score(value: Any) -> float | None:
    return None if value is None else float(value)


def episode_record(episode: PublishedEpisode, trajectory: Path | None = None) -> TaskRecord:
    """The results.jsonl record of a published episode, with the published scores."""
    m = episode.metrics
    accuracy = _score(m.get("output_match"))
    script = _score(m.get("entrypoint"))
    metric = script if episode.set == "auto" else accuracy
    final = episode.final_action
    if final is not None and final.action == "submit":
        status = "submitted"
    elif final is not None and final.action == LIMIT_ACTION:
        status = "compute_limit" if "compute" in final.content.lower() else "budget_exceeded"
    else:
        status = "no_submission"
    steps = [s for s in episode.steps if not s.pre_executed]
    category = ""
    if episode.set == "masked":
        category = raw_category_of(episode.task_id) or ",".join(categories_from_id(episode.task_id))
    return TaskRecord(
        task_id=episode.task_id,
        outcome="passed" if metric is not None and metric >= 1.0 else "failed",
        properties={
            "set": episode.set,
            "category": category,
            "agent": published_agent(episode),
            "model": episode.model,
            "accuracy": accuracy,
            "landmarks": _score(m.get("checkpoints")),
            "submitted": bool(m.get("submitted")),
            "script_executed": script,
            "exit_status": status,
            "steps": sum(s.action not in (FORMAT_ERROR_ACTION, LIMIT_ACTION) for s in steps),
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "cost_usd": 0.0,
            "duration_s": round(sum(s.duration_s for s in episode.steps), 3),
            "trajectory": str(trajectory) if trajectory else "",
            "source": str(episode.folder),
        },
    )


def write_trajectory(episode: PublishedEpisode, path: Path) -> Trajectory:
    """The episode as our trajectory JSON (what `--super-agent=replay` reads)."""
    record = episode_record(episode)
    trajectory = Trajectory(
        path=path,
        task_id=episode.task_id,
        query=episode.query,
        agent=published_agent(episode),
        model=episode.model,
        steps=list(episode.steps),
        info={
            "exit_status": record.properties["exit_status"],
            "submission": episode.final_action.content
            if episode.final_action and episode.final_action.action == "submit"
            else None,
            "accuracy": record.properties["accuracy"],
            "landmarks": record.properties["landmarks"],
            "script_executed": record.properties["script_executed"],
            "published": str(episode.folder),
        },
    )
    trajectory.save()
    return trajectory


def import_run(run_dir: Path, out_dir: Path) -> tuple[Path, int]:
    """Import one published run folder into `out_dir/<run folder name>/`: a trajectory per
    episode and one results.jsonl. Returns the folder written and the number of episodes."""
    episodes = read_run(run_dir)
    target = Path(out_dir) / Path(run_dir).name
    results = target / "results.jsonl"
    results.unlink(missing_ok=True)  # importing again replaces, never appends twice
    writer = ResultsWriter(results)
    try:
        for episode in episodes:
            path = target / "trajectories" / f"{file_stem(episode.task_id)}.json"
            write_trajectory(episode, path)
            writer.write(episode_record(episode, path))
    finally:
        writer.close()
    return target, len(episodes)


def published_runs(directory: Path) -> list[Path]:
    """`directory` itself when it is a run folder (holds <task>/history.ipynb), else the run
    folders directly under it."""
    directory = Path(directory)
    if not directory.is_dir():
        raise EpisodeFormatError(f"{directory}: no such folder")
    if any(directory.glob("*/history.ipynb")):
        return [directory]
    runs = sorted(p for p in directory.iterdir() if any(p.glob("*/history.ipynb")))
    if not runs:
        raise EpisodeFormatError(
            f"{directory}: no published episodes (<model>_<agent>_<set>/<task_id>/history.ipynb)"
        )
    return runs
