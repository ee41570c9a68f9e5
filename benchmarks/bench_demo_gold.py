"""Each Expert demo task's gold solution, once: its seconds, against the 2-minute budget per task and
against a baseline measured in the same run of this script.

    .venv/bin/python benchmarks/bench_demo_gold.py [--sets expert] [--rounds 1]

tests/test_demo_repos.py::test_gold_solution_runs checks that each gold solution runs and scores
(accuracy, landmarks, determinism); it no longer bounds the time, which the machine's load decided
(issue 42). The figure is printed here. Each task runs exactly as the test runs it
(tests/support/demo_gold.py): a fresh virtualenv finding ipykernel in a shared base virtualenv, a
local kernel of it, git redirected to the demo repositories' mirrors, the project's runner with the
gold agent. The baseline is the same machinery without the task's work: a fresh virtualenv, its
kernel's start and one trivial cell (a one-cell gold task), through the same runner.

Printed: each task's seconds (the runner's `duration_s`, what the test recorded), its ratio to the
120 s budget, and its ratio to the baseline's median. Always exits 0: it reports, it does not judge.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.demo_gold import (  # noqa: E402
    TASK_FILES,
    make_base_site,
    make_venv,
    mirrors,
    run_gold,
    task_set,
)
from tests.support.projects import task_yaml  # noqa: E402

#: the budget per demo task (the demo benchmark: each gold solution within 2 minutes)
TASK_BUDGET_S = 120.0


def one_run(path: Path, base_site: Path, mirror_dir: Path, scratch: Path) -> tuple[float, str]:
    """(the runner's seconds, what went wrong or "") of one gold run of `path`, in a fresh
    virtualenv and working directory under `scratch` (removed after)."""
    workdir = Path(tempfile.mkdtemp(prefix=f"{path.stem}-", dir=scratch))
    try:
        venv = make_venv(base_site, workdir)
        result = run_gold(path, venv, mirror_dir, workdir)
        scored = result.accuracy == 1.0 or result.script_executed == 1.0
        return result.duration_s, "" if scored else f" (NOT SCORED: {result.last_observation})"
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default="expert", help="comma-separated: expert,masked,auto")
    parser.add_argument("--rounds", type=int, default=1, help="baseline runs: rounds + 2")
    args = parser.parse_args()
    sets = set(args.sets.split(","))
    tasks = [p for p in TASK_FILES if task_set(p) in sets]
    scratch = Path(tempfile.mkdtemp(prefix="bench-demo-gold-"))
    try:
        started = time.monotonic()
        base_site = make_base_site(scratch / "base-venv")
        mirror_dir = mirrors.build_mirrors(scratch / "mirrors")
        print(f"set-up (base virtualenv, mirrors): {time.monotonic() - started:.1f} s")
        trivial = scratch / "expert" / "trivial.yaml"  # its folder names its set
        trivial.parent.mkdir()
        trivial.write_text(task_yaml("trivial", "print('{\"x\": 1}')"))
        baseline: list[float] = []
        figures: list[tuple[str, float, str]] = []
        # the baseline before and after the tasks (the load changes)
        for _ in range(args.rounds + 2):
            baseline.append(one_run(trivial, base_site, mirror_dir, scratch)[0])
            if len(baseline) == 1:
                for path in tasks:
                    seconds, note = one_run(path, base_site, mirror_dir, scratch)
                    figures.append((f"{path.parent.name}/{path.stem}", seconds, note))
        base = statistics.median(baseline)
        print(
            "baseline (fresh virtualenv, kernel start, one trivial cell): "
            + ", ".join(f"{s:.1f} s" for s in baseline)
            + f"; median {base:.2f} s"
        )
        print(f"{'task':<28} {'seconds':>8} {'/ 120 s':>8} {'/ baseline':>11}")
        for name, seconds, note in figures:
            print(
                f"{name:<28} {seconds:8.1f} {seconds / TASK_BUDGET_S:8.2f} "
                f"{seconds / base:11.1f}{note}"
            )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
