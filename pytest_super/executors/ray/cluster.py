"""Tasks run whole on the nodes of a Ray cluster (`--super-executor=ray`).

One Ray task per pytest item: on a node with free resources (the task's `--super-cpus` and
`--super-mem` as Ray resources) a Ray worker calls `execute.run_one_task` with a fresh docker
kernel on that node's own engine (the node's DOCKER_HOST), so the agent loop, the model calls and
the kernel are all on the node and the kernel never talks across machines. What comes back is one
`NodeOutcome`: the scored `TaskResult` or the error that ended the task, the trajectory file and
its notebook, and the node that ran it. The controller (the one pytest process) writes them into
the run's folder, and the reports are made from them exactly as for a local run.

`RayDispatcher` keeps at most K tasks in flight (`--super-ray-concurrency`, default what the
cluster can place) and hands each outcome to the item that waits for it. A task whose node died
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
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from pytest_super.errors import InfrastructureError, SuperError
from pytest_super.execute import trajectory_path
from pytest_super.executors.ray.connect import RayUnavailable, connect, import_ray
from pytest_super.executors.ray.node import (
    NodeOutcome,
    _build_here,
    cleanup_on_node,
    run_on_node,
)
from pytest_super.kernels.base import KernelSettings
from pytest_super.runner import TaskResult
from pytest_super.settings import SuperRun
from pytest_super.tasks import Task

__all__ = ["NodeOutcome", "RayDispatcher", "RayUnavailable", "build_on_nodes", "cleanup_nodes"]

#: Ray's label for the tasks we submit (shown by `ray list tasks`): no secret, only the item
TASK_NAME_PREFIX = "pytest-super"


# -- on the controller ---------------------------------------------------------------------------
@dataclass
class _Pending:
    name: str
    task: Task
    deadline_s: float | None
    attempts_left: int
    retried: list[str] = field(default_factory=list)


class RayDispatcher:
    """The controller's side: connects, submits, waits, cancels, cleans the nodes up."""

    def __init__(self, run: SuperRun, *, live: bool = False) -> None:
        self.run = run
        self.ray = import_ray()
        self._live = live
        self._queue: deque[_Pending] = deque()
        self._in_flight: dict[Any, _Pending] = {}  # Ray object ref -> the task it runs
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
        self._steps: Any = None
        self._secrets: list[Any] = []
        self.concurrency = 1
        self._remote: Any = None
        self._cleanup: Any = None
        self._task_options: dict[str, Any] = {}
        self._run_ref: Any = None

    # -- connection -------------------------------------------------------------------------------
    def connect(self) -> None:
        """Join the cluster as a driver; `RayUnavailable` when nothing answers at the address."""
        connect(self.ray, self.run.ray_address or "auto", f"pytest-super-{self.run.run_id}")

    def start(self) -> None:
        """Connect to the cluster (a clear error when it cannot be reached or has no node that
        can run a task), put the key in the object store, and clear what dead runs left."""
        self.connect()
        ray = self.ray
        address = self.run.ray_address or "auto"
        slots = self._slots()
        if slots < 1:
            self.stop()
            raise RayUnavailable(
                f"the Ray cluster at {address} has no node with {self.run.kernel.cpus:g} CPUs and "
                f"{self.run.kernel.mem} of memory free for a task (--super-cpus, --super-mem)"
            )
        self.concurrency = self.run.ray_concurrency or slots
        options: dict[str, Any] = {"num_cpus": self.run.kernel.cpus, "max_retries": 0}
        memory = _bytes(self.run.kernel.mem)
        if memory:
            options["memory"] = memory
        self._task_options = options
        self._remote = ray.remote(run_on_node)
        self._cleanup = ray.remote(cleanup_on_node)
        if self.run.llm_settings is not None and self.run.llm_settings.api_key:
            self._secrets = [ray.put(self.run.llm_settings.api_key)]
        if self._live:
            from ray.util.queue import Queue

            self._steps = Queue(actor_options={"num_cpus": 0})
        self.cleanup_on_nodes(None)  # what runs whose controller died left on the nodes

    def _slots(self) -> int:
        """How many tasks the cluster's live nodes can hold at once."""
        memory = _bytes(self.run.kernel.mem) or 0
        total = 0
        for node in self.ray.nodes():
            if not node.get("Alive"):
                continue
            resources = node.get("Resources", {})
            by_cpu = int(resources.get("CPU", 0) // max(self.run.kernel.cpus, 1e-9))
            by_mem = int(resources.get("memory", 0) // memory) if memory else by_cpu
            total += min(by_cpu, by_mem)
        return total

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.ray.shutdown()

    # -- tasks ----------------------------------------------------------------------------------
    def submit(self, name: str, task: Task, deadline_s: float | None) -> None:
        """Queue one task; it starts when a slot of the K is free."""
        self._queue.append(_Pending(name, task, deadline_s, attempts_left=self.run.retries))
        self._fill()

    def _fill(self) -> None:
        """Launch queued tasks while slots are free; a task back from its node holds its slot
        until it is reported (`release`), so the tasks in flight never pass the slots."""
        while self._queue and len(self._in_flight) + len(self._done) < self.concurrency:
            pending = self._queue.popleft()
            self._launch(pending)

    def _launch(self, pending: _Pending) -> None:
        if self._run_ref is None:  # the run's settings: one object for every task
            self._run_ref = self.ray.put(self._payload_run())
        name = f"{TASK_NAME_PREFIX} {pending.name}"[:200]
        ref = self._remote.options(name=name, **self._task_options).remote(
            pending.task,
            self._run_ref,
            pending.name,
            pending.deadline_s,
            self._secrets,
            self._steps,
        )
        self._launched[pending.name] = time.monotonic()
        self._in_flight[ref] = pending
        self.peak_in_flight = max(self.peak_in_flight, len(self._in_flight))

    def _payload_run(self) -> SuperRun:
        """The run's settings as a node needs them: no key (it travels as an object), no
        controller's engine address."""
        llm = self.run.llm_settings
        if llm is not None:
            llm = dataclasses.replace(llm, api_key=None)
        return dataclasses.replace(self.run, llm_settings=llm, sources={})

    @property
    def busy(self) -> bool:
        return bool(self._queue or self._in_flight)

    def wait(self, timeout_s: float = 0.2) -> list[str]:
        """Names of the tasks that finished within `timeout_s` (their outcomes are ready)."""
        if not self._in_flight:
            return []
        refs = list(self._in_flight)
        ready, _ = self.ray.wait(refs, num_returns=1, timeout=timeout_s)
        if ready and len(refs) > 1:  # all that are back, in one call (not one a call)
            ready, _ = self.ray.wait(refs, num_returns=len(refs), timeout=0)
        finished = []
        for ref in ready:
            pending = self._in_flight.pop(ref)
            outcome = self._collect(ref, pending)
            if outcome is not None:
                self._done[pending.name] = outcome
                self.ended_at[pending.name] = outcome.ended_at
                self.spans.append((outcome.started_at, outcome.ended_at))
                finished.append(pending.name)
        self._fill()
        return finished

    def _collect(self, ref: Any, pending: _Pending) -> NodeOutcome | None:
        """The outcome of a finished Ray task; a node or worker that died mid-task is an
        infrastructure error, run again while retries are left (None: it was resubmitted)."""
        ray = self.ray
        try:
            outcome: NodeOutcome = ray.get(ref)
        except (ray.exceptions.TaskCancelledError, KeyboardInterrupt):
            raise
        except ray.exceptions.RayError as exc:
            why = f"{type(exc).__name__}: {_first_line(exc)}"
            if pending.attempts_left > 0:
                pending.attempts_left -= 1
                pending.retried.append(f"attempt {len(pending.retried) + 1}: {why}"[:500])
                self._queue.appendleft(pending)
                return None
            outcome = NodeOutcome(
                name=pending.name,
                node="(lost)",
                error=("NodeLost", f"the Ray node running the task was lost ({why})"),
            )
        outcome.retried = pending.retried + outcome.retried
        if outcome.built_image:
            self.built.append((outcome.node, outcome.built_image, outcome.build_s))
        if outcome.pulled_image:
            self.pulled.append((outcome.node, outcome.pulled_image, outcome.pull_s))
        if outcome.pull_failed:
            self.pull_failures.setdefault(outcome.pull_failed, []).append(outcome.node)
        return outcome

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

    def outcome(self, name: str) -> NodeOutcome:
        self._launched.pop(name, None)
        return self._done.pop(name)

    def release(self, name: str) -> None:
        """Task `name` is reported (or its report failed before taking its outcome): its slot
        goes to the next queued task."""
        self._launched.pop(name, None)
        self._done.pop(name, None)
        self._fill()

    def peek(self, name: str) -> NodeOutcome | None:
        """The outcome of finished task `name`, left for `outcome` to take."""
        return self._done.get(name)

    def in_flight(self) -> tuple[dict[str, float], int]:
        """The tasks running (name -> when launched, monotonic: in flight, or back and not yet
        reported) and how many are queued."""
        return dict(self._launched), len(self._queue)

    def drain_steps(self) -> list[tuple[str, dict[str, Any]]]:
        """The live steps the nodes have sent since the last call."""
        if self._steps is None:
            return []
        steps: list[tuple[str, dict[str, Any]]] = []
        with contextlib.suppress(Exception):  # two calls of the queue's actor, not one a step
            waiting = self._steps.qsize()
            if waiting:
                steps = self._steps.get_nowait_batch(waiting)
        return steps

    def cancel(self) -> None:
        """Cancel every queued and in-flight task (their workers end; their containers are
        removed by `cleanup_on_nodes`)."""
        self._queue.clear()
        self._launched.clear()
        for ref in list(self._in_flight):
            with contextlib.suppress(Exception):
                self.ray.cancel(ref, force=True)
        self._in_flight.clear()

    def cleanup_on_nodes(self, run_id: str | None, *, timeout_s: float = 120.0) -> list[str]:
        """Remove the run's containers (`run_id` None: dead runs') on every live node that has
        an engine; returns "node: name" for each container removed."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        if self._cleanup is None:  # connected for the cleanup only (`pytest-super cleanup`)
            self._cleanup = self.ray.remote(cleanup_on_node)
        refs = []
        for node in self.ray.nodes():
            if not node.get("Alive") or not node.get("Resources", {}).get("CPU"):
                continue
            strategy = NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
            refs.append(
                self._cleanup.options(
                    num_cpus=0,
                    max_retries=0,
                    name=f"{TASK_NAME_PREFIX} cleanup",
                    scheduling_strategy=strategy,
                ).remote(self._payload_run(), run_id)
            )
        removed: list[str] = []
        if not refs:
            return removed
        ready, _ = self.ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
        for ref in ready:
            with contextlib.suppress(Exception):  # a node without an engine has nothing of ours
                node, names = self.ray.get(ref)
                removed += [f"{node}: {n}" for n in names]
        return removed


def build_on_nodes(
    address: str,
    *,
    profile: str = "default",
    base: str | None = None,
    offline: bool = False,
    tag: str | None = None,
) -> list[tuple[str, str]]:
    """`pytest-super image build --ray`: the kernel image built (or found up to date) on the
    engine of every live node that can run tasks; returns (node, tag) for each."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    dispatcher = RayDispatcher(SuperRun(ray_address=address, executor="ray"))
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


def cleanup_nodes(address: str, settings: KernelSettings, run_id: str | None) -> list[str]:
    """`pytest-super cleanup --executor ray`: what the backend of `settings` left on every live
    node (of run `run_id`, else of runs whose controller died); "node: name" for each removed."""
    run = SuperRun(ray_address=address, executor="ray", kernel=settings)
    dispatcher = RayDispatcher(run)
    dispatcher.connect()
    try:
        return dispatcher.cleanup_on_nodes(run_id)
    finally:
        dispatcher.stop()


def write_outcome(run: SuperRun, outcome: NodeOutcome) -> TaskResult | None:
    """Put a node's trajectory files into the run's folder; return its result with the local
    path (None when the task ended in an error)."""
    path = trajectory_path(run, outcome.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    if outcome.trajectory:
        path.write_bytes(outcome.trajectory)
    if outcome.notebook:
        path.with_suffix(".ipynb").write_bytes(outcome.notebook)
    if outcome.result is None:
        return None
    result = outcome.result
    result.trajectory = str(path.with_suffix(".ipynb") if outcome.notebook else path)
    result.retried = outcome.retried
    if result.kept:  # --super-keep: the container stays on its node's engine
        result.kept = f"on Ray node {outcome.node} (its own Docker engine):\n{result.kept}"
    return result


def raise_error(outcome: NodeOutcome) -> None:
    """The error a node reported, raised here as the same kind of error (an infrastructure error,
    a task error or a bug of ours), carrying the attempts before it."""
    from pytest_super import errors

    assert outcome.error is not None
    kind, message = outcome.error
    cls = getattr(errors, kind, None)
    if not (isinstance(cls, type) and issubclass(cls, SuperError)) or kind == "TaskFileError":
        cls = InfrastructureError
    try:
        exc = cls(f"on node {outcome.node}: {message}")
    except TypeError:  # an error type with more arguments: its text is what matters here
        exc = InfrastructureError(f"on node {outcome.node}: {kind}: {message}")
    exc.retried = outcome.retried  # type: ignore[attr-defined]
    raise exc


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else ""


def _bytes(size: str) -> int | None:
    """Docker's memory size ("4g", "512m") in bytes as the engine reads it, for Ray's `memory`
    resource; None when it does not read (the engine then says so for the container)."""
    from docker.errors import DockerException
    from docker.utils import parse_bytes

    try:
        return int(parse_bytes(size))
    except DockerException:
        return None


def wait_for(
    dispatcher: RayDispatcher,
    names: set[str],
    *,
    on_steps: Callable[[list[tuple[str, dict[str, Any]]]], None],
    should_stop: Callable[[], bool],
) -> Iterator[str]:
    """Yield each of `names` as its task finishes, showing live steps in between."""
    left = set(names)
    while left and not should_stop():
        finished = dispatcher.wait(0.2)
        steps = dispatcher.drain_steps()
        if steps:
            on_steps(steps)
        for name in finished:
            left.discard(name)
            yield name
        if not dispatcher.busy and left:  # nothing runs that could still finish them
            return
