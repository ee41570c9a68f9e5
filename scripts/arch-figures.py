"""The architecture's figures of issue 45's "Done when", for a closing note's before and after:
modules, lines, the longest modules and classes, uses of `Any`, and whether `mypy --strict` is
clean.

    .venv/bin/python scripts/arch-figures.py                 # this checkout's pytest_super/
    .venv/bin/python scripts/arch-figures.py --rev 31c1d49   # a commit's, exported to a temp folder
    .venv/bin/python scripts/arch-figures.py --no-mypy       # without the type check (~1 min)

Each figure is printed with the command that gives it by hand where there is one:
`find pytest_super -name '*.py' | xargs wc -l` for the lines, `grep -rw Any pytest_super | wc -l`
for the uses of `Any` (lines that name it), `mypy` (pyproject.toml's [tool.mypy]: strict) for the
type check. Classes are measured from their `class` line to their last line, nested ones too.
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

PACKAGE = "pytest_super"
#: issue 45's size limit: no module over this many lines
MODULE_LIMIT = 600
TOP = 10


def line_count(path: Path) -> int:
    """Lines as `wc -l` counts them (newline characters)."""
    return path.read_bytes().count(b"\n")


def modules(tree: Path) -> dict[str, int]:
    """Each module of the package (path relative to `tree`) and its lines."""
    return {str(p.relative_to(tree)): line_count(p) for p in sorted((tree / PACKAGE).rglob("*.py"))}


def classes(tree: Path) -> list[tuple[int, str]]:
    """(lines, module:Class) of every class the package defines."""
    found = []
    for path in sorted((tree / PACKAGE).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_bytes(), str(path))):
            if isinstance(node, ast.ClassDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                found.append((lines, f"{path.relative_to(tree)}:{node.name}"))
    return sorted(found, key=lambda item: (-item[0], item[1]))


def any_uses(tree: Path) -> int:
    """Lines that name `Any` as a word, as `grep -rw Any pytest_super | wc -l` counts them (every
    file under the package, as grep reads it)."""
    word = re.compile(rb"(?<![A-Za-z0-9_])Any(?![A-Za-z0-9_])")
    return sum(
        1
        for path in (tree / PACKAGE).rglob("*")
        if path.is_file()
        for line in path.read_bytes().splitlines()
        if word.search(line)
    )


def mypy_result(tree: Path) -> str:
    """`mypy`'s last line in `tree` (its pyproject.toml's configuration: strict)."""
    done = subprocess.run(
        [sys.executable, "-m", "mypy"], cwd=tree, capture_output=True, text=True, check=False
    )
    lines = (done.stdout or done.stderr).strip().splitlines()
    last = lines[-1] if lines else f"no output (exit status {done.returncode})"
    return f"{'clean' if done.returncode == 0 else 'NOT clean'}: {last}"


def report(tree: Path, label: str, *, type_check: bool) -> list[str]:
    sizes = modules(tree)
    over = {name: n for name, n in sizes.items() if n > MODULE_LIMIT}
    out = [
        f"architecture figures of {label}",
        f"  modules (find {PACKAGE} -name '*.py' | wc -l): {len(sizes)}",
        f"  lines (find {PACKAGE} -name '*.py' | xargs wc -l): {sum(sizes.values())}",
        f"  modules over {MODULE_LIMIT} lines: {len(over)}",
        f"  uses of Any (grep -rw Any {PACKAGE} | wc -l): {any_uses(tree)}",
    ]
    if type_check:
        out.append(f"  mypy --strict (mypy): {mypy_result(tree)}")
    out.append(f"  the {TOP} longest modules (lines):")
    ranked = sorted(sizes.items(), key=lambda item: (-item[1], item[0]))[:TOP]
    out += [f"    {n:6d}  {name}" for name, n in ranked]
    out.append(f"  the {TOP} longest classes (lines, class line to last line):")
    out += [f"    {n:6d}  {name}" for n, name in classes(tree)[:TOP]]
    return out


def exported(rev: str, into: Path) -> Path:
    """The tree of commit `rev` of this checkout, written under `into`."""
    root = Path(__file__).resolve().parent.parent
    archive = subprocess.run(
        ["git", "-C", str(root), "archive", "--format=tar", rev], capture_output=True, check=True
    ).stdout
    with tempfile.TemporaryFile() as buffer:
        buffer.write(archive)
        buffer.seek(0)
        with tarfile.open(fileobj=buffer) as tar:
            tar.extractall(into, filter="data")
    return into


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tree", nargs="?", default=None, help="a checkout (default: this one)")
    parser.add_argument("--rev", help="measure this commit of this checkout instead")
    parser.add_argument("--no-mypy", action="store_true", help="leave out the type check")
    args = parser.parse_args(argv)
    if args.rev:
        with tempfile.TemporaryDirectory(prefix="arch-figures-") as folder:
            tree = exported(args.rev, Path(folder))
            print("\n".join(report(tree, f"commit {args.rev}", type_check=not args.no_mypy)))
        return 0
    tree = Path(args.tree or Path(__file__).resolve().parent.parent).resolve()
    print("\n".join(report(tree, str(tree), type_check=not args.no_mypy)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
