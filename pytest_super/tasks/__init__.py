"""The task model and its files: what one SUPER task is (`model`), our YAML files
(`yaml_files`), SUPER's JSON lines (`super_jsonl`, converted to the YAML mapping), the one
validation both go through (`validation`: task.schema.json and the checks it cannot express),
and writing tasks back as YAML (`dump`). The names below are the package's public interface;
`load_tasks` reads a file or a folder of them as collection does; LMR-Bench's task folders
(`lmr`: one task per implementation of an `info.json`) too."""

from __future__ import annotations

from pathlib import Path

from pytest_super.errors import TaskFileError
from pytest_super.tasks.dump import dump_task_yaml, import_jsonl, task_to_dict
from pytest_super.tasks.lmr import LMR_SET, LmrTask, is_lmr_info, lmr_tasks, load_lmr_folder
from pytest_super.tasks.model import (
    CATEGORIES,
    SETS,
    SUPER_IMAGE,
    YAML_IMAGE,
    Cell,
    Limits,
    Task,
    categories_from_id,
    categories_of,
    category_suffix,
    raw_category_of,
)
from pytest_super.tasks.super_jsonl import iter_jsonl_tasks, jsonl_lines, task_from_super_row
from pytest_super.tasks.validation import infer_set, schema, warn_unmatchable_answer
from pytest_super.tasks.yaml_files import load_yaml_task

__all__ = [
    "CATEGORIES",
    "LMR_SET",
    "LmrTask",
    "SETS",
    "SUPER_IMAGE",
    "YAML_IMAGE",
    "Cell",
    "Limits",
    "Task",
    "TaskFileError",
    "categories_from_id",
    "categories_of",
    "category_suffix",
    "dump_task_yaml",
    "import_jsonl",
    "infer_set",
    "is_lmr_info",
    "iter_jsonl_tasks",
    "jsonl_lines",
    "load_lmr_folder",
    "load_tasks",
    "load_yaml_task",
    "register_task_id",
    "raw_category_of",
    "schema",
    "task_from_super_row",
    "task_to_dict",
    "warn_unmatchable_answer",
]

#: the suffixes of task files (collect.py collects the same)
TASK_SUFFIXES = (".yaml", ".yml", ".jsonl")


def load_tasks(path: Path | str, *, set_name: str | None = None) -> list[Task]:
    """The tasks of a YAML task file, a SUPER JSON-lines file, or a folder of them (walked as
    collection walks a `super_tasks` folder: sorted, `repos/` and hidden folders left out), with
    collection's validation. `set_name` names the set of JSON lines whose file name and rows do
    not (as a single `--super-set` does).

    Raises the first `TaskFileError` collection would report (a bad file or line, a task id
    defined twice, a link out of the folder), with the same message."""
    path = Path(path)
    if path.is_dir():
        files = _task_files(path)
    elif path.suffix in TASK_SUFFIXES or not path.exists() or is_lmr_info(path):
        files = [path]
    else:
        raise TaskFileError(
            str(path),
            f"not a task file (expected a folder or a file ending in {', '.join(TASK_SUFFIXES)})",
        )
    tasks: list[Task] = []
    seen: dict[str, str] = {}
    for file in files:
        for task in _file_tasks(file, set_name):
            register_task_id(task, seen)
            tasks.append(task)
    return tasks


def _task_files(folder: Path) -> list[Path]:
    found: list[Path] = []
    for file in _walk(folder):
        parts = file.relative_to(folder).parts[:-1]
        if file.suffix not in TASK_SUFFIXES and file.name != "info.json":
            continue
        if any(p == "repos" or p.startswith(".") for p in parts):
            continue
        target = file.resolve()
        if file.is_symlink() and folder.resolve() not in target.parents:
            raise TaskFileError(
                str(file),
                f"is a symbolic link to {target}, outside the project ({folder}); task files "
                "are read only inside the project",
                hint="copy the task file into the project's tasks folder",
            )
        found.append(file)
    return found


def _walk(folder: Path) -> list[Path]:
    """The files under `folder`, sorted; of an LMR task folder only its info.json (its
    repository may hold YAML files that are no tasks)."""
    if is_lmr_info(folder / "info.json"):
        return [folder / "info.json"]
    files: list[Path] = []
    for entry in sorted(folder.iterdir()):
        if entry.is_dir() and not entry.is_symlink():
            files.extend(_walk(entry))
        elif not entry.is_dir() and (entry.name != "info.json" or is_lmr_info(entry)):
            files.append(entry)
    return sorted(files)


def _file_tasks(file: Path, set_name: str | None) -> list[Task]:
    if is_lmr_info(file):
        return list(lmr_tasks(file))
    if file.suffix != ".jsonl":
        return [load_yaml_task(file)]
    named_by_file = infer_set(file) is not None
    tasks: list[Task] = []
    for entry in iter_jsonl_tasks(file, None if named_by_file else set_name):
        if isinstance(entry, TaskFileError):
            raise entry
        tasks.append(entry)
    return tasks


def register_task_id(task: Task, seen: dict[str, str]) -> None:
    """A task id defined in two places is an error on the later one (`seen`: id -> where it was
    first defined; collection and `load_tasks` share it)."""
    here = f"{task.source}" + (f":{task.line}" if task.line else "")
    first = seen.setdefault(task.id, here)
    if first != here:
        raise TaskFileError(
            task.source,
            "duplicate task id",
            field="id",
            value=task.id,
            line=task.line,
            hint=f"already defined in {first}; task ids must be unique across task files",
        )
