"""Throughput of a gold run on xdist: the same quick tasks with one worker and with two.

Run: `.venv/bin/python benchmarks/bench_throughput.py [--tasks 20] [--sleep 1]` (needs the engine
and the default image; builds it offline if missing). Each task is a gold cell that sleeps
`--sleep` seconds and prints its answer, in its own container. The script writes a throwaway
project per mode (fresh report folders), runs `pytest -n 1` and `pytest -n 2` on it, and prints
wall times, the speed-up n1/n2 (target >= 1.7 on 2 cores) and the peak memory (VmHWM) of the
controller and of each worker, which a conftest.py in the project writes when each pytest
process ends. Always exits 0: it reports, it does not judge.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from pytest_super.kernels import cleanup_containers, docker_client_for
from pytest_super.kernels.image import build_image

TARGET_RATIO = 1.7

MEMORY_CONFTEST = '''\
"""Writes the peak resident memory (VmHWM) of this pytest process to mem/<name> at its end."""
import os
import pathlib


def pytest_unconfigure(config):
    name = os.environ.get("PYTEST_XDIST_WORKER", "controller")
    status = pathlib.Path("/proc/self/status").read_text()
    peak_kb = next(int(ln.split()[1]) for ln in status.splitlines() if ln.startswith("VmHWM:"))
    folder = pathlib.Path(str(config.rootpath), "mem")
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(str(peak_kb))
'''


@dataclass
class Measurement:
    """One pytest run of the benchmark project."""

    workers: int
    wall_s: float
    passed: int
    exit_code: int
    peak_kb: dict[str, int] = field(default_factory=dict)  # process name -> VmHWM

    @property
    def controller_mb(self) -> float:
        return self.peak_kb.get("controller", 0) / 1024

    @property
    def worker_mb(self) -> float:
        values = [v for k, v in self.peak_kb.items() if k != "controller"]
        return max(values, default=0) / 1024


def write_project(root: Path, tasks: int, sleep_s: float) -> None:
    (root / "pytest.ini").write_text("[pytest]\nsuper_tasks = tasks\n")
    (root / "conftest.py").write_text(MEMORY_CONFTEST)
    folder = root / "tasks" / "expert"
    folder.mkdir(parents=True)
    cell = f"import time\ntime.sleep({sleep_s})\nprint('quick {{}}')\nprint('{{\"x\": 1}}')"
    for i in range(tasks):
        task = {
            "id": f"quick{i:03}",
            "query": 'Report x as a json structured as follows: {"x": 0}.',
            "answer": {"x": 1},
            "solution": [{"execute": cell.replace("{}", str(i))}],
        }
        (folder / f"quick{i:03}.yaml").write_text(json.dumps(task))  # JSON is YAML


def measure(root: Path, workers: int) -> Measurement:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    command = [sys.executable, "-m", "pytest", "tasks", "--super-agent=gold", "-q"]
    command += ["-p", "no:cacheprovider", "-n", str(workers), "--dist", "worksteal"]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    results = next((root / "reports").iterdir()) / "results.jsonl"
    lines = [json.loads(ln) for ln in results.read_text().splitlines() if ln.strip()]
    if done.returncode != 0:
        print(done.stdout[-3000:], file=sys.stderr)
    peaks = {p.name: int(p.read_text()) for p in (root / "mem").iterdir()}
    return Measurement(
        workers=workers,
        wall_s=wall,
        passed=sum(r["outcome"] == "passed" for r in lines),
        exit_code=done.returncode,
        peak_kb=peaks,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20, help="number of tasks (20)")
    parser.add_argument("--sleep", type=float, default=1.0, help="seconds each task sleeps (1)")
    args = parser.parse_args(argv)

    image = build_image(offline=True, log=lambda line: None)
    client = docker_client_for(None)
    info = client.info()
    print(
        f"engine: {info.get('ServerVersion')}, {info.get('NCPU')} CPUs; image {image}; "
        f"{args.tasks} gold tasks, each one cell sleeping {args.sleep:g} s\n"
    )
    runs: list[Measurement] = []
    for workers in (1, 2):
        with tempfile.TemporaryDirectory(prefix=f"bench-throughput-n{workers}-") as tmp:
            root = Path(tmp)
            write_project(root, args.tasks, args.sleep)
            try:
                runs.append(measure(root, workers))
            finally:
                for run_dir in (root / "reports").glob("*"):
                    cleanup_containers(client, run_id=run_dir.name)

    header = ("mode", "wall s", "tasks/min", "passed", "controller MB", "worker MB (max)")
    rows = [
        (
            f"-n {m.workers}",
            f"{m.wall_s:.1f}",
            f"{60 * args.tasks / m.wall_s:.1f}",
            f"{m.passed}/{args.tasks}",
            f"{m.controller_mb:.0f}",
            f"{m.worker_mb:.0f}",
        )
        for m in runs
    ]
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]
    for row in (header, tuple("-" * w for w in widths), *rows):
        print("  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)))
    ratio = runs[0].wall_s / runs[1].wall_s
    verdict = "meets" if ratio >= TARGET_RATIO else "below"
    print(f"\nspeed-up n1/n2: {ratio:.2f} ({verdict} the target {TARGET_RATIO})")
    for m in runs:
        per = ", ".join(f"{k} {v / 1024:.0f} MB" for k, v in sorted(m.peak_kb.items()))
        print(f"peak memory (VmHWM) -n {m.workers}: {per}")
        if m.exit_code != 0 or m.passed != args.tasks:
            print(f"  note: -n {m.workers} exited {m.exit_code} with {m.passed} passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
