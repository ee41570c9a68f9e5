"""Reading the episodes a replay plays back, each on its own: a published run's notebooks, or the
trajectories of a run `import-trajectories` wrote.

Such a run is data this run did not write. Each episode is read through `safe_read` (a regular
file, a size cap, a nesting bound) and checked for the shape the replay needs (a JSON object, a
`task_id` text, a list of step objects with the fields of a step, each of its type); one that
cannot be read is named in `RunEpisodes.errors` and the others are still replayed.
"""

from __future__ import annotations

import dataclasses
import os
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from pytest_super.published_runs import (
    EpisodeFormatError,
    Metrics,
    PublishedEpisode,
    parse_run_name,
    read_episode,
    read_json_object,
)
from pytest_super.report import read_results
from pytest_super.trajectory import Step

#: a trajectory file of an imported run (SUPER's largest published notebook is ~55 MB)
TRAJECTORY_MAX_BYTES = 512 * 1024 * 1024
#: the published metrics.json keys of the scores an imported record holds
_IMPORTED_SCORES = {
    "output_match": "accuracy",
    "checkpoints": "landmarks",
    "entrypoint": "script_executed",
}
_STEP_TYPES = typing.get_type_hints(Step)
_STEP_FIELDS = {f.name for f in dataclasses.fields(Step)}
_REQUIRED = {f.name for f in dataclasses.fields(Step) if f.default is dataclasses.MISSING}


@dataclass
class RunEpisodes:
    """The episodes of a run that could be read, and one line for each that could not."""

    episodes: list[PublishedEpisode] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def is_imported_run(run_dir: Path) -> bool:
    """Whether `run_dir` is a run `import-trajectories` wrote (trajectories/ and results.jsonl)."""
    return (Path(run_dir) / "trajectories").is_dir()


def read_episodes(run_dir: Path) -> RunEpisodes:
    """The episodes of a published run folder, or of one `import-trajectories` wrote."""
    run_dir = Path(run_dir)
    model, agent, set_name = parse_run_name(run_dir.name)
    found = RunEpisodes()
    if is_imported_run(run_dir):
        records = _records(run_dir / "results.jsonl", found.errors)
        sources = sorted((run_dir / "trajectories").glob("*.json"))
    else:
        records = {}
        sources = sorted(p.parent for p in run_dir.glob("*/history.ipynb"))
    for source in sources:
        try:
            if source.name.endswith(".json"):
                found.episodes.append(
                    _imported_episode(source, records, model=model, agent=agent, set_name=set_name)
                )
            else:
                found.episodes.append(
                    read_episode(source, model=model, agent=agent, set_name=set_name)
                )
        except EpisodeFormatError as exc:
            found.errors.append(f"{exc}; not replayed")
    if not sources:
        found.errors.append(f"{run_dir}: no episode with steps in it (<task_id>/history.ipynb)")
    return found


def _records(path: Path, errors: list[str]) -> dict[str, dict[str, object]]:
    if not os.path.lexists(path):
        return {}
    return {
        r.task_id: r.properties
        for r in read_results(path, on_bad_line=lambda line: errors.append(f"{line}"))
    }


def _imported_episode(
    path: Path, records: dict[str, dict[str, object]], *, model: str, agent: str, set_name: str
) -> PublishedEpisode:
    """One trajectory of an imported run, with the published scores its results.jsonl record
    carries (as metrics.json names them)."""
    data = read_json_object(path, TRAJECTORY_MAX_BYTES, "a trajectory object")
    task_id, query, raw_steps = data.get("task_id"), data.get("query", ""), data.get("steps", [])
    if not isinstance(task_id, str) or not task_id:
        raise EpisodeFormatError(f"{path}: task_id {task_id!r:.60} is not a task id (text)")
    if not isinstance(query, str):
        raise EpisodeFormatError(f"{path}: query is a {type(query).__name__}, not text")
    if not isinstance(raw_steps, list):
        raise EpisodeFormatError(f"{path}: steps is a {type(raw_steps).__name__}, not a list")
    steps = [_step(path, n, raw) for n, raw in enumerate(raw_steps, start=1)]
    record = records.get(task_id, {})
    metrics = cast(  # read_results checked each score's type
        Metrics, {key: record[name] for key, name in _IMPORTED_SCORES.items() if name in record}
    )
    if "submitted" in record:
        metrics["submitted"] = int(bool(record["submitted"]))
    return PublishedEpisode(
        task_id=task_id,
        folder=path,
        model=model,
        agent=agent,
        set=set_name,
        query=query,
        steps=steps,
        metrics=metrics,
    )


def _step(path: Path, number: int, raw: object) -> Step:
    """A trajectory's step, checked field by field against `Step`."""
    where = f"{path}: step {number}"
    if not isinstance(raw, dict):
        raise EpisodeFormatError(f"{where}: a JSON {type(raw).__name__}, not a step object")
    unknown = sorted(set(raw) - _STEP_FIELDS)
    if unknown:
        raise EpisodeFormatError(f"{where}: unknown field {unknown[0]!r:.60}")
    missing = sorted(_REQUIRED - set(raw))
    if missing:
        raise EpisodeFormatError(f"{where}: field {missing[0]!r} is missing")
    for name, value in raw.items():
        if not _fits(value, _STEP_TYPES[name]):
            raise EpisodeFormatError(
                f"{where}: field {name!r} is {value!r:.60}, a {type(value).__name__}"
            )
    return Step(**raw)


def _fits(value: object, hint: object) -> bool:
    """Whether a JSON value fits a step field's type (`str`, `int`, `float`, `bool`, `X | None`,
    `Action | str`)."""
    kinds = typing.get_args(hint) or (hint,)
    if value is None:
        return type(None) in kinds
    if isinstance(value, bool):
        return bool in kinds
    if isinstance(value, int):
        return int in kinds or float in kinds
    if isinstance(value, float):
        return float in kinds
    return isinstance(value, str) and any(
        k is str or isinstance(k, type) and issubclass(k, str) for k in kinds
    )
