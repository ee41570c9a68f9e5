"""Longest first against collection order on real runs (issue 33 item 2), in one run of this script:

    .venv/bin/python benchmarks/bench_order.py [--short 8] [--short-s 2] [--long 1] [--long-s 30]
                                               [--cluster]

The set is built to show the gain: `--short` gold tasks of one cell sleeping `--short-s` seconds,
then `--long` tasks sleeping `--long-s` seconds, listed last (collection order is by file name).
Their durations are given to both runs in a pytest-split file (`--super-durations`), as an earlier
run would give them; the runs differ only in `--super-order=collection` / `--super-order=longest`.

- local: `pytest -n 2 --dist load` on this machine's engine (xdist hands each worker runs of
  consecutive items; pytest_super.ordering.for_xdist deals the longest into them);
- `--cluster`: `pytest --super-executor=ray` on the tests' two-node cluster
  (tests/support/ray_cluster.py: needs root for its network namespace and the nodes' engines),
  4 slots (2 nodes x 4 CPUs, --super-cpus 2), one task per slot in the executor's order; beside it
  benchmarks/bench_cluster_sim.py's simulation of the same durations on the same slots (the
  simulation orders with the same pytest_super.ordering code).

Printed: each wall time (pytest's start to its end, its own start-up included; first an untimed
warm-up run, then `--rounds` runs in each order, alternating which goes first), the ratio of the
mean wall times, longest first / collection order, and the simulated one. The machine's other load
shows in the figures: run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_cluster_sim as sim  # noqa: E402

from pytest_super import ordering  # noqa: E402
from pytest_super.kernels.docker.image import build_image  # noqa: E402
from tests.support.projects import make_project, sleep_then_answer, task_yaml  # noqa: E402

#: the cluster of tests/test_ray_backend.py: 2 nodes of 4 CPUs, tasks of --super-cpus 2
NODES, SLOTS_PER_NODE = 2, 2


def planned(args: argparse.Namespace) -> dict[str, float]:
    """Task id -> sleep seconds, in collection order (the long ones last)."""
    tasks = {f"s{i:02d}": args.short_s for i in range(args.short)}
    tasks.update({f"z-long{j}": args.long_s for j in range(args.long)})
    return tasks


def project(root: Path, tasks: dict[str, float]) -> Path:
    made = make_project(
        root, {f"expert/{t}": task_yaml(t, sleep_then_answer(s)) for t, s in tasks.items()}
    )
    (made / "durations.json").write_text(
        json.dumps({f"tasks/expert/{t}.yaml::{t}": s for t, s in tasks.items()})
    )
    return made


def timed(cmd: list[str], cwd: Path, cluster: object | None = None) -> tuple[float, str]:
    """Wall seconds of `cmd` and the order its report header names; exits if it fails."""
    started = time.monotonic()
    if cluster is None:
        done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    else:
        done = cluster.run(cmd, cwd=cwd, timeout=1800)  # type: ignore[attr-defined]
    took = time.monotonic() - started
    out = done.stdout + done.stderr
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}):\n{out[-4000:]}")
    header = next((ln for ln in out.splitlines() if "pytest-super: order" in ln), "(no header)")
    return took, header


def compare(
    label: str,
    tasks: dict[str, float],
    base: list[str],
    tmp: Path,
    rounds: int,
    cluster: object | None = None,
) -> float:
    """A warm-up run (one short task: first container starts and Ray workers are not charged to
    either order), then `rounds` pairs of runs, the two orders alternating which goes first, each
    on a fresh project; prints each wall time and the ratio of the mean wall times."""
    warm = project(tmp / f"{label}-warm-up", {"s00": 0.0})
    timed([*base, "--super-order=collection"], warm, cluster)
    walls: dict[str, list[float]] = {ordering.COLLECTION: [], ordering.LONGEST: []}
    for n in range(rounds):
        pair = (ordering.COLLECTION, ordering.LONGEST)
        for order in pair if n % 2 == 0 else pair[::-1]:
            made = project(tmp / f"{label}-{order}-{n}", tasks)
            cmd = [*base, "--super-durations=durations.json", f"--super-order={order}"]
            took, header = timed(cmd, made, cluster)
            walls[order].append(took)
            shown = header.strip().split(" (/tmp")[0].split(" /tmp")[0]
            print(f"{label:>8} {order:>10}: {took:6.1f} s   [{shown}]", flush=True)
    mean = {order: sum(w) / len(w) for order, w in walls.items()}
    ratio = mean[ordering.LONGEST] / mean[ordering.COLLECTION]
    print(
        f"{label:>8} mean collection {mean[ordering.COLLECTION]:.1f} s, longest first "
        f"{mean[ordering.LONGEST]:.1f} s: ratio longest first / collection order {ratio:.2f}",
        flush=True,
    )
    return ratio


def simulated(tasks: dict[str, float], start_s: float) -> tuple[float, float]:
    """bench_cluster_sim's wall times of the set on the cluster's slots, in both orders."""
    seconds = [s + start_s for s in tasks.values()]
    return tuple(  # type: ignore[return-value]
        sim.wall_time(sim.in_order(seconds, order), NODES, SLOTS_PER_NODE)
        for order in (ordering.COLLECTION, ordering.LONGEST)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--short", type=int, default=8, help="short tasks (8)")
    parser.add_argument("--short-s", type=float, default=2.0, help="their sleep in seconds (2)")
    parser.add_argument("--long", type=int, default=1, help="long tasks, listed last (1)")
    parser.add_argument("--long-s", type=float, default=30.0, help="their sleep in seconds (30)")
    parser.add_argument("--workers", type=int, default=2, help="xdist workers of the local run")
    parser.add_argument("--cluster", action="store_true", help="also on the two-node Ray cluster")
    parser.add_argument("--start-s", type=float, default=2.0, help="the simulation's start time")
    parser.add_argument("--rounds", type=int, default=2, help="runs in each order (2)")
    args = parser.parse_args()
    image = build_image(offline=True, log=lambda line: None)
    tasks = planned(args)
    base = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--super-agent=gold"]
    print(
        f"{args.short} tasks of {args.short_s:g} s then {args.long} of {args.long_s:g} s "
        f"(listed last), {os.cpu_count()} cores",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="bench-order-") as tmp:
        local = [*base, "-n", str(args.workers), "--dist", "load"]
        compare(f"-n {args.workers}", tasks, local, Path(tmp), args.rounds)
        if args.cluster:
            from tests.support.ray_cluster import GIB, RayTestCluster

            with RayTestCluster(image, nodes=NODES, num_cpus=4, memory=8 * GIB) as cluster:
                ray = [*base, "--super-executor=ray"]
                compare("cluster", tasks, ray, Path(tmp), args.rounds, cluster)
            fifo, lpt = simulated(tasks, args.start_s)
            print(
                f"simulated (bench_cluster_sim, {NODES}x{SLOTS_PER_NODE} slots, "
                f"+{args.start_s:g} s a task): collection {fifo:.1f} s, longest first {lpt:.1f} s, "
                f"ratio {lpt / fifo:.2f}"
            )


if __name__ == "__main__":
    main()
