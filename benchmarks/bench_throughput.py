"""Throughput of a gold run on xdist, with and without the kernel pool, at -n 1 and -n 2.

Run: `.venv/bin/python benchmarks/bench_throughput.py [--tasks 20] [--sleep 1]` (needs the engine
and the default image; builds it offline if missing). Each task is a gold cell that sleeps
`--sleep` seconds and prints its answer, in its own container. The script writes a throwaway
project per mode (fresh report folders), runs `pytest -n 1` and `pytest -n 2` on it with the pool
(`--super-pool`, the default: the next task's kernel is made while a task runs, containers are
removed in the background) and without it (`--no-super-pool`: made when asked, removed before the
next task), and prints wall times, the harness overhead per task (worker time not spent in the
tasks' own cells: `(wall x workers - tasks x sleep) / tasks`), the pool's speed-up at -n 1 (target
>= 1.8, overhead target <= 0.2 s a task), the speed-up n1/n2 (target >= 1.7 on 2 cores, set before
the pool) and the peak memory (VmHWM) of the controller and of each worker, which a conftest.py in
the project writes when each pytest process ends. The machine's load average is printed before and
after: the figures are CPU-sensitive. Always exits 0: it reports, it does not judge.
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

from pytest_super.kernels.docker.cleanup import cleanup_containers
from pytest_super.kernels.docker.engine import docker_client_for
from pytest_super.kernels.docker.image import build_image

TARGET_RATIO = 1.7  # n1/n2, set (issue 9) when the harness's own waits dominated -n 1
TARGET_POOL_SPEEDUP = 1.8  # -n 1 with the pool against without it (issue 15)
TARGET_OVERHEAD_S = 0.2  # harness seconds per task at -n 1 with the pool (issue 15)

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
    pool: bool
    wall_s: float
    passed: int
    exit_code: int
    peak_kb: dict[str, int] = field(default_factory=dict)  # process name -> VmHWM

    def overhead_s(self, tasks: int, sleep_s: float) -> float:
        """Worker seconds per task not spent in the tasks' own cells."""
        return (self.wall_s * self.workers - tasks * sleep_s) / tasks

    @property
    def label(self) -> str:
        return f"-n {self.workers} {'pool' if self.pool else 'no pool'}"

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


def measure(root: Path, workers: int, pool: bool) -> Measurement:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    command = [sys.executable, "-m", "pytest", "tasks", "--super-agent=gold", "-q"]
    command += ["-p", "no:cacheprovider", "-n", str(workers), "--dist", "worksteal"]
    command.append("--super-pool" if pool else "--no-super-pool")
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
        pool=pool,
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
        f"{args.tasks} gold tasks, each one cell sleeping {args.sleep:g} s"
    )
    print(f"load average before: {_load()}\n")
    runs: dict[tuple[int, bool], Measurement] = {}
    for workers in (1, 2):
        for pool in (True, False):
            with tempfile.TemporaryDirectory(prefix=f"bench-throughput-n{workers}-") as tmp:
                root = Path(tmp)
                write_project(root, args.tasks, args.sleep)
                try:
                    runs[workers, pool] = measure(root, workers, pool)
                finally:
                    for run_dir in (root / "reports").glob("*"):
                        cleanup_containers(client, run_id=run_dir.name)

    header = ("mode", "wall s", "tasks/min", "overhead s/task", "passed", "ctl MB", "worker MB")
    rows = [
        (
            m.label,
            f"{m.wall_s:.1f}",
            f"{60 * args.tasks / m.wall_s:.1f}",
            f"{m.overhead_s(args.tasks, args.sleep):.2f}",
            f"{m.passed}/{args.tasks}",
            f"{m.controller_mb:.0f}",
            f"{m.worker_mb:.0f}",
        )
        for m in runs.values()
    ]
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]
    for row in (header, tuple("-" * w for w in widths), *rows):
        print("  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)))
    print(f"\nload average after: {_load()}")

    pooled, plain = runs[1, True], runs[1, False]
    overhead = pooled.overhead_s(args.tasks, args.sleep)
    speedup = plain.wall_s / pooled.wall_s
    print(
        f"-n 1 harness overhead with the pool: {overhead:.2f} s/task "
        f"({_verdict(overhead <= TARGET_OVERHEAD_S)} <= {TARGET_OVERHEAD_S}); without: "
        f"{plain.overhead_s(args.tasks, args.sleep):.2f} s/task"
    )
    print(
        f"-n 1 speed-up of the pool: {speedup:.2f} "
        f"({_verdict(speedup >= TARGET_POOL_SPEEDUP)} >= {TARGET_POOL_SPEEDUP})"
    )
    # the most any pool could give: no harness time at all, only the tasks' own seconds (the
    # issue's 1.8x was set against 43.3 s without a pool; that path is faster now)
    ceiling = plain.wall_s / (args.tasks * args.sleep)
    print(f"-n 1 ceiling of that speed-up (no-pool wall / the tasks' own work): {ceiling:.2f}")
    for pool in (True, False):
        ratio = runs[1, pool].wall_s / runs[2, pool].wall_s
        print(
            f"speed-up n1/n2 {'with' if pool else 'without'} the pool: {ratio:.2f} "
            f"({_verdict(ratio >= TARGET_RATIO)} >= {TARGET_RATIO})"
        )
    for m in runs.values():
        per = ", ".join(f"{k} {v / 1024:.0f} MB" for k, v in sorted(m.peak_kb.items()))
        print(f"peak memory (VmHWM) {m.label}: {per}")
        if m.exit_code != 0 or m.passed != args.tasks:
            print(f"  note: {m.label} exited {m.exit_code} with {m.passed} passed")
    return 0


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _verdict(met: bool) -> str:
    return "meets" if met else "below the target"


if __name__ == "__main__":
    sys.exit(main())
