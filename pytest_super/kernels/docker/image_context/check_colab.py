"""The colab image's build check: the installed set is exactly the lock, and the reference imports.

Run by Dockerfile.colab as its last step (a failure fails the build):
    python check_colab.py colab.lock requirements-colab.txt
1. every distribution installed in the venv is in colab.lock at its locked version, and every
   locked distribution that applies to this Python is installed (nothing more, nothing less);
2. every top-level package of requirements-colab.txt (SUPER's reference set) imports; a package
   that ships no module of its own (a metapackage such as jupyter 1.0.0) must be installed.
Prints one line per package; exits 1 naming every problem.
"""

from __future__ import annotations

import importlib
import importlib.metadata as metadata
import re
import sys
from pathlib import Path

from packaging.markers import Marker
from packaging.utils import canonicalize_name

PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)\s*(?:;\s*([^\\]+?))?\s*\\?$")


def pins(path: Path) -> dict[str, str]:
    """name -> version of the `name==version [; marker]` lines whose marker holds here."""
    found: dict[str, str] = {}
    for line in path.read_text().splitlines():
        match = PIN.match(line.strip())
        if match is None:
            continue
        name, version, marker = match.groups()
        if marker and not Marker(marker).evaluate():
            continue
        found[canonicalize_name(name)] = version
    return found


def installed() -> dict[str, str]:
    return {canonicalize_name(d.metadata["Name"]): d.version for d in metadata.distributions()}


def modules_of(distribution: str) -> list[str]:
    """The top-level modules a distribution installed (from its RECORD), private ones left out."""
    names: set[str] = set()
    for file in metadata.distribution(distribution).files or ():
        top = file.parts[0]
        # a package folder, or a module file at the top of site-packages
        name = (
            top if len(file.parts) > 1 else top.removesuffix(".py") if top.endswith(".py") else ""
        )
        if name.isidentifier() and not name.startswith("_"):
            names.add(name)
    return sorted(names)


def main(lock: Path, reference: Path) -> int:
    problems: list[str] = []
    locked, present = pins(lock), installed()
    for name, version in sorted(present.items()):
        if name not in locked:
            problems.append(f"{name}=={version} is installed but not in {lock.name}")
        elif locked[name] != version:
            problems.append(f"{name} is {version}, {lock.name} pins {locked[name]}")
    problems += [
        f"{n}=={v} is locked but not installed" for n, v in locked.items() if n not in present
    ]
    for name in pins(reference):
        if name not in present:
            problems.append(f"{name}: not installed")
            continue
        modules = modules_of(name)
        for module in modules:
            try:
                importlib.import_module(module)
            except Exception as exc:  # any failure to import is a broken environment
                problems.append(f"{name}: import {module} failed: {type(exc).__name__}: {exc}")
        print(f"{name}=={present[name]}: {', '.join(modules) or '(no module: metapackage)'}")
    for problem in problems:
        print(f"PROBLEM: {problem}", file=sys.stderr)
    print(f"{len(present)} distributions installed, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
