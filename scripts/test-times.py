#!/usr/bin/env python3
"""The suite's time per group and per module, from the JUnit file a run of it wrote.

`make test` and `make test-all` write reports/tests-junit.xml (the Makefile's TEST_RUN). This
script reads it and prints, for each group of docs/testing.md (`core`: what `make test` runs;
`long`: what `make test-all` adds), the number of tests, their summed time (setup, call and
teardown, as JUnit counts a test case) and the modules that took longest:

    .venv/bin/python scripts/test-times.py reports/tests-junit.xml

Which tests are long is asked of pytest itself (`pytest tests --collect-only -q -m long`, the
marks tests/conftest.py gives at collection), so the figures follow the checkout's own split.
Under `-n 2` the summed time is about twice the wall time the group would take alone.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def long_test_ids(marks: str) -> set[str]:
    """The node ids of the tests pytest collects under `-m long` (and `marks`)."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "tests",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            "-m",
            f"long and ({marks})",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode not in (0, 5):  # 5: nothing collected
        raise SystemExit(
            f"pytest --collect-only failed ({done.returncode}):\n{done.stderr[-2000:]}"
        )
    return {line for line in done.stdout.splitlines() if "::" in line}


def junit_key(nodeid: str) -> tuple[str, str]:
    """The (classname, name) pytest's JUnit writer gives the test `nodeid` (mangle_test_address)."""
    path, *parts = nodeid.split("::")
    module = path.removesuffix(".py").replace("/", ".")
    return ".".join([module, *parts[:-1]]), parts[-1]


def module_of(classname: str) -> str:
    """tests.attacks.test_x.TestC -> tests/attacks/test_x.py"""
    names = classname.split(".")
    while names and not names[-1].startswith("test_"):
        names.pop()
    return "/".join(names) + ".py" if names else classname


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("junit", type=Path, help="the JUnit file of a run of the suite")
    parser.add_argument("--marks", default="not colab and not guide", help="the run's -m")
    parser.add_argument("--top", type=int, default=12, help="modules shown per group")
    args = parser.parse_args()
    long_keys = {junit_key(nodeid) for nodeid in long_test_ids(args.marks)}
    seconds: dict[str, dict[str, float]] = {"core": defaultdict(float), "long": defaultdict(float)}
    counts = {"core": 0, "long": 0}
    for case in ET.parse(args.junit).getroot().iter("testcase"):
        key = (case.get("classname", ""), case.get("name", ""))
        if key not in long_keys and "@" in key[1]:  # xdist's loadgroup names it test@group
            key = (key[0], key[1].rsplit("@", 1)[0])
        group = "long" if key in long_keys else "core"
        counts[group] += 1
        seconds[group][module_of(key[0])] += float(case.get("time") or 0)
    for group in ("core", "long"):
        total = sum(seconds[group].values())
        print(f"{group}: {counts[group]} tests, {total:.0f} s summed ({total / 60:.1f} min)")
        ranked = sorted(seconds[group].items(), key=lambda kv: -kv[1])
        for module, spent in ranked[: args.top]:
            print(f"  {spent:8.1f} s  {module}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
