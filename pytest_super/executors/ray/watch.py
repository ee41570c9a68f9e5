"""What the Ray executor's dispatcher (cluster.py) knows of the cluster's nodes and head: a node
as it places tasks on it (`Node`), the watch (`Watch`: two daemon threads, one knocking on the
head's GCS port, one reading `ray.nodes()`), so that the controller never waits on Ray alone, and
what the dispatcher concludes from it (`HeadChecks`, a base of `RayDispatcher`: the head or its
own node lost is `ClusterLost`). No Ray import here: the watch is handed the `ray` module."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any, TypedDict, TypeVar

from pytest_super.errors import InfrastructureError

#: seconds between two looks at the cluster's nodes (`ray.nodes()`, on a thread of its own)
NODE_POLL_S = 2.0
#: seconds between two knocks on the head's GCS port (a TCP connect, on a thread of its own)
HEAD_PROBE_S = 1.0
#: seconds the head's GCS port may stay silent before the head is taken as lost. Ray's driver
#: ends its own process 60 s after it lost the GCS (gcs_rpc_server_reconnect_timeout_s): the run
#: must end, reports written, well before that
HEAD_LOST_S = 15.0
#: a node whose Docker engine failed this many times takes no more tasks of the run
ENGINE_FAILURES_TO_EXCLUDE = 2
#: seconds of one wait on Ray where the head may be gone (`HeadChecks._watching_head`)
GET_SLICE_S = 1.0

T = TypeVar("T")


class RayNodeInfo(TypedDict):
    """One node as `ray.nodes()` gives it (ray/_private/state.py: a plain dict, more keys than
    these): the keys read here."""

    NodeID: str
    Alive: bool
    NodeManagerAddress: str
    NodeManagerHostname: str
    Resources: dict[str, float]  # CPU, memory, ...: what the node has in all


@dataclass
class Node:
    """A node of the cluster as the controller places tasks on it."""

    id: str
    name: str  # as the node names itself in its outcomes: host name / the id's first 12
    slots: int
    alive: bool = True
    engine_failures: int = 0
    #: names of the tasks placed here: in flight, or back and not yet reported
    placed: set[str] = field(default_factory=set)
    #: the run's clean-up actor on this node (a warm Ray worker: Ctrl-C must not wait for one)
    cleaner: Any = None  # Any: ray (an actor handle: its methods' `.remote` are untyped)

    @property
    def usable(self) -> bool:
        return self.alive and self.engine_failures < ENGINE_FAILURES_TO_EXCLUDE


class Watch:
    """Two daemon threads: one knocks on the head's GCS port, one reads `ray.nodes()`. The
    controller never waits on Ray alone: what they last saw tells it which node died and whether
    the head still answers."""

    def __init__(self, ray: Any, gcs_address: str) -> None:  # Any: ray (its module, run time only)
        self.ray = ray
        host, _, port = gcs_address.rpartition(":")
        self.gcs = (host or "127.0.0.1", int(port or 6379))
        self.nodes: list[RayNodeInfo] | None = None
        self.answered_at = time.monotonic()
        self._stop = threading.Event()

    def start(self) -> None:
        for loop, name in ((self._probe, "head"), (self._poll, "nodes")):
            threading.Thread(target=loop, name=f"pytest-super-ray-{name}", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def silent_s(self) -> float:
        """Seconds since the head's GCS port last took a connection."""
        return time.monotonic() - self.answered_at

    def head_answers(self) -> bool:
        """The head took a connection lately: `ray.nodes()` will not hang on it."""
        return self.silent_s() <= HEAD_PROBE_S * 3

    def _probe(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(OSError):
                socket.create_connection(self.gcs, timeout=HEAD_PROBE_S * 2).close()
                self.answered_at = time.monotonic()
            self._stop.wait(HEAD_PROBE_S)

    def _poll(self) -> None:
        while not self._stop.wait(NODE_POLL_S):
            if not self.head_answers():
                continue  # the head does not answer: ray.nodes() would hang
            with contextlib.suppress(Exception):
                self.nodes = self.ray.nodes()


def node_name(node: RayNodeInfo) -> str:
    """A node's name as `node._node_name` gives it on the node (host name / id's first 12)."""
    host = node.get("NodeManagerHostname") or node.get("NodeManagerAddress") or "?"
    return f"{host}/{node['NodeID'][:12]}"


class ClusterLost(InfrastructureError):
    """The Ray cluster's head (its GCS) stopped answering: no task can be placed, waited for or
    cancelled any more. The run ends with the results it has."""


class HeadChecks:
    """The dispatcher's conclusions from its `Watch`: the head silent too long, or the node its
    driver is attached to declared dead, is `ClusterLost` (with `lost` saying which)."""

    ray: Any  # Any: ray (its module, imported at run time only)
    lost: str
    back_when: str
    _watch: Watch | None
    _own_node: str

    def _check_head(self) -> None:
        """`ClusterLost` once the head's GCS port stayed silent past `HEAD_LOST_S`."""
        watch = self._watch
        if watch is not None and watch.silent_s() > HEAD_LOST_S:
            self.lost = (
                f"the Ray cluster's head at {watch.gcs[0]}:{watch.gcs[1]} stopped answering "
                f"({watch.silent_s():.0f} s without an answer)"
            )
            raise ClusterLost(self.lost)

    def _check_own_node(self, nodes: list[RayNodeInfo] | None) -> None:
        """`ClusterLost` when the cluster declared dead the Ray node this controller's driver is
        attached to (its raylet missed the head's health checks: a stalled or overloaded
        machine; or it died). Ray then ends the run's job, and with it every task of the run on
        every node: their workers' deaths are not the nodes' fault, and no retry can run."""
        own = next((n for n in nodes or [] if n.get("NodeID") == self._own_node), None)
        if own is None or own.get("Alive"):
            return
        address = own.get("NodeManagerAddress") or "?"
        self.lost = (
            f"the Ray node this controller is attached to (node {self._own_node[:12]}, the "
            f"raylet at {address}) was declared dead by the cluster's head (it missed the head's "
            "health checks: a stalled or overloaded machine, or its raylet died), and Ray ends "
            "the run's tasks with it"
        )
        self.back_when = (
            "once this machine's Ray node runs again (`ray start` on it, docs/cluster.md)"
        )
        raise ClusterLost(self.lost)

    def _nodes_now(self) -> list[RayNodeInfo] | None:
        """`ray.nodes()` asked now (the head answers), None when it cannot be asked."""
        if self._watch is None or not self._watch.head_answers():
            return None
        asked: Future[list[RayNodeInfo] | None] = Future()

        def ask() -> None:
            nodes = None
            with contextlib.suppress(Exception):  # the watch will tell
                nodes = self.ray.nodes()
            asked.set_result(nodes)

        # the head may have gone since it last answered: `ray.nodes()` would then wait on its GCS
        # until Ray ends this process (60 s), so it is asked on a thread of its own
        threading.Thread(target=ask, name="pytest-super-ray-nodes-now", daemon=True).start()
        return self._watching_head(asked.result)

    def _watching_head(self, wait: Callable[[float], T]) -> T:
        """`wait(GET_SLICE_S)` again until it returns (`ray.get`'s `GetTimeoutError` and a
        future's timeout are TimeoutErrors), the head checked between two (`ClusterLost`)."""
        while True:
            try:
                return wait(GET_SLICE_S)
            except (TimeoutError, FutureTimeout):
                self._check_head()
