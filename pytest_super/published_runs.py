"""The paper's published episodes: read SUPER's run folders into this project's trajectories and results.

SUPER publishes each run as `<model>_<agent>_<set>/<task_id>/` holding `history.ipynb` (every step
the agent saw: a `### Step N` heading, the execution times, `**Thought**`, `**Action (type)**` and a
code cell whose source is the action's content and whose output is the observation) and
`metrics.json` (`submitted`, `output_match`, `checkpoints`, `entrypoint`). This module owns:

- `read_episode` / `read_run`: one folder / one run folder as `PublishedEpisode`s;
- the notebook's cells as raw steps, each mapped to our `Step` by published_steps.py (so that the
  replay agent can re-run them and scoring can read them);
- `import_run`: `<out>/<run>/trajectories/<task>.json` plus `<out>/<run>/results.jsonl` with the
  published scores, so `pytest-super report` puts a run of ours next to the paper's agents;
- `entrypoint_from_query`: the script a Masked query asks to run (the first its run block names).
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict, cast

from pytest_super import safe_read, scoring
from pytest_super.edit import AFTER_MARKER, BEFORE_MARKER
from pytest_super.errors import ExitStatus, SuperError
from pytest_super.names import file_stem
from pytest_super.published_steps import SWE_EDIT, SWE_EXITS, RawStep, published_step
from pytest_super.report import ResultsWriter, TaskRecord
from pytest_super.strictjson import JSON
from pytest_super.tasks import SETS, categories_from_id, raw_category_of
from pytest_super.trajectory import NOT_ACTIONS, Action, Step, Trajectory

#: the agent name of imported results: never mistaken for a run of ours (`--super-resume`)
PUBLISHED_PREFIX = "published:"

_STEP_HEADING = re.compile(r"^### Step (\d+)\s*$")
_TIMES = re.compile(r"^Execution Start time: .*\(duration: (\d+(?:\.\d+)?) seconds?\)")
_ACTION = re.compile(r"^\*\*Action \((.*)\)\*\*:\s*$", re.DOTALL)
_THOUGHT = "**Thought**:"
_RUN_BLOCK = re.compile(r"successfully run\s*```(.*?)```", re.DOTALL)
#: what a run block names to run: a module (`python -m a.b`, group 1) or a script file (group 2)
_RUN_TARGET = re.compile(r"\bpython[\d.]*\s+(?:-\w+\s+)*-m\s+([\w.]+)|([\w./-]+\.(?:py|sh|bash))\b")


class Metrics(TypedDict, total=False):
    """metrics.json as `_read_metrics` checked it (other keys are kept, unread)."""

    submitted: bool | int | None  # true, false, 0 or 1
    output_match: float | None  # each score a number from 0 to 1
    checkpoints: float | None
    entrypoint: float | None


class _Output(TypedDict, total=False):
    data: dict[str, str | list[str]]
    text: str | list[str]


class _Cell(TypedDict, total=False):
    """A notebook cell as `_check_cell` checked it: its text a string or a list of lines."""

    cell_type: str
    source: str | list[str]
    outputs: list[_Output]


class EpisodeFormatError(SuperError):
    """A published episode folder this module cannot read (names the file and what is wrong)."""


#: metrics.json: a handful of scores
METRICS_MAX_BYTES = 1024 * 1024
#: history.ipynb (the published notebooks reach tens of MB: their cells hold whole pip logs)
NOTEBOOK_MAX_BYTES = 512 * 1024 * 1024
#: metrics.json's scores, each in [0, 1] (or null)
METRIC_SCORES = ("output_match", "checkpoints", "entrypoint")


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
    metrics: Metrics = field(default_factory=lambda: Metrics())
    has_notebook: bool = True
    #: a pre-executed edit's text as the task gave it (blank lines kept), by its index in
    #: `steps`, where the notebook shows it whole (SWE-agent's Masked `EDITING ...` steps);
    #: the step's content is the canonical edit
    edit_sources: dict[int, str] = field(default_factory=dict)

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


def episode_folders(run_dir: Path) -> list[Path]:
    """The episode folders of a run: each one holding history.ipynb or metrics.json, by task id."""
    return sorted(
        p
        for p in Path(run_dir).iterdir()
        if p.is_dir() and any(os.path.lexists(p / n) for n in EPISODE_FILES)
    )


#: what an episode folder holds; a folder with either is an episode
EPISODE_FILES = ("history.ipynb", "metrics.json")


def read_run(run_dir: Path) -> list[PublishedEpisode]:
    """Every episode of a published run with a notebook, sorted by task id (folders with only
    metrics.json: `read_metrics_only`; `import_run` reads both and names what it could not)."""
    run_dir = Path(run_dir)
    model, agent, set_name = parse_run_name(run_dir.name)
    folders = sorted(p.parent for p in run_dir.glob("*/history.ipynb"))
    if not folders:
        raise EpisodeFormatError(f"{run_dir}: no <task_id>/history.ipynb folders in it")
    return [read_episode(f, model=model, agent=agent, set_name=set_name) for f in folders]


def read_metrics_only(folder: Path, *, model: str, agent: str, set_name: str) -> PublishedEpisode:
    """An episode folder without history.ipynb: its scores only (no steps, no query)."""
    return PublishedEpisode(
        task_id=folder.name,
        folder=folder,
        model=model,
        agent=agent,
        set=set_name,
        query="",
        metrics=_read_metrics(folder / "metrics.json"),
        has_notebook=False,
    )


def read_json_object(path: Path, max_bytes: int, what: str) -> dict[str, JSON]:
    """A JSON object of a file we did not write (through safe_read); EpisodeFormatError naming
    the file if it cannot be read or is not an object (`what` says which)."""
    try:
        data = safe_read.read_json_file(path, max_bytes)
    except safe_read.ForeignDataError as exc:
        raise EpisodeFormatError(str(exc)) from None
    if not isinstance(data, dict):
        raise EpisodeFormatError(f"{path}: a JSON {type(data).__name__}, not {what}")
    return data


def _read_metrics(path: Path) -> Metrics:
    """metrics.json, a regular file of scores: `output_match`, `checkpoints` and `entrypoint`
    finite numbers in [0, 1] (or null), `submitted` a boolean, 0 or 1 (or null)."""
    metrics = read_json_object(path, METRICS_MAX_BYTES, "an object of scores")
    for name in METRIC_SCORES:
        value = metrics.get(name)
        if value is None:
            continue
        try:
            if isinstance(value, str):
                raise ValueError("not a number (a JSON string)")
            safe_read.number(value, high=1.0)
        except ValueError as exc:
            raise EpisodeFormatError(
                f"{path}: {name} {json.dumps(value)[:60]} is refused: {exc}; a score is a "
                "number from 0 to 1"
            ) from None
    if metrics.get("submitted") not in (None, True, False, 0, 1):
        raise EpisodeFormatError(
            f"{path}: submitted {json.dumps(metrics['submitted'])[:60]} is refused: "
            "it is true, false, 0 or 1"
        )
    return cast(Metrics, metrics)  # each score checked above


def read_episode(folder: Path, *, model: str, agent: str, set_name: str) -> PublishedEpisode:
    """One published episode folder: `history.ipynb` (steps) and `metrics.json` (scores)."""
    folder = Path(folder)
    notebook = folder / "history.ipynb"
    cells = _read_cells(notebook)
    metrics_path = folder / "metrics.json"
    metrics = _read_metrics(metrics_path) if os.path.lexists(metrics_path) else Metrics()
    swe = "swe" in agent
    query, raw_steps = _notebook_steps(notebook, cells)
    steps: list[Step] = []
    edit_sources: dict[int, str] = {}
    for raw in raw_steps:
        steps.append(
            published_step(raw, swe=swe, after_pre_executed=bool(steps) and steps[-1].pre_executed)
        )
        edit = SWE_EDIT.match(raw["content"]) if steps[-1].action == Action.EDIT else None
        if edit is not None and steps[-1].pre_executed:
            edit_sources[len(steps) - 1] = (
                f"{edit['path'].strip()}\n{BEFORE_MARKER}\n{edit['before']}{AFTER_MARKER}\n"
                f"{edit['after']}"
            )
    return PublishedEpisode(
        task_id=folder.name,
        folder=folder,
        model=model,
        agent=agent,
        set=set_name,
        query=query,
        steps=steps,
        metrics=metrics,
        edit_sources=edit_sources,
    )


def _read_cells(notebook: Path) -> list[_Cell]:
    """The cells of a regular notebook file, each checked to have the shape the steps are read
    from (`_check_cell`)."""
    try:
        data = safe_read.read_json_file(notebook, NOTEBOOK_MAX_BYTES)
    except safe_read.ForeignDataError as exc:
        raise EpisodeFormatError(str(exc)) from None
    cells = data.get("cells") if isinstance(data, dict) else None
    if not isinstance(cells, list):
        raise EpisodeFormatError(f"{notebook}: not a notebook (no list of cells)")
    for number, cell in enumerate(cells, start=1):
        problem = _check_cell(cell)
        if problem:
            raise EpisodeFormatError(f"{notebook}: cell {number}: {problem}")
    return cast(list[_Cell], cells)  # each cell checked above


def _is_text(value: object) -> bool:
    """A notebook's text: a string, or a list of strings (its lines)."""
    return isinstance(value, str) or (
        isinstance(value, list) and all(isinstance(v, str) for v in value)
    )


def _check_cell(cell: object) -> str | None:
    """What is wrong with a notebook cell for reading its step (None when nothing is)."""
    if not isinstance(cell, dict):
        return f"a JSON {type(cell).__name__}, not an object"
    if not _is_text(cell.get("source", "")):
        return "its source is not text"
    outputs = cell.get("outputs") or []
    if not isinstance(outputs, list):
        return "its outputs are not a list"
    for number, output in enumerate(outputs, start=1):
        if not isinstance(output, dict):
            return f"output {number}: a JSON {type(output).__name__}, not an object"
        data = output.get("data", {})
        if not isinstance(data, dict):
            return f"output {number}: its data is a JSON {type(data).__name__}, not an object"
        if not _is_text(data.get("text/plain", output.get("text", ""))):
            return f"output {number}: its text is not text"
    return None


def _source(cell: _Cell) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def _output_text(cell: _Cell) -> str:
    parts = []
    for output in cell.get("outputs") or []:
        data = output.get("data", {}).get("text/plain", output.get("text", ""))
        parts.append("".join(data) if isinstance(data, list) else str(data))
    return "".join(parts)


def _notebook_steps(notebook: Path, cells: list[_Cell]) -> tuple[str, list[RawStep]]:
    """The query and, per `### Step N`, its thought, action type, content, observation, duration."""
    query = ""
    steps: list[RawStep] = []
    for cell in cells:
        text = _source(cell)
        if cell.get("cell_type") == "markdown":
            if text.startswith("### Query"):
                query = text[len("### Query") :].strip("\n")
            elif _STEP_HEADING.match(text):
                steps.append({"thought": "", "action": "", "content": "", "observation": ""})
            elif steps and (times := _TIMES.match(text)):
                duration = float(times.group(1))
                if not math.isfinite(duration):
                    raise EpisodeFormatError(f"{notebook}: a step's duration is {duration}")
                steps[-1]["duration_s"] = duration
            elif steps and text.startswith(_THOUGHT):
                # as the agent held it: its leading line breaks are part of what it was shown
                steps[-1]["thought"] = text[len(_THOUGHT) :].removeprefix(" ").rstrip()
            elif steps and (action := _ACTION.match(text)):
                steps[-1]["action"] = action.group(1)
        elif cell.get("cell_type") == "code" and steps:
            steps[-1]["content"] = _source(cell)
            steps[-1]["observation"] = _output_text(cell)
    if not steps:
        raise EpisodeFormatError(f"{notebook}: no `### Step N` cells in it")
    return query, steps


def entrypoint_from_query(query: str) -> str | None:
    """The script a Masked query asks to run ("... your goal is to successfully run ```...```"):
    the first script that block names (`run_block_scripts`); None when it runs none.

    Derived from what the paper's metric did (scripts/script-executed-agreement.py): over every
    published episode whose query has such a block and whose `metrics.json` has an `entrypoint`
    score, the first script the block names scores as the paper scored it, also where the block
    runs two scripts (the training script, then an evaluation) or a module (`python -m
    colbert.train`, whose entrypoint is `colbert/train.py`)."""
    block = _RUN_BLOCK.search(query)
    if block is None:
        return None
    return next(iter(run_block_scripts(block.group(1))), None)


def run_block_scripts(block: str) -> list[str]:
    """The scripts a block of cells names, in order, each once: a .py/.sh/.bash file by its name,
    a module run with `python -m` by its path (`a.b` is `a/b.py`). (Not filtered by
    `scoring.runs_entrypoint`: a `%%bash` block's lines are shell lines it reads as Python.)"""
    found: list[str] = []
    for match in _RUN_TARGET.finditer(block):
        module, path = match.group(1), match.group(2)
        name = module.replace(".", "/") + ".py" if module else Path(path).name
        if name not in found:
            found.append(name)
    return found


# -- writing --------------------------------------------------------------------------------------


def published_agent(episode: PublishedEpisode) -> str:
    return f"{PUBLISHED_PREFIX}{episode.agent}"


def _score(value: float | None) -> float | None:
    return None if value is None else float(value)


def exit_status_of(episode: PublishedEpisode) -> str:
    """How a published episode ended, as our exit statuses name it."""
    if not episode.has_notebook:  # only the scores are known
        submitted = episode.metrics.get("submitted")
        return ExitStatus.SUBMITTED.value if submitted else ExitStatus.NO_SUBMISSION.value
    final = episode.final_action
    if final is not None and final.action == Action.SUBMIT:
        return ExitStatus.SUBMITTED.value
    if final is not None and final.action == Action.LIMIT:
        if final.content in SWE_EXITS:
            return SWE_EXITS[final.content].value
        if final.content.startswith("exit_"):
            return ExitStatus.NO_SUBMISSION.value
        if final.content.startswith("step limit"):  # an episode cut by replay-run --steps
            return ExitStatus.STEP_LIMIT.value
        if "compute" in final.content.lower():
            return ExitStatus.COMPUTE_LIMIT.value
        return ExitStatus.BUDGET_EXCEEDED.value
    return ExitStatus.NO_SUBMISSION.value


def rescored(episode: PublishedEpisode) -> Rescored:
    """Our own scores of what the episode shows: submitted (its final action) and, when the query
    names the script to run, script-executed (its executed cells). Accuracy and landmarks need
    the task's answer and landmarks, which the published runs do not hold."""
    final = episode.final_action
    submitted = False
    if final is not None and final.action == Action.SUBMIT:
        submitted = scoring.read_submission(final.content).submitted
    entrypoint = entrypoint_from_query(episode.query)
    script = None
    if entrypoint is not None:
        script = scoring.score_script_executed(entrypoint, scoring.executed_cells(episode.steps))
    return {"submitted": submitted, "script_executed": script}


class Rescored(TypedDict):
    """Our own scores of a published episode (`rescored`)."""

    submitted: bool
    script_executed: float | None


def episode_record(episode: PublishedEpisode, trajectory: Path | None = None) -> TaskRecord:
    """The results.jsonl record of a published episode, with the published scores."""
    m = episode.metrics
    accuracy = _score(m.get("output_match"))
    script = _score(m.get("entrypoint"))
    metric = script if episode.set == "auto" else accuracy
    status = exit_status_of(episode)
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
            "steps": sum(s.action not in NOT_ACTIONS for s in steps),
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
            if episode.final_action and episode.final_action.action == Action.SUBMIT
            else None,
            "accuracy": record.properties["accuracy"],
            "landmarks": record.properties["landmarks"],
            "script_executed": record.properties["script_executed"],
            "published": str(episode.folder),
        },
    )
    trajectory.save()
    return trajectory


@dataclass
class RunImport:
    """What `import_run` did with one run folder: what it wrote, and what it could not read."""

    folder: Path  # where the run was written
    statuses: dict[str, int] = field(default_factory=dict)  # episodes per exit status
    warnings: list[str] = field(default_factory=list)  # imported, but with less than a notebook
    errors: list[str] = field(default_factory=list)  # not imported: each names its folder
    rescore_differences: list[str] = field(default_factory=list)

    @property
    def imported(self) -> int:
        return sum(self.statuses.values())


def import_run(run_dir: Path, out_dir: Path, *, rescore: bool = False) -> RunImport:
    """Import one published run folder into `out_dir/<run folder name>/`: a trajectory per
    episode and one results.jsonl. An episode folder with metrics.json but no notebook is imported
    from its scores, with a warning that names it; a folder that cannot be read is an error that
    names it, and the other episodes are still imported. With `rescore`, each record also holds
    our own scores of the episode (`rescored_submitted`, `rescored_script_executed`)."""
    run_dir = Path(run_dir)
    model, agent, set_name = parse_run_name(run_dir.name)
    target = Path(out_dir) / run_dir.name
    done = RunImport(folder=target)
    results = target / "results.jsonl"
    results.unlink(missing_ok=True)  # importing again replaces, never appends twice
    writer = ResultsWriter(results)
    try:
        for folder in episode_folders(run_dir):
            try:
                if os.path.lexists(folder / "history.ipynb"):
                    episode = read_episode(folder, model=model, agent=agent, set_name=set_name)
                else:
                    episode = read_metrics_only(folder, model=model, agent=agent, set_name=set_name)
                    done.warnings.append(
                        f"{folder}: no history.ipynb; imported from metrics.json alone "
                        "(no trajectory, no steps)"
                    )
            except EpisodeFormatError as exc:
                done.errors.append(str(exc))
                continue
            path = None
            if episode.has_notebook:
                path = target / "trajectories" / f"{file_stem(episode.task_id)}.json"
                write_trajectory(episode, path)
            record = episode_record(episode, path)
            if rescore and episode.has_notebook:
                ours = rescored(episode)
                record.properties["rescored_submitted"] = ours["submitted"]
                record.properties["rescored_script_executed"] = ours["script_executed"]
                published = record.properties
                for key in ("submitted", "script_executed"):
                    if None not in (ours[key], published[key]) and ours[key] != published[key]:
                        done.rescore_differences.append(
                            f"{episode.task_id}: {key} published {published[key]}, ours {ours[key]}"
                        )
            writer.write(record)
            status = cast(str, record.properties["exit_status"])
            done.statuses[status] = done.statuses.get(status, 0) + 1
    finally:
        writer.close()
    return done


def published_runs(directory: Path) -> list[Path]:
    """`directory` itself when it is a run folder (holds <task>/history.ipynb), else the run
    folders directly under it."""
    directory = Path(directory)
    if not directory.is_dir():
        raise EpisodeFormatError(f"{directory}: no such folder")
    if _is_run(directory):
        return [directory]
    runs = sorted(p for p in directory.iterdir() if p.is_dir() and _is_run(p))
    if not runs:
        raise EpisodeFormatError(
            f"{directory}: no published episodes (<model>_<agent>_<set>/<task_id>/history.ipynb)"
        )
    return runs


def _is_run(directory: Path) -> bool:
    return any(directory.glob("*/history.ipynb")) or any(directory.glob("*/metrics.json"))
