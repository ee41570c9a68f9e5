"""SUPER's own data (allenai/super, one JSON object a line) read as tasks.

Each row is converted to our YAML mapping (`row_to_mapping`: SUPER's field names, its answer held
as a JSON string, its cells as JSON strings in its edit format) and then validated like a YAML
file, by the same schema and checks (`validation.task_from_mapping`); errors name the row's
file, line and fields in SUPER's terms.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path

from pytest_super import safe_read
from pytest_super.edit import parse_edit
from pytest_super.errors import TaskFileError
from pytest_super.tasks.model import SUPER_IMAGE, Cell, Task
from pytest_super.tasks.validation import (
    Location,
    Origin,
    cell_to_mapping,
    field_path,
    infer_set_at,
    read_task_file,
    task_from_mapping,
    type_name,
)

_HINTS = {
    "set": 'pass --super-set expert|masked|auto, add a "set" field, '
    "or name the file expert.jsonl, masked.jsonl or auto_gen.jsonl",
    "answer": 'add the gold values as a JSON string, e.g. "{\\"accuracy\\": 0.27}"',
    "entrypoint": 'add the script that must run as "entrypoint", e.g. "train.py"',
}
#: our fields under SUPER's names (repository.url is github_repo, repository.commit git_commit)
_SUPER_NAMES = {"id": "task_id", "pre_executed": "pre_execute_cells"}
# builds the error of one JSONL row: fail(message, field, value, hint)
_Fail = Callable[..., TaskFileError]


def iter_jsonl_tasks(path: Path, set_name: str | None = None) -> Iterator[Task | TaskFileError]:
    """The tasks of a SUPER JSON-lines file, one item per non-blank line.

    A bad line (not UTF-8, not JSON, nested too deep, not a valid task) yields a TaskFileError
    with its line number in place of its task, so the other lines still load; a task id seen
    before in the file is an error on the later line. A file that cannot be read raises
    TaskFileError.
    """
    path = Path(path)
    data = read_task_file(path, safe_read.JSONL_MAX_BYTES)
    first_line: dict[str, int] = {}
    for number, line in jsonl_lines(data):
        if isinstance(line, UnicodeDecodeError):
            yield TaskFileError(
                str(path),
                f"not UTF-8 text ({line.reason} at byte {line.start} of the line)",
                line=number,
                hint="each line must hold one JSON object in UTF-8; fix or remove the line",
            )
            continue
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            yield TaskFileError(
                str(path),
                f"not a JSON object: {error.msg} (column {error.colno})",
                line=number,
                hint="each line must hold one JSON object",
            )
            continue
        except RecursionError:
            yield _too_deep(path, number)
            continue
        task_id = row.get("task_id") if isinstance(row, dict) else None
        if isinstance(task_id, str) and task_id in first_line:
            yield TaskFileError(
                str(path),
                f"duplicate task id (first on line {first_line[task_id]})",
                field="task_id",
                value=task_id,
                line=number,
                hint="give each task its own task_id, or remove the repeated line",
            )
            continue
        if isinstance(task_id, str):
            first_line[task_id] = number
        try:
            yield task_from_super_row(row, path=str(path), line=number, set_name=set_name)
        except TaskFileError as error:
            yield error
        except RecursionError:
            yield _too_deep(path, number)


def _too_deep(path: Path, number: int) -> TaskFileError:
    return TaskFileError(
        str(path),
        "nested too deeply to load",
        line=number,
        hint="task data must be a plain structure a few levels deep: flatten it",
    )


def jsonl_lines(data: bytes) -> Iterator[tuple[int, str | UnicodeDecodeError]]:
    """(line number, text) of each line of JSON-lines bytes; a line that is not UTF-8 comes as its
    UnicodeDecodeError. Only `\n` ends a line (JSON strings may hold U+2028, \x1c, ... which
    `str.splitlines` would split at); a `\r` before it and a UTF-8 BOM at the start are dropped."""
    data = data.removeprefix(b"\xef\xbb\xbf")
    if data.endswith(b"\n"):
        data = data[:-1]
    if not data:
        return
    for number, raw in enumerate(data.split(b"\n"), start=1):
        try:
            yield number, raw.removesuffix(b"\r").decode("utf-8")
        except UnicodeDecodeError as error:
            yield number, error


def task_from_super_row(row: object, *, path: str, line: int, set_name: str | None) -> Task:
    """One row of SUPER's published data (allenai/super) as a Task.

    Required: task_id, query. The set comes from `set_name` (the --super-set option), else the
    row's own "set", else the file name. Fields SUPER may add later are ignored.
    """
    origin = Origin(
        path,
        line_at=lambda location, key: line,
        name_of=_super_name,
        missing=_missing_super_field,
        hints=_HINTS,
        row_line=line,
    )
    task = task_from_mapping(row_to_mapping(row, path=path, line=line, set_name=set_name), origin)
    # checked for every set, but run (kept) only for Masked tasks, as the reference does
    return task if task.set == "masked" else replace(task, pre_executed=())


def row_to_mapping(row: object, *, path: str, line: int, set_name: str | None) -> dict[str, object]:
    """SUPER's row as our YAML mapping, to be validated as a task file is. What only SUPER's
    format holds is decoded here: the set (option, row or file name), the answer's JSON string,
    pre_execute_cells and solution in their several shapes. A field that is null or blank text
    is absent. Raises TaskFileError for what cannot be decoded."""

    def fail(
        message: str, field: str | None = None, value: object = None, hint: str | None = None
    ) -> TaskFileError:
        return TaskFileError(path, message, field=field, value=value, line=line, hint=hint)

    if not isinstance(row, dict):
        raise fail(f"a line must hold a JSON object, not {type_name(row)}")
    task_set = infer_set_at(Path(path), set_name, row.get("set"), line=line)
    if task_set is None:
        raise fail("cannot tell which set the task belongs to", field="set", hint=_HINTS["set"])
    given = {name: _given(value) for name, value in row.items()}
    pre_executed = given.get("pre_execute_cells")
    if isinstance(pre_executed, list):
        pre_executed = [
            _typed_cell(_decoded_cell(item, f"pre_execute_cells[{i}]", fail), i, fail)
            for i, item in enumerate(pre_executed)
        ]
    mapping = {
        "id": given.get("task_id"),
        "set": task_set,
        "query": given.get("query"),
        "answer": _answer(given.get("answer"), fail),
        "landmarks": given.get("landmarks"),
        "entrypoint": given.get("entrypoint"),
        "pre_executed": pre_executed or None,
        "solution": _solution(given.get("solution"), fail) or None,
        "image": SUPER_IMAGE,
    }
    if given.get("github_repo") is not None:  # our format keeps the commit under repository
        repository = {"url": given["github_repo"], "commit": given.get("git_commit")}
        mapping["repository"] = {k: v for k, v in repository.items() if v is not None}
    return {name: value for name, value in mapping.items() if value is not None}


def _given(value: object) -> object:
    """None for what SUPER leaves empty: null or blank text."""
    return None if isinstance(value, str) and not value.strip() else value


def _super_name(location: Location) -> str:
    """A field of the mapping as SUPER's row names it (`id` -> `task_id`, ...)."""
    head, *rest = location
    if head == "repository":
        return "git_commit" if rest[:1] == ["commit"] else "github_repo"
    return field_path([_SUPER_NAMES.get(str(head), head), *rest])


def _missing_super_field(name: str, about: str) -> tuple[str, str]:
    return f"missing {name}", f'add a "{name}"' + (f" ({about})" if about else "")


def _answer(raw: object, fail: _Fail) -> object:
    """SUPER stores the gold answer as a string holding JSON; empty means none (Auto)."""
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw)
    except json.JSONDecodeError as error:
        raise fail(
            f"answer is not valid JSON ({error.msg} at column {error.colno})",
            field="answer",
            value=raw,
            hint='the answer must be a string holding JSON, e.g. "{\\"accuracy\\": 0.27}"',
        ) from None


def _decoded_cell(item: object, where: str, fail: _Fail) -> Mapping[str, object]:
    """A SUPER cell given as a JSON string or as an object, decoded to a dict."""
    if isinstance(item, str):
        try:
            item = json.loads(item)
        except json.JSONDecodeError as error:
            raise fail(
                f"{where} is not a JSON object: {error.msg}",
                field=where,
                value=item,
                hint='each cell is {"type": "execute"|"edit", "content": "..."}',
            ) from None
    if not isinstance(item, dict):
        raise fail(f"{where} must be a cell object", field=where, value=item)
    return item


def _typed_cell(
    item: Mapping[str, object], index: int, fail: _Fail, field: str = "pre_execute_cells"
) -> dict[str, object]:
    """{"type": "execute"|"edit", "content": "..."} -> our cell mapping; edits are in SUPER's
    edit format."""
    where = f"{field}[{index}]"
    kind, content = item.get("type"), item.get("content")
    if not isinstance(content, str):
        raise fail(f"{where}.content must be a string", field=f"{where}.content", value=content)
    if kind == "execute":
        return {"execute": content}
    if kind == "edit":
        try:
            edit = parse_edit(content)
        except ValueError as error:
            raise fail(
                f"{where} is not a valid SUPER edit: {error}",
                field=f"{where}.content",
                value=content,
                hint="<file>\\n[context lines]\\n<<<BEFORE_EDIT>>>\\n<lines>\\n<<<AFTER_EDIT>>>\\n<lines>",
            ) from None
        return cell_to_mapping(
            Cell(
                kind="edit",
                file=edit.file,
                before=edit.before,
                after=edit.after,
                context=edit.context,
            )
        )
    raise fail(
        f"{where} has an unknown cell type",
        field=f"{where}.type",
        value=kind,
        hint="expected 'execute' or 'edit'",
    )


def _solution(raw: object, fail: _Fail) -> object:
    """The gold cells as our cell mappings, in whichever shape the row holds them (a value that
    is no list of cells is passed on for the schema to name).

    SUPER's exact shape is not documented, so accept: a list (or a JSON string of a list, or a
    notebook with "cells") whose items are code strings, {"type", "content"} objects like
    pre_execute_cells, notebook cells {"cell_type", "source"} (markdown skipped), or JSON strings
    of those objects.
    """
    raw = _solution_items(raw)
    if not isinstance(raw, list):
        return raw
    cells: list[dict[str, object]] = []
    for index, item in enumerate(raw):
        cell = _solution_cell(_decoded_json_cell(item), index, fail)
        if cell is not None:
            cells.append(cell)
    return cells


def _solution_items(raw: object) -> object:
    """The list of cells a solution holds: a list as it is; a JSON string of a list or of a
    notebook decoded; a notebook's "cells"; one cell (a code string or a cell object) as a list
    of it. Anything else is returned as it is."""
    if isinstance(raw, str):
        try:
            decoded = json.loads(raw)
        except json.JSONDecodeError:
            decoded = None
        raw = decoded if isinstance(decoded, (list, dict)) else [raw]
    if isinstance(raw, dict):
        raw = raw["cells"] if isinstance(raw.get("cells"), list) else [raw]
    return raw


def _decoded_json_cell(item: object) -> object:
    """An item that is a JSON string of a cell object, decoded; any other item as it is."""
    if isinstance(item, str) and item.lstrip().startswith("{"):
        try:
            decoded = json.loads(item)
        except json.JSONDecodeError:
            decoded = None
        if isinstance(decoded, dict) and ("type" in decoded or "cell_type" in decoded):
            return decoded
    return item


def _solution_cell(item: object, index: int, fail: _Fail) -> dict[str, object] | None:
    """One item of a solution as our cell mapping; None for an item that runs nothing (blank
    code, a markdown or raw notebook cell)."""
    where = f"solution[{index}]"
    if isinstance(item, str):
        return {"execute": item} if item.strip() else None
    if isinstance(item, dict) and "type" in item:
        return _typed_cell(item, index, fail, field="solution")
    if isinstance(item, dict) and "cell_type" in item:
        if item["cell_type"] != "code":
            return None  # markdown and raw cells are commentary
        source = item.get("source", "")
        if isinstance(source, list) and all(isinstance(part, str) for part in source):
            source = "".join(source)
        if not isinstance(source, str):
            raise fail(
                f"{where}.source must be a string or a list of strings",
                field=f"{where}.source",
                value=source,
            )
        return {"execute": source} if source.strip() else None
    raise fail(
        f"{where} is not a cell",
        field=where,
        value=item,
        hint='expected code, {"type": ..., "content": ...} or {"cell_type": ..., "source": ...}',
    )
