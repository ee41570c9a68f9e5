"""Ctrl-C of a cluster run with tasks on two nodes: how long the run takes to end, against
removing the same containers directly, both measured in the same run of this script; and
(`--case collection`) Ctrl-C during a large `pytest -n 2` collection.

    .venv/bin/python benchmarks/bench_ctrl_c.py [--rounds 3] [--case cluster|collection]

The figure issue 32 bounds at 2 s (docs/cluster.md); tests/test_ray_faults.py checks only that
such a run ends, long before its tasks' own end, and leaves nothing. On the tests' cluster
(tests/support/ray_cluster.py: a head and two worker nodes of 4 CPUs, each with its own engine;
needs root) each round

- baseline: starts two containers of the kernel image on each node's engine (as the run's tasks
  are: `init`, sleeping) and times their removal, both nodes at once (`remove(force=True)`);
- Ctrl-C: runs a quick task and four tasks sleeping 300 s (`--super-executor=ray`), waits until
  each node runs two of them, sends SIGINT to pytest and times until it exits.

Printed: each round, the medians, and the ratio Ctrl-C / baseline: what the run's stop adds to the
engines' own removal of its containers, which is most of it under load. Always exits 0: it
reports, it does not judge.

`--case collection` (issue 41 cause 9, bound 15 s; tests/attacks/test_attack_round5_inputs.py
checks only that such a run ends within it and leaves nothing): each round interrupts `pytest -n
2` 10 s into both workers' collection of 10,000 Masked rows (tests/support/collection_interrupt.py)

- baseline: without --super-agent (the tasks collected and skipped: pytest's and xdist's own
  interrupt, none of pytest-super's);
- Ctrl-C: with --super-agent=gold;
- stubborn workers: the same, with workers that ignore SIGINT once they collect (the mechanism
  of the attack's 18.2 s; the controller ends them after `interrupts.COLLECTING_WAIT_S`).

Printed: each round, the medians and the ratios to the baseline.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import docker

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pytest_super.kernels.docker.engine import LABEL_RUN  # noqa: E402
from pytest_super.kernels.docker.image import build_image  # noqa: E402
from tests.support.projects import make_project, sleep_then_answer, task_yaml, wait_for  # noqa: E402
from tests.support.ray_cluster import GIB, RayTestCluster  # noqa: E402
from tests.support.ray_fixtures import ClusterRun  # noqa: E402

PER_NODE = 2


def removal_s(cluster: RayTestCluster, image: str) -> float:
    """Seconds to remove PER_NODE sleeping containers on every node's engine, nodes at once."""
    clients = [docker.DockerClient(base_url=engine) for engine in cluster.engines]
    name = f"bench-ctrl-c-{uuid.uuid4().hex[:8]}"
    boxes = [
        [
            client.containers.run(
                image, ["sleep", "300"], name=f"{name}-{i}-{j}", init=True, detach=True
            )
            for j in range(PER_NODE)
        ]
        for i, client in enumerate(clients)
    ]
    threads = [
        threading.Thread(target=lambda b=b: [c.remove(force=True) for c in b]) for b in boxes
    ]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    took = time.monotonic() - started
    for client in clients:
        client.close()
    return took


def running_on(cluster: RayTestCluster, i: int) -> int:
    client = docker.DockerClient(base_url=cluster.engines[i])
    try:
        return len(client.containers.list(filters={"label": LABEL_RUN}))
    finally:
        client.close()


def ctrl_c_s(cluster: RayTestCluster, root: Path) -> float:
    """Seconds from SIGINT to pytest's exit, with PER_NODE tasks running on each node."""
    tasks = {"expert/quick": task_yaml("quick", sleep_then_answer(0))}
    tasks.update(
        {f"expert/slow{i}": task_yaml(f"slow{i}", sleep_then_answer(300)) for i in range(4)}
    )
    project = make_project(root, tasks)
    run = ClusterRun(cluster, project, "--super-agent=gold", "--super-executor=ray", "-q")
    for i in range(cluster.nodes):
        wait_for(lambda i=i: running_on(cluster, i) >= PER_NODE, 240, f"tasks on node {i}")
    started = time.monotonic()
    os.kill(run.proc.pid, signal.SIGINT)
    code = run.wait(150)
    took = time.monotonic() - started
    if code != 2:
        raise SystemExit(f"the run exited {code}, not 2 (interrupted):\n{run.output()[-3000:]}")
    wait_for(lambda: not any(running_on(cluster, i) for i in range(cluster.nodes)), 120, "clean")
    return took


def collection(rounds: int) -> None:
    """The `--case collection` rounds and their medians (see the module's docstring)."""
    from tests.support.collection_interrupt import interrupt_collection

    kinds = {
        "baseline (no --super-agent)": {"agent": None},
        "Ctrl-C": {},
        "Ctrl-C, stubborn workers": {"stubborn": True},
    }
    took: dict[str, list[float]] = {kind: [] for kind in kinds}
    with tempfile.TemporaryDirectory(prefix="bench-ctrl-c-collection-") as tmp:
        for i in range(rounds):
            for n, (kind, options) in enumerate(kinds.items()):
                where = Path(tmp, f"round{i}-{n}")
                done = interrupt_collection(where, 10.0, bound_s=120.0, **options)
                if done.code != 2:
                    raise SystemExit(
                        f"{kind}: exit {done.code}, not 2:\n{done.run.output()[-3000:]}"
                    )
                took[kind].append(done.took_s)
            print(f"round {i + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in took.items()))
    medians = {kind: statistics.median(values) for kind, values in took.items()}
    base = medians["baseline (no --super-agent)"]
    print(
        f"medians of {rounds} rounds, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}: "
        "Ctrl-C 10 s into a -n 2 collection of 10,000 rows, to the run's exit (bound 15 s)"
    )
    for kind, median in medians.items():
        print(f"  {kind}: {median:.2f} s, ratio to the baseline {median / base:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--case", choices=("cluster", "collection"), default="cluster")
    args = parser.parse_args()
    if args.case == "collection":
        collection(args.rounds)
        return
    image = build_image(offline=True, log=lambda line: None)
    baseline: list[float] = []
    stopped: list[float] = []
    with (
        tempfile.TemporaryDirectory(prefix="bench-ctrl-c-") as tmp,
        RayTestCluster(image, nodes=2, num_cpus=4, memory=8 * GIB) as cluster,
    ):
        for i in range(args.rounds):
            baseline.append(removal_s(cluster, image))
            stopped.append(ctrl_c_s(cluster, Path(tmp, f"round{i}")))
            print(
                f"round {i + 1}: removal {baseline[-1]:.2f} s, Ctrl-C to exit {stopped[-1]:.2f} s"
            )
    removal, ctrl_c = statistics.median(baseline), statistics.median(stopped)
    print(
        f"medians of {args.rounds} rounds, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}:"
    )
    print(f"  removing {2 * PER_NODE} containers on 2 nodes directly: {removal:.2f} s")
    print(f"  Ctrl-C of a run with them as its tasks, to its exit:   {ctrl_c:.2f} s (bound 2 s)")
    print(f"  ratio Ctrl-C / removal: {ctrl_c / removal:.2f}")


if __name__ == "__main__":
    main()
