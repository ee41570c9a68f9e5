"""Our task files: YAML parsed safely (duplicate keys refused, `1e308` a number), with each
field's line kept for error messages, then validated (`validation.task_from_mapping`)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from pytest_super import safe_read
from pytest_super.errors import TaskFileError
from pytest_super.tasks.model import Task
from pytest_super.tasks.validation import (
    Location,
    Origin,
    read_task_file,
    task_from_mapping,
    type_name,
)

_HINTS = {
    "set": "put the file under tasks/<set>/ (expert, masked or auto) or add `set: expert` "
    "(or masked, auto)",
    "answer": "add `answer:` with the gold values, e.g. `answer: {accuracy: 0.82}`",
    "entrypoint": "add `entrypoint: <script>`, e.g. `entrypoint: train.py`",
}


def load_yaml_task(path: Path) -> Task:
    """Load and validate one task file (YAML). Raises TaskFileError naming file, field and value."""
    path = Path(path)
    data = read_task_file(path, safe_read.SMALL_MAX_BYTES)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise TaskFileError(
            str(path), f"not UTF-8 text ({error.reason})", hint="save the file as UTF-8"
        ) from None
    data, root = _parse_yaml(path, text)
    if not isinstance(data, dict):
        found = "an empty file" if data is None else type_name(data)
        raise TaskFileError(
            str(path),
            f"a task file must be a YAML mapping (id: ..., query: ...), not {found}",
            line=None if root is None else root.start_mark.line + 1,
            hint="see the task format in the README",
        )
    origin = Origin(
        str(path), line_at=lambda location, key: _line_at(root, location, key=key), hints=_HINTS
    )
    return task_from_mapping(data, origin)


class _TaskLoader(yaml.SafeLoader):
    """PyYAML's safe loader, but `1e308` and `2E-5` are numbers (YAML 1.2), not strings."""


_TaskLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


#: how much of the line a YAML error points at is quoted in the message
NEAR_CHARS = 40
#: the most nodes a task file may stand for once its aliases are expanded. The largest task of
#: SUPER's sets (converted to YAML) has a few hundred; a "billion laughs" file of 524 bytes (nested
#: anchors and aliases) stands for billions, and expanding it stalled collection for minutes.
MAX_EXPANDED_NODES = 100_000


def _parse_yaml(path: Path, text: str) -> tuple[Any, yaml.Node | None]:  # Any: PyYAML's documents
    """The document and its node tree (for line numbers), from one safe parse."""
    loader = _TaskLoader(text)
    try:
        root = loader.get_single_node()
        if root is not None:
            _check_expansion(path, root)
            _check_duplicate_keys(path, root, set())
        data = None if root is None else loader.construct_document(root)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line = None if mark is None else mark.line + 1
        message = f"malformed YAML: {error.problem or error}"
        lines = text.splitlines()
        if line is not None and line <= len(lines):
            near = lines[line - 1].strip()
            if len(near) > NEAR_CHARS:  # a short excerpt, never a whole line of the file
                near = near[:NEAR_CHARS] + "..."
            message += f" near {near!r}"
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
    except RecursionError:
        raise TaskFileError(
            str(path),
            "the YAML is nested too deeply to read",
            hint="a task file nests a few levels (fields, cells, answer keys)",
        ) from None
    finally:
        loader.dispose()
    return data, root


def _check_expansion(path: Path, root: yaml.Node) -> None:
    """Refuse a document whose aliases stand for more than MAX_EXPANDED_NODES nodes, counting each
    shared node once per use without expanding anything (each node is visited once)."""
    sizes: dict[int, int] = {}

    def size(node: yaml.Node) -> int:
        known = sizes.get(id(node))
        if known is not None:
            return known
        sizes[id(node)] = 1  # a node that contains itself (a recursive alias) counts once
        total = 1
        if isinstance(node, yaml.MappingNode):
            total += sum(size(k) + size(v) for k, v in node.value)
        elif isinstance(node, yaml.SequenceNode):
            total += sum(size(item) for item in node.value)
        total = min(total, MAX_EXPANDED_NODES + 1)
        sizes[id(node)] = total
        return total

    if size(root) > MAX_EXPANDED_NODES:
        raise TaskFileError(
            str(path),
            f"the YAML stands for more than {MAX_EXPANDED_NODES:,} values once its aliases (*name) "
            "are expanded",
            hint="write the values out, or use fewer nested anchors (&name) and aliases",
        )


def _check_duplicate_keys(path: Path, node: yaml.Node, seen_nodes: set[int]) -> None:
    """YAML keeps the last of two equal keys silently; in a task file that is always a mistake.
    Each node is checked once, however many aliases point at it."""
    if id(node) in seen_nodes:
        return
    seen_nodes.add(id(node))
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
            _check_duplicate_keys(path, value, seen_nodes)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            _check_duplicate_keys(path, item, seen_nodes)


def _line_at(root: yaml.Node | None, location: Location, *, key: bool = False) -> int | None:
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
