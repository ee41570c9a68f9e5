"""Reports: the failure message of one task, the per-run summary table, and reading JUnit files.

A run writes `reports/<run id>/results.jsonl` (one line per finished task, flushed as each finishes)
and `reports/<run id>/summary.md`; `pytest-super report A.xml B.xml` rebuilds the table from JUnit
files written with `--junitxml`, one column group per file.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_super import scoring
from pytest_super.kernels.output import clean_for_model

PROPERTY_PREFIX = "super."
OUTCOMES = ("passed", "failed", "error", "skipped")


# -- one task's failure ------------------------------------------------------------------------
def format_failure(result: Any) -> str:
    """Explain in the user's terms why a task did not pass (the pytest failure text)."""
    task = result.task
    value = result.metric_value
    shown = "none" if value is None else f"{value:.3f}"
    lines = [
        f"SUPER task {task.id} ({task.set}) did not pass: {result.pass_metric} {shown} "
        f"< {result.pass_threshold:g}",
        f"exit status: {result.exit_status.value}"
        + (f" ({_first_line(result.detail)})" if result.detail else ""),
    ]
    if result.comparisons:
        lines.append("answer (expected vs submitted):")
        for c in result.comparisons:
            mark = "ok  " if c.score >= 1 else "MISS"
            sub = (
                "<missing>"
                if c.submitted is scoring.MISSING
                else json.dumps(c.submitted, default=str)
            )
            lines.append(
                f"  {mark} {c.path or '(answer)'}: expected {json.dumps(c.expected, default=str)}, "
                f"submitted {sub}"
            )
    if task.answer is not None and not result.submitted:
        lines.append("  (no valid submission)")
    if result.landmarks is not None:
        lines.append(f"landmarks: {result.landmarks:.2f}")
        for regex in result.landmarks_missed:
            lines.append(f"  not hit: {regex}")
    if result.script_executed is not None:
        lines.append(f"script executed ({task.entrypoint}): {result.script_executed:g}")
    if result.last_observation:
        tail = clean_for_model(result.last_observation)[-800:]
        lines.append("last observation (tail):")
        lines.extend("  | " + ln for ln in tail.splitlines()[-15:])
    lines.append(f"steps: {result.steps}, prompt tokens: {result.prompt_tokens}")
    lines.append(f"trajectory: {result.trajectory}")
    if result.kept:
        lines.append(result.kept)
    return "\n".join(lines)


def _first_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


# -- records and the summary table -------------------------------------------------------------
@dataclass
class TaskRecord:
    """One finished task as the reports see it (a line of results.jsonl)."""

    task_id: str
    outcome: str
    properties: dict[str, Any] = field(default_factory=dict)  # without the `super.` prefix

    def as_json(self) -> dict[str, Any]:
        return {"task_id": self.task_id, "outcome": self.outcome, **self.properties}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TaskRecord:
        data = dict(data)
        return cls(task_id=data.pop("task_id"), outcome=data.pop("outcome"), properties=data)


def strip_prefix(properties: Iterable[tuple[str, Any]]) -> dict[str, Any]:
    return {k[len(PROPERTY_PREFIX) :]: v for k, v in properties if k.startswith(PROPERTY_PREFIX)}


@dataclass
class SummaryRow:
    group: str
    tasks: int = 0
    passed: int = 0
    errors: int = 0
    accuracy: float | None = None
    landmarks: float | None = None
    submitted: float | None = None
    script_executed: float | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0


def summarize(records: Iterable[TaskRecord]) -> list[SummaryRow]:
    """Rows per set, per masked category, and overall: the shape of the paper's Tables 4–6."""
    records = [r for r in records if r.outcome != "skipped"]
    groups: dict[str, list[TaskRecord]] = {}
    for r in records:
        set_name = str(r.properties.get("set") or "?")
        groups.setdefault(set_name, []).append(r)
        if set_name == "masked":
            for cat in str(r.properties.get("category") or "").split(","):
                if cat:
                    groups.setdefault(f"masked:{cat}", []).append(r)
    order = ["expert", "masked", "auto"]
    keys = sorted(
        groups, key=lambda k: (order.index(k.split(":")[0]) if k.split(":")[0] in order else 9, k)
    )
    rows = [_row(k, groups[k]) for k in keys]
    if len({k.split(":")[0] for k in keys}) > 1:
        rows.append(_row("all", records))
    return rows


def images_line(records: Iterable[TaskRecord]) -> str:
    """Which kernel image the tasks ran in: `images: <tag> (N tasks), ...` ("" when none says)."""
    counts: dict[str, int] = {}
    for r in records:
        image = r.properties.get("image")
        if image and r.outcome != "skipped":
            counts[str(image)] = counts.get(str(image), 0) + 1
    parts = [f"{tag} ({n} task{'s' if n != 1 else ''})" for tag, n in sorted(counts.items())]
    return f"images: {', '.join(parts)}" if parts else ""


def _row(group: str, records: list[TaskRecord]) -> SummaryRow:
    def values(name: str) -> list[float | None]:
        out = []
        for r in records:
            v = r.properties.get(name)
            out.append(None if v in (None, "", "None") else float(_as_bool_num(v)))
        return out

    return SummaryRow(
        group=group,
        tasks=len(records),
        passed=sum(r.outcome == "passed" for r in records),
        errors=sum(r.outcome == "error" for r in records),
        accuracy=scoring.mean_or_none(values("accuracy")),
        landmarks=scoring.mean_or_none(values("landmarks")),
        submitted=scoring.mean_or_none(values("submitted")),
        script_executed=scoring.mean_or_none(values("script_executed")),
        prompt_tokens=int(sum(v or 0 for v in values("prompt_tokens"))),
        completion_tokens=int(sum(v or 0 for v in values("completion_tokens"))),
        cost_usd=sum(v or 0 for v in values("cost_usd")),
    )


def _as_bool_num(v: Any) -> float:
    if isinstance(v, str):
        if v in ("True", "true"):
            return 1.0
        if v in ("False", "false"):
            return 0.0
    return float(v)


COLUMNS = ("tasks", "pass", "err", "acc%", "lm%", "sub%", "exec%", "tokens", "cost$")


def _cells(row: SummaryRow) -> list[str]:
    def pct(v: float | None) -> str:
        return "-" if v is None else f"{100 * v:.1f}"

    return [
        str(row.tasks),
        str(row.passed),
        str(row.errors),
        pct(row.accuracy),
        pct(row.landmarks),
        pct(row.submitted),
        pct(row.script_executed),
        str(row.prompt_tokens + row.completion_tokens),
        f"{row.cost_usd:.2f}",
    ]


def format_table(columns: dict[str, list[SummaryRow]], *, markdown: bool = False) -> str:
    """One table; each key of `columns` (a run, an agent, a file) gets its own column group."""
    groups: list[str] = []
    for rows in columns.values():
        for row in rows:
            if row.group not in groups:
                groups.append(row.group)
    header = ["group"]
    for name in columns:
        header += [f"{c}" if len(columns) == 1 else f"{name}:{c}" for c in COLUMNS]
    body = []
    for g in groups:
        line = [g]
        for rows in columns.values():
            row = next((r for r in rows if r.group == g), None)
            line += _cells(row) if row else ["-"] * len(COLUMNS)
        body.append(line)
    if markdown:
        out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        out += ["| " + " | ".join(r) + " |" for r in body]
        return "\n".join(out)
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]

    def fmt(cells: list[str]) -> str:
        return "  ".join(
            c.rjust(w) if i else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    return "\n".join([fmt(header), fmt(["-" * w for w in widths]), *map(fmt, body)])


# -- files ---------------------------------------------------------------------------------------
class ResultsWriter:
    """Appends one JSON line per finished task to results.jsonl, flushed at once."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = path.open("a", encoding="utf-8")

    def write(self, record: TaskRecord) -> None:
        self._file.write(json.dumps(record.as_json(), default=str) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def read_results(path: Path) -> list[TaskRecord]:
    """Read a results.jsonl file (for --super-resume and re-reporting)."""
    if not path.exists():
        return []
    return [
        TaskRecord.from_json(json.loads(ln)) for ln in path.read_text().splitlines() if ln.strip()
    ]


def final_results(
    report_dir: Path, *, agent: str, model: str | None, exclude_run: str | None = None
) -> dict[str, tuple[str, TaskRecord]]:
    """Tasks with a final result (passed or failed, not an error) for this agent and model in any
    earlier run under `report_dir`: task id -> (run id, record); the newest run wins."""
    found: dict[str, tuple[str, TaskRecord]] = {}
    if not report_dir.is_dir():
        return found
    for results in sorted(report_dir.glob("*/results.jsonl")):
        run_id = results.parent.name
        if run_id == exclude_run:
            continue
        for record in read_results(results):
            same = record.properties.get("agent") == agent and (
                (record.properties.get("model") or None) == (model or None)
            )
            if same and record.outcome in ("passed", "failed"):
                found[record.task_id] = (run_id, record)
    return found


def read_junit(path: Path) -> list[TaskRecord]:
    """The task records in a JUnit XML file written by pytest --junitxml with this plugin."""
    root = ET.parse(path).getroot()
    records = []
    for case in root.iter("testcase"):
        props = [(p.get("name", ""), p.get("value")) for p in case.iter("property")]
        stripped = strip_prefix(props)
        if not stripped:
            continue
        if case.find("skipped") is not None:
            outcome = "skipped"
        elif case.find("error") is not None:
            outcome = "error"
        elif case.find("failure") is not None:
            outcome = "failed"
        else:
            outcome = "passed"
        records.append(
            TaskRecord(task_id=case.get("name", "?"), outcome=outcome, properties=stripped)
        )
    return records
