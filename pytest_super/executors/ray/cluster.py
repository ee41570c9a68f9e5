"""Tasks run whole on the nodes of a Ray cluster (`--super-executor=ray`).

One Ray task per pytest item: on a node with free resources (the task's `--super-cpus` and
`--super-mem` as Ray resources) a Ray worker calls `execute.run_one_task` with a fresh docker
kernel on that node's own engine (the node's DOCKER_HOST), so the agent loop, the model calls and
the kernel are all on the node and the kernel never talks across machines. What comes back is one
`NodeOutcome`: the task's `TaskOutcome` as the node made it (`execute.outcome_of`: the scored
`TaskResult`, or the error that ended it as data, or its deadline passed, and the node that ran
it), with the trajectory file and its notebook. The controller (the one pytest process) writes them into
the run's folder, and the reports are made from them exactly as for a local run.

`RayDispatcher`, the run's Ray driver (in a process of its own, which the controller asks:
driver.py), keeps at most K tasks in flight (`--super-ray-concurrency`, default what the cluster
can place) and hands each outcome to the item that waits for it. A task whose node died
is an infrastructure error, run again (on a node that is alive) while `--super-retries` allows.
At the end of a run, and after Ctrl-C or SIGTERM, in-flight tasks are cancelled and each live node
removes the run's containers from its engine (`cleanup_on_nodes`); a node that was away runs
`cleanup_dead_runs` at the start of the next run (`RayDispatcher.start`), as a local engine does.

The model API key travels as a Ray object (`ray.put`), never as part of a task's arguments, its
runtime environment or its name, so Ray's task listings, dashboard and logs never hold it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_super.errors import InfrastructureError
from pytest_super.executors.ray.connect import (
    RayUnavailable,
    connect,
    import_ray,
    import_what_shutdown_imports,
)
from pytest_super.executors.ray.node import NodeOutcome, StepFields, cleanup_on_node, run_on_node
from pytest_super.executors.ray.settings import memory_bytes, ray_address, ray_concurrency
from pytest_super.executors.ray.sweep import TASK_NAME_PREFIX, NodeSweeps
from pytest_super.executors.ray.watch import (
    ENGINE_FAILURES_TO_EXCLUDE,
    ClusterLost,
    HeadChecks,
    Node,
    RayNodeInfo,
    Watch,
    node_name,
)
from pytest_super.kernels import node_options
from pytest_super.llm.settings import LLMSettings
from pytest_super.outcome import TaskError, TaskOutcome
from pytest_super.settings import SuperRun
from pytest_super.tasks import Task

if TYPE_CHECKING:
    from ray import ObjectRef
    from ray.util.queue import Queue

__all__ = ["ClusterLost", "NodeOutcome", "RayDispatcher", "RayUnavailable", "TASK_NAME_PREFIX"]


# -- on the controller ---------------------------------------------------------------------------
#: seconds queued tasks wait for a live node that may take them before they are reported
NO_NODE_GRACE_S = 60.0
#: when the rest of a run whose cluster was lost can run (said with its resume command)
BACK_WHEN = "once the cluster is back"
#: seconds `ray.shutdown()` may take at the end (with the head gone it waits for the GCS)
SHUTDOWN_TIMEOUT_S = 3.0


@dataclass
class _Pending:
    name: str
    task: Task
    deadline_s: float | None
    attempts_left: int
    retried: list[str] = field(default_factory=list)
    #: the node it runs on (a Ray node id) while in flight
    node: str = ""
    #: nodes where it failed through the node's fault (lost, engine failed): a retry goes elsewhere
    avoid: set[str] = field(default_factory=set)


class RayDispatcher(NodeSweeps, HeadChecks):
    """The controller's side: connects, places tasks on nodes, watches the nodes and the head,
    waits, retries elsewhere, cancels, cleans the nodes up."""

    def __init__(self, run: SuperRun, *, live: bool = False) -> None:
        self.run = run
        self.ray = import_ray()
        self._live = live
        self._queue: deque[_Pending] = deque()
        self._in_flight: dict[ObjectRef[NodeOutcome], _Pending] = {}  # a task's ref -> it
        self._done: dict[str, NodeOutcome] = {}
        #: the most tasks in flight at once, and when each finished task ended on its node
        self.peak_in_flight = 0
        self.ended_at: dict[str, float] = {}
        #: (start, end) on its node of each finished task: how many ran there at once
        self.spans: list[tuple[float, float]] = []
        #: name -> when it was launched (monotonic), from its launch until its outcome is taken
        self._launched: dict[str, float] = {}
        #: (node, image, seconds) of each kernel image a node built for this run
        self.built: list[tuple[str, str, float]] = []
        #: (node, image, seconds) of each kernel image a node pulled from --super-registry
        self.pulled: list[tuple[str, str, float]] = []
        #: why pulls from --super-registry failed (each said once at the end)
        self.pull_failures: dict[str, list[str]] = {}
        self._steps: Queue | None = None
        self._secrets: list[ObjectRef[str]] = []  # the endpoint's key, in the object store
        #: the backend's options a node needs from here (`kernels.node_options`: Docker's trusted
        #: images, for a node's pulls to match)
        self._node_options: Mapping[str, object] = {}
        self.concurrency = 1
        self._remote: Any = None  # Any: ray (`ray.remote`'s RemoteFunction: `.options()` untyped)
        self._cleanup: Any = None  # Any: ray (as `_remote`: of cleanup_on_node)
        self._task_options: dict[str, float] = {}
        self._run_ref: ObjectRef[SuperRun] | None = None
        #: the cluster's nodes that can run a task (Ray node id -> node), and where each task is
        self._nodes: dict[str, Node] = {}
        self._placed: dict[str, str] = {}  # task name -> node id, until it is reported
        self._watch: Watch | None = None
        self._no_node_since: float | None = None
        #: the nodes that took no more tasks of this run, and why (said at the end)
        self.excluded: dict[str, str] = {}
        #: set when the head, or this controller's own Ray node, was lost: why (then nothing more
        #: is asked of Ray), and what must run again before the rest of the run can
        self.lost: str = ""
        self.back_when = BACK_WHEN
        #: the Ray node this controller's driver is attached to (its raylet: the head's, when
        #: the controller runs on the head machine)
        self._own_node = ""
        #: clean-ups sent at Ctrl-C, waited for by cleanup_on_nodes
        self._sweeps: dict[ObjectRef[tuple[str, list[str]]], str] = {}
        #: what happened to nodes since the controller last said it (`take_events`)
        self._events: list[str] = []

    # -- connection -------------------------------------------------------------------------------
    def connect(self) -> None:
        """Join the cluster as a driver; `RayUnavailable` when nothing answers at the address."""
        connect(self.ray, ray_address(self.run), f"pytest-super-{self.run.run_id}")

    def start(self) -> None:
        """Connect to the cluster (a clear error when it cannot be reached or has no node that
        can run a task), put the key in the object store, start each node's clean-up actor and
        the watch of nodes and head, and clear what dead runs left."""
        self.connect()
        ray = self.ray
        address = ray_address(self.run)
        self._see_nodes(ray.nodes())
        slots = self._slots()
        if slots < 1:
            self.stop()
            raise RayUnavailable(
                f"the Ray cluster at {address} has no node with {self.run.kernel.cpus:g} CPUs and "
                f"{self.run.kernel.mem} of memory free for a task (--super-cpus, --super-mem)"
            )
        self.concurrency = ray_concurrency(self.run) or slots
        options: dict[str, float] = {"num_cpus": self.run.kernel.cpus, "max_retries": 0}
        memory = memory_bytes(self.run.kernel)
        if memory:
            options["memory"] = memory
        self._task_options = options
        self._remote = ray.remote(run_on_node)
        self._cleanup = ray.remote(cleanup_on_node)
        key = next((s.api_key for s in self._endpoints() if s.api_key), None)
        if key:  # the agent's endpoint and the judge's (--super-judge-model) have the same key
            self._secrets = [ray.put(key)]
        self._node_options = node_options(self.run.kernel)
        if self._live:
            from ray.util.queue import Queue

            self._steps = Queue(actor_options={"num_cpus": 0})
        context = ray.get_runtime_context()
        self._own_node = context.get_node_id()
        self._watch = Watch(ray, context.gcs_address)
        self._watch.start()
        self.start_cleaners()
        self.cleanup_on_nodes(None)  # what runs whose controller died left on the nodes
        import_what_shutdown_imports()

    def _node_slots(self, node: RayNodeInfo) -> int:
        """How many tasks a node can hold at once (its CPUs and memory for a task's)."""
        memory = memory_bytes(self.run.kernel) or 0
        resources = node.get("Resources", {})
        by_cpu = int(resources.get("CPU", 0) // max(self.run.kernel.cpus, 1e-9))
        by_mem = int(resources.get("memory", 0) // memory) if memory else by_cpu
        return min(by_cpu, by_mem)

    def _slots(self) -> int:
        """How many tasks the cluster's usable nodes can hold at once."""
        return sum(node.slots for node in self._nodes.values() if node.usable)

    def _see_nodes(self, nodes: list[RayNodeInfo]) -> list[Node]:
        """Take in what `ray.nodes()` said: new nodes that can run a task join, nodes no longer
        alive are marked so; returns the nodes that died since the last look."""
        died = []
        seen = set()
        for info in nodes:
            node_id = info["NodeID"]
            seen.add(node_id)
            known = self._nodes.get(node_id)
            if known is None and info.get("Alive") and self._node_slots(info) > 0:
                self._nodes[node_id] = Node(node_id, node_name(info), self._node_slots(info))
            elif known is not None and known.alive and not info.get("Alive"):
                known.alive = False
                died.append(known)
        for node in self._nodes.values():  # gone from the list altogether: dead too
            if node.alive and node.id not in seen:
                node.alive = False
                died.append(node)
        return died

    def stop(self) -> None:
        """Leave the cluster. `ray.shutdown()` is bounded: with the head gone it would wait for
        it (and Ray's exit hook would too, at the interpreter's end: it is removed)."""
        if self._watch is not None:
            self._watch.stop()
        import atexit

        done = threading.Thread(
            target=self._shutdown, name="pytest-super-ray-shutdown", daemon=True
        )
        done.start()
        done.join(SHUTDOWN_TIMEOUT_S)
        with contextlib.suppress(Exception):
            atexit.unregister(self.ray.shutdown)

    def _shutdown(self) -> None:
        with contextlib.suppress(Exception):
            self.ray.shutdown()

    # -- tasks ----------------------------------------------------------------------------------
    def submit(self, name: str, task: Task, deadline_s: float | None) -> None:
        """Queue one task; it starts when a slot of the K is free."""
        self._queue.append(_Pending(name, task, deadline_s, attempts_left=self.run.retries))
        self._fill()

    def _fill(self) -> None:
        """Launch queued tasks, in their order, while a usable node has a free slot (and fewer
        than K are placed); a task back from its node holds its slot until it is reported
        (`release`), so the tasks in flight never pass the slots."""
        while self._queue and len(self._placed) < self.concurrency and not self.lost:
            for pending in self._queue:
                node = self._place(pending)
                if node is not None:
                    self._queue.remove(pending)
                    self._launch(pending, node)
                    break
            else:
                return

    def _place(self, pending: _Pending) -> Node | None:
        """The usable node with the most free slots, not one where the task failed by the node's
        fault while another usable node exists (then it waits for that one)."""
        usable = [n for n in self._nodes.values() if n.usable]
        elsewhere = [n for n in usable if n.id not in pending.avoid] or usable
        free = [n for n in elsewhere if len(n.placed) < n.slots]
        if not free:
            return None
        return max(free, key=lambda n: (n.slots - len(n.placed), n.name))

    def _launch(self, pending: _Pending, node: Node) -> None:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        if self._run_ref is None:  # the run's settings: one object for every task
            self._run_ref = self.ray.put(self._payload_run())
        name = f"{TASK_NAME_PREFIX} {pending.name}"[:200]
        strategy = NodeAffinitySchedulingStrategy(node.id, soft=False)
        ref = self._remote.options(
            name=name, scheduling_strategy=strategy, **self._task_options
        ).remote(
            pending.task,
            self._run_ref,
            pending.name,
            pending.deadline_s,
            self._secrets,
            self._steps,
            self._node_options,
        )
        pending.node = node.id
        node.placed.add(pending.name)
        self._placed[pending.name] = node.id
        self._launched[pending.name] = time.monotonic()
        self._in_flight[ref] = pending
        self.peak_in_flight = max(self.peak_in_flight, len(self._in_flight))

    def _unplace(self, name: str) -> None:
        node = self._nodes.get(self._placed.pop(name, ""))
        if node is not None:
            node.placed.discard(name)

    def _payload_run(self) -> SuperRun:
        """The run's settings as a node needs them: no key (it travels as an object), no
        controller's engine address."""
        llm, judge = self.run.llm_settings, self.run.judge_settings
        return dataclasses.replace(
            self.run,
            llm_settings=llm and dataclasses.replace(llm, api_key=None),
            judge_settings=judge and dataclasses.replace(judge, api_key=None),
            sources={},
        )

    def _endpoints(self) -> list[LLMSettings]:
        """The run's endpoint settings: the agent's and the judge's, those it has."""
        found = (self.run.llm_settings, self.run.judge_settings)
        return [s for s in found if s is not None]

    @property
    def busy(self) -> bool:
        return bool(self._queue or self._in_flight)

    def wait(self, timeout_s: float = 0.2) -> list[str]:
        """Names of the tasks that finished within `timeout_s` (their outcomes are ready): back
        from their nodes, or failed by their node's death. `ClusterLost` when the head is gone."""
        finished = self._watch_cluster()
        if not self._in_flight:
            if not finished and self._queue:
                time.sleep(timeout_s)  # waiting for a node to take the queued tasks
            self._fill()
            return finished
        refs = list(self._in_flight)
        ready, _ = self.ray.wait(refs, num_returns=1, timeout=timeout_s)
        if ready and len(refs) > 1:  # all that are back, in one call (not one a call)
            ready, _ = self.ray.wait(refs, num_returns=len(refs), timeout=0)
        for ref in ready:
            outcome = self._collect(ref, self._in_flight[ref])
            pending = self._in_flight.pop(ref)
            if outcome is not None:
                self._finish(pending.name, outcome)
                finished.append(pending.name)
        self._fill()
        return finished

    def _finish(self, name: str, outcome: NodeOutcome) -> None:
        self._done[name] = outcome
        if outcome.ended_at:
            self.ended_at[name] = outcome.ended_at
            self.spans.append((outcome.started_at, outcome.ended_at))

    def _watch_cluster(self) -> list[str]:
        """What the watch saw: the head lost (`ClusterLost`), nodes dead (their tasks retried
        elsewhere or reported as lost), no node left for the queued tasks; returns the names
        that finished so (failed)."""
        watch = self._watch
        if watch is None:
            return []
        self._check_head()
        finished: list[str] = []
        nodes, watch.nodes = watch.nodes, None
        self._check_own_node(nodes)
        for node in self._see_nodes(nodes) if nodes is not None else []:
            finished += self._node_lost(node)
        if self._queue and not any(n.usable for n in self._nodes.values()):
            self._no_node_since = self._no_node_since or time.monotonic()
            if time.monotonic() - self._no_node_since > NO_NODE_GRACE_S:
                finished += self._fail_queued()
        else:
            self._no_node_since = None
        return finished

    def _node_lost(self, node: Node) -> list[str]:
        """Node `node` died: each task placed there is run again elsewhere (retries left) or
        reported as lost with the node named. Its Ray tasks are cancelled (they may come back
        from a node that was cut off, not dead)."""
        finished = []
        for ref, pending in list(self._in_flight.items()):
            if pending.node != node.id:
                continue
            del self._in_flight[ref]
            with contextlib.suppress(Exception):
                self.ray.cancel(ref, force=True)
            why = f"the Ray node {node.name} died while it ran the task (Ray declared it dead)"
            outcome = self._failed(pending, node, "NodeLost", why)
            if outcome is not None:
                self._finish(pending.name, outcome)
                finished.append(pending.name)
        node.cleaner = None
        self.excluded.setdefault(node.name, "it died (Ray declared it dead)")
        retried = sum(1 for p in self._queue if node.id in p.avoid)
        self._events.append(
            f"Ray node {node.name} is dead (Ray declared it so): {len(finished)} of its tasks "
            f"reported as lost, {retried} to run again on another node"
        )
        return finished

    def take_events(self) -> list[str]:
        """What happened to nodes since the last call (a node's death, its exclusion)."""
        events, self._events = self._events, []
        return events

    def _failed(
        self, pending: _Pending, node: Node | None, kind: str, why: str
    ) -> NodeOutcome | None:
        """A task ended by its node's fault: queued again to run on another node while retries
        are left (None), else its outcome: an infrastructure error naming the node."""
        self._unplace(pending.name)
        self._launched.pop(pending.name, None)
        if node is not None:
            pending.avoid.add(node.id)
        if pending.attempts_left > 0:
            pending.attempts_left -= 1
            pending.retried.append(f"attempt {len(pending.retried) + 1}: {kind}: {why}"[:500])
            self._queue.appendleft(pending)
            return None
        hint = "" if self.run.retries else "; --super-retries N runs such a task again elsewhere"
        return _lost(pending, node.name if node is not None else "(none)", kind, f"{why}{hint}")

    def _fail_queued(self) -> list[str]:
        """No node is left that can take a task: every queued one is reported as such."""
        lost = ", ".join(f"{name} ({why})" for name, why in self.excluded.items()) or "none"
        finished = []
        while self._queue:
            pending = self._queue.popleft()
            why = (
                f"no live Ray node could take the task for {NO_NODE_GRACE_S:.0f} s (nodes out "
                f"of this run: {lost}); start nodes, then run it again with --super-resume"
            )
            self._finish(pending.name, _lost(pending, "(none)", "NodeLost", why))
            finished.append(pending.name)
        return finished

    def _collect(self, ref: ObjectRef[NodeOutcome], pending: _Pending) -> NodeOutcome | None:
        """The outcome of a finished Ray task; a node or worker that died mid-task, or a node
        whose engine failed, is the node's fault: run again on another node while retries are
        left (None: it was queued again)."""
        ray = self.ray
        node = self._nodes.get(pending.node)
        try:
            sent = self._get(ref)
        except (ray.exceptions.TaskCancelledError, KeyboardInterrupt):
            raise
        except ray.exceptions.RayError as exc:
            self._check_own_node(self._nodes_now())  # then no node is at fault
            where = node.name if node is not None else "its node"
            why = f"the Ray worker running the task on {where} was lost ({type(exc).__name__}: {_first_line(exc)})"
            return self._failed(pending, node, "NodeLost", why)
        error, retried = sent.error, sent.outcome.retried
        if node is not None and _engine_failed(sent):
            self._engine_failed(node)
            if error is not None and pending.attempts_left > 0:
                pending.retried += retried
                return self._failed(pending, node, error.kind, error.message)
        sent.outcome = dataclasses.replace(sent.outcome, retried=pending.retried + retried)
        if sent.built_image:
            self.built.append((sent.node, sent.built_image, sent.build_s))
        if sent.pulled_image:
            self.pulled.append((sent.node, sent.pulled_image, sent.pull_s))
        if sent.pull_failed:
            self.pull_failures.setdefault(sent.pull_failed, []).append(sent.node)
        return sent

    def _get(self, ref: ObjectRef[NodeOutcome]) -> NodeOutcome:
        """The outcome of a task `ray.wait` found done. Its object can be lost with the head after
        that `ray.wait` (make test-all, 2026-11-29: the head killed there): Ray then tries to
        rebuild it and `ray.get` waits on the gone GCS until Ray ends the driver's process, 60 s
        later, with the head's loss unseen; hence `_watching_head`."""
        sent: NodeOutcome = self._watching_head(lambda s: self.ray.get(ref, timeout=s))
        return sent

    def _engine_failed(self, node: Node) -> None:
        node.engine_failures += 1
        if node.engine_failures == ENGINE_FAILURES_TO_EXCLUDE:
            self.excluded[node.name] = (
                f"its Docker engine failed {node.engine_failures} times; see the node's "
                "engine (`docker info` there) before giving it tasks again"
            )
            self._events.append(
                f"Ray node {node.name} takes no more tasks of this run: " + self.excluded[node.name]
            )

    def image_lines(self) -> list[str]:
        """The end-of-run lines on kernel images: each node's build or pull, and each reason a
        pull failed, once (with the nodes it failed on)."""
        lines = [
            f"Ray node {node} built the kernel image {image} ({seconds:.0f} s)"
            for node, image, seconds in self.built
        ]
        lines += [
            f"Ray node {node} pulled the kernel image {image} from {self.run.registry} "
            f"({seconds:.0f} s)"
            for node, image, seconds in self.pulled
        ]
        lines += [
            f"{why} (on {', '.join(sorted(set(nodes)))})"
            for why, nodes in self.pull_failures.items()
        ]
        return lines

    def node_lines(self) -> list[str]:
        """The end-of-run lines on nodes that took no more tasks of this run."""
        return [
            f"Ray node {name} took no more tasks of this run: {why}"
            for name, why in self.excluded.items()
        ]

    def outcome(self, name: str) -> NodeOutcome:
        self._launched.pop(name, None)
        return self._done.pop(name)

    def release(self, name: str) -> None:
        """Task `name` is reported (or its report failed before taking its outcome): its slot
        goes to the next queued task."""
        self._launched.pop(name, None)
        self._done.pop(name, None)
        self._unplace(name)
        self._fill()

    def peek(self, name: str) -> NodeOutcome | None:
        """The outcome of finished task `name`, left for `outcome` to take."""
        return self._done.get(name)

    def in_flight(self) -> tuple[dict[str, float], int]:
        """The tasks running (name -> when launched, monotonic: in flight, or back and not yet
        reported) and how many are queued."""
        return dict(self._launched), len(self._queue)

    def unfinished(self) -> int:
        """Tasks not reported yet: queued, in flight, or back and not yet reported."""
        return len(self._queue) + len(self._in_flight) + len(self._done)

    def drain_steps(self) -> list[tuple[str, StepFields]]:
        """The live steps the nodes have sent since the last call."""
        if self._steps is None or self.lost:
            return []
        steps: list[tuple[str, StepFields]] = []
        with contextlib.suppress(Exception):  # two calls of the queue's actor, not one a step
            waiting = self._steps.qsize()
            if waiting:
                steps = self._steps.get_nowait_batch(waiting)
        return steps

    def cancel(self, run_id: str | None = None) -> None:
        """Cancel every queued and in-flight task (their workers end). With `run_id`, each
        live node's clean-up actor is asked at once to remove the run's containers;
        `cleanup_on_nodes` waits for that."""
        self._queue.clear()
        self._launched.clear()
        # the tasks first: a task still running when its container is removed starts another
        for ref in list(self._in_flight):
            with contextlib.suppress(Exception):
                self.ray.cancel(ref, force=True)
        self._in_flight.clear()
        if run_id is not None and not self.lost:
            self._sweeps = self._send_cleanups(run_id)


def _engine_failed(sent: NodeOutcome) -> bool:
    """The node's kernel engine failed under the task (said by the node: its flag, or its
    error's fault is the engine's)."""
    return sent.engine_failed or (sent.error is not None and sent.error.whose == "engine")


def _lost(pending: _Pending, node: str, kind: str, why: str) -> NodeOutcome:
    """The outcome of a task its node's fault ended, with no retry left: an infrastructure
    error of the dispatcher's own (`kind`: "NodeLost", or the node's error) naming the node."""
    error = TaskError.of_class(InfrastructureError, f"on node {node}: {why}", kind=kind)
    return NodeOutcome(TaskOutcome.failed(pending.name, error, retried=pending.retried, node=node))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else ""
