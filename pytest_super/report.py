"""Reports: the failure message of one task, the per-run summary table, and reading JUnit files.

A run writes `reports/<run id>/results.jsonl` (one line per finished task, flushed as each finishes)
and `reports/<run id>/summary.md`; `pytest-super report A.xml B.xml` rebuilds the table from JUnit
files written with `--junitxml`, one column group per file.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, cast
from xml.parsers import expat

from pytest_super import junit, safe_read, scoring, stats, strictjson
from pytest_super.kernels.jupyter.output import clean_for_model
from pytest_super.lmr.unit_tests import UnitTestOutcome
from pytest_super.paths import shown_path
from pytest_super.runner import TaskResult
from pytest_super.tasks import categories_of, jsonl_lines

PROPERTY_PREFIX = "super."
OUTCOMES = safe_read.OUTCOMES


# -- one task's failure ------------------------------------------------------------------------
def format_failure(result: TaskResult) -> str:
    """Explain in the user's terms why a task did not pass (the pytest failure text)."""
    task = result.task
    value = result.metric_value
    shown = "none" if value is None else f"{value:.3f}"
    lines = [
        f"{'LMR-Bench' if result.unit_test else 'SUPER'} task {task.id} ({task.set}) did not pass: {result.pass_metric} {shown} "
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
    if result.unit_test is not None:
        lines.extend(unit_test_lines(result.unit_test))
        if result.judge is not None:
            lines.append(result.judge.line())
    elif result.last_observation:
        tail = clean_for_model(result.last_observation)[-800:]
        lines.append("last observation (tail):")
        lines.extend("  | " + ln for ln in tail.splitlines()[-15:])
    lines.append(f"steps: {result.steps}, prompt tokens: {result.prompt_tokens}")
    shown = shown_path(result.trajectory) if result.trajectory else ""
    lines.append(f"trajectory: {shown}")
    if result.kept:
        lines.append(result.kept)
        lines.append(KEPT_CONSOLE_NOTE)
    return "\n".join(lines)


def unit_test_lines(unit_test: UnitTestOutcome) -> list[str]:
    """An LMR task's unit test in its failure text: why, the counts, the failing assertion or
    exception, the test's output tail, and upstream's verdict from its log beside ours."""
    ours = "PASS" if unit_test.passed else "FAIL"
    lines = [
        f"unit test: {unit_test.why or 'passed'}",
        f"  ran {unit_test.run}, failed {unit_test.failed}, errored {unit_test.errored}; "
        f"exit code {unit_test.exit_code}",
        f"  upstream's log verdict: {unit_test.upstream_verdict}"
        + (
            "" if unit_test.upstream_passed == unit_test.passed else f" (differs from ours: {ours})"
        ),
    ]
    for problem in unit_test.problems[:3]:
        lines.append("failing test:")
        lines.extend("  | " + ln for ln in problem.strip().splitlines()[-12:])
    if unit_test.output_tail:
        lines.append("unit test output (tail):")
        lines.extend("  | " + ln for ln in unit_test.output_tail.strip().splitlines()[-15:])
    return lines


#: how to leave the console of a kept kernel without stopping it (a plain `exit` in
#: `jupyter console --existing` shuts the kernel down)
KEPT_CONSOLE_NOTE = (
    "in the console, leave with exit(keep_kernel=True): a plain `exit` stops the kept kernel"
)


def _first_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


# -- records and the summary table -------------------------------------------------------------
@dataclass
class TaskRecord:
    """One finished task as the reports see it (a line of results.jsonl)."""

    task_id: str
    outcome: str
    properties: dict[str, object] = field(default_factory=dict)  # without the `super.` prefix

    def as_json(self) -> dict[str, object]:
        return {"task_id": self.task_id, "outcome": self.outcome, **self.properties}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> TaskRecord:
        data = dict(data)
        task_id, outcome = cast(str, data.pop("task_id")), cast(str, data.pop("outcome"))
        return cls(task_id=task_id, outcome=outcome, properties=data)  # check_record checked them


def strip_prefix(properties: Iterable[tuple[str, object]]) -> dict[str, object]:
    return {k[len(PROPERTY_PREFIX) :]: v for k, v in properties if k.startswith(PROPERTY_PREFIX)}


@dataclass
class SummaryRow:
    """One group of the summary (a set, a masked category, or all): means over tasks, each with
    its 95% interval (`stats`), and with repeats pass@k and pass^k for k = `repeats`."""

    group: str
    tasks: int = 0
    runs: int = 0
    passed: int = 0
    errors: int = 0
    accuracy: float | None = None
    landmarks: float | None = None
    submitted: float | None = None
    script_executed: float | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    intervals: dict[str, stats.Estimate] = field(default_factory=dict)
    repeats: int = 1
    pass_at_k: float | None = None
    pass_hat_k: float | None = None


SCORES = ("accuracy", "landmarks", "submitted", "script_executed")
_REPEAT_SUFFIX = re.compile(r"\[repeat(\d+)\]\Z")


def base_task_id(task_id: str) -> str:
    """The task id without the `[repeatN]` suffix of `--super-repeat` items."""
    return _REPEAT_SUFFIX.sub("", task_id)


def repeat_suffix(number: int) -> str:
    """The item-name suffix of the `number`-th run of a task under `--super-repeat`."""
    return f"[repeat{number}]"


def summarize(records: Iterable[TaskRecord]) -> list[SummaryRow]:
    """Rows per set, per masked category, and overall: the shape of the paper's Tables 4–6."""
    records = [r for r in records if r.outcome != "skipped"]
    groups: dict[str, list[TaskRecord]] = {}
    for r in records:
        set_name = str(r.properties.get("set") or "?")
        groups.setdefault(set_name, []).append(r)
        if set_name == "masked":
            for cat in categories_of(str(r.properties.get("category") or "")):
                groups.setdefault(f"masked:{cat}", []).append(r)
    order = ["expert", "masked", "auto"]
    keys = sorted(
        groups, key=lambda k: (order.index(k.split(":")[0]) if k.split(":")[0] in order else 9, k)
    )
    rows = [_row(k, groups[k]) for k in keys]
    if len({k.split(":")[0] for k in keys}) > 1:
        rows.append(_row("all", records))
    return rows


#: the scores a set has by design (SUPER's Auto tasks have no answer to submit and no landmarks:
#: only script-executed); a set not named has them all
SCORES_OF_SET: dict[str, tuple[str, ...]] = {"auto": ("script_executed",), "lmr": ()}


def applies(record: TaskRecord, name: str) -> bool:
    """Whether score `name` means anything for the record's set (the summary shows `-`/`–` and
    the `all` row leaves the record out of that mean where it does not)."""
    return name in SCORES_OF_SET.get(str(record.properties.get("set") or ""), SCORES)


def score_value(record: TaskRecord, name: str) -> float | None:
    """A record's numeric property (scores, tokens, cost) as a float; None when absent or empty
    (JUnit files carry "" and older ones "None")."""
    v = record.properties.get(name)
    return None if v in (None, "", "None") else float(_as_bool_num(cast("str | float", v)))


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
    by_task: dict[str, list[TaskRecord]] = {}
    for r in records:
        by_task.setdefault(base_task_id(r.task_id), []).append(r)

    def per_task(name: str) -> list[list[float]]:
        return [
            [v for v in (score_value(r, name) for r in runs if applies(r, name)) if v is not None]
            for runs in by_task.values()
        ]

    def total(name: str) -> float:
        return sum(score_value(r, name) or 0 for r in records)

    intervals = {}
    for name in SCORES:
        estimate = stats.bootstrap_mean(per_task(name))
        if estimate is not None:
            intervals[name] = estimate
    repeats = max((len(runs) for runs in by_task.values()), default=1)
    outcomes = [[r.outcome == "passed" for r in runs] for runs in by_task.values()]
    return SummaryRow(
        group=group,
        tasks=len(by_task),
        runs=len(records),
        passed=sum(r.outcome == "passed" for r in records),
        errors=sum(r.outcome == "error" for r in records),
        accuracy=_mean_of(intervals.get("accuracy")),
        landmarks=_mean_of(intervals.get("landmarks")),
        submitted=_mean_of(intervals.get("submitted")),
        script_executed=_mean_of(intervals.get("script_executed")),
        prompt_tokens=int(total("prompt_tokens")),
        completion_tokens=int(total("completion_tokens")),
        cost_usd=total("cost_usd"),
        intervals=intervals,
        repeats=repeats,
        pass_at_k=stats.mean_pass_at_k(outcomes, repeats) if repeats > 1 else None,
        pass_hat_k=stats.mean_pass_hat_k(outcomes, repeats) if repeats > 1 else None,
    )


def _mean_of(estimate: stats.Estimate | None) -> float | None:
    return None if estimate is None else estimate.mean


def _as_bool_num(v: str | float) -> float:
    if isinstance(v, str):
        if v in ("True", "true"):
            return 1.0
        if v in ("False", "false"):
            return 0.0
    return float(v)


COLUMNS = ("tasks", "pass", "err", "acc%", "lm%", "sub%", "exec%", "tokens", "cost$")
REPEAT_COLUMNS = ("runs", "pass@k", "pass^k")


def format_percent(value: float | None, estimate: stats.Estimate | None = None) -> str:
    """A share as a percentage, with its 95% interval when it has width: `45.0 [30.0-60.0]`."""
    if value is None:
        return "-"
    shown = f"{100 * value:.1f}"
    if estimate is not None and estimate.high > estimate.low:
        shown += f" [{100 * estimate.low:.1f}-{100 * estimate.high:.1f}]"
    return shown


def _cells(row: SummaryRow, with_repeats: bool) -> list[str]:
    cells = [
        str(row.tasks),
        str(row.passed),
        str(row.errors),
        *(format_percent(getattr(row, name), row.intervals.get(name)) for name in SCORES),
        str(row.prompt_tokens + row.completion_tokens),
        f"{row.cost_usd:.2f}",
    ]
    if with_repeats:
        cells += [str(row.runs), format_percent(row.pass_at_k), format_percent(row.pass_hat_k)]
    return cells


def format_table(columns: dict[str, list[SummaryRow]], *, markdown: bool = False) -> str:
    """One table; each key of `columns` (a run, an agent, a file) gets its own column group.
    Percentages carry their 95% interval; runs, pass@k and pass^k (k = the repeats) are added
    when a task ran more than once."""
    groups: list[str] = []
    for rows in columns.values():
        for row in rows:
            if row.group not in groups:
                groups.append(row.group)
    with_repeats = any(row.repeats > 1 for rows in columns.values() for row in rows)
    names = COLUMNS + (REPEAT_COLUMNS if with_repeats else ())
    letters = run_letters(columns)
    header = ["group"]
    for name in columns:
        header += [f"{c}" if len(columns) == 1 else f"{letters[name]}:{c}" for c in names]
    body = []
    for g in groups:
        line = [g]
        for rows in columns.values():
            found = next((r for r in rows if r.group == g), None)
            line += _cells(found, with_repeats) if found else ["-"] * len(names)
        body.append(line)
    if markdown:
        out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        out += ["| " + " | ".join(r) + " |" for r in body]
        note = "Percentages: mean over tasks [95% bootstrap interval], see docs/report.md."
        return "\n".join([*out, "", note, *legend(letters, markdown=True)])
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]

    def fmt(cells: list[str]) -> str:
        return "  ".join(
            c.rjust(w) if i else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    table = [fmt(header), fmt(["-" * w for w in widths]), *map(fmt, body)]
    return "\n".join([*table, *legend(letters)])


def run_letters(columns: Mapping[str, object]) -> dict[str, str]:
    """A short name per run (A, B, ..., Z, AA, ...) for the headers of a table of several runs:
    the runs' own names (agent/model, file) are too long to repeat over each column."""
    letters = {}
    for index, name in enumerate(columns):
        letter = ""
        index += 1
        while index:
            index, rest = divmod(index - 1, 26)
            letter = chr(ord("A") + rest) + letter
        letters[name] = letter
    return letters


def legend(letters: dict[str, str], *, markdown: bool = False) -> list[str]:
    """The lines under a table of several runs that say which run each letter is."""
    if len(letters) < 2:
        return []
    if markdown:
        return ["", *(f"- {letter}: {name}" for name, letter in letters.items())]
    return ["", *(f"{letter}: {name}" for name, letter in letters.items())]


TASK_COLUMNS = ("outcome", "acc%", "lm%", "sub", "exec%")


def _task_cells(record: TaskRecord | None) -> list[str]:
    if record is None:
        return ["-"] * len(TASK_COLUMNS)

    def pct(name: str) -> str:
        v = record.properties.get(name)
        return (
            "-" if v in (None, "", "None") else f"{100 * _as_bool_num(cast('str | float', v)):.1f}"
        )

    submitted = record.properties.get("submitted")
    shown = cast("str | float", submitted)  # check_record checked it
    sub = "-" if submitted in (None, "", "None") else str(int(_as_bool_num(shown)))
    return [record.outcome, pct("accuracy"), pct("landmarks"), sub, pct("script_executed")]


def format_task_table(columns: dict[str, list[TaskRecord]]) -> str:
    """One row per task, one column group per run (ours next to the paper's, for example)."""
    tasks: list[str] = []
    by_column: dict[str, dict[str, TaskRecord]] = {}
    for name, records in columns.items():
        by_column[name] = {}
        for record in records:
            if record.task_id not in tasks:
                tasks.append(record.task_id)
            by_column[name][record.task_id] = record
    letters = run_letters(columns)
    header = ["task"] + [
        c if len(columns) == 1 else f"{letters[name]}:{c}" for name in columns for c in TASK_COLUMNS
    ]
    body = [
        [task] + [c for name in columns for c in _task_cells(by_column[name].get(task))]
        for task in tasks
    ]
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    lines = [
        "  ".join(
            c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in [header, *body]
    ]
    return "\n".join([*lines, *legend(letters)])


# -- files ---------------------------------------------------------------------------------------
class ResultsWriter:
    """Appends one JSON line per finished task to results.jsonl, flushed at once."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file: BinaryIO = path.open("ab", buffering=0)

    def write(self, record: TaskRecord) -> None:
        """Append the record's line; on a write error (a full disk) the file is cut back to its
        last whole line before the error is raised, so what was written stays valid."""
        line = memoryview((strictjson.dumps(record.as_json()) + "\n").encode("utf-8"))
        fd = self._file.fileno()
        size = os.fstat(fd).st_size
        try:
            while line:  # an unbuffered write may take part of the line and refuse the rest
                line = line[os.write(fd, line) :]
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, size)
            raise

    def close(self) -> None:
        self._file.close()


def read_results(path: Path, on_bad_line: Callable[[str], None] | None = None) -> list[TaskRecord]:
    """Read a results.jsonl file (for --super-resume and re-reporting), line by line.

    A line that is not a task record the reports can read (what a crash or a full disk leaves: a
    truncated line, junk; or a mistyped field, `"accuracy": "high"`) is skipped; `on_bad_line`
    gets a message naming the file, the line and the field (default: a warning). A file that is
    not a regular file (a FIFO, a folder) or larger than `safe_read.RESULTS_MAX_BYTES` is
    skipped whole, with the same message.
    """
    if not os.path.lexists(path):
        return []
    warn = on_bad_line or (lambda message: warnings.warn(message, stacklevel=3))
    try:
        data = safe_read.read_regular_file(path, safe_read.RESULTS_MAX_BYTES)
    except safe_read.ForeignDataError as error:
        warn(f"skipped results file {error}")
        return []
    records = []
    for number, line in jsonl_lines(data):
        if isinstance(line, str) and not line.strip():
            continue
        try:
            if isinstance(line, UnicodeDecodeError):
                raise ValueError(f"not UTF-8 ({line.reason})")
            safe_read.check_depth(line)
            record = json.loads(line)
            safe_read.check_record(record)
        except (ValueError, RecursionError) as error:
            warn(f"{path}:{number}: skipped a broken results line ({str(error)[:160]})")
            continue
        records.append(TaskRecord.from_json(record))
    return records


def same_run(record: TaskRecord, agent: str | None, model: str | None) -> bool:
    """Whether a task record is of a run of `agent` and `model` (no model: "" or None)."""
    return (record.properties.get("agent") or "") == (agent or "") and (
        record.properties.get("model") or ""
    ) == (model or "")


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
            if same_run(record, agent, model) and record.outcome in ("passed", "failed"):
                found[record.task_id] = (run_id, record)
    return found


def read_junit(path: Path, on_bad_case: Callable[[str], None] | None = None) -> list[TaskRecord]:
    """The task records in a JUnit XML file written by pytest --junitxml with this plugin: the
    `super.` properties of each test case (xunit1), or the suite's `super.<case>.<field>`
    properties (xunit2, junit.py).

    Only a regular file of at most `safe_read.JUNIT_MAX_BYTES` is read (else ForeignDataError);
    a test case whose `super.` properties the reports cannot read (`super.accuracy="abc"`) is
    skipped, and `on_bad_case` gets a message naming the file, the case's line and the field
    (default: a warning). Raises ForeignDataError for a file that is not XML."""
    warn = on_bad_case or (lambda message: warnings.warn(message, stacklevel=3))
    data = safe_read.read_regular_file(path, safe_read.JUNIT_MAX_BYTES)
    records = []
    for line, case in _junit_cases(path, data):
        stripped = strip_prefix(case.properties)
        if not stripped:
            continue
        if stripped.get("resumed_outcome") in OUTCOMES:  # skipped here, its result is earlier
            outcome = cast(str, stripped.pop("resumed_outcome"))
        else:
            outcome = case.outcome
        record = TaskRecord(task_id=case.name, outcome=outcome, properties=stripped)
        try:
            safe_read.check_record(record.as_json())
        except ValueError as error:
            warn(f"{path}:{line}: skipped test case {case.name!r} ({str(error)[:160]})")
            continue
        records.append(record)
    return records


@dataclass
class _JunitCase:
    name: str
    properties: list[tuple[str, str | None]] = field(default_factory=list)
    outcome: str = "passed"


#: a test case's child element -> the outcome it gives (the first found of these, in this order)
_CASE_OUTCOMES = {"skipped": "skipped", "error": "error", "failure": "failed"}


def _junit_cases(path: Path, data: bytes) -> list[tuple[int, _JunitCase]]:
    """(line, case) for each <testcase> of a JUnit file, read by expat as a stream of events
    (no tree: a deep or huge file costs what its test cases hold)."""
    parser = expat.ParserCreate()
    cases: list[tuple[int, _JunitCase]] = []
    current: list[_JunitCase] = []  # the open test case, if any
    found: list[str] = []  # outcome elements of the open test case
    suite: list[tuple[str, str]] = []  # the test suites' properties (xunit2: keyed by case)

    def start(tag: str, attrs: dict[str, str]) -> None:
        if tag == "testcase":
            current[:] = [_JunitCase(name=attrs.get("name", "?"))]
            found.clear()
            cases.append((parser.CurrentLineNumber, current[0]))
        elif current and tag == "property":
            current[0].properties.append((attrs.get("name", ""), attrs.get("value")))
        elif tag == "property":
            suite.append((attrs.get("name", ""), attrs.get("value", "")))
        elif current and tag in _CASE_OUTCOMES:
            found.append(tag)

    def end(tag: str) -> None:
        if tag == "testcase" and current:
            kinds = [k for k in _CASE_OUTCOMES if k in found]
            current[0].outcome = _CASE_OUTCOMES[kinds[0]] if kinds else "passed"
            current.clear()

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    try:
        parser.Parse(data, True)
    except expat.ExpatError as error:
        raise safe_read.ForeignDataError(f"{path}: not a JUnit XML file ({error})") from None
    _add_suite_properties(cases, suite)
    return cases


def _add_suite_properties(
    cases: list[tuple[int, _JunitCase]], suite: list[tuple[str, str]]
) -> None:
    """Each `super.<case>.<field>` property of the suite to the test case of that name."""
    by_name = {case.name: case for _, case in cases}
    for name, value in suite:
        split = junit.split_suite_property(name)
        if split is not None and split[0] in by_name:
            by_name[split[0]].properties.append((f"{PROPERTY_PREFIX}{split[1]}", value))
