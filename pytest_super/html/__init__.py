"""The HTML report: a run's front page, one page per task, and several runs side by side.

`write_run_report(run_dir)` writes `run_dir/index.html` and `run_dir/tasks/<task>.html` from the
run's results.jsonl and trajectories; `write_comparison(run_dirs, out_dir)` writes a page with each
run's outcome and scores per task and the tasks whose outcome flipped. The pages are self-contained:
CSS and JavaScript are inlined, nothing is fetched, and they open from disk. Every value from a run
(task output is hostile) goes through Jinja's autoescaping.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import os
import stat
import threading
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import jinja2
import markupsafe

from pytest_super import lmr_report, sinks, strictjson
from pytest_super import report as reports
from pytest_super.edit import EditFormatError, parse_edit
from pytest_super.errors import SuperError, SuperWarning
from pytest_super.kernels.jupyter.output import clean_for_model
from pytest_super.names import file_stem
from pytest_super.trajectory import read_trajectory_data

HERE = Path(__file__).parent
#: Observations longer than this many lines are folded (the first lines stay visible). SUPER's
#: agent sees at most ~50 lines of a cell's output; anything longer is a wall a reader scrolls past.
FOLD_LINES = 12
#: Characters of one observation the task page shows (a pip install can print megabytes).
OBSERVATION_CHARS = 20_000
#: Characters of a folded observation's first lines shown beside "click to unfold".
HEAD_CHARS = 2_000
TASK_COLUMNS = (
    "outcome",
    "accuracy",
    "landmarks",
    "submitted",
    "script_executed",
    "exit_status",
    "steps",
    "tokens",
    "cost_usd",
    "duration_s",
)


@dataclass
class TaskView:
    """One task of one run as the pages show it."""

    record: reports.TaskRecord
    page: str  # the task page's path relative to the run folder
    trajectory: dict[str, object] | None = None  # read for its page only (`read_for_page`)
    trajectory_path: Path | None = None
    trajectory_json: str | None = None  # relative to the run folder
    notebook: str | None = None

    @property
    def task_id(self) -> str:
        return self.record.task_id

    @property
    def outcome(self) -> str:
        return self.record.outcome

    def prop(self, name: str) -> object:
        return self.record.properties.get(name)

    def number(self, name: str) -> float | None:
        if name in reports.SCORES and lmr_report.is_lmr(self.record):
            return None  # SUPER's scores mean nothing for an LMR-Bench task: its unit tests decide
        if name == "tokens":
            parts = [
                reports.score_value(self.record, n) for n in ("prompt_tokens", "completion_tokens")
            ]
            return None if all(p is None for p in parts) else sum(p or 0 for p in parts)
        return reports.score_value(self.record, name)

    @property
    def categories(self) -> list[str]:
        return [c for c in str(self.prop("category") or "").split(",") if c]

    @property
    def published(self) -> dict[str, str | None]:
        """An LMR task's verdict in each of upstream's published runs (None: not scored)."""
        return lmr_report.published_verdicts(self.task_id)


@dataclass
class RunView:
    """One run: its folder, its tasks and its summary rows."""

    run_dir: Path
    tasks: list[TaskView] = field(default_factory=list)
    rows: list[reports.SummaryRow] = field(default_factory=list)  # SUPER's tasks
    lmr: list[lmr_report.LmrRow] = field(default_factory=list)  # LMR-Bench's tasks

    @property
    def benchmark(self) -> str:
        """What the run ran: `SUPER`, `LMR-Bench`, or both."""
        ran = [name for name, rows in (("SUPER", self.rows), ("LMR-Bench", self.lmr)) if rows]
        return " and ".join(ran) or "SUPER"

    @property
    def lmr_tasks(self) -> list[TaskView]:
        return [t for t in self.tasks if lmr_report.is_lmr(t.record)]

    @property
    def run_id(self) -> str:
        return self.run_dir.name

    @property
    def label(self) -> str:
        first = self.tasks[0] if self.tasks else None
        agent = str(first.prop("agent") or "") if first else ""
        model = str(first.prop("model") or "") if first else ""
        who = "/".join(x for x in (agent, model) if x and x != "None")
        return f"{who} ({self.run_id})" if who else self.run_id

    @property
    def prompts(self) -> str:
        """The prompts the run's agents used: `ours`, or the file and its sha256 (runs of older
        versions and imported episodes name none: "")."""
        seen = {
            (str(t.prop("prompts")), str(t.prop("prompts_sha256") or ""))
            for t in self.tasks
            if t.prop("prompts")
        }
        return "; ".join(f"{p} (sha256 {h})" if h else p for p, h in sorted(seen))


def page_name(task_id: str) -> str:
    """The file name of a task's page: safe, bounded and collision-free whatever the task id
    holds (`a/b` and `a_b` get pages of their own), as trajectories are named."""
    return f"tasks/{file_stem(task_id)}.html"


def relative_href(path: str) -> str:
    """A link to a file of the report, never a scheme from data: the path percent-encoded (a
    folder named `javascript:...` stays a folder) and starting with `./` or `../`."""
    encoded = quote(path.replace(os.sep, "/"), safe="/._-~")
    return encoded if encoded.startswith(("./", "../")) else f"./{encoded}"


def load_run(run_dir: Path) -> RunView:
    """Read a run folder (results.jsonl and trajectories/) into what the pages show."""
    results = run_dir / "results.jsonl"
    if not results.is_file():
        raise FileNotFoundError(f"{run_dir}: no results.jsonl; name a run folder under reports/")
    records = [r for r in reports.read_results(results) if r.outcome != "skipped"]
    # a resumed run repeats a task's line when it is run again: the last line is the task's result
    latest = {r.task_id: r for r in records}
    supers, lmr = lmr_report.split(latest.values())  # each benchmark reported apart
    run = RunView(run_dir=run_dir, rows=reports.summarize(supers), lmr=lmr_report.lmr_rows(lmr))
    for record in latest.values():
        view = TaskView(record=record, page=page_name(record.task_id))
        json_path = _trajectory_file(run_dir, record)
        if json_path is not None:
            view.trajectory_path = json_path
            view.trajectory_json = os.path.relpath(json_path, run_dir)
            notebook = json_path.with_suffix(".ipynb")
            if notebook.is_file():
                view.notebook = os.path.relpath(notebook, run_dir)
        run.tasks.append(view)
    order = {name: i for i, name in enumerate(("expert", "masked", "auto", "lmr"))}
    run.tasks.sort(key=lambda t: (order.get(str(t.prop("set")), 9), t.task_id))
    return run


class ReportOutError(SuperError):
    """The comparison page would be written over a run's own files."""


def read_for_page(path: Path | None) -> dict[str, object] | None:
    """A task's trajectory as its page shows it, read a step at a time: each step's output is
    cleaned and cut to what the page shows (`shown`) before the next is read, so a task that
    printed hundreds of megabytes costs the report one step's memory. None if unreadable: a
    file that is not regular (a FIFO would block), nested too deep, or not shaped as a
    trajectory (a foreign or hand-edited file) is named in a warning, and its page shows the
    rest of the task."""
    if path is None:
        return None
    try:
        mode = os.stat(path).st_mode
        if not stat.S_ISREG(mode):
            raise ValueError("not a regular file")
        data = read_trajectory_data(path, _shown_step)
        if not isinstance(data.get("info", {}), dict):
            raise ValueError("its info is not an object")
        return data
    except (OSError, ValueError, TypeError, AttributeError, RecursionError) as exc:
        _warn(f"{path}: trajectory not shown ({type(exc).__name__}: {str(exc)[:160]})")
        return None


def _warn(message: str) -> None:
    warnings.warn(f"pytest-super html: {message}", SuperWarning, stacklevel=3)


def _shown_step(step: Mapping[str, object]) -> dict[str, object]:
    if not isinstance(step, dict):
        raise ValueError(f"a step is a JSON {type(step).__name__}, not an object")
    raw = step.pop("observation", None) or step.pop("output", None) or ""
    step.pop("output", None)
    if not isinstance(raw, str):
        raise ValueError(f"a step's observation is a JSON {type(raw).__name__}, not text")
    text = clean_for_model(raw)
    lines = text.splitlines()
    step["shown"] = {
        "lines": len(lines),
        "head": "\n".join(lines[:FOLD_LINES])[:HEAD_CHARS],
        "text": _clip(text),
    }
    return step


def _trajectory_file(run_dir: Path, record: reports.TaskRecord) -> Path | None:
    """The trajectory JSON of a task: named by the record (absolute, relative to the report
    folder's parent, or only by file name inside this run's trajectories/)."""
    named = str(record.properties.get("trajectory") or "")
    if not named:
        return None
    path = Path(named).with_suffix(".json")
    for candidate in (run_dir / "trajectories" / path.name, path, run_dir.parent.parent / path):
        if os.path.lexists(
            candidate
        ):  # `read_for_page` says why one that is not a file is not read
            return candidate
    return None


# -- rendering ---------------------------------------------------------------------------------
@functools.cache
def _environment() -> jinja2.Environment:
    """The report's one Jinja environment of this process: its compiled templates are kept."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals.update(
        css=(HERE / "static" / "report.css").read_text(),
        js=(HERE / "static" / "report.js").read_text(),
        columns=TASK_COLUMNS,
        percent=reports.format_percent,
        published_totals=lmr_report.published_totals,
        scores=reports.SCORES,
        fold_lines=FOLD_LINES,
    )
    # outputs are shown as a terminal would have left them (no ANSI codes, progress bars settled)
    env.filters.update(
        cell=_cell_text,
        as_json=_as_json,
        diff=edit_diff,
        clip=_clip,
        terminal=clean_for_model,
        href=relative_href,
    )
    return env


#: the templates of a run's report (`write_run_report`)
_RUN_TEMPLATES = ("index.html.j2", "task.html.j2", "_macros.html.j2", "base.html.j2")


@functools.cache
def warm_up() -> threading.Thread:
    """Compile the run report's templates in a thread of their own, once a process, so that the
    report written at a run's end does not wait for them. Jinja parses and compiles a template
    to Python the first time it is used: 0.4-0.6 s of the 2 s an interrupted cluster run may
    take to end, measured on 2 cores (the first `write_run_report` of a process); started when a
    run starts, it is done long before its end. Templates that fail to compile are the report's
    to say so (it compiles them again)."""

    def compile_templates() -> None:
        with contextlib.suppress(Exception):
            env = _environment()
            for name in _RUN_TEMPLATES:
                env.get_template(name)

    thread = threading.Thread(
        target=compile_templates, name="pytest-super-html-warm-up", daemon=True
    )
    thread.start()
    return thread


def _cell_text(value: float | None, column: str) -> str:
    if value is None:
        return "–"
    if column in ("accuracy", "landmarks"):
        return f"{100 * value:.0f}%"
    if column in ("submitted", "script_executed"):
        return "yes" if value >= 1 else "no"
    if column == "cost_usd":
        return f"${value:.4f}"
    if column == "duration_s":
        return f"{value:.1f}s"
    return f"{value:g}"


def _as_json(value: object) -> str:
    return strictjson.dumps(value, ensure_ascii=False)


def _clip(text: str | None, chars: int = OBSERVATION_CHARS) -> str:
    text = text or ""
    if len(text) <= chars:
        return text
    return f"[… {len(text) - chars} characters cut; the notebook has them all …]\n" + text[-chars:]


def edit_diff(content: str) -> list[tuple[str, str]] | None:
    """An edit action's content as unified-diff lines `(kind, text)`, kind one of "file", "hunk",
    "del", "add", "ctx"; None when the content is not SUPER's edit format."""
    try:
        request = parse_edit(content)
    except EditFormatError:
        return None
    lines: list[tuple[str, str]] = [("file", request.file)]
    before = request.before.splitlines()
    after = request.after.splitlines()
    for line in list(difflib.unified_diff(before, after, lineterm="", n=3))[2:]:
        kind = {"@": "hunk", "-": "del", "+": "add"}.get(line[:1], "ctx")
        lines.append((kind, line))
    return lines


#: the chart's bar colours, one per run shown (accuracy solid, landmarks the same colour lighter)
CHART_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")
_CHART_BAR = 9  # px per bar
_CHART_LABEL = 170  # px for the category names
_CHART_WIDTH = 360  # px for 100%


def category_chart(runs: list[tuple[str, list[reports.SummaryRow]]]) -> markupsafe.Markup | None:
    """Accuracy and landmarks per masked category, a pair of bars per run (inline SVG, no
    script); None when no run has masked tasks."""
    by_run = [
        (label, {r.group.split(":", 1)[1]: r for r in rows if r.group.startswith("masked:")})
        for label, rows in runs
    ]
    categories = sorted({c for _, rows in by_run for c in rows})
    if not categories:
        return None
    block = 2 * _CHART_BAR * len(by_run) + 10
    legend = 18 * len(by_run) + 8
    height = legend + block * len(categories) + 20
    width = _CHART_LABEL + _CHART_WIDTH + 60
    parts = [
        f'<svg class="chart" role="img" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">',
        "<title>Accuracy and landmarks per masked category</title>",
    ]
    for i, (label, _) in enumerate(by_run):
        colour = CHART_COLOURS[i % len(CHART_COLOURS)]
        y = 4 + 18 * i
        parts.append(f'<rect x="0" y="{y}" width="12" height="12" fill="{colour}"/>')
        parts.append(
            f'<rect x="14" y="{y}" width="12" height="12" fill="{colour}" fill-opacity="0.4"/>'
        )
        parts.append(
            f'<text x="32" y="{y + 10}" font-size="12">{markupsafe.escape(label)} '
            "(accuracy, landmarks)</text>"
        )
    for c, category in enumerate(categories):
        top = legend + c * block
        parts.append(
            f'<text x="{_CHART_LABEL - 6}" y="{top + block / 2}" font-size="12" '
            f'text-anchor="end">{markupsafe.escape(category)}</text>'
        )
        for i, (label, rows) in enumerate(by_run):
            colour = CHART_COLOURS[i % len(CHART_COLOURS)]
            row = rows.get(category)
            for j, (name, opacity) in enumerate((("accuracy", 1.0), ("landmarks", 0.4))):
                value = getattr(row, name) if row is not None else None
                y = top + (2 * i + j) * _CHART_BAR
                shown = "–" if value is None else f"{100 * value:.0f}%"
                bar = 0 if value is None else round(_CHART_WIDTH * value, 1)
                parts.append(
                    f'<rect x="{_CHART_LABEL}" y="{y}" width="{bar}" height="{_CHART_BAR - 1}" '
                    f'fill="{colour}" fill-opacity="{opacity}"><title>'
                    f"{markupsafe.escape(label)}: {category} {name} {shown}</title></rect>"
                )
                parts.append(
                    f'<text x="{_CHART_LABEL + bar + 4}" y="{y + _CHART_BAR - 1}" '
                    f'font-size="9">{shown}</text>'
                )
    axis = legend + block * len(categories) + 4
    for tick in (0, 50, 100):
        x = _CHART_LABEL + _CHART_WIDTH * tick / 100
        parts.append(
            f'<line x1="{x}" y1="{legend - 4}" x2="{x}" y2="{axis}" stroke="#999" '
            'stroke-width="0.5"/>'
        )
        parts.append(
            f'<text x="{x}" y="{axis + 12}" font-size="10" text-anchor="middle">{tick}%</text>'
        )
    parts.append("</svg>")
    return markupsafe.Markup("".join(parts))


def published_masked_beside(run_dir: Path) -> list[tuple[str, list[reports.SummaryRow]]]:
    """The paper's Masked runs imported into the same report folder (`pytest-super
    import-trajectories`), as (label, summary rows), to show beside a run of ours."""
    found = []
    for results in sorted(run_dir.parent.glob("*/results.jsonl")):
        if results.parent == run_dir:
            continue
        try:
            records = reports.read_results(results)
        except (OSError, ValueError):
            continue
        agents = {str(r.properties.get("agent") or "") for r in records}
        sets = {str(r.properties.get("set") or "") for r in records}
        if sets == {"masked"} and agents and all(a.startswith("published:") for a in agents):
            model = str(records[0].properties.get("model") or "")
            found.append(
                (f"paper: {agents.pop()[len('published:') :]}/{model}", reports.summarize(records))
            )
    return found


def write_run_report(run_dir: Path) -> Path:
    """Write `run_dir/index.html` and one page per task; return the index's path."""
    run = load_run(run_dir)
    env = _environment()
    (run_dir / "tasks").mkdir(exist_ok=True)
    for task in run.tasks:  # one trajectory in memory at a time
        _write_page(run_dir / task.page, _task_page(env, run, task))
    index = run_dir / "index.html"
    sets = sorted({str(t.prop("set") or "?") for t in run.tasks})
    categories = sorted({c for t in run.tasks for c in t.categories})
    outcomes = [o for o in reports.OUTCOMES if any(t.outcome == o for t in run.tasks)]
    chart = category_chart([(run.label, run.rows), *published_masked_beside(run_dir)])
    _write_page(
        index,
        env.get_template("index.html.j2").render(
            run=run, sets=sets, categories=categories, outcomes=outcomes, root="", chart=chart
        ),
    )
    return index


def _write_page(path: Path, text: str) -> None:
    """A page, as UTF-8 can encode it (`sinks.html`: a lone surrogate of a reply is U+FFFD)."""
    path.write_text(sinks.html(text), encoding="utf-8")


#: what rendering a trajectory of an unexpected shape raises (a score that is text, a step number
#: that is a list, ...): the page is then rendered without the trajectory
_RENDER_ERRORS = (
    TypeError,
    ValueError,
    AttributeError,
    KeyError,
    RecursionError,
    jinja2.TemplateError,
)


def _task_page(env: jinja2.Environment, run: RunView, task: TaskView) -> str:
    """A task's page; when its trajectory cannot be rendered (foreign data of another shape), the
    page without it, and a warning naming the file."""
    task.trajectory = read_for_page(task.trajectory_path)
    template = env.get_template("task.html.j2")
    try:
        return template.render(run=run, task=task, root="../")
    except _RENDER_ERRORS as exc:
        if task.trajectory is None:
            raise
        _warn(
            f"{task.trajectory_path}: trajectory not shown ({type(exc).__name__}: {str(exc)[:160]})"
        )
        task.trajectory = None
        return template.render(run=run, task=task, root="../")
    finally:
        task.trajectory = None


def check_out_dir(run_dirs: list[Path], out_dir: Path) -> None:
    """Refuse a comparison folder that is a run's own folder or inside one, or that holds a run
    (its index.html would replace that run's front page)."""
    out = out_dir.resolve()
    for run_dir in run_dirs:
        run = run_dir.resolve()
        if out == run or run in out.parents:
            raise ReportOutError(
                f"--out {out_dir}: that is (inside) the run folder {run_dir}, whose own report "
                "would be overwritten; give the comparison a folder of its own"
            )
    if os.path.lexists(out / "results.jsonl"):
        raise ReportOutError(
            f"--out {out_dir}: that is a run folder (it holds results.jsonl), whose own report "
            "would be overwritten; give the comparison a folder of its own"
        )


@dataclass
class ComparedTask:
    """One task across runs: each run's view of it (None where the run lacks it)."""

    task_id: str
    views: list[TaskView | None]

    @property
    def flipped(self) -> bool:
        outcomes = {v.outcome for v in self.views if v is not None}
        return len(outcomes) > 1

    @property
    def set_name(self) -> str:
        return next(str(v.prop("set") or "?") for v in self.views if v is not None)


def compare_runs(runs: list[RunView]) -> list[ComparedTask]:
    """Every task of any run, in first-seen order, with each run's result for it."""
    order: list[str] = []
    by_run = []
    for run in runs:
        tasks = {t.task_id: t for t in run.tasks}
        by_run.append(tasks)
        order += [t for t in tasks if t not in order]
    return [ComparedTask(tid, [tasks.get(tid) for tasks in by_run]) for tid in order]


def write_comparison(run_dirs: list[Path], out_dir: Path) -> Path:
    """Write each run's own report and `out_dir/index.html`, the runs side by side (never into a
    run's own folder: `check_out_dir`)."""
    check_out_dir(run_dirs, out_dir)
    for run_dir in run_dirs:
        write_run_report(run_dir)
    runs = [load_run(d) for d in run_dirs]
    out_dir.mkdir(parents=True, exist_ok=True)
    links = [os.path.relpath(run.run_dir, out_dir) for run in runs]
    compared = compare_runs(runs)
    index = out_dir / "index.html"
    _write_page(
        index,
        _environment()
        .get_template("compare.html.j2")
        .render(
            runs=runs,
            links=links,
            compared=compared,
            flipped=sum(c.flipped for c in compared),
            root="",
            chart=category_chart([(run.label, run.rows) for run in runs]),
        ),
    )
    return index
