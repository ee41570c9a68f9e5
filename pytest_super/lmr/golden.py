"""The golden function, or the golden method of `class_name`, put in place of the masked one.

Pure text: the golden file is read on the host and never enters the box; the masked goal file is
read from the box, the function's definition (decorators included) replaced by the golden one's
source, indented as the masked one stands.
"""

from __future__ import annotations

import ast
import textwrap

from pytest_super.errors import TaskSetupError

Function = ast.FunctionDef | ast.AsyncFunctionDef


def find_function(source: str, name: str, class_name: str | None, where: str) -> Function:
    """The definition of `name` (a method of `class_name` when given) in `source`."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise TaskSetupError(f"{where}: not valid Python ({exc})") from None
    scope: list[ast.stmt] = tree.body
    if class_name:
        owner = next(
            (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == class_name),
            None,
        )
        if owner is None:
            raise TaskSetupError(f"{where}: no class {class_name!r}")
        scope = owner.body
    found = [n for n in scope if isinstance(n, Function) and n.name == name]
    if not found:
        owner_text = f" in class {class_name!r}" if class_name else " at module level"
        raise TaskSetupError(f"{where}: no function {name!r}{owner_text}")
    return found[-1]  # the definition that stands, as Python binds the name


def _span(node: Function) -> tuple[int, int]:
    """The 0-based first and last+1 lines of a definition, its decorators included."""
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
    assert node.end_lineno is not None
    return first, node.end_lineno


def function_text(source: str, name: str, class_name: str | None, where: str) -> str:
    """The definition of `name` in `source` (decorators included), dedented."""
    node = find_function(source, name, class_name, where)
    start, end = _span(node)
    return textwrap.dedent("".join(source.splitlines(keepends=True)[start:end]))


def put_function(masked: str, text: str, name: str, class_name: str | None, *, where: str) -> str:
    """`masked` with the definition of `name` (in `class_name`) replaced by `text`, a whole
    definition, indented as the masked one stands (`where`: the masked file's name)."""
    target = find_function(masked, name, class_name, where)
    masked_lines = masked.splitlines(keepends=True)
    first, last = _span(target)
    indent = masked_lines[first][: len(masked_lines[first]) - len(masked_lines[first].lstrip())]
    body = textwrap.indent(text, indent, lambda line: bool(line.strip()))
    if not body.endswith("\n"):
        body += "\n"
    return "".join(masked_lines[:first]) + body + "".join(masked_lines[last:])


def put_golden(
    masked: str, golden: str, name: str, class_name: str | None, *, where: tuple[str, str]
) -> str:
    """`masked` with the definition of `name` replaced by the one of `golden` (`where`: the two
    files' names, for the errors)."""
    find_function(masked, name, class_name, where[0])  # the masked file's error comes first
    text = function_text(golden, name, class_name, where[1])
    return put_function(masked, text, name, class_name, where=where[0])
