"""One pytest process driving a 2-node Ray cluster against local pytest-xdist, same tasks.

    .venv/bin/python benchmarks/bench_cluster.py [--tasks 40] [--sleep 2] [--in-flight 8]
    .venv/bin/python benchmarks/bench_cluster.py --in-flight 100 [--tasks 100] [--sleep 240]

Both runs get the same project: `--tasks` gold tasks, each one cell that sleeps `--sleep` seconds.

- local: `pytest -n K` (K xdist workers, the kernel pool on), on this machine's engine;
- cluster: `pytest --super-executor=ray --super-ray-concurrency K`, one pytest process, on a cluster
  of this machine (tests/support/ray_cluster.py: a head and two worker nodes, each with its own
  Docker engine, in a network namespace with only loopback).

Both share the same two cores here, so the ratio says what the cluster's dispatch costs, not what
more machines would give (benchmarks/bench_cluster_sim.py plans that). Then the controller's peak
memory (VmHWM of the pytest process and of its Ray driver's) with 100 tasks queued, at K = 2 and K = 8: what one more task
in flight costs the controller.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pytest_super.kernels.docker.image import build_image  # noqa: E402
from tests.support.projects import make_project, sleep_then_answer, task_yaml  # noqa: E402
from tests.support.ray_cluster import GIB, RayTestCluster  # noqa: E402

#: written into the project: the peak memory of the controller (the pytest process) and of its
#: Ray driver (a process of its own: executors/ray/driver.py), read from /proc at their end
PEAK_PLUGIN = """
import json, pathlib, os, resource

def _peak_kb(pid):
    status = pathlib.Path(f"/proc/{pid}/status").read_text()
    return next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM"))

def _ray_session(config):
    from pytest_super.executors.ray import pytest_loop as ray_session
    return config.stash.get(ray_session.SESSION_KEY, None)

import pytest

@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session):  # the run's end, before the run's record ends the driver
    result = yield
    ray = _ray_session(session.config)
    if ray is not None and ray.dispatcher.pid:  # the Ray driver's process, still running
        path = pathlib.Path(str(session.config.rootpath), "driver-peak-kb")
        path.write_text(_peak_kb(ray.dispatcher.pid))
    return result

def pytest_unconfigure(config):
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    pathlib.Path(str(config.rootpath), "controller-peak-kb").write_text(_peak_kb("self"))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    figures = {"cpu_s": usage.ru_utime + usage.ru_stime}
    session = _ray_session(config)
    if session is not None:
        figures["lags"] = session.report_lags
        figures["peak_in_flight"] = session.dispatcher.peak_in_flight
        figures["spans"] = session.dispatcher.spans
    pathlib.Path(str(config.rootpath), "controller-figures.json").write_text(json.dumps(figures))
"""


def project(root: Path, tasks: int, sleep: float) -> Path:
    made = make_project(
        root,
        {
            f"expert/b{i:03d}": task_yaml(f"b{i:03d}", sleep_then_answer(sleep))
            for i in range(tasks)
        },
    )
    (made / "conftest.py").write_text((made / "conftest.py").read_text() + PEAK_PLUGIN)
    return made


def passed(report_dir: Path) -> int:
    (run_dir,) = [p for p in report_dir.iterdir() if p.is_dir()]
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    return sum(json.loads(line)["outcome"] == "passed" for line in lines)


def timed(cmd: list[str], cwd: Path, run: object | None = None) -> float:
    started = time.monotonic()
    if run is None:
        done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
        code, out = done.returncode, done.stdout + done.stderr
    else:
        done = run.run(cmd, cwd=cwd, timeout=3600)  # type: ignore[attr-defined]
        code, out = done.returncode, done.stdout + done.stderr
    took = time.monotonic() - started
    if code != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({code}):\n{out[-4000:]}")
    return took


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (nearest rank) of `values`."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)] if ordered else float("nan")


def most_at_once(spans: list[tuple[float, float]]) -> int:
    """The most of the (start, end) spans that overlap at one time."""
    events = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans])
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def run_in_flight(args: argparse.Namespace, image: str, pytest: list[str], tmp: str) -> None:
    """One controller, K tasks in flight on two nodes of K/2 slots each (issue 33 item 4)."""
    k = args.in_flight
    per_node = math.ceil(k / 2)
    memory = per_node * memory_bytes(args.mem) + GIB  # Ray's accounting, with room to spare
    cpus = math.ceil(per_node * args.cpus)
    with RayTestCluster(image, nodes=2, num_cpus=cpus, memory=memory) as cluster:
        made = project(Path(tmp, "in-flight"), args.tasks, args.sleep)
        ray = [
            *pytest,
            "--super-executor=ray",
            f"--super-ray-concurrency={k}",
            f"--super-mem={args.mem}",
            f"--super-cpus={args.cpus:g}",
        ]
        took = timed(ray, made, cluster)
        assert passed(made / "reports") == args.tasks
    kb = peak_kb(made)
    figures = json.loads((made / "controller-figures.json").read_text())
    lags = figures["lags"]
    print(
        f"{args.tasks} tasks of one {args.sleep:g} s cell, --super-ray-concurrency={k}, "
        f"--super-mem={args.mem} --super-cpus={args.cpus:g}, 2 nodes, {os.cpu_count()} cores"
    )
    print(f"wall time:                                  {took:7.1f} s")
    print(f"most tasks in flight at the controller:     {figures['peak_in_flight']:7d}")
    print(f"most tasks running on the nodes at once:    {most_at_once(figures['spans']):7d}")
    print(f"controller peak memory (VmHWM, pytest + driver): {kb / 1024:7.1f} MB (target < 1024)")
    print(f"controller CPU time per task:               {figures['cpu_s'] / args.tasks:7.3f} s")
    print(f"task end on node -> report, p50:            {percentile(lags, 50):7.3f} s")
    print(f"task end on node -> report, p99:            {percentile(lags, 99):7.3f} s")


def peak_kb(made: Path) -> int:
    """The controller's peak memory: its pytest process's and its Ray driver's (kB)."""
    driver = made / "driver-peak-kb"
    return int((made / "controller-peak-kb").read_text()) + (
        int(driver.read_text()) if driver.exists() else 0
    )


def memory_bytes(size: str) -> int:
    from docker.utils import parse_bytes

    return int(parse_bytes(size))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--sleep", type=float, default=2.0)
    parser.add_argument("--in-flight", type=int, default=8)
    parser.add_argument("--queued", type=int, default=100)
    parser.add_argument("--mem", default="256m", help="--super-mem of the in-flight run")
    parser.add_argument("--cpus", type=float, default=0.5, help="--super-cpus of the in-flight run")
    parser.add_argument(
        "--local",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="compare with local -n K (default: when --in-flight is at most 16)",
    )
    args = parser.parse_args()
    image = build_image(offline=True, log=lambda line: None)
    pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--super-agent=gold"]
    k = args.in_flight
    if not (args.local if args.local is not None else k <= 16):
        with tempfile.TemporaryDirectory(prefix="bench-cluster-") as tmp:
            run_in_flight(args, image, pytest, tmp)
        return
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as tmp:
        local_dir = project(Path(tmp, "local"), args.tasks, args.sleep)
        local_s = timed([*pytest, "-n", str(k), "--dist", "worksteal"], local_dir)
        assert passed(local_dir / "reports") == args.tasks
        # nodes of 2 k CPUs: k tasks of --super-cpus 2 fit on the two nodes
        with RayTestCluster(image, nodes=2, num_cpus=k, memory=4 * k * GIB) as cluster:
            cluster_dir = project(Path(tmp, "cluster"), args.tasks, args.sleep)
            ray = [*pytest, "--super-executor=ray", f"--super-ray-concurrency={k}"]
            cluster_s = timed(ray, cluster_dir, cluster)
            assert passed(cluster_dir / "reports") == args.tasks
            peaks = {}
            for in_flight in (2, k):
                queued = project(Path(tmp, f"queued{in_flight}"), args.queued, 0)
                timed(
                    [*pytest, "--super-executor=ray", f"--super-ray-concurrency={in_flight}"],
                    queued,
                    cluster,
                )
                assert passed(queued / "reports") == args.queued
                peaks[in_flight] = peak_kb(queued)
    ratio = cluster_s / local_s
    per_task = (peaks[k] - peaks[2]) / (k - 2) if k > 2 else 0.0
    print(f"{args.tasks} tasks of one {args.sleep:g} s cell, {k} in flight, {os.cpu_count()} cores")
    print(f"local  pytest -n {k}:                     {local_s:7.1f} s")
    print(f"cluster (2 nodes, one pytest process):     {cluster_s:7.1f} s")
    print(f"ratio cluster / local:                     {ratio:7.2f} (target <= 1.3)")
    for in_flight, kb in peaks.items():
        print(f"controller peak, {args.queued} tasks queued, K={in_flight}: {kb / 1024:7.1f} MB")
    print(f"controller memory per task in flight:      {per_task / 1024:7.2f} MB")


if __name__ == "__main__":
    main()
