"""One validation for every task, whatever file it came from: the JSON Schema
(`task.schema.json`), then the checks a schema cannot express (the set, a gold answer for
Expert and Masked, an entrypoint for Auto, landmark regexes, categories), then the `Task`.

A task arrives as our YAML mapping (SUPER's rows are converted to it first); its `Origin` says
how the file names each field and on which line it stands, so errors speak the file's terms.
"""

from __future__ import annotations

import difflib
import functools
import json
import re
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import date
from importlib import resources
from pathlib import Path
from typing import Any, TypedDict, cast

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match

from pytest_super import safe_read
from pytest_super.errors import SuperWarning, TaskFileError
from pytest_super.scoring import MAX_LANDMARK_EXPANSION, regex_expansion, unmatchable_leaves
from pytest_super.strictjson import JSON
from pytest_super.tasks.model import (
    LIMIT_RANGES,
    YAML_IMAGE,
    Cell,
    Limits,
    Task,
    categories_from_id,
    raw_category_of,
)

#: a place in a task mapping: ["pre_executed", 2, "edit", "file"]
Location = list[str | int]

_SET_NAMES = {"expert": "expert", "masked": "masked", "auto": "auto", "auto_gen": "auto"}
_GOLD_SETS = ("expert", "masked")
_YAML_TYPE_NAMES = {
    "object": "a mapping",
    "array": "a list",
    "string": "a string",
    "number": "a number",
    "integer": "an integer",
    "boolean": "true or false",
    "null": "null",
}
_PLURALS = {"object": "mappings", "string": "strings", "number": "numbers", "integer": "integers"}


def field_path(location: Location) -> str:
    """["pre_executed", 2, "edit", "file"] -> "pre_executed[2].edit.file"."""
    text = ""
    for step in location:
        text += f"[{step}]" if isinstance(step, int) else (f".{step}" if text else str(step))
    return text


def _missing_yaml_field(name: str, about: str) -> tuple[str, str]:
    return f"missing required field {name!r}", f"add `{name}:`" + (f" ({about})" if about else "")


@dataclass(frozen=True)
class Origin:
    """Where a task mapping came from: the file, how it names a field, where a field stands,
    and the hints that tell its author what to write."""

    path: str
    #: the 1-based line of the value at a location (key=True: of its key), None if unknown
    line_at: Callable[[Location, bool], int | None] = lambda location, key: None
    #: the field at a location as the file names it
    name_of: Callable[[Location], str] = field_path
    #: (message, hint) for a required field that is missing, from its name and description
    missing: Callable[[str, str], tuple[str, str]] = _missing_yaml_field
    #: hints by the field a semantic check is about: "set", "answer", "entrypoint"
    hints: Mapping[str, str] = field(default_factory=dict)
    #: the line of a JSON-lines row (the Task keeps it)
    row_line: int | None = None

    @property
    def where(self) -> str:
        """The file, and the line for a row, as warnings name them."""
        return self.path if self.row_line is None else f"{self.path}:{self.row_line}"


def infer_set(
    path: Path, explicit: str | None = None, field_value: str | None = None
) -> str | None:
    """Which set a task belongs to: `explicit` (the --super-set option) > the file's `set` field >
    the name of the file (JSON lines: expert.jsonl, masked.jsonl, auto_gen.jsonl) or of its
    parent directory (tasks/masked/x.yaml). None when nothing tells.

    Raises TaskFileError when a given name is not a set.
    """
    return infer_set_at(path, explicit, field_value)


def infer_set_at(
    path: Path, explicit: str | None, field_value: object, *, line: int | None = None
) -> str | None:
    """`infer_set`, with the line an error names (a JSON-lines row's)."""
    for given, origin in ((explicit, "the --super-set option"), (field_value, "the `set` field")):
        if given is None or given == "":
            continue
        name = _SET_NAMES.get(given.strip().lower()) if isinstance(given, str) else None
        if name is None:
            raise TaskFileError(
                str(path),
                f"unknown set in {origin}",
                field="set",
                value=given,
                line=line,
                hint="use one of expert, masked, auto",
            )
        return name
    path = Path(path)
    if path.suffix.lower() in (".jsonl", ".json"):
        candidates = [path.stem, path.parent.name]
    else:  # a YAML file's name is its task id, not its set
        candidates = [path.parent.name]
    for candidate in candidates:
        name = _SET_NAMES.get(candidate.lower())
        if name is not None:
            return name
    return None


@functools.cache
def schema() -> dict[str, JSON]:
    """The JSON Schema of a task file (`task.schema.json`), loaded once. Do not mutate it."""
    text = resources.files("pytest_super").joinpath("task.schema.json").read_text(encoding="utf-8")
    loaded: dict[str, JSON] = json.loads(text)
    return loaded


class RepositoryMapping(TypedDict, total=False):
    url: str
    commit: str


class EditMapping(TypedDict, total=False):
    file: str
    before: str
    after: str
    context: str


class CellMapping(TypedDict, total=False):
    execute: str
    edit: EditMapping


class LimitsMapping(TypedDict, total=False):
    compute_s: float
    token_budget: int
    steps: int
    cell_timeout_s: float


class TaskMapping(TypedDict, total=False):
    """A task mapping as task.schema.json lets it through (`id` and `query` always there)."""

    id: str
    set: str
    query: str
    categories: list[str]
    repository: RepositoryMapping
    answer: JSON
    landmarks: list[str]
    entrypoint: str
    pre_executed: list[CellMapping]
    solution: list[CellMapping]
    limits: LimitsMapping
    image: str


@functools.cache
def _validator() -> Draft202012Validator:
    return Draft202012Validator(schema())


def task_from_mapping(mapping: Mapping[str, object], origin: Origin) -> Task:
    """Validate a task mapping (our YAML format) by the schema, then by what the schema cannot
    express, and return the Task. Raises TaskFileError naming file, field, value and a fix."""
    _check_limits(mapping, origin)
    violation = best_match(_validator().iter_errors(mapping))
    if violation is not None:
        raise _schema_error(violation, origin)
    data = cast(TaskMapping, mapping)  # as the schema just checked it
    source = origin.path
    set_name = infer_set(Path(source), None, data.get("set"))
    if set_name is None:
        raise TaskFileError(
            source,
            "cannot tell which set this task belongs to",
            field="set",
            line=origin.row_line,
            hint=origin.hints.get("set"),
        )
    task_id = data["id"]
    answer = data.get("answer")
    if set_name in _GOLD_SETS and answer is None:
        raise TaskFileError(
            source,
            f"{set_name} tasks need a gold answer",
            field=origin.name_of(["answer"]),
            value=answer,
            line=origin.line_at(["answer"], False) if "answer" in data else origin.row_line,
            hint=origin.hints.get("answer"),
        )
    entrypoint = data.get("entrypoint")
    if set_name == "auto" and not entrypoint:
        raise TaskFileError(
            source,
            "auto tasks need an entrypoint (they are scored by whether it ran)",
            field=origin.name_of(["entrypoint"]),
            value=entrypoint,
            line=origin.row_line,
            hint=origin.hints.get("entrypoint"),
        )
    landmarks = tuple(data.get("landmarks", ()))
    _check_landmarks(landmarks, origin)
    if "categories" in data:
        if set_name != "masked":
            raise TaskFileError(
                source,
                f"categories apply only to masked tasks, and this one is {set_name}",
                field="categories",
                value=data["categories"],
                line=origin.line_at(["categories"], False),
                hint="remove `categories:` or make it a masked task",
            )
        categories = tuple(data["categories"])
        raw_category = ""
    else:
        categories = categories_from_id(task_id) if set_name == "masked" else ()
        raw_category = raw_category_of(task_id) if set_name == "masked" else ""
    if answer is not None:
        warn_unmatchable_answer(task_id, origin.where, answer)
    repository = data.get("repository") or {}
    return Task(
        id=task_id,
        set=set_name,
        query=data["query"],
        categories=categories,
        repository=repository.get("url"),
        commit=repository.get("commit"),
        answer=answer,
        landmarks=landmarks,
        entrypoint=entrypoint,
        pre_executed=tuple(_cell_from_mapping(item) for item in data.get("pre_executed", ())),
        solution=tuple(_cell_from_mapping(item) for item in data.get("solution", ())),
        limits=Limits(**data.get("limits", {})),
        image=data.get("image", YAML_IMAGE),
        source=source,
        line=origin.row_line,
        raw_category=raw_category,
    )


def warn_unmatchable_answer(task_id: str, source: str, answer: object) -> None:
    """Warn when a gold answer holds values no submission can match (NaN, infinity)."""
    paths = unmatchable_leaves(answer)
    if paths:
        warnings.warn(
            SuperWarning(
                f"{source}: task {task_id!r}: gold answer value(s) at {', '.join(paths)} are NaN "
                "or infinite, so no submission can ever match them; fix the answer"
            ),
            stacklevel=2,
        )


def type_name(value: object) -> str:
    """What a value is, in a task author's words ("a mapping", "a list", "an integer", ...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    return f"a {type(value).__name__}"


def cell_to_mapping(cell: Cell) -> dict[str, object]:
    """A cell as our YAML format writes it: {"execute": code} or {"edit": {file, before, ...}}."""
    if cell.kind == "execute":
        return {"execute": cell.code}
    edit = {"file": cell.file, "before": cell.before, "after": cell.after}
    if cell.context:
        edit["context"] = cell.context
    return {"edit": edit}


def _cell_from_mapping(item: CellMapping) -> Cell:
    if "execute" in item:
        return Cell(kind="execute", code=item["execute"])
    edit = item["edit"]
    return Cell(
        kind="edit",
        file=edit["file"],
        before=edit["before"],
        after=edit["after"],
        context=edit.get("context", ""),
    )


def _check_limits(data: object, origin: Origin) -> None:
    """Every number under `limits` finite and in its range (LIMIT_RANGES). Checked before the
    schema, whose `exclusiveMinimum` lets NaN and infinity through; what is not a number is
    left to the schema."""
    limits = data.get("limits") if isinstance(data, dict) else None
    if not isinstance(limits, dict):
        return
    for name, value in limits.items():
        bounds = LIMIT_RANGES.get(name)
        if bounds is None or isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if not bounds.accepts(value):
            where = origin.name_of(["limits", name])
            raise TaskFileError(
                origin.path,
                f"{where} must be {bounds.text}",
                field=where,
                value=value,
                line=origin.line_at(["limits", name], False),
                hint=f"give {where} a value in that range, or remove it to use the run's option",
            )


def _check_landmarks(landmarks: tuple[str, ...], origin: Origin) -> None:
    for index, landmark in enumerate(landmarks):
        try:
            re.compile(landmark)
        except re.error as error:
            raise TaskFileError(
                origin.path,
                f"landmark {index} is not a valid regular expression: {error}",
                field=origin.name_of(["landmarks", index]),
                value=landmark,
                line=origin.line_at(["landmarks", index], False),
                hint="fix the regex (Python `re` syntax); escape literal characters like ( [ . with \\",
            ) from None
        if regex_expansion(landmark) > MAX_LANDMARK_EXPANSION:
            raise TaskFileError(
                origin.path,
                f"landmark {index} repeats more than {MAX_LANDMARK_EXPANSION:,} times once its "
                "nested counts are multiplied: compiling it would take gigabytes",
                field=origin.name_of(["landmarks", index]),
                value=landmark,
                line=origin.line_at(["landmarks", index], False),
                hint="use + or * instead of large nested counts such as (?:a{5000}){5000}",
            )


def _schema_error(error: ValidationError, origin: Origin) -> TaskFileError:
    """Turn the most relevant schema violation into a message a task author can act on."""
    path = origin.path
    location: Location = list(error.absolute_path)
    where = origin.name_of(location) if location else ""
    within = f" in {where}" if where else ""
    # the violated (sub)schema, the value and the keyword's value, as the task file gave them
    subschema: dict[str, Any] = (  # Any: jsonschema's ValidationError
        error.schema if isinstance(error.schema, dict) else {}
    )
    instance: Any = error.instance  # Any: jsonschema's ValidationError types them so
    expected: Any = error.validator_value  # Any: jsonschema's ValidationError
    described = subschema.get("description")
    line = origin.line_at(location, False)
    kind = error.validator
    if kind == "additionalProperties":
        allowed = list(subschema.get("properties", {}))
        unknown = next(name for name in instance if name not in allowed)
        close = difflib.get_close_matches(str(unknown), allowed, n=1)
        hint = f"did you mean {close[0]!r}?" if close else "remove it or fix its spelling"
        return TaskFileError(
            path,
            f"unknown field {unknown!r}{within} (allowed: {', '.join(allowed)})",
            field=origin.name_of([*location, unknown]),
            value=instance[unknown],
            line=origin.line_at([*location, unknown], True),
            hint=hint,
        )
    if kind == "required":
        name = next(name for name in expected if name not in instance)
        about = subschema.get("properties", {}).get(name, {}).get("description", "")
        named = origin.name_of([*location, name])
        message, hint = origin.missing(named.rpartition(".")[2], about)
        return TaskFileError(path, message + within, field=named, value=None, line=line, hint=hint)
    subject = where or "the task file"
    if kind == "type":
        names = [expected] if isinstance(expected, str) else list(expected)
        wanted = " or ".join(_YAML_TYPE_NAMES.get(name, name) for name in names)
        items = subschema.get("items", {}).get("type")
        if names == ["array"] and items in _PLURALS:
            wanted = f"a list of {_PLURALS[items]}"
        message = f"{subject} must be {wanted}, not {type_name(instance)}"
        type_hint = described
        if "string" in names and isinstance(instance, (bool, int, float, date)):
            # YAML read an unquoted value as a number, boolean or date
            type_hint = " ".join(filter(None, [described, "Quote the value to keep it a string."]))
        return TaskFileError(
            path, message, field=where or None, value=instance, line=line, hint=type_hint
        )
    if kind == "enum":
        choices = ", ".join(str(choice) for choice in expected)
        message = f"{subject} must be one of {choices}"
    elif kind in ("minProperties", "maxProperties") and subschema.get("title") == "Cell":
        keys = ", ".join(map(str, instance)) or "none"
        message = f"{subject} must have exactly one key, `execute` or `edit` (found: {keys})"
    elif kind == "pattern":
        message = f"{subject} does not match {expected}"
    elif kind == "minLength":
        message = f"{subject} must not be empty"
    elif kind == "uniqueItems":
        message = f"{subject} lists the same value twice"
    elif kind in ("minimum", "exclusiveMinimum"):
        bound = ">" if kind == "exclusiveMinimum" else ">="
        message = f"{subject} must be {bound} {expected}"
    elif kind in ("maximum", "exclusiveMaximum"):
        bound = "<" if kind == "exclusiveMaximum" else "<="
        message = f"{subject} must be {bound} {expected}"
    else:
        message = f"{subject}: {error.message}"
    return TaskFileError(
        path, message, field=where or None, value=instance, line=line, hint=described
    )


def read_task_file(path: Path, max_bytes: int) -> bytes:
    """The bytes of a task file through the safe reader: a FIFO, a folder or a file over
    `max_bytes` is an error of this file (TaskFileError), never opened blocking or read whole."""
    try:
        return safe_read.read_regular_file(path, max_bytes)
    except safe_read.ForeignDataError as error:
        raise TaskFileError(
            str(path),
            f"cannot read the task file: {error.reason}",
            hint=safe_read.replace_hint(max_bytes),
        ) from None
