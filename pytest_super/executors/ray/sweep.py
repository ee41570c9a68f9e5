"""The run's clean-up on the cluster's nodes, the dispatcher's part that asks each live node to
remove what a run left (`NodeSweeps`, a base of cluster.py's `RayDispatcher`): at the start
(what dead runs left), at Ctrl-C and at the run's end; a clean-up actor per node (`Cleaner`), so
that a Ctrl-C does not wait for a Ray worker to start. No Ray import at module level: the
dispatcher holds the `ray` module."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from pytest_super.executors.ray.node import cleanup_on_node
from pytest_super.executors.ray.watch import Node, node_name
from pytest_super.settings import SuperRun

if TYPE_CHECKING:
    from ray import ObjectRef

#: Ray's label for the tasks we submit (shown by `ray list tasks`): no secret, only the item
TASK_NAME_PREFIX = "pytest-super"


class Cleaner:
    """A Ray actor on one node for the run's length: it removes the run's containers there at
    once when asked (a task would wait for a Ray worker to start and import the backend)."""

    def __init__(self, run: SuperRun) -> None:
        from pytest_super.kernels import kernel_backend

        self.run = run
        kernel_backend(run.kernel)  # imported now

    def cleanup(self, run_id: str | None, every: bool = False) -> tuple[str, list[str]]:
        return cleanup_on_node(self.run, run_id, every)


class NodeSweeps:
    """The clean-ups `RayDispatcher` sends to the nodes and waits for."""

    ray: Any  # Any: ray (its module, imported at run time only)
    run: SuperRun
    lost: str
    _nodes: dict[str, Node]
    _cleanup: Any  # Any: ray (`ray.remote`'s RemoteFunction: `.options().remote()` untyped)
    _sweeps: dict[ObjectRef[tuple[str, list[str]]], str]  # a clean-up's answer -> the node

    def _payload_run(self) -> SuperRun:
        raise NotImplementedError

    def _send_cleanups(
        self, run_id: str | None, every: bool = False
    ) -> dict[ObjectRef[tuple[str, list[str]]], str]:
        """One clean-up call per live node that can run a task of any size (CPUs: the nodes the
        run uses and any other, whatever the run's task size), or, for this run's own clean-up
        (Ctrl-C, its end), per live node it placed tasks on (known: no call to the head): its
        actor's when it has one (no Ray worker to start), else a Ray task placed there. The
        calls, with the node each went to (Ray's node name)."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        if self._cleanup is None:  # connected for the cleanup only (`pytest-super cleanup`)
            self._cleanup = self.ray.remote(cleanup_on_node)
        refs: dict[ObjectRef[tuple[str, list[str]]], str] = {}
        payload = None
        if run_id == self.run.run_id and not every and self._nodes:
            targets = [(n.id, n.name) for n in self._nodes.values() if n.alive]
        else:
            targets = [
                (info["NodeID"], node_name(info))
                for info in self.ray.nodes()
                if info.get("Alive") and info.get("Resources", {}).get("CPU")
            ]
        for node_id, name in targets:
            node = self._nodes.get(node_id)
            if node is not None and node.cleaner is not None:
                refs[node.cleaner.cleanup.remote(run_id, every)] = name
                continue
            payload = payload or self._payload_run()
            call = self._cleanup.options(
                num_cpus=0,
                max_retries=0,
                name=f"{TASK_NAME_PREFIX} cleanup",
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
            )
            refs[call.remote(payload, run_id, every)] = name
        return refs

    def start_cleaners(self) -> None:
        """A clean-up actor on each usable node (not waited for: it starts while tasks run)."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        actor = self.ray.remote(Cleaner)
        payload = self._payload_run()
        for node in self._nodes.values():
            if node.alive and node.cleaner is None:
                strategy = NodeAffinitySchedulingStrategy(node.id, soft=False)
                with contextlib.suppress(Exception):
                    node.cleaner = actor.options(
                        num_cpus=0,
                        max_restarts=0,
                        name=f"{TASK_NAME_PREFIX}-cleaner-{self.run.run_id}-{node.id[:12]}",
                        scheduling_strategy=strategy,
                    ).remote(payload)

    def cleanup_on_nodes(
        self, run_id: str | None, *, every: bool = False, timeout_s: float = 120.0
    ) -> list[str]:
        """Remove the run's containers (`run_id` None: dead runs'; `every`: all of ours) on
        every live node that can run tasks; "node: name" for each container removed, "node:"
        for a node that had nothing to remove, "node: (no answer in N s)" for one that did not
        answer. Those sent by `cancel` are waited for, not sent again."""
        if self.lost:
            return []
        refs, self._sweeps = self._sweeps or self._send_cleanups(run_id, every), {}
        entries: list[str] = []
        if not refs:
            return entries
        ready, _ = self.ray.wait(list(refs), num_returns=len(refs), timeout=timeout_s)
        for ref, name in refs.items():
            if ref not in ready:
                entries.append(f"{name}: (no answer in {timeout_s:.0f} s)")
                continue
            try:
                node, names = self.ray.get(ref)
            except Exception:  # a node without an engine has nothing of ours
                entries.append(f"{name}:")
                continue
            entries += [f"{node}: {n}" for n in names] or [f"{node}:"]
        return entries
