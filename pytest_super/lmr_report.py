"""LMR-Bench's shape of a run's summary: the pass rate overall and per category, each with its
95% interval, and upstream's published pass rates beside it, over the same tasks
(data/lmr_published.json: the per-test verdicts of upstream's `results.txt` files, MIT).

A task's pass rate is its mean over repeats; a task that ended in a pytest error (the harness's
fault, not the agent's) is counted in `err` and left out of the rate. A published run's rate is
over the tasks of the group it scored. A mixed run reports each benchmark apart (`split`): SUPER's
table over its SUPER tasks, this one over its LMR tasks.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from pytest_super import stats
from pytest_super.report import TaskRecord, base_task_id, format_percent, format_table, summarize
from pytest_super.tasks.lmr import LMR_SET

PUBLISHED = Path(__file__).resolve().parent / "data" / "lmr_published.json"


@dataclass
class PublishedRate:
    """A published run's pass rate over the tasks of a group it scored (`n` of them)."""

    rate: float | None
    n: int


class _PublishedRun(TypedDict):
    """A run of the shipped file of upstream's published runs (`PUBLISHED`)."""

    published_pass_rate: float
    tests: dict[str, str]  # a task id -> `PASS` or upstream's failure text


@functools.cache
def _published() -> dict[str, _PublishedRun]:
    runs: dict[str, _PublishedRun] = json.loads(PUBLISHED.read_text(encoding="utf-8"))["runs"]
    return runs


def published_runs() -> dict[str, dict[str, str]]:
    """Upstream's published runs (`OpenHands/gpt4o`, `BaseAgent/gpt4.1`: the no-agent
    baseline), each task id -> `PASS` or upstream's failure text."""
    return {name: dict(run["tests"]) for name, run in _published().items()}


def published_totals() -> dict[str, PublishedRate]:
    """Each published run's own pass rate, as upstream published it, over the tasks it scored."""
    return {
        name: PublishedRate(float(run["published_pass_rate"]), len(run["tests"]))
        for name, run in _published().items()
    }


def is_lmr(record: TaskRecord) -> bool:
    return record.properties.get("set") == LMR_SET


def split(records: Iterable[TaskRecord]) -> tuple[list[TaskRecord], list[TaskRecord]]:
    """(SUPER's records, LMR-Bench's records) of a run: each benchmark is reported apart."""
    ours = list(records)
    return [r for r in ours if not is_lmr(r)], [r for r in ours if is_lmr(r)]


def benchmark_tables(columns: Mapping[str, Iterable[TaskRecord]], *, markdown: bool = False) -> str:
    """The summary of one or more runs (`columns`: a name -> its records), each benchmark apart:
    SUPER's table over the SUPER tasks of each run that has some, then LMR-Bench's table of
    each run that has LMR tasks (headed by the run's name when there are several)."""
    parts = {name: split(records) for name, records in columns.items()}
    supers = {name: summarize(ours) for name, (ours, _) in parts.items() if ours}
    lmr = {name: lmr_table(ours, markdown=markdown) for name, (_, ours) in parts.items()}
    lmr = {name: table for name, table in lmr.items() if table}
    tables = []
    if supers or not lmr:
        tables.append(format_table(supers or {n: [] for n in columns}, markdown=markdown))
    for name, table in lmr.items():
        tables.append(table if len(columns) == 1 else f"{name}:\n\n{table}")
    return "\n\n".join(tables)


@dataclass
class LmrRow:
    """One group (`all` or a category) of a run's LMR tasks."""

    group: str
    tasks: int
    passed: int
    errors: int
    estimate: stats.Estimate | None
    published: dict[str, PublishedRate] = field(default_factory=dict)


def lmr_rows(records: Iterable[TaskRecord]) -> list[LmrRow]:
    """The rows of a run's LMR tasks: `all`, then one per category ([] when it has none)."""
    lmr = [r for r in records if is_lmr(r) and r.outcome != "skipped"]
    if not lmr:
        return []
    groups: dict[str, list[TaskRecord]] = {"all": lmr}
    for r in lmr:
        groups.setdefault(str(r.properties.get("category") or "?"), []).append(r)
    return [_row(name, group, published_runs()) for name, group in groups.items()]


def lmr_table(records: Iterable[TaskRecord], *, markdown: bool = False) -> str:
    """The table of a run's LMR tasks ("" when it has none)."""
    found = lmr_rows(records)
    if not found:
        return ""
    header = ["LMR-Bench", "tasks", "pass", "err", "pass%", *(f"{n}%" for n in published_runs())]
    rows = [header] + [_cells(row) for row in found]
    if markdown:
        lines = ["| " + " | ".join(row) + " |" for row in rows]
        lines.insert(1, "|" + "---|" * len(header))
        return "\n".join(lines)
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows
    )


def _cells(row: LmrRow) -> list[str]:
    rate = None if row.estimate is None else row.estimate.mean
    cells = [row.group, str(row.tasks), str(row.passed), str(row.errors)]
    cells.append(format_percent(rate, row.estimate))
    for published in row.published.values():
        shown = f"{format_percent(published.rate)} (n={published.n})"
        cells.append(shown if published.n else "-")
    return cells


def _row(name: str, group: list[TaskRecord], runs: dict[str, dict[str, str]]) -> LmrRow:
    by_task: dict[str, list[float]] = {}
    for r in group:
        runs_of_task = by_task.setdefault(base_task_id(r.task_id), [])
        if r.outcome in ("passed", "failed"):
            runs_of_task.append(1.0 if r.outcome == "passed" else 0.0)
    row = LmrRow(
        group=name,
        tasks=len(by_task),
        passed=sum(r.outcome == "passed" for r in group),
        errors=sum(r.outcome == "error" for r in group),
        estimate=stats.bootstrap_mean(list(by_task.values())),
    )
    for run, verdicts in runs.items():
        scored = [verdicts[t] == "PASS" for t in by_task if t in verdicts]
        row.published[run] = PublishedRate(
            sum(scored) / len(scored) if scored else None, len(scored)
        )
    return row


def published_verdicts(task_id: str) -> dict[str, str | None]:
    """Each published run's verdict on a task (`PASS`, upstream's failure text, or None where
    the run did not score it), to compare a run of ours task by task."""
    return {run: verdicts.get(base_task_id(task_id)) for run, verdicts in published_runs().items()}
