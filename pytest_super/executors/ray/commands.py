"""What the `pytest-super` command asks of every live node of a Ray cluster (`pytest-super image
build --executor ray`, `pytest-super cleanup --executor ray`): a `RayDispatcher` connected for
that only, each node asked once, then the cluster left."""

from __future__ import annotations

from pytest_super.executors.ray.cluster import RayDispatcher
from pytest_super.executors.ray.node import _build_here
from pytest_super.executors.ray.settings import cluster_run
from pytest_super.executors.ray.sweep import TASK_NAME_PREFIX
from pytest_super.kernels.base import KernelSettings


def build_on_nodes(
    address: str,
    *,
    profile: str = "default",
    base: str | None = None,
    offline: bool = False,
    tag: str | None = None,
) -> list[tuple[str, str]]:
    """`pytest-super image build --executor ray`: the kernel image built (or found up to date) on the
    engine of every live node that can run tasks; returns (node, tag) for each."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    dispatcher = RayDispatcher(cluster_run(address))
    dispatcher.connect()
    try:
        ray = dispatcher.ray
        build = ray.remote(_build_here)
        refs = [
            build.options(
                num_cpus=0,
                max_retries=0,
                name=f"{TASK_NAME_PREFIX} image build",
                scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False),
            ).remote(profile, base, offline, tag)
            for node in ray.nodes()
            if node.get("Alive") and node.get("Resources", {}).get("CPU")
        ]
        return [ray.get(ref) for ref in refs]
    finally:
        dispatcher.stop()


def cleanup_nodes(
    address: str, settings: KernelSettings, run_id: str | None, every: bool = False
) -> list[str]:
    """`pytest-super cleanup --executor ray`: what the backend of `settings` left on every live
    node (of run `run_id`, else of runs whose controller died; `every`: all of ours, docker
    only); `RayDispatcher.cleanup_on_nodes`'s entries."""
    run = cluster_run(address, kernel=settings)
    dispatcher = RayDispatcher(run)
    dispatcher.connect()
    try:
        return dispatcher.cleanup_on_nodes(run_id, every=every)
    finally:
        dispatcher.stop()
