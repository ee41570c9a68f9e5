"""Collection: task files (our YAML, SUPER's JSON lines) become pytest items.

A YAML file holds one task; a JSONL file one task per line. A broken YAML file is a collection
error of that file; a broken JSONL line is a collection error of that line only (node
`file.jsonl::line<N>`), so the other lines' tasks are still collected and run.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

from pytest_super import options
from pytest_super.errors import SuperError, SuperWarning, TaskFileError
from pytest_super.report import repeat_suffix
from pytest_super.runner import TaskResult
from pytest_super.tracebacks import leave_out_lineless_entries

if TYPE_CHECKING:  # pytest's own types of a failure's representation
    from _pytest._code.code import TerminalRepr, TracebackStyle
from pytest_super.tasks import (
    Task,
    infer_set,
    is_lmr_info,
    iter_jsonl_tasks,
    load_lmr_folder,
    load_yaml_task,
    register_task_id,
)
from pytest_super.tasks.lmr import inside_lmr_folder

TASK_SUFFIXES = (".yaml", ".yml", ".jsonl")
#: each task id collected, and where it was first found (`file` or `file:line`)
SEEN_IDS = pytest.StashKey[dict[str, str]]()
NAMED_FOLDERS = pytest.StashKey[list[Path]]()
#: the named folders whose task files were left out, each said once
UNCOLLECTED = pytest.StashKey[set[Path]]()


class TaskFailed(AssertionError):
    """The agent's episode did not reach the pass threshold. Carries the `TaskResult`."""

    def __init__(self, result: TaskResult) -> None:
        self.result = result
        super().__init__(f"{result.task.id}: {result.pass_metric} {result.metric_value}")


def run_super_task(super_result: TaskResult) -> None:
    """The body of every task item: the episode ran in the `super_result` fixture; judge it."""
    if not super_result.passed:
        raise TaskFailed(super_result)


class SuperTaskItem(pytest.Function):
    """One SUPER task. Its episode runs in fixtures, so infrastructure faults are pytest errors."""

    task: Task
    repeat: int | None = None  # which run of the task under --super-repeat N > 1

    @classmethod
    def from_task(
        cls, parent: pytest.Collector, task: Task, repeat: int | None = None
    ) -> SuperTaskItem:
        name = task.id if repeat is None else task.id + repeat_suffix(repeat)
        item = cls.from_parent(parent, name=name, callobj=run_super_task)
        item.task = task
        item.repeat = repeat
        item.add_marker(task.set)
        for category in task.categories:
            item.add_marker(category)
        return item

    def reportinfo(self) -> tuple[Path, int, str]:
        line = (self.task.line or 1) - 1  # pytest's locations are 0-based
        return self.path, line, f"{self.task.set} task {self.task.id}"

    def repr_failure(
        self, excinfo: pytest.ExceptionInfo[BaseException], style: TracebackStyle | None = None
    ) -> str | TerminalRepr:
        from pytest_super.report import format_failure

        if isinstance(excinfo.value, TaskFailed):
            try:
                return format_failure(excinfo.value.result)
            except RecursionError:  # an answer nested too deep to print: say so, lose nothing
                return f"SUPER task {self.task.id} did not pass (its answer is too deep to show)"
        if isinstance(excinfo.value, SuperError):
            return f"{type(excinfo.value).__name__}: {excinfo.value}"
        if isinstance(excinfo.value, RecursionError):
            return f"{self.task.source}: task {self.task.id}: {too_deep(excinfo.value)}"
        leave_out_lineless_entries(excinfo)  # pytest-timeout's fail may come at any instruction
        return super().repr_failure(excinfo)  # pytest's Function.repr_failure takes no style


def too_deep(error: RecursionError) -> str:
    """The sentence for data nested deeper than Python's recursion limit can load or score."""
    return (
        f"nested too deeply to load ({error}); task data must be a plain structure a few "
        "levels deep: flatten it"
    )


def task_items(parent: pytest.Collector, task: Task) -> list[SuperTaskItem]:
    """The items of one task: one, or with `--super-repeat N` N items `<id>[repeat1]`..., each
    its own episode in its own container."""
    repeats = options.run_of(parent.config).repeat
    if repeats == 1:
        return [SuperTaskItem.from_task(parent, task)]
    return [SuperTaskItem.from_task(parent, task, n) for n in range(1, repeats + 1)]


class _TaskFileCollector(pytest.File):
    def _register(self, task: Task) -> None:
        """Reject a task id seen in another file (collection order is deterministic)."""
        register_task_id(task, self.config.stash.setdefault(SEEN_IDS, {}))

    def _selected(self, task: Task) -> bool:
        wanted = options.run_of(self.config).sets
        return not wanted or task.set in wanted

    def repr_failure(
        self, excinfo: pytest.ExceptionInfo[BaseException], style: TracebackStyle | None = None
    ) -> str | TerminalRepr:
        """Our own errors as their sentence; anything else as pytest shows it (pytest's
        `Collector.repr_failure` takes no `style`: passing one crashed the session)."""
        if isinstance(excinfo.value, SuperError):
            return str(excinfo.value)
        if isinstance(excinfo.value, RecursionError):
            return f"{self.path}: {too_deep(excinfo.value)}"
        return super().repr_failure(excinfo)


class YamlTaskFile(_TaskFileCollector):
    """A YAML file holding one task."""

    def collect(self) -> Iterator[SuperTaskItem]:
        task = load_yaml_task(self.path)
        self._register(task)
        if self._selected(task):
            yield from task_items(self, task)


class LinkedOutsideTaskFile(_TaskFileCollector):
    """A task file that is a symbolic link out of the project: an error, and never read (a link
    to /etc/shadow named `x.yaml` must not have its lines quoted into the reports)."""

    def collect(self) -> NoReturn:
        raise TaskFileError(
            str(self.path),
            f"is a symbolic link to {self.path.resolve()}, outside the project "
            f"({self.config.rootpath}); task files are read only inside the project",
            hint="copy the task file into the project's tasks folder",
        )


class JsonlTaskFile(_TaskFileCollector):
    """SUPER's own data: one task per JSON line, node id `file.jsonl::<task_id>`."""

    def collect(self) -> Iterator[pytest.Item | pytest.Collector]:
        # The file's name (expert.jsonl, masked.jsonl, auto_gen.jsonl) or a row's own field names
        # the set; a single --super-set names it for files that say nothing.
        explicit = options.run_of(self.config).sets
        named_by_file = infer_set(self.path) is not None
        set_name = explicit[0] if explicit and len(explicit) == 1 and not named_by_file else None
        for entry in iter_jsonl_tasks(self.path, set_name):
            if isinstance(entry, TaskFileError):
                yield BrokenTaskLine.from_parent(self, name=f"line{entry.line}", error=entry)
                continue
            try:
                self._register(entry)
            except TaskFileError as exc:
                yield BrokenTaskLine.from_parent(self, name=f"line{entry.line}", error=exc)
                continue
            if self._selected(entry):
                yield from task_items(self, entry)


class LmrTaskFolder(_TaskFileCollector):
    """An LMR-Bench task folder's info.json: one item per implementation (`13-DecBound/1`); a
    broken implementation is a collection error of its own, named by its id."""

    def collect(self) -> Iterator[pytest.Item | pytest.Collector]:
        for task_id, entry in load_lmr_folder(self.path):
            if not isinstance(entry, TaskFileError):
                try:
                    self._register(entry)
                except TaskFileError as exc:
                    entry = exc
            if isinstance(entry, TaskFileError):
                yield BrokenTaskLine.from_parent(self, name=task_id, error=entry)
            elif self._selected(entry):
                _register_markers(self.config, (entry.set, *entry.categories))
                yield from task_items(self, entry)


def _register_markers(config: pytest.Config, names: tuple[str, ...]) -> None:
    """The benchmark's and a category's markers, declared once (--strict-markers accepts them)."""
    known = {line.split(":")[0].strip() for line in config.getini("markers")}
    for name in names:
        if name not in known:
            config.addinivalue_line("markers", f"{name}: an LMR-Bench task")


class BrokenTaskLine(pytest.Collector):
    """A JSONL line or an LMR implementation that could not be loaded: a collection error of its
    own."""

    def __init__(self, *, error: TaskFileError, **kwargs: Any) -> None:  # Any: pytest's from_parent
        super().__init__(**kwargs)
        self.error = error

    def collect(self) -> NoReturn:
        raise self.error

    def repr_failure(
        self, excinfo: pytest.ExceptionInfo[BaseException], style: TracebackStyle | None = None
    ) -> str:
        return str(excinfo.value)


def task_roots(config: pytest.Config) -> list[Path]:
    """The directories named by the `super_tasks` ini option, resolved once per session."""
    return list(options.run_of(config).task_roots)


def is_under(path: Path, roots: list[Path]) -> bool:
    path = path.resolve()
    return any(path == root or root in path.parents for root in roots)


def _where(path: Path) -> Path:
    """Where `path` itself stands (its folders resolved, not the file: a link stays the link)."""
    return path.parent.resolve() / path.name


def collect_task_file(file_path: Path, parent: pytest.Collector) -> pytest.File | None:
    """The collector for a task file, or None when `file_path` is not one of ours.

    A task file that is a symbolic link is collected where the link stands, when its target is
    inside the project; a link out of the project is an error and is never read; a link to a
    task file that is collected itself (in the tasks folder) is left out with a warning, since
    the task would be there twice."""
    lmr_info = is_lmr_info(file_path)
    if file_path.suffix not in TASK_SUFFIXES and not lmr_info:
        return None
    config = parent.config
    where = _where(file_path)
    named = any(_where(Path(a.split("::")[0]).absolute()) == where for a in config.args)
    roots = task_roots(config)
    if not named and not any(where == r or r in where.parents for r in roots):
        folder = next((f for f in named_folders(config) if f in where.parents), None)
        if folder is None:
            return None
        run = options.run_of(config)
        if not (run.agent or run.sets):
            _say_not_collected(config, folder, file_path)
            return None
        named = True
    if file_path.is_symlink():
        target = file_path.resolve()
        if not is_under(target, [config.rootpath.resolve()]):
            return LinkedOutsideTaskFile.from_parent(parent, path=file_path)
        if not named and is_under(target, roots):
            warnings.warn(
                SuperWarning(
                    f"{file_path}: a symbolic link to {target}, which is collected itself; "
                    "the link is left out"
                ),
                stacklevel=1,
            )
            return None
    if lmr_info:
        return LmrTaskFolder.from_parent(parent, path=file_path)
    if file_path.suffix == ".jsonl":
        return JsonlTaskFile.from_parent(parent, path=file_path)
    return YamlTaskFile.from_parent(parent, path=file_path)


def add_unlisted_task_files(collector: pytest.Collector, report: pytest.CollectReport) -> None:
    """pytest's folder collector passes over what is neither a folder nor a file (a FIFO, a
    socket, a device) without a word: such an entry under a task file's name is collected too,
    and its collector's read names it as an error of that file alone (a FIFO is never opened
    blocking)."""
    if not isinstance(collector, pytest.Dir) or not report.passed:
        return
    for entry in sorted(os.scandir(collector.path), key=lambda e: e.name):
        if entry.name.endswith(TASK_SUFFIXES) and not (entry.is_dir() or entry.is_file()):
            task_file = collect_task_file(Path(entry.path), collector)
            if task_file is not None:
                report.result.append(task_file)


def named_folders(config: pytest.Config) -> list[Path]:
    """The folders named on the command line, resolved (once per session): their task files are
    collected in a benchmark run wherever they stand. Not the project itself or a folder above it:
    `pytest .` walks the project as a run without paths does, finding task files in the
    `super_tasks` folders only (any other YAML file there is not a task)."""
    if NAMED_FOLDERS not in config.stash:
        folders: list[Path] = []
        if config.args_source == pytest.Config.ArgsSource.ARGS:
            project = config.rootpath.resolve()
            for arg in config.args:
                path = Path(arg.split("::")[0]).absolute().resolve()
                if path.is_dir() and path != project and path not in project.parents:
                    folders.append(path)
        config.stash[NAMED_FOLDERS] = folders
    return config.stash[NAMED_FOLDERS]


def _say_not_collected(config: pytest.Config, folder: Path, file_path: Path) -> None:
    """Warn once per named folder that its task files are left out, and what to do: without
    --super-agent a task file is collected only in the `super_tasks` folders. Not for a folder of
    the ini's `testpaths` (a test suite's own task data)."""
    said = config.stash.setdefault(UNCOLLECTED, set())
    testpaths = {(config.rootpath / p).resolve() for p in config.getini("testpaths")}
    if folder in said or folder in testpaths:
        return
    said.add(folder)
    roots = ", ".join(str(r) for r in task_roots(config)) or "none"
    warnings.warn(
        SuperWarning(
            f"{folder}: task files (such as {file_path.name}) are not collected: they are outside "
            f"the super_tasks folders ({roots}); run them with --super-agent=<agent> (or "
            "--super-set), which collects the task files of a folder you name, or add the "
            "folder to super_tasks in the ini file"
        ),
        stacklevel=1,
    )


def ignore_in_task_roots(collection_path: Path, config: pytest.Config) -> bool | None:
    """Skip `repos/` (the demo research repositories), hidden folders and .py files inside task
    roots, and everything of an LMR task folder but its info.json, wherever it stands."""
    if inside_lmr_folder(collection_path):
        return True  # an LMR folder's repository, golden files and unit tests
    skip_dir = collection_path.name == "repos" or collection_path.name.startswith(".")
    if (collection_path.suffix == ".py" or (skip_dir and collection_path.is_dir())) and is_under(
        collection_path, task_roots(config)
    ):
        return True
    return None
