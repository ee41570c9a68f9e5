"""Known task durations, for starting the longest tasks first (issue 33; ordering.py orders).

Three sources, first found wins:

1. `--super-durations FILE`: JSON of item id (pytest node id) to seconds, the format of
   pytest-split's `.test_durations`, so one file serves both;
2. the latest earlier run of the same agent and model in the same report folder: its
   results.jsonl (`super.duration_s` of each task record of that agent and model, read with
   report.read_results, which skips bad lines; another agent's or model's records are not read);
3. the table shipped with the package (data/super_durations.json): SUPER's own task ids, derived
   from the paper's published episodes by benchmarks/bench_cluster_sim.py (regenerate with
   `python benchmarks/bench_cluster_sim.py --write-durations pytest_super/data/super_durations.json`).

Any source orders tasks; only durations of the run's own agent and model give the status line's ETA
(`Durations.for_eta`, issue 44): a gold run's seconds say nothing of an LLM run's. A
`--super-durations` file is the user's word and counts as the run's own; the shipped table is the
paper's react-super runs with gpt-4o-2024-08-06 (its `runs`).

No pytest here: the plugin keeps the chosen `Durations` in `config.stash[plugin.DURATIONS_KEY]`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TypeGuard

from pytest_super import safe_read
from pytest_super.errors import SuperError
from pytest_super.report import base_task_id, read_results, same_run

#: the table shipped with the package (package data)
SHIPPED_TABLE = Path(__file__).resolve().parent / "data" / "super_durations.json"
#: a durations file larger than this is refused (pytest-split's file for 10^5 tests is ~10 MB)
MAX_BYTES = 64 * 2**20


class DurationsFileError(SuperError):
    """A --super-durations file that cannot be used: the message names the file and what is wrong."""


@dataclass(frozen=True)
class Durations:
    """Where the durations came from and the durations themselves (item id -> seconds).

    `source` is "--super-durations FILE", "earlier run <run id>", "shipped table" or "none";
    `whose` the agent and model they were measured with (model "" when none), None for a
    --super-durations file (the user's word: any run's).
    """

    source: str
    seconds: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    whose: tuple[str, str] | None = None

    def for_eta(self, agent: str | None, model: str | None) -> bool:
        """Whether these durations may give the ETA of a run of `agent` and `model`."""
        return self.whose is None or self.whose == (agent or "", model or "")

    def get(self, item_id: str) -> float | None:
        """The known duration of an item: by its node id, else by its last `::` part (the task id
        results.jsonl and the shipped table use), else by that task id without `[repeatN]`."""
        task_id = item_id.rsplit("::", 1)[-1]
        for key in (item_id, task_id, base_task_id(task_id)):
            found = self.seconds.get(key)
            if found is not None:
                return found
        return None

    def __bool__(self) -> bool:
        return bool(self.seconds)


NONE = Durations("none")


def _frozen(seconds: dict[str, float]) -> Mapping[str, float]:
    return MappingProxyType(dict(seconds))


def _is_seconds(value: object) -> TypeGuard[float]:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    )


def read_durations_file(path: Path) -> Durations:
    """A pytest-split `.test_durations` file: a JSON object of node id to seconds (a number >= 0).
    Anything else raises DurationsFileError naming the file, the entry and what to do."""
    shown = f"--super-durations {path}"
    try:
        text = safe_read.read_regular_file(path, MAX_BYTES).decode("utf-8")
    except safe_read.ForeignDataError as exc:
        raise DurationsFileError(f"--super-durations {exc}; give a pytest-split file") from None
    except UnicodeDecodeError as exc:
        raise DurationsFileError(f"{shown}: not UTF-8 ({exc.reason})") from None
    try:
        safe_read.check_depth(text)
        table = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise DurationsFileError(
            f"{shown}: not JSON ({str(exc)[:160]}); expected an object of test id to seconds, "
            "as pytest-split's .test_durations"
        ) from None
    if not isinstance(table, dict):
        raise DurationsFileError(
            f"{shown}: expected a JSON object of test id to seconds, found a {type(table).__name__}"
        )
    for key, value in table.items():
        if not _is_seconds(value):
            raise DurationsFileError(
                f"{shown}: entry {key[:200]!r} is {str(value)[:60]!r}, not a number of seconds "
                "(>= 0); fix or remove it"
            )
    return Durations(shown, _frozen({k: float(v) for k, v in table.items()}))


def latest_earlier_run(
    report_dir: Path, exclude_run: str | None = None, *, agent: str | None, model: str | None
) -> Durations:
    """The durations of the latest earlier run under `report_dir` that recorded any for `agent`
    and `model` (run ids sort by their start time): each task's `duration_s`, the last record of a
    task winning; records of another agent or model are not read."""
    if not report_dir.is_dir():
        return NONE
    runs = sorted(
        (p for p in report_dir.glob("*/results.jsonl") if p.parent.name != exclude_run),
        key=lambda p: p.parent.name,
        reverse=True,
    )
    for results in runs:
        found: dict[str, float] = {}
        for record in read_results(results, on_bad_line=lambda _message: None):
            value = record.properties.get("duration_s")
            if (
                _is_seconds(value)
                and record.outcome != "skipped"
                and same_run(record, agent, model)
            ):
                found[record.task_id] = float(value)
        if found:
            name = f"earlier run {results.parent.name}"
            return Durations(name, _frozen(found), whose=(agent or "", model or ""))
    return NONE


def shipped_table(path: Path = SHIPPED_TABLE) -> Durations:
    """The table shipped with the package: SUPER's task ids to seconds (see the module's doc)."""
    try:
        table = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return NONE
    seconds = table.get("seconds") if isinstance(table, dict) else None
    if not isinstance(seconds, dict):
        return NONE
    return Durations(
        "shipped table",
        _frozen({k: float(v) for k, v in seconds.items() if _is_seconds(v)}),
        whose=_table_whose(table.get("runs")),
    )


def _table_whose(runs: object) -> tuple[str, str]:
    """The agent and model of the table's published runs (`<model>_<agent>_<set>`, as
    bench_cluster_sim.py names them); one pair, else one no run has (no ETA from the table)."""
    pairs = set()
    for name in runs if isinstance(runs, list) else []:
        parts = str(name).rsplit("_", 2)
        if len(parts) == 3:
            pairs.add((parts[1], parts[0]))
    return pairs.pop() if len(pairs) == 1 else ("", "(several)")


def known_durations(
    durations_file: Path | None,
    report_dir: Path,
    *,
    agent: str | None,
    model: str | None,
    exclude_run: str | None = None,
) -> Durations:
    """The first source that has any: the file given, the latest earlier run of `agent` and
    `model`, the shipped table. A file given that is bad raises DurationsFileError (a usage
    error)."""
    if durations_file is not None:
        return read_durations_file(durations_file)
    earlier = latest_earlier_run(report_dir, exclude_run, agent=agent, model=model)
    if earlier:
        return earlier
    return shipped_table()
