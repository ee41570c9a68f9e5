"""The task model: what one SUPER task is, loaded from our YAML files or SUPER's own JSON lines.

Owns: `Task`, `Cell`, `Limits`, loading and validation against `task.schema.json`, the
conversion of SUPER's JSONL rows (import), task ids and the categories they carry, and the safe,
bounded file names derived from ids (`names.file_stem`).
"""

from __future__ import annotations

import difflib
import functools
import json
import re
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import date
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match

from pytest_super.edit import parse_edit
from pytest_super.errors import SuperWarning, TaskFileError
from pytest_super.names import file_stem
from pytest_super.scoring import unmatchable_leaves

SETS = ("expert", "masked", "auto")
CATEGORIES = ("dependencies", "cpu", "configuration", "data", "issue", "goal", "other")
# The kernel image profile a task runs in unless it names one (`image:`) or --super-image is
# given: our YAML files keep the small default image; SUPER's own rows need its environment.
YAML_IMAGE = "default"
SUPER_IMAGE = "colab"


@dataclass(frozen=True)
class Cell:
    """One notebook cell of a prefix or a solution.

    An execute cell has `code`. An edit cell replaces the lines `before` of `file` with `after`,
    in SUPER's edit semantics (the lines must match exactly; `context`, if given, are lines that
    stand just before them in the file).
    """

    kind: Literal["execute", "edit"]
    code: str = ""
    file: str = ""
    before: str = ""
    after: str = ""
    context: str = ""


@dataclass(frozen=True)
class Limits:
    """Per-task limits; None means the run's default (set by options)."""

    compute_s: float | None = None
    token_budget: int | None = None
    steps: int | None = None
    cell_timeout_s: float | None = None


@dataclass(frozen=True)
class Task:
    """One SUPER task."""

    id: str
    set: str  # one of SETS
    query: str
    categories: tuple[str, ...] = ()
    repository: str | None = None
    commit: str | None = None
    answer: Any = None  # gold values (dict, list, number, string); None for auto tasks
    landmarks: tuple[str, ...] = ()
    entrypoint: str | None = None
    pre_executed: tuple[Cell, ...] = ()
    solution: tuple[Cell, ...] = ()
    limits: Limits = field(default_factory=Limits)
    image: str = YAML_IMAGE  # the kernel image profile (pytest_super.kernels.image.PROFILES)
    source: str = ""  # the file it came from
    line: int | None = None  # the line, for JSONL
    raw_category: str = ""  # a masked id's category suffix as written (e.g. "customgoal")

    @property
    def category(self) -> str:
        """The category as the data writes it (`super.category`): the id's raw suffix when the
        categories came from it, else the categories joined by commas."""
        return self.raw_category or ",".join(self.categories)


# --------------------------------------------------------------------------- loading

# Ids are the data's: SUPER's use letters, digits and _ . , - and Auto ids may contain "/".
_ID_PATTERN = re.compile(r"^[A-Za-z0-9_.,/+@=-]+$")
_ID_CHARACTERS = "letters, digits and _ . , - / + @ ="
#: longest file name (without suffix) derived from an id; file systems allow 255 bytes, and the
#: trajectory folder adds `.json`/`.ipynb`
_SET_NAMES = {"expert": "expert", "masked": "masked", "auto": "auto", "auto_gen": "auto"}
_GOLD_SETS = ("expert", "masked")
_SET_HINT = "put the file under tasks/<set>/ (expert, masked or auto) or add `set: expert` (or masked, auto)"
_JSONL_SET_HINT = (
    'pass --super-set expert|masked|auto, add a "set" field, '
    "or name the file expert.jsonl, masked.jsonl or auto_gen.jsonl"
)
# builds the error of one JSONL row: fail(message, field, value, hint)
_Fail = Callable[..., TaskFileError]
_YAML_TYPE_NAMES = {
    "object": "a mapping",
    "array": "a list",
    "string": "a string",
    "number": "a number",
    "integer": "an integer",
    "boolean": "true or false",
    "null": "null",
}


def category_suffix(task_id: str) -> str:
    """The raw category suffix of a masked task id: what follows its last underscore ("" if none)."""
    _, underscore, suffix = task_id.rpartition("_")
    return suffix if underscore else ""


def categories_from_id(task_id: str) -> tuple[str, ...]:
    """The masked categories a task id carries after its last underscore.

    `amrbart_dependencies` -> ("dependencies",); `safetybench_configuration,cpu` ->
    ("configuration", "cpu"). A word that is not one of the paper's categories (the real data has
    `_custom` and `_customgoal`) is "other"; () when the id has no suffix.
    """
    return categories_of(category_suffix(task_id))


def categories_of(label: str) -> tuple[str, ...]:
    """The paper's categories named by a category label such as `configuration,cpu` or
    `customgoal` (a word that is not one of them is "other")."""
    found: list[str] = []
    for word in label.split(","):
        word = word.strip().lower()
        if not word:
            continue
        word = word if word in CATEGORIES else "other"
        if word not in found:
            found.append(word)
    return tuple(found)


def raw_category_of(task_id: str) -> str:
    """The id's suffix as written when it names a category outside the paper's (kept in
    `super.category`, e.g. "customgoal"); "" when the suffix is made of known categories."""
    suffix = category_suffix(task_id)
    words = [w.strip().lower() for w in suffix.split(",") if w.strip()]
    return suffix if any(w not in CATEGORIES for w in words) else ""


def warn_unmatchable_answer(task_id: str, source: str, answer: Any) -> None:
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


def infer_set(
    path: Path, explicit: str | None = None, field_value: str | None = None
) -> str | None:
    """Which set a task belongs to: `explicit` (the --super-set option) > the file's `set` field >
    the name of the file (JSON lines: expert.jsonl, masked.jsonl, auto_gen.jsonl) or of its
    parent directory (tasks/masked/x.yaml). None when nothing tells.

    Raises TaskFileError when a given name is not a set.
    """
    return _infer_set(path, explicit, field_value)


def _infer_set(
    path: Path, explicit: str | None, field_value: str | None, *, line: int | None = None
) -> str | None:
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
def schema() -> dict:
    """The JSON Schema of a task file (`task.schema.json`), loaded once. Do not mutate it."""
    text = resources.files("pytest_super").joinpath("task.schema.json").read_text(encoding="utf-8")
    return json.loads(text)


@functools.cache
def _validator() -> Draft202012Validator:
    return Draft202012Validator(schema())


def load_yaml_task(path: Path) -> Task:
    """Load and validate one task file (YAML). Raises TaskFileError naming file, field and value."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise TaskFileError(
            str(path), f"cannot read the task file: {error.strerror or error}"
        ) from None
    except UnicodeDecodeError as error:
        raise TaskFileError(
            str(path), f"not UTF-8 text ({error.reason})", hint="save the file as UTF-8"
        ) from None
    data, root = _parse_yaml(path, text)
    if not isinstance(data, dict):
        found = "an empty file" if data is None else _yaml_type_name(data)
        raise TaskFileError(
            str(path),
            f"a task file must be a YAML mapping (id: ..., query: ...), not {found}",
            line=None if root is None else root.start_mark.line + 1,
            hint="see the task format in the README",
        )
    violation = best_match(_validator().iter_errors(data))
    if violation is not None:
        raise _schema_error(path, violation, root)
    return _task_from_mapping(path, data, root)


class _TaskLoader(yaml.SafeLoader):
    """PyYAML's safe loader, but `1e308` and `2E-5` are numbers (YAML 1.2), not strings."""


_TaskLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def _parse_yaml(path: Path, text: str) -> tuple[Any, yaml.Node | None]:
    """The document and its node tree (for line numbers), from one safe parse."""
    loader = _TaskLoader(text)
    try:
        root = loader.get_single_node()
        if root is not None:
            _check_duplicate_keys(path, root)
        data = None if root is None else loader.construct_document(root)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line = None if mark is None else mark.line + 1
        message = f"malformed YAML: {error.problem or error}"
        lines = text.splitlines()
        if line is not None and line <= len(lines):
            message += f" near {lines[line - 1].strip()!r}"
        started = error.context_mark
        if error.context and started is not None and started.line + 1 != line:
            message += f" ({error.context} that started on line {started.line + 1})"
        raise TaskFileError(
            str(path),
            message,
            line=line,
            hint="check indentation and quoting: text with ': ' or starting with a special "
            "character needs quotes, multi-line text wants a `|` block",
        ) from None
    except yaml.YAMLError as error:
        raise TaskFileError(str(path), f"malformed YAML: {error}") from None
    finally:
        loader.dispose()
    return data, root


def _check_duplicate_keys(path: Path, node: yaml.Node) -> None:
    """YAML keeps the last of two equal keys silently; in a task file that is always a mistake."""
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode):
                line = key.start_mark.line + 1
                if key.value in seen:
                    raise TaskFileError(
                        str(path),
                        f"duplicate key {key.value!r} (first on line {seen[key.value]})",
                        line=line,
                        hint="keep one of them",
                    )
                seen[key.value] = line
            _check_duplicate_keys(path, value)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            _check_duplicate_keys(path, item)


def _line_at(root: yaml.Node | None, location: list, *, key: bool = False) -> int | None:
    """The 1-based line of the node at `location` (or of its key), as deep as the tree goes."""
    if root is None:
        return None
    node: yaml.Node = root
    line = node.start_mark.line + 1
    for depth, step in enumerate(location, start=1):
        if isinstance(node, yaml.MappingNode):
            match = next(((k, v) for k, v in node.value if str(k.value) == str(step)), None)
            if match is None:
                return line
            node = match[0] if key and depth == len(location) else match[1]
        elif (
            isinstance(node, yaml.SequenceNode) and isinstance(step, int) and step < len(node.value)
        ):
            node = node.value[step]
        else:
            return line
        line = node.start_mark.line + 1
    return line


def _field_path(location: list) -> str:
    """["pre_executed", 2, "edit", "file"] -> "pre_executed[2].edit.file"."""
    text = ""
    for step in location:
        text += f"[{step}]" if isinstance(step, int) else (f".{step}" if text else str(step))
    return text


def _yaml_type_name(value: Any) -> str:
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


def _schema_error(path: Path, error: ValidationError, root: yaml.Node | None) -> TaskFileError:
    """Turn the most relevant schema violation into a message a task author can act on."""
    location = list(error.absolute_path)
    where = _field_path(location)
    within = f" in {where}" if where else ""
    # the violated (sub)schema, the value and the keyword's value, as the task file gave them
    schema: dict[str, Any] = error.schema if isinstance(error.schema, dict) else {}
    instance: Any = error.instance
    expected: Any = error.validator_value
    described = schema.get("description")
    line = _line_at(root, location)
    kind = error.validator
    if kind == "additionalProperties":
        allowed = list(schema.get("properties", {}))
        unknown = next(name for name in instance if name not in allowed)
        close = difflib.get_close_matches(str(unknown), allowed, n=1)
        hint = f"did you mean {close[0]!r}?" if close else "remove it or fix its spelling"
        return TaskFileError(
            str(path),
            f"unknown field {unknown!r}{within} (allowed: {', '.join(allowed)})",
            field=_field_path([*location, unknown]),
            value=instance[unknown],
            line=_line_at(root, [*location, unknown], key=True),
            hint=hint,
        )
    if kind == "required":
        name = next(name for name in expected if name not in instance)
        about = schema.get("properties", {}).get(name, {}).get("description", "")
        return TaskFileError(
            str(path),
            f"missing required field {name!r}{within}",
            field=_field_path([*location, name]),
            value=None,
            line=line,
            hint=f"add `{name}:`" + (f" ({about})" if about else ""),
        )
    subject = where or "the task file"
    if kind == "type":
        names = [expected] if isinstance(expected, str) else list(expected)
        wanted = " or ".join(_YAML_TYPE_NAMES.get(name, name) for name in names)
        message = f"{subject} must be {wanted}, not {_yaml_type_name(instance)}"
        type_hint = described
        if "string" in names and isinstance(instance, (bool, int, float, date)):
            # YAML read an unquoted value as a number, boolean or date
            type_hint = " ".join(filter(None, [described, "Quote the value to keep it a string."]))
        return TaskFileError(
            str(path), message, field=where or None, value=instance, line=line, hint=type_hint
        )
    if kind == "enum":
        choices = ", ".join(str(choice) for choice in expected)
        message = f"{subject} must be one of {choices}"
    elif kind in ("minProperties", "maxProperties") and schema.get("title") == "Cell":
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
    else:
        message = f"{subject}: {error.message}"
    return TaskFileError(
        str(path), message, field=where or None, value=instance, line=line, hint=described
    )


def _check_landmarks(
    path: str, landmarks: tuple[str, ...], *, line_of: Callable[[int], int | None], field: str
) -> None:
    for index, landmark in enumerate(landmarks):
        try:
            re.compile(landmark)
        except re.error as error:
            raise TaskFileError(
                path,
                f"landmark {index} is not a valid regular expression: {error}",
                field=f"{field}[{index}]",
                value=landmark,
                line=line_of(index),
                hint="fix the regex (Python `re` syntax); escape literal characters like ( [ . with \\",
            ) from None


def _cell_from_yaml(item: dict) -> Cell:
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


def _task_from_mapping(path: Path, data: dict, root: yaml.Node | None) -> Task:
    """Semantic checks the schema cannot express, then the Task (data is schema-valid)."""
    source = str(path)
    set_name = infer_set(path, None, data.get("set"))
    if set_name is None:
        raise TaskFileError(
            source, "cannot tell which set this task belongs to", field="set", hint=_SET_HINT
        )
    task_id = data["id"]
    answer = data.get("answer")
    if set_name in _GOLD_SETS and answer is None:
        raise TaskFileError(
            source,
            f"{set_name} tasks need a gold answer",
            field="answer",
            value=answer,
            line=_line_at(root, ["answer"]) if "answer" in data else None,
            hint="add `answer:` with the gold values, e.g. `answer: {accuracy: 0.82}`",
        )
    entrypoint = data.get("entrypoint")
    if set_name == "auto" and not entrypoint:
        raise TaskFileError(
            source,
            "auto tasks need an entrypoint (they are scored by whether it ran)",
            field="entrypoint",
            value=entrypoint,
            hint="add `entrypoint: <script>`, e.g. `entrypoint: train.py`",
        )
    landmarks = tuple(data.get("landmarks", ()))
    _check_landmarks(
        source, landmarks, line_of=lambda i: _line_at(root, ["landmarks", i]), field="landmarks"
    )
    if "categories" in data:
        if set_name != "masked":
            raise TaskFileError(
                source,
                f"categories apply only to masked tasks, and this one is {set_name}",
                field="categories",
                value=data["categories"],
                line=_line_at(root, ["categories"]),
                hint="remove `categories:` or make it a masked task",
            )
        categories = tuple(data["categories"])
        raw_category = ""
    else:
        categories = categories_from_id(task_id) if set_name == "masked" else ()
        raw_category = raw_category_of(task_id) if set_name == "masked" else ""
    if answer is not None:
        warn_unmatchable_answer(task_id, source, answer)
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
        pre_executed=tuple(_cell_from_yaml(item) for item in data.get("pre_executed", ())),
        solution=tuple(_cell_from_yaml(item) for item in data.get("solution", ())),
        limits=Limits(**data.get("limits", {})),
        image=data.get("image", YAML_IMAGE),
        source=source,
        line=None,
        raw_category=raw_category,
    )


# --------------------------------------------------------------------------- SUPER's JSON lines


def iter_jsonl_tasks(path: Path, set_name: str | None = None) -> Iterator[Task | TaskFileError]:
    """The tasks of a SUPER JSON-lines file, one item per non-blank line.

    A bad line (not UTF-8, not JSON, nested too deep, not a valid task) yields a TaskFileError
    with its line number in place of its task, so the other lines still load; a task id seen
    before in the file is an error on the later line. A file that cannot be read raises
    TaskFileError.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as error:
        raise TaskFileError(str(path), f"cannot read the file: {error.strerror or error}") from None
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


def task_from_super_row(row: dict, *, path: str, line: int, set_name: str | None) -> Task:
    """One row of SUPER's published data (allenai/super) as a Task.

    Required: task_id, query. The set comes from `set_name` (the --super-set option), else the
    row's own "set", else the file name. Fields SUPER may add later are ignored.
    """

    def fail(
        message: str, field: str | None = None, value: Any = None, hint: str | None = None
    ) -> TaskFileError:
        return TaskFileError(path, message, field=field, value=value, line=line, hint=hint)

    if not isinstance(row, dict):
        raise fail(f"a line must hold a JSON object, not {_yaml_type_name(row)}")
    task_id = row.get("task_id")
    if not isinstance(task_id, str) or not task_id:
        raise fail("missing task_id", field="task_id", value=task_id, hint='add a "task_id"')
    if not _ID_PATTERN.match(task_id):
        raise fail(f"task_id may contain only {_ID_CHARACTERS}", field="task_id", value=task_id)
    query = row.get("query")
    if not isinstance(query, str) or not query.strip():
        raise fail("missing query", field="query", value=query, hint='add the prompt as "query"')
    task_set = _infer_set(Path(path), set_name, row.get("set"), line=line)
    if task_set is None:
        raise fail("cannot tell which set the task belongs to", field="set", hint=_JSONL_SET_HINT)
    answer = _super_answer(row.get("answer"), fail)
    if task_set in _GOLD_SETS and answer is None:
        raise fail(
            f"{task_set} tasks need a gold answer",
            field="answer",
            value=row.get("answer"),
            hint='add the gold values as a JSON string, e.g. "{\\"accuracy\\": 0.27}"',
        )
    landmarks = _super_strings(row.get("landmarks"), "landmarks", fail)
    _check_landmarks(path, landmarks, line_of=lambda _: line, field="landmarks")
    entrypoint = _super_optional_string(row.get("entrypoint"), "entrypoint", fail)
    if task_set == "auto" and entrypoint is None:
        raise fail("auto tasks need an entrypoint", field="entrypoint", value=row.get("entrypoint"))
    repository = _super_optional_string(row.get("github_repo"), "github_repo", fail)
    commit = _super_optional_string(row.get("git_commit"), "git_commit", fail)
    pre_executed = row.get("pre_execute_cells") or []
    if not isinstance(pre_executed, list):
        raise fail(
            "pre_execute_cells must be a list", field="pre_execute_cells", value=pre_executed
        )
    categories = categories_from_id(task_id) if task_set == "masked" else ()
    if answer is not None:
        warn_unmatchable_answer(task_id, f"{path}:{line}", answer)
    return Task(
        id=task_id,
        set=task_set,
        query=query,
        categories=categories,
        raw_category=raw_category_of(task_id) if task_set == "masked" else "",
        repository=repository,
        commit=commit if repository else None,  # our format keeps the commit under repository
        answer=answer,
        landmarks=landmarks,
        entrypoint=entrypoint,
        # checked for every set, but run (kept) only for Masked tasks, as the reference does
        pre_executed=tuple(
            cell
            for cell in (
                _super_typed_cell(_decoded_cell(item, f"pre_execute_cells[{i}]", fail), i, fail)
                for i, item in enumerate(pre_executed)
            )
            if task_set == "masked"
        ),
        solution=_super_solution(row.get("solution"), fail),
        image=SUPER_IMAGE,
        source=path,
        line=line,
    )


def _super_answer(raw: Any, fail: _Fail) -> Any:
    """SUPER stores the gold answer as a string holding JSON; empty means none (Auto)."""
    if not isinstance(raw, str):
        return raw
    if not raw.strip():
        return None
    try:
        return json.loads(raw)
    except json.JSONDecodeError as error:
        raise fail(
            f"answer is not valid JSON ({error.msg} at column {error.colno})",
            field="answer",
            value=raw,
            hint='the answer must be a string holding JSON, e.g. "{\\"accuracy\\": 0.27}"',
        ) from None


def _super_strings(raw: Any, field: str, fail: _Fail) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(item, str) for item in raw):
        raise fail(f"{field} must be a list of strings", field=field, value=raw)
    return tuple(raw)


def _super_optional_string(raw: Any, field: str, fail: _Fail) -> str | None:
    if raw is None or raw == "":
        return None
    if not isinstance(raw, str):
        raise fail(f"{field} must be a string", field=field, value=raw)
    return raw


def _decoded_cell(item: Any, where: str, fail: _Fail) -> dict:
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


def _super_typed_cell(
    item: dict, index: int, fail: _Fail, field: str = "pre_execute_cells"
) -> Cell:
    """{"type": "execute"|"edit", "content": "..."} -> Cell; edits are in SUPER's edit format."""
    where = f"{field}[{index}]"
    kind, content = item.get("type"), item.get("content")
    if not isinstance(content, str):
        raise fail(f"{where}.content must be a string", field=f"{where}.content", value=content)
    if kind == "execute":
        return Cell(kind="execute", code=content)
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
        return Cell(
            kind="edit", file=edit.file, before=edit.before, after=edit.after, context=edit.context
        )
    raise fail(
        f"{where} has an unknown cell type",
        field=f"{where}.type",
        value=kind,
        hint="expected 'execute' or 'edit'",
    )


def _super_solution(raw: Any, fail: _Fail) -> tuple[Cell, ...]:
    """The gold cells, in whichever shape the row holds them.

    SUPER's exact shape is not documented, so accept: a list (or a JSON string of a list, or a
    notebook with "cells") whose items are code strings, {"type", "content"} objects like
    pre_execute_cells, notebook cells {"cell_type", "source"} (markdown skipped), or JSON strings
    of those objects.
    """
    if raw is None or raw == "":
        return ()
    if isinstance(raw, str):
        try:
            decoded = json.loads(raw)
        except json.JSONDecodeError:
            decoded = None
        raw = decoded if isinstance(decoded, (list, dict)) else [raw]
    if isinstance(raw, dict):
        raw = raw["cells"] if isinstance(raw.get("cells"), list) else [raw]
    if not isinstance(raw, list):
        raise fail("solution must be a list of cells", field="solution", value=raw)
    cells: list[Cell] = []
    for index, item in enumerate(raw):
        where = f"solution[{index}]"
        if isinstance(item, str) and item.lstrip().startswith("{"):
            try:
                decoded = json.loads(item)
            except json.JSONDecodeError:
                decoded = None
            if isinstance(decoded, dict) and ("type" in decoded or "cell_type" in decoded):
                item = decoded
        if isinstance(item, str):
            if item.strip():
                cells.append(Cell(kind="execute", code=item))
        elif isinstance(item, dict) and "type" in item:
            cells.append(_super_typed_cell(item, index, fail, field="solution"))
        elif isinstance(item, dict) and "cell_type" in item:
            if item["cell_type"] != "code":
                continue  # markdown and raw cells are commentary
            source = item.get("source", "")
            if isinstance(source, list) and all(isinstance(part, str) for part in source):
                source = "".join(source)
            if not isinstance(source, str):
                raise fail(
                    f"{where}.source must be a string or a list of strings",
                    field=f"{where}.source",
                    value=source,
                )
            if source.strip():
                cells.append(Cell(kind="execute", code=source))
        else:
            raise fail(
                f"{where} is not a cell",
                field=where,
                value=item,
                hint='expected code, {"type": ..., "content": ...} or {"cell_type": ..., "source": ...}',
            )
    return tuple(cells)


# --------------------------------------------------------------------------- writing YAML


def _cell_to_dict(cell: Cell) -> dict:
    if cell.kind == "execute":
        return {"execute": cell.code}
    edit = {"file": cell.file, "before": cell.before, "after": cell.after}
    if cell.context:
        edit["context"] = cell.context
    return {"edit": edit}


def task_to_dict(task: Task) -> dict:
    """The task as our YAML mapping, fields in the format's order, empty and default ones left out."""
    data: dict[str, Any] = {"id": task.id, "set": task.set}
    implied = categories_from_id(task.id) if task.set == "masked" else ()
    if task.categories or task.categories != implied:
        data["categories"] = list(task.categories)
    if task.repository:
        data["repository"] = {"url": task.repository}
        if task.commit:
            data["repository"]["commit"] = task.commit
    data["query"] = task.query
    if task.answer is not None:
        data["answer"] = task.answer
    if task.landmarks:
        data["landmarks"] = list(task.landmarks)
    if task.entrypoint:
        data["entrypoint"] = task.entrypoint
    if task.pre_executed:
        data["pre_executed"] = [_cell_to_dict(cell) for cell in task.pre_executed]
    if task.solution:
        data["solution"] = [_cell_to_dict(cell) for cell in task.solution]
    limits = {name: value for name, value in vars(task.limits).items() if value is not None}
    if limits:
        data["limits"] = limits
    if task.image != YAML_IMAGE:
        data["image"] = task.image
    return data


class _TaskDumper(yaml.SafeDumper):
    """Block scalars for multi-line text, list items indented under their key, no aliases."""

    def ignore_aliases(self, data: Any) -> bool:
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
