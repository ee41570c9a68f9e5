"""What the Ray executor's dispatcher (cluster.py) knows of the cluster's nodes and head: a node
as it places tasks on it (`Node`), and the watch (`Watch`: two daemon threads, one knocking on
the head's GCS port, one reading `ray.nodes()`), so that the controller never waits on Ray alone.
No Ray import here: the watch is handed the `ray` module."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any, TypedDict

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
