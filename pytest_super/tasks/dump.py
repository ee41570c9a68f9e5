"""Tasks written back as our YAML files: `task_to_dict`, `dump_task_yaml`, and `import_jsonl`
(SUPER's JSON lines -> one YAML file a task)."""

from __future__ import annotations

from pathlib import Path

import yaml

from pytest_super.errors import TaskFileError
from pytest_super.names import file_stem
from pytest_super.tasks.model import YAML_IMAGE, Task, categories_from_id
from pytest_super.tasks.super_jsonl import iter_jsonl_tasks
from pytest_super.tasks.validation import cell_to_mapping


def task_to_dict(task: Task) -> dict[str, object]:
    """The task as our YAML mapping, fields in the format's order, empty and default ones left out."""
    data: dict[str, object] = {"id": task.id, "set": task.set}
    implied = categories_from_id(task.id) if task.set == "masked" else ()
    if task.categories or task.categories != implied:
        data["categories"] = list(task.categories)
    if task.repository:
        repository = {"url": task.repository}
        if task.commit:
            repository["commit"] = task.commit
        data["repository"] = repository
    data["query"] = task.query
    if task.answer is not None:
        data["answer"] = task.answer
    if task.landmarks:
        data["landmarks"] = list(task.landmarks)
    if task.entrypoint:
        data["entrypoint"] = task.entrypoint
    if task.pre_executed:
        data["pre_executed"] = [cell_to_mapping(cell) for cell in task.pre_executed]
    if task.solution:
        data["solution"] = [cell_to_mapping(cell) for cell in task.solution]
    limits = {name: value for name, value in vars(task.limits).items() if value is not None}
    if limits:
        data["limits"] = limits
    if task.image != YAML_IMAGE:
        data["image"] = task.image
    return data


class _TaskDumper(yaml.SafeDumper):
    """Block scalars for multi-line text, list items indented under their key, no aliases."""

    def ignore_aliases(self, data: object) -> bool:
        return True

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        return super().increase_indent(flow, False)


def _represent_str(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    # PyYAML falls back to a quoted style by itself when a block scalar cannot hold the text
    # exactly (trailing spaces on a line, tabs), so this never changes the value.
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_TaskDumper.add_representer(str, _represent_str)


def dump_task_yaml(task: Task) -> str:
    """The task as a readable YAML document that `load_yaml_task` reads back to the same Task."""
    return yaml.dump(
        task_to_dict(task),
        Dumper=_TaskDumper,
        sort_keys=False,
        allow_unicode=True,
        default_flow_style=False,
        width=4096,
    )


def import_jsonl(path: Path, set_name: str | None, out_dir: Path) -> list[Path]:
    """Write one YAML task file `<task_id>.yaml` into `out_dir` per line of a SUPER JSONL file.

    All lines are checked first: if any is bad, nothing is written and the TaskFileError lists
    every bad line. Returns the written paths in file order.
    """
    path, out_dir = Path(path), Path(out_dir)
    tasks: list[Task] = []
    errors: list[TaskFileError] = []
    for item in iter_jsonl_tasks(path, set_name):
        if isinstance(item, TaskFileError):
            errors.append(item)
        else:
            tasks.append(item)
    if errors:
        numbers = ", ".join(str(error.line) for error in errors)
        details = "\n".join(f"  {error}" for error in errors)
        raise TaskFileError(
            str(path),
            f"{len(errors)} bad line(s) ({numbers}), nothing was written:\n{details}\n",
            hint="fix or remove those lines and import again",
        )
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for task in tasks:
        target = out_dir / f"{file_stem(task.id)}.yaml"
        header = f"# Imported by pytest-super from {path.name}, line {task.line}.\n"
        target.write_text(header + dump_task_yaml(task), encoding="utf-8")
        written.append(target)
    return written
