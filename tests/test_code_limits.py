"""Issue 30 item 6: no function of pytest_super is over 80 lines (its `def` line to its last line,
decorators excluded). The cyclomatic-complexity limit (15) is ruff's C901 rule, configured in
pyproject.toml ([tool.ruff.lint.mccabe]) and run by `make lint`; this test checks that the rule is
configured too, so neither limit can be dropped silently."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest_super

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[import-not-found]

MAX_LINES = 80
MAX_COMPLEXITY = 15
PACKAGE = Path(pytest_super.__file__).parent
PYPROJECT = PACKAGE.parent / "pyproject.toml"


def _long_functions(root: Path) -> list[str]:
    """Every function (methods and nested ones too) under `root` longer than MAX_LINES, as
    `path:line qualified.name (N lines)`."""
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        found += _walk(tree, path.relative_to(root.parent).as_posix(), "")
    return found


def _walk(node: ast.AST, where: str, prefix: str) -> list[str]:
    found = []
    for child in ast.iter_child_nodes(node):
        name = prefix
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            name = f"{prefix}{child.name}"
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            lines = (child.end_lineno or child.lineno) - child.lineno + 1
            if lines > MAX_LINES:
                found.append(f"{where}:{child.lineno} {name} ({lines} lines)")
        found += _walk(child, where, f"{name}." if name != prefix else prefix)
    return found


def test_no_function_is_over_80_lines() -> None:
    long = _long_functions(PACKAGE)
    assert not long, f"functions over {MAX_LINES} lines (split them by what the parts do):\n" + (
        "\n".join(long)
    )


def test_the_walk_finds_a_long_nested_function(tmp_path: Path) -> None:
    """The check itself can fail: a method and a nested function over the limit are named."""
    body = "\n".join(f"        x{i} = {i}" for i in range(MAX_LINES))
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "m.py").write_text(
        f"class C:\n    def long(self):\n{body}\n\n"
        f"def outer():\n    def inner():\n{body}\n    return inner\n"
        f"def short():\n    return 1\n",
        encoding="utf-8",
    )
    long = _long_functions(package)
    assert [entry.split(" (")[0] for entry in long] == [
        "pkg/m.py:2 C.long",
        f"pkg/m.py:{MAX_LINES + 4} outer",
        f"pkg/m.py:{MAX_LINES + 5} outer.inner",
    ]


def test_ruff_checks_cyclomatic_complexity_at_15() -> None:
    lint = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]["ruff"]["lint"]
    selected = lint.get("select", []) + lint.get("extend-select", [])
    assert any("C901".startswith(rule) for rule in selected), f"C901 not in {selected}"
    assert lint.get("mccabe", {}).get("max-complexity") == MAX_COMPLEXITY


MAX_MODULE_LINES = 600


def test_no_module_is_over_600_lines() -> None:
    """Issue 45 item 7: a module a reader takes in whole; a longer one is split by what its parts
    do (as cli/, scoring/ and kernels/jupyter/ are)."""
    long = {
        path.relative_to(PACKAGE).as_posix(): lines
        for path in sorted(PACKAGE.rglob("*.py"))
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert not long, (
        f"modules over {MAX_MODULE_LINES} lines (split them by what the parts do): {long}"
    )
