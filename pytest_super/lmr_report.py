"""LMR-Bench's shape of a run's summary: the pass rate overall and per category, each with its
95% interval, and upstream's published pass rates beside it, over the same tasks
(data/lmr_published.json: the per-test verdicts of upstream's `results.txt` files, MIT).

A task's pass rate is its mean over repeats; a task that ended in a pytest error (the harness's
fault, not the agent's) is counted in `err` and left out of the rate. A published run's rate is
over the tasks of the group it scored.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pytest_super import stats
from pytest_super.report import TaskRecord, base_task_id, format_percent
from pytest_super.tasks.lmr import LMR_SET

PUBLISHED = Path(__file__).resolve().parent / "data" / "lmr_published.json"


@functools.cache
def published_runs() -> dict[str, dict[str, str]]:
    """Upstream's published runs (`OpenHands/gpt4o`, `BaseAgent/gpt4.1`: the no-agent
    baseline), each task id -> `PASS` or upstream's failure text."""
    data: dict[str, Any] = json.loads(PUBLISHED.read_text(encoding="utf-8"))
    return {name: dict(run["tests"]) for name, run in data["runs"].items()}


def lmr_table(records: Iterable[TaskRecord], *, markdown: bool = False) -> str:
    """The table of a run's LMR tasks ("" when it has none)."""
    lmr = [r for r in records if r.properties.get("set") == LMR_SET and r.outcome != "skipped"]
    if not lmr:
        return ""
    groups: dict[str, list[TaskRecord]] = {"all": lmr}
    for r in lmr:
        groups.setdefault(str(r.properties.get("category") or "?"), []).append(r)
    runs = published_runs()
    header = ["LMR-Bench", "tasks", "pass", "err", "pass%", *(f"{n}%" for n in runs)]
    rows = [header] + [_row(name, group, runs) for name, group in groups.items()]
    if markdown:
        lines = ["| " + " | ".join(row) + " |" for row in rows]
        lines.insert(1, "|" + "---|" * len(header))
        return "\n".join(lines)
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows
    )


def _row(name: str, group: list[TaskRecord], runs: dict[str, dict[str, str]]) -> list[str]:
    by_task: dict[str, list[float]] = {}
    for r in group:
        runs_of_task = by_task.setdefault(base_task_id(r.task_id), [])
        if r.outcome in ("passed", "failed"):
            runs_of_task.append(1.0 if r.outcome == "passed" else 0.0)
    estimate = stats.bootstrap_mean(list(by_task.values()))
    cells = [
        name,
        str(len(by_task)),
        str(sum(r.outcome == "passed" for r in group)),
        str(sum(r.outcome == "error" for r in group)),
        format_percent(None if estimate is None else estimate.mean, estimate),
    ]
    for verdicts in runs.values():
        scored = [verdicts[t] == "PASS" for t in by_task if t in verdicts]
        rate = sum(scored) / len(scored) if scored else None
        cells.append(f"{format_percent(rate)} (n={len(scored)})" if scored else "-")
    return cells
