"""A real Ray cluster on this machine for the tests of a Ray backend (`RayTestCluster`).

One head node and N worker nodes, all inside a network namespace of the cluster's own that has
only loopback, and one Docker engine per worker node, in the host's network namespace:

- Ray binds the machine's own address whatever `--node-ip-address` says (docs: ENVIRONMENT.md,
  "Clusters"); in a namespace that has only loopback and no route out, it binds 127.0.0.1 only,
  and nothing it opens is reachable from the host or beyond. The controller of a test (a Ray
  driver) runs in the namespace too (`popen`/`run`). Since ports are per namespace, the fixed
  ports below cannot clash with another cluster's, nor Ray's own fixed defaults (44217, 44227,
  10001) with another Ray on the machine.
- Each worker node's raylet gets `DOCKER_HOST` naming its own engine, which its Ray workers
  inherit: a task placed on node i by `node_resource(i)` starts its containers on engine i.
- Every engine's dockerd runs in the host's network namespace (as tests/support/second_engine.py's
  does: its own socket, data root on a tmpfs, exec root, pidfile and bridge, `--iptables=false`),
  because its containers need the way out the main engine's containers have: `!pip install` in
  a task reaches PyPI, and Docker's embedded DNS (127.0.0.11 in a container on a user-defined
  network) forwards each query from dockerd's own namespace, which in the loopback-only one
  failed ("Temporary failure in name resolution"). dockerd listens on nothing but its unix
  socket, a file that the Ray workers in the namespace reach like the kernels' ipc sockets in the
  folders bind-mounted into the containers (unix sockets know no network namespace); no port is
  published.
- Each cluster claims a slot (`SLOT_COUNT` of them, held by an abstract unix socket of this
  process, so a dead process frees its slot): its bridges are `psr<slot>n<node>` and every
  address its engines use is in 10.<SLOT_BASE + slot>.0.0/16 (node i: the pool 10.x.16i.0/20,
  the bridge 10.x.(64+i).0/24), so clusters of any process and xdist worker never share one,
  nor the main engine (172.17-31.x) or tests/support/second_engine.py (10.110-209.x). The
  cluster adds what the engines' `--iptables=false` leaves out, in chains named after it, and
  removes them in `stop()`: `masquerade` for that range going elsewhere, FORWARD accepting what
  leaves it and the replies (the policy may be DROP) but nothing between its own containers
  (the task network's `enable_icc=false`, and node apart from node), and INPUT dropping what
  its containers send the host (what `guard_host` of kernels/docker/hostguard.py does for the
  main engine's task bridge; the backend's own call of it runs in the namespace and guards
  nothing here). `stop()` removes each engine's networks before stopping it (their host bridges
  outlive the engine otherwise), then its bridge.
- Every node is one `ray start --block` started in a new session, so the node's processes are a
  session of ours (a Ray worker makes a process group of its own, but stays in the session):
  `ray stop` would kill every Ray process on the machine, another test's cluster included, and is
  never used.

It needs root, `ip`, `iptables`, `dockerd` and an importable `ray`; without them it skips on a
developer's machine and fails with CI=true (tests/support/second_engine.py's convention).
"""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import docker
import docker.errors

from pytest_super.kernels.docker.network import bridge_interface
from tests.support.second_engine import _cannot_start_second_engine

_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "gwm")
_SERIAL = itertools.count()
#: subnets and address pools are numbered per node up to this many nodes
MAX_NODES = 4
#: cluster slot s owns every address of 10.<SLOT_BASE + s>.0.0/16 and the bridges psr<s>n<i>
#: (10.110-209 are second_engine.py's pools, 10.255.255.53 may be the host's nameserver)
SLOT_BASE = 210
SLOT_COUNT = 40
GCS_PORT = 6379
#: the head's ports; node i's are NODE_PORT_BASE + NODE_PORT_STEP * i onwards. All are below the
#: ephemeral range (32768-60999), so no port the kernel picks for Ray's unnamed listeners can
#: take one of them first.
HEAD_PORT_BASE = 6380
NODE_PORT_BASE = 20000
NODE_PORT_STEP = 1000
#: a worker node started again moves to the next of these port sets in its range
INCARNATIONS = 5
INCARNATION_STEP = 200
#: every Ray process gets the same value of this variable: `ps e` tells a cluster's processes
#: apart from any other Ray on the machine even after setproctitle rewrote their command line
MARKER_ENV = "PYTEST_SUPER_RAY_TEST_CLUSTER"
#: The head declares a node dead after 3 failed health checks 1 s apart (Ray's defaults: 5, 3 s
#: apart), so that a test of node loss waits about 3 s for it, not 15: a dead raylet refuses the
#: connection at once. Each check still waits Ray's 10 s for an answer: with a 1 s timeout, a
#: raylet slowed down by a loaded machine was declared dead while alive.
#: Ray's token authentication, pinned off for every process of a test cluster (nodes and drivers).
#: Left unset, Ray 2.60 decides per process: a `ray start` finding ~/.ray/auth_token (written by any
#: local `ray.init()` on the machine, e.g. someone trying Ray out) starts a node that demands the
#: token, while a driver joining by address stays unauthenticated: every `ray.nodes()` of the tests
#: then failed with "InvalidAuthToken" once such a file appeared mid-run (issue 42, this round's
#: first run of make test-all). The cluster is on its namespace's loopback alone.
AUTH_ENV = {"RAY_AUTH_MODE": "disabled"}
HEALTH_CHECK_ENV = {
    "RAY_health_check_period_ms": "1000",
    "RAY_health_check_failure_threshold": "3",
}
#: Ray's word, in a driver's output, for a node its GCS declared dead for missed health checks:
#: only a running GCS sends it to the drivers
RAY_MARKED_DEAD = "has been marked dead because the detector has missed too many heartbeats"
#: seconds a driver of the tests (`nodes_info`, the start's readiness wait) keeps trying to join
#: the cluster: a machine as loaded as 13 on 2 cores kept a fresh head from taking one for tens
#: of seconds
CONNECT_WAIT_S = 120
#: the most an engine's data root (a tmpfs: memory only as used) may hold; the kernel image
#: takes about 1 GB of it
ENGINE_TMPFS_SIZE = "6g"
#: seconds `stop()` gives a node after SIGTERM before SIGKILL (a test cluster's state is
#: worthless, and a head needs 10-25 s to stop gracefully)
STOP_GRACE_S = 3
GIB = 1 << 30
#: in the command line of a task's watchdog on a node
WATCHDOG = "pytest_super/executors/ray/watchdog.py"
MIB = 1 << 20

_PORT_FLAGS = (
    "--node-manager-port",
    "--object-manager-port",
    "--dashboard-agent-listen-port",
    "--dashboard-agent-grpc-port",
    "--metrics-export-port",
    "--runtime-env-agent-port",
)

# Run by a driver inside the namespace: every node Ray knows, alive or dead, as JSON. A driver
# attaches to the head's raylet when one runs on its host (services.get_node_to_connect_for_driver),
# so killing a worker node does not take this driver with it. A head whose GCS port is open may
# not take drivers yet (its raylet still registering: "Failed to connect to Ray cluster" on a
# loaded machine): joining is tried again for CONNECT_WAIT_S.
_NODES_SCRIPT = """
import json, os, sys, time, ray
joined_by = time.monotonic() + float(sys.argv[4])
while True:
    try:
        ray.init(logging_level="ERROR", log_to_driver=False)
        break
    except Exception:
        ray.shutdown()
        if time.monotonic() > joined_by:
            raise
        time.sleep(1)
want, dead, deadline = sys.argv[1], sys.argv[2], time.monotonic() + float(sys.argv[3])
while True:
    nodes = ray.nodes()
    alive = {r for n in nodes if n["Alive"] for r in n["Resources"]}
    gone = {n["NodeID"] for n in nodes if not n["Alive"]}
    if (set(json.loads(want)) <= alive and dead in gone | {""}) or time.monotonic() > deadline:
        break
    time.sleep(0.2)
print("NODES", json.dumps([{k: n[k] for k in ("NodeID", "Alive", "Resources")} for n in nodes]))
# What it saw is said: leave without Ray's shutdown, which can end the process with an error
# status when a node just died (a fresh clone's make test: test_kill_node's poll printed its NODES
# line and Ray's word of the killed node's death, then ended with a non-zero status)
sys.stdout.flush()
os._exit(0)
"""

# The `sitecustomize` of every driver of the cluster (`env()` puts its folder first on
# PYTHONPATH). A driver joining a cluster picks its node among the raylets it finds by grepping
# every process of the machine (ray/_private/services.find_node_ids), and asks its GCS about each
# of them: with another test cluster running on the machine (another xdist worker, another
# checkout's `make test`), it asked about that cluster's raylets too, and the GCS's answer never
# came ("Failed to get node info for possible node ids ... Deadline Exceeded", then "Failed to
# connect to Ray cluster at 127.0.0.1:6379" after minutes). Here the search sees only the
# processes of the driver's own network namespace: its own cluster's.
_SITECUSTOMIZE = """
import importlib.abc, importlib.machinery, os, sys


def _same_namespace(pid):
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino == os.stat("/proc/self/ns/net").st_ino
    except OSError:
        return False


def _patch(services):
    find = services.find_node_ids
    psutil = services.psutil

    def find_node_ids():
        every = psutil.process_iter

        def ours(*args, **kwargs):
            return (p for p in every(*args, **kwargs) if _same_namespace(p.pid))

        psutil.process_iter = ours
        try:
            return find()
        finally:
            psutil.process_iter = every

    services.find_node_ids = find_node_ids


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "ray._private.services":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            load = spec.loader.exec_module

            def exec_module(module):
                load(module)
                _patch(module)

            spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _Finder())
"""

_PORT_SCRIPT = """
import socket, sys, time
deadline = time.monotonic() + float(sys.argv[2])
while True:
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=1).close()
        break
    except OSError:
        if time.monotonic() > deadline:
            sys.exit(f"nothing listens on 127.0.0.1:{sys.argv[1]} in the namespace")
        time.sleep(0.1)
"""


def _sh(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, check=False)


def _ns_inode(path: str) -> int | None:
    """The inode of a network namespace (a /run/netns file or a /proc/PID/ns/net link)."""
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


def _processes() -> Iterator[tuple[int, str, str]]:
    """(pid, command line, environment) of every process still readable (we are root)."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            cmdline = Path(entry.path, "cmdline").read_bytes().replace(b"\0", b" ")
            environ = Path(entry.path, "environ").read_bytes()
        except OSError:
            continue
        yield int(entry.name), cmdline.decode(errors="replace"), environ.decode(errors="replace")


def ray_declared_dead(driver_output: str) -> list[str]:
    """The lines of a Ray driver's output saying that the cluster's GCS declared a node dead
    for its missed health checks (`RAY_MARKED_DEAD`)."""
    return [line for line in driver_output.splitlines() if RAY_MARKED_DEAD in line]


def stat_fields(pid: int) -> list[str]:
    """The fields of /proc/<pid>/stat after the command's name (state first, parent pid
    second); empty when the process is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


class RayTestCluster:
    """A head and `nodes` worker nodes, each with its own Docker engine, in a namespace of its own.

    Use it as a context manager (or `start()` / `stop()`). `image` is loaded into the engine of
    every node listed in `image_on` (all by default), so that a test can leave one node without
    it. Worker node i offers `num_cpus` CPUs, `memory` bytes and one unit of the custom resource
    `node_resource(i)`; the head offers no CPUs, so no task of ours lands there. Several clusters
    may run at once, in one process or many.
    """

    def __init__(
        self,
        image: str,
        *,
        nodes: int = 2,
        num_cpus: int = 4,
        memory: int = 2 * GIB,
        object_store_memory: int = 150 * MIB,
        image_on: Sequence[int] | None = None,
    ) -> None:
        if not 1 <= nodes <= MAX_NODES:
            raise ValueError(f"nodes must be 1..{MAX_NODES}, not {nodes}")
        self.image = image
        self.nodes = nodes
        self.num_cpus = num_cpus
        self.memory = memory
        self.object_store_memory = object_store_memory
        self.image_on = list(range(nodes)) if image_on is None else list(image_on)
        self.name = f"psr-{_WORKER}-{os.getpid()}-{next(_SERIAL)}"
        # Short on purpose: Ray's unix sockets live at <temp dir>/session_<date>_<pid>/sockets/...
        # and a socket path must stay under 108 bytes.
        self.root = Path("/tmp", self.name)
        self.address = f"127.0.0.1:{GCS_PORT}"
        self.engines = [f"unix://{self.root}/e{i}/docker.sock" for i in range(nodes)]
        #: the slot `start()` claims (module docstring) and what it names: the engines' bridges
        #: and the iptables chains of the cluster (in the filter table `<name>-fwd` and
        #: `<name>-in`, in the nat table `<name>`)
        self.slot: int | None = None
        self.bridges: list[str] = []
        self.chains = {"filter": [f"{self.name}-fwd", f"{self.name}-in"], "nat": [self.name]}
        self._slot_lock: socket.socket | None = None
        self._no_engine = f"unix://{self.root}/no-engine-here.sock"
        self._nodes: dict[str, subprocess.Popen[bytes]] = {}
        #: set by every fault a test causes (a node killed, cut off or hung, an engine or the head
        #: killed): `ensure_healthy` then asks the GCS which nodes it holds alive
        self.disturbed = False
        #: how many times each worker node was started again (its ports: `_node_ports`)
        self._incarnations: dict[str, int] = {}
        self._daemons: list[subprocess.Popen[bytes]] = []
        self._controllers: list[subprocess.Popen[Any]] = []
        self._logs: list[Any] = []
        self._load_error = ""
        self._started = False

    # -- public API ------------------------------------------------------------------------

    def __enter__(self) -> RayTestCluster:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        """Namespace, engines, head, worker nodes and images; returns when every node is alive.

        Whatever was started is stopped again if any step fails.
        """
        self._check_prerequisites()
        sweep_orphans()
        self._started = True
        try:
            self._claim_slot()
            self._make_namespace()
            self._add_rules()
            for i in range(self.nodes):
                self._start_engine(i)
            self._start_head()
            for i in range(self.nodes):
                self._start_node(i)
            loader = threading.Thread(target=self._load_images, daemon=True)
            loader.start()
            for i in range(self.nodes):
                self._wait_engine(i)
            self._wait_alive(list(range(self.nodes)), timeout=180)
            loader.join()
            if self._load_error:
                raise RuntimeError(self._load_error)
        except BaseException:
            self.stop()
            raise

    def node_tmp(self, i: int) -> Path:
        """Worker node i's temporary directory (its TMPDIR)."""
        return self.root / f"n{i}" / "tmp"

    def node_run(self, i: int) -> Path:
        """Worker node i's XDG_RUNTIME_DIR (where its private folder of locks is)."""
        return self.root / f"n{i}" / "run"

    def node_files(self, i: int) -> list[str]:
        """What is in worker node i's temporary directory (task folders, kernel folders) and in
        its folder of locks (a run's start lock folder, `ray-<run id>`)."""
        found = []
        for folder in (self.node_tmp(i), self.node_run(i) / "pytest-super" / "locks"):
            with contextlib.suppress(OSError):
                found += [str(p.relative_to(self.root)) for p in folder.iterdir()]
        return sorted(found)

    def node_resource(self, i: int) -> str:
        """The custom resource only worker node i offers (one unit): place a task with it."""
        return f"super_test_node_{i}"

    def env(self) -> dict[str, str]:
        """The environment of a controller (a Ray driver) of this cluster: RAY_ADDRESS (never
        left to Ray's "auto", which greps `ps` and may find another test's cluster), Ray's search
        for a raylet to join kept to the namespace (`_SITECUSTOMIZE`), and a
        DOCKER_HOST that answers nothing, so that only tasks on a worker node reach an engine."""
        path = [str(self.root / "py"), os.environ.get("PYTHONPATH", "")]
        return {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(p for p in path if p),
            "RAY_ADDRESS": self.address,
            "RAY_USAGE_STATS_ENABLED": "0",
            **AUTH_ENV,
            "DOCKER_HOST": self._no_engine,
        }

    def popen(self, cmd: Sequence[str], **kw: Any) -> subprocess.Popen[Any]:
        """Start `cmd` in the cluster's namespace with `env()` (merged under kw's env); it is
        killed by `stop()` if still running then."""
        kw["env"] = {**self.env(), **kw.get("env", {})}
        process = subprocess.Popen(["ip", "netns", "exec", self.name, *cmd], **kw)
        self._controllers.append(process)
        return process

    def run(
        self, cmd: Sequence[str], *, timeout: float = 120, **kw: Any
    ) -> subprocess.CompletedProcess[str]:
        """Run `cmd` in the namespace like `popen`; text output captured unless kw says else."""
        kw.setdefault("stdout", subprocess.PIPE)
        kw.setdefault("stderr", subprocess.PIPE)
        kw.setdefault("text", True)
        with self.popen(cmd, **kw) as process:
            try:
                out, err = process.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.communicate()
                raise
        return subprocess.CompletedProcess(process.args, process.returncode, out, err)

    def nodes_info(self) -> list[dict[str, Any]]:
        """Every node the head knows, alive or dead: NodeID, Alive, Resources."""
        return self._poll_nodes(want=[], wait=0)

    def node_ids(self) -> dict[str, str]:
        """Node name ("head" or node_resource(i)) -> Ray node id, of the nodes alive now."""
        ids = {}
        for node in self.nodes_info():
            if not node["Alive"]:
                continue
            for i in range(self.nodes):
                if self.node_resource(i) in node["Resources"]:
                    ids[self.node_resource(i)] = node["NodeID"]
            if "node:__internal_head__" in node["Resources"]:
                ids["head"] = node["NodeID"]
        return ids

    def kill_node(self, i: int, *, timeout: float = 30) -> float:
        """SIGKILL worker node i's Ray processes; return the seconds until the head reported the
        node dead, which must be within `timeout`. Its engine, and the containers its tasks
        started, stay: as on a machine whose Ray died."""
        self.disturbed = True
        node_id = self.node_ids()[self.node_resource(i)]
        started = time.monotonic()
        self._kill(self._node_pids(i), signal.SIGKILL)
        self._nodes.pop(str(i)).wait(timeout=10)
        nodes = self._poll_nodes(want=[], dead=node_id, wait=timeout)
        if any(n["NodeID"] == node_id and n["Alive"] for n in nodes):
            raise TimeoutError(f"the head still reports node {i} alive after {timeout} s")
        return time.monotonic() - started

    def restart_node(self, i: int, *, timeout: float = 120) -> None:
        """Start worker node i again after `kill_node` (its next ports, same engine and
        resources)."""
        self._next_incarnation(i)
        self._start_node(i)
        self._wait_alive([i], timeout=timeout)

    def kill_head(self) -> None:
        """SIGKILL the head node's Ray processes (its GCS, raylet, dashboard): the cluster is
        headless. The worker nodes' raylets end by themselves once they give up on the GCS (Ray's
        60 s); `restart_head` starts a new cluster on the same engines."""
        self.disturbed = True
        self._kill(self._node_pids("head"), signal.SIGKILL)
        self._nodes.pop("head").wait(timeout=10)

    def restart_head(self, *, timeout: float = 180) -> None:
        """A new head, and every worker node started again to join it (a restarted head without
        Ray's fault tolerance knows none of the old nodes); the engines and their images stay."""
        for node in [n for n in self._nodes if n != "head"]:
            self._kill(self._node_pids(int(node)), signal.SIGKILL)
            self._nodes.pop(node).wait(timeout=10)
        if "head" in self._nodes:
            self.kill_head()
        self._start_head()
        for i in range(self.nodes):
            self._next_incarnation(i)
            self._start_node(i)
        self._wait_alive(list(range(self.nodes)), timeout=timeout)

    def _next_incarnation(self, i: int) -> None:
        self._incarnations[str(i)] = self._incarnations.get(str(i), 0) + 1

    def partition(self, i: int) -> None:
        """Cut worker node i off the cluster's network: inside the namespace, every TCP packet
        to or from one of node i's ports (its node manager, object manager, agents and Ray
        workers: NODE_PORT_BASE + NODE_PORT_STEP * i onwards) is dropped, both ways, so nothing
        reaches the node's raylet or workers and nothing they serve answers. Its processes and
        engine keep running, as on a machine whose link went down. `heal(i)` undoes it."""
        self.disturbed = True
        for rule in self._partition_rules(i):
            done = self._ns_sh("iptables", "-w", "-I", "INPUT", "1", *rule)
            if done.returncode != 0:
                raise RuntimeError(f"iptables in {self.name}: {done.stderr.strip()}")

    def heal(self, i: int, *, timeout: float = 180) -> None:
        """Undo `partition(i)`; node i is started again (`revive_node`) unless the head still
        holds it alive: a node the head declared dead never comes back by itself."""
        for rule in self._partition_rules(i):
            while self._ns_sh("iptables", "-w", "-D", "INPUT", *rule).returncode == 0:
                continue
        if self.node_resource(i) not in self.node_ids():
            self.revive_node(i, timeout=timeout)

    def _partition_rules(self, i: int) -> list[tuple[str, ...]]:
        low = NODE_PORT_BASE + NODE_PORT_STEP * i
        ports = f"{low}:{low + NODE_PORT_STEP - 1}"
        return [
            ("-p", "tcp", "--dport", ports, "-j", "DROP"),
            ("-p", "tcp", "--sport", ports, "-j", "DROP"),
        ]

    def hang_node(self, i: int) -> None:
        """SIGSTOP worker node i's Ray processes (its raylet, agents and Ray workers): alive,
        listening, answering nothing, as a node hung on a full disk or swap. `revive_node(i)`
        ends them and starts the node again."""
        self.disturbed = True
        self._kill(self._node_pids(i), signal.SIGSTOP)

    def stall_head_raylet(self, *, timeout: float = 120) -> float:
        """SIGSTOP the head node's raylet (the one a controller's Ray driver on the head machine
        is attached to) until the head's GCS declares that node dead for its missed health
        checks, then SIGCONT it: what an overloaded head machine met in CI (`ci8`). The seconds
        to the declaration; the head needs `restart_head` after."""
        self.disturbed = True
        head = self.node_ids()["head"]
        raylets = {
            pid
            for pid in self._node_pids("head")
            if Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].endswith(b"/raylet")
        }
        if not raylets:
            raise RuntimeError("the head's raylet was not found")
        started = time.monotonic()
        self._kill(raylets, signal.SIGSTOP)
        try:
            while not self.head_declared_dead(head):
                if time.monotonic() - started > timeout:
                    raise TimeoutError(f"the head's node was not declared dead in {timeout} s")
                time.sleep(0.5)
            return time.monotonic() - started
        finally:
            self._kill(raylets, signal.SIGCONT)

    def head_declared_dead(self, node_id: str) -> str:
        """The head's GCS log lines declaring node `node_id` dead for its failed health checks,
        if any: only a GCS still running writes them."""
        lines = self.head_log_lines("health check failed").splitlines()
        return "\n".join(line for line in lines if f"failed. node_id={node_id}" in line)

    def revive_node(self, i: int, *, timeout: float = 180) -> None:
        """Node i started again whatever happened to it (hung, cut off and healed, dead): what is
        left of its Ray processes is killed first. Its engine stays."""
        pids = self._node_pids(i)
        self._kill(pids, signal.SIGKILL)
        self._kill(pids, signal.SIGCONT)
        process = self._nodes.pop(str(i), None)
        if process is not None:
            process.wait(timeout=30)
        self._next_incarnation(i)
        self._start_node(i)
        self._wait_alive([i], timeout=timeout)

    def kill_engine(self, i: int) -> None:
        """SIGKILL worker node i's Docker engine (dockerd and its containerd): its API socket
        answers no more. The containers' shims, and so the containers, run on."""
        self.disturbed = True
        daemon = self._daemons[i]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(daemon.pid, signal.SIGKILL)
        daemon.wait(timeout=30)

    def restart_engine(self, i: int, *, timeout: float = 120) -> None:
        """Start worker node i's engine again after `kill_engine` (same socket, data, bridge)."""
        if self._daemons[i].poll() is None:
            return
        self._daemons[i] = self._spawn_engine(i)
        self._wait_engine(i, timeout=timeout)

    def ensure_healthy(self, *, timeout: float = 240) -> list[str]:
        """Put the cluster back as every test expects to find it, whatever an earlier test left
        (one that failed or timed out before its own `heal`/`restart_*`): no partition rule, every
        engine answering (its dockerd started again if it died or hangs), the head and every
        worker node alive (the head and its nodes started anew when its GCS does not answer, a
        node when it is not alive or its processes are stopped). The GCS is asked (a driver, a
        few seconds) only after a fault a test caused (`disturbed`) or when a process of the
        cluster is gone or stopped. What was repaired, in words; RuntimeError naming what is
        still wrong after `timeout` s."""
        started = time.monotonic()
        repaired = []
        for i in range(self.nodes):
            for rule in self._partition_rules(i):
                while self._ns_sh("iptables", "-w", "-D", "INPUT", *rule).returncode == 0:
                    repaired.append(f"partition rule of node {i} removed")
        for i in range(self.nodes):
            if not self._engine_answers(i):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self._daemons[i].pid, signal.SIGKILL)
                self._daemons[i].wait(timeout=30)
                self.restart_engine(i, timeout=max(30.0, timeout - (time.monotonic() - started)))
                repaired.append(f"engine {i} restarted")
        stopped = {i for i in range(self.nodes) if self._stopped(self._node_pids(i))}
        head = self._nodes.get("head")
        running = all(p.poll() is None for p in self._nodes.values())
        if (
            not (self.disturbed or stopped or repaired)
            and running
            and len(self._nodes) > self.nodes
        ):
            return []  # nothing broke it since the last look: no driver needed to ask the GCS
        self.disturbed = False
        try:
            alive = set() if head is None or head.poll() is not None else set(self.node_ids())
        except RuntimeError:
            alive = set()
        if "head" not in alive:
            self.restart_head(timeout=max(60.0, timeout - (time.monotonic() - started)))
            return [*repaired, "head and nodes restarted"]
        for i in range(self.nodes):
            if i in stopped or self.node_resource(i) not in alive:
                self.revive_node(i, timeout=max(60.0, timeout - (time.monotonic() - started)))
                repaired.append(f"node {i} restarted")
        return repaired

    def _engine_answers(self, i: int) -> bool:
        if self._daemons[i].poll() is not None:
            return False
        try:
            with contextlib.closing(docker.DockerClient(base_url=self.engines[i], timeout=15)) as c:
                return bool(c.ping())
        except Exception:
            return False

    @staticmethod
    def _stopped(pids: set[int]) -> bool:
        """Is any of `pids` stopped (SIGSTOP: state T in /proc/<pid>/stat)?"""
        return any(stat_fields(pid)[:1] == ["T"] for pid in pids)

    def pids(self) -> set[int]:
        """Every process of the cluster: those in its namespace, and those naming its folder or
        carrying its marker (found even once the namespace is gone)."""
        inode = _ns_inode(f"/run/netns/{self.name}")
        found = set()
        for pid, cmdline, environ in _processes():
            marked = f"{self.root}/" in cmdline or f"{MARKER_ENV}={self.root}\0" in environ
            if marked or (inode is not None and _ns_inode(f"/proc/{pid}/ns/net") == inode):
                found.add(pid)
        return found

    def leftovers(self) -> list[str]:
        """What of the cluster still exists (empty after `stop()`): processes, namespace,
        bridges and other links on the host, iptables chains and rules, mounts, folders."""
        found = [f"process {pid}: {_cmdline(pid)}" for pid in sorted(self.pids())]
        if self.name in _sh("ip", "netns", "list").stdout.split():
            found.append(f"network namespace {self.name}")
        task_bridges = [bridge_interface(engine) for engine in self.engines]
        found += [f"link {b} on the host" for b in self.bridges + task_bridges if _link_exists(b)]
        found += [f"link {b} in {self._range()}" for b in self._links_in_range(unclaimed=True)]
        found += [f"iptables: {rule}" for rule in self._rules_left()]
        found += [f"mount {m}" for m in _mounts_under(self.root)]
        if self.root.exists():
            found.append(f"folder {self.root}")
        return found

    def stop(self) -> None:
        """Stop everything: SIGTERM then SIGKILL every node's process group, remove every
        container and network of the private engines and stop them, then their bridges (and any
        other link left in the slot's range), the iptables chains, the namespace and the folder;
        then free the slot. Safe to call twice or after a failed start."""
        if not self._started:
            return
        self._started = False
        for process in self._controllers:
            if process.poll() is None:
                process.kill()
        _wait_all(self._controllers, 10)
        self._controllers.clear()
        groups = [p for p in self._nodes.values() if p.poll() is None]
        _killpg(groups, signal.SIGTERM)
        _wait_all(groups, STOP_GRACE_S)
        _killpg(groups, signal.SIGKILL)
        self._kill(self._ray_pids(), signal.SIGKILL)
        _wait_all(list(self._nodes.values()), 10)
        self._nodes.clear()
        running = [(i, d) for i, d in enumerate(self._daemons) if d.poll() is None]
        for i, _ in running:
            self._empty_engine(i)
        for _, daemon in running:
            daemon.terminate()
        _wait_all(self._daemons, 30)
        for daemon in self._daemons:
            if daemon.poll() is None:
                daemon.kill()
                daemon.wait()
        self._daemons.clear()
        # whatever still runs in the namespace or names the folder (a shim, a stray worker) is ours
        self._kill(self.pids(), signal.SIGKILL)
        # a network whose engine died before it was removed leaves its bridge: any link holding
        # an address of the slot's range is ours
        for bridge in dict.fromkeys(self.bridges + self._links_in_range()):
            _sh("ip", "link", "delete", bridge)
        self._delete_rules()
        _sh("ip", "netns", "delete", self.name)
        for mount in reversed(_mounts_under(self.root)):
            _sh("umount", "-l", mount)
        for log in self._logs:
            log.close()
        self._logs.clear()
        shutil.rmtree(self.root, ignore_errors=True)
        if self._slot_lock is not None:
            self._slot_lock.close()
            self._slot_lock = None

    # -- starting --------------------------------------------------------------------------

    def _check_prerequisites(self) -> None:
        if os.geteuid() != 0:
            _cannot_start_second_engine("a Ray test cluster needs root (a namespace, dockerd)")
        for tool in ("ip", "ss", "iptables", "mount", "dockerd", "docker"):
            if shutil.which(tool) is None:
                _cannot_start_second_engine(f"no `{tool}` on this machine for a Ray test cluster")
        if importlib.util.find_spec("ray") is None:
            _cannot_start_second_engine('ray is not installed: pip install "ray[default]"')

    def _range(self, part: str = "0.0/16") -> str:
        """The slot's address range 10.<SLOT_BASE + slot>.0.0/16, or `part` of it."""
        return f"10.{SLOT_BASE + (self.slot or 0)}.{part}"

    def _claim_slot(self) -> None:
        """Claim the first slot no process holds and nothing on the host uses (no link named
        like its bridges, no address or route in its range: a leftover of a killed process)."""
        for slot in range(SLOT_COUNT):
            lock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                lock.bind(_slot_address(slot))
            except OSError:
                lock.close()
                continue
            self.slot, self._slot_lock = slot, lock
            self.bridges = [f"psr{slot:02d}n{i}" for i in range(self.nodes)]
            routes = _sh("ip", "route", "show", "root", self._range()).stdout.strip()
            if (
                not routes
                and not self._links_in_range()
                and not any(map(_link_exists, self.bridges))
            ):
                return
            lock.close()
            self.slot, self._slot_lock, self.bridges = None, None, []
        raise RuntimeError(f"all {SLOT_COUNT} slots of Ray test clusters are in use")

    def _links_in_range(self, *, unclaimed: bool = False) -> list[str]:
        """The host's links holding an address of the slot's range. With `unclaimed`, none
        while another cluster holds the slot (after `stop()` it may be another's already)."""
        if self.slot is None:
            return []
        if unclaimed and self._slot_lock is None:
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                probe.bind(_slot_address(self.slot))
            except OSError:
                return []
            with contextlib.closing(probe):
                return self._links_in_range()
        out = _sh("ip", "-o", "-4", "addr", "show", "to", self._range()).stdout
        return list(dict.fromkeys(line.split()[1] for line in out.splitlines()))

    def _rules(self) -> list[tuple[str, ...]]:
        """The iptables commands (after `iptables -w`) that give the engines' containers the
        main engine's way out: each chain's rules, then the jump into it, at the top of its
        built-in chain so that nothing of the main engine's (DOCKER-USER, DOCKER-ISOLATION-*,
        the policy DROP) decides first. Only traffic from or to the slot's range matches."""
        ours = self._range()
        forward, guard = self.chains["filter"]
        (nat,) = self.chains["nat"]
        return [
            ("-N", forward),
            ("-A", forward, "-s", ours, "-d", ours, "-j", "DROP"),
            ("-A", forward, "-s", ours, "-j", "ACCEPT"),
            ("-A", forward, "-d", ours, "-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED")
            + ("-j", "ACCEPT"),
            ("-I", "FORWARD", "1", "-j", forward),
            ("-N", guard),
            ("-A", guard, "-s", ours, "-j", "DROP"),
            ("-I", "INPUT", "1", "-j", guard),
            ("-t", "nat", "-N", nat),
            ("-t", "nat", "-A", nat, "-s", ours, "!", "-d", ours, "-j", "MASQUERADE"),
            ("-t", "nat", "-I", "POSTROUTING", "1", "-j", nat),
        ]

    def _add_rules(self) -> None:
        for rule in self._rules():
            done = _sh("iptables", "-w", *rule)
            if done.returncode != 0:
                raise RuntimeError(f"iptables {' '.join(rule)}: {done.stderr.strip()}")

    def _delete_rules(self) -> None:
        """Remove every jump into the cluster's chains, then the chains (whatever exists)."""
        jumps = {"filter": [("FORWARD", 0), ("INPUT", 1)], "nat": [("POSTROUTING", 0)]}
        for table, chains in self.chains.items():
            for builtin, n in jumps[table]:
                delete = ("iptables", "-w", "-t", table, "-D", builtin, "-j", chains[n])
                while _sh(*delete).returncode == 0:
                    continue
            for chain in chains:
                _sh("iptables", "-w", "-t", table, "-F", chain)
                _sh("iptables", "-w", "-t", table, "-X", chain)

    def _rules_left(self) -> list[str]:
        """Every rule (`iptables -S`) naming one of the cluster's chains."""
        left = []
        for table, chains in self.chains.items():
            for line in _sh("iptables", "-w", "-t", table, "-S").stdout.splitlines():
                if set(line.split()) & set(chains):
                    left.append(f"-t {table} {line}")
        return left

    def _make_namespace(self) -> None:
        self.root.mkdir(mode=0o700)
        (self.root / "slot").write_text(str(self.slot))  # for `sweep_orphans`
        (self.root / "py").mkdir()
        (self.root / "py" / "sitecustomize.py").write_text(_SITECUSTOMIZE)
        for step in (
            ("ip", "netns", "add", self.name),
            ("ip", "-n", self.name, "link", "set", "lo", "up"),
        ):
            done = _sh(*step)
            if done.returncode != 0:
                raise RuntimeError(f"{' '.join(step)}: {done.stderr.strip()}")
        # A fresh namespace has no listener, so the fixed ports below are all free: check it.
        listening = self._ns_sh("ss", "-ltnuH").stdout.strip()
        if listening:
            raise RuntimeError(f"a fresh namespace already has listeners: {listening}")

    def _ns_sh(self, *cmd: str) -> subprocess.CompletedProcess[str]:
        return _sh("ip", "netns", "exec", self.name, *cmd)

    def _start_engine(self, i: int) -> None:
        """dockerd for node i on its own socket, data and exec root, pidfile and bridge, with
        its own address pool, all in the slot's range; in the host's network namespace, where
        the cluster's iptables rules give its containers a way out."""
        folder = self.root / f"e{i}"
        (folder / "data").mkdir(parents=True)
        # On a tmpfs: loading the image is faster and removing it takes no time (on disk, deleting
        # two engines' unpacked kernel image took 9-35 s of every stop)
        mounted = _sh(
            "mount",
            "-t",
            "tmpfs",
            "-o",
            f"size={ENGINE_TMPFS_SIZE},mode=0700",
            self.name,
            f"{folder}/data",
        )
        if mounted.returncode != 0:
            raise RuntimeError(f"cannot mount a tmpfs for engine {i}: {mounted.stderr.strip()}")
        for step in (
            ("link", "add", "name", self.bridges[i], "type", "bridge"),
            ("addr", "add", self._range(f"{64 + i}.1/24"), "dev", self.bridges[i]),
            ("link", "set", self.bridges[i], "up"),
        ):
            done = _sh("ip", *step)
            if done.returncode != 0:
                raise RuntimeError(f"ip {' '.join(step)}: {done.stderr.strip()}")
        self._daemons.append(self._spawn_engine(i))

    def _spawn_engine(self, i: int) -> subprocess.Popen[bytes]:
        """dockerd (and the containerd it starts) for node i, as a session of its own."""
        folder = self.root / f"e{i}"
        log = open(folder / "dockerd.log", "ab")  # noqa: SIM115 - closed by stop()
        self._logs.append(log)
        return subprocess.Popen(
            [
                "dockerd",
                f"--host={self.engines[i]}",
                f"--data-root={folder}/data",
                f"--exec-root={folder}/exec",
                f"--pidfile={folder}/dockerd.pid",
                f"--bridge={self.bridges[i]}",
                "--iptables=false",
                "--ip-masq=false",
                # never without: a dockerd that finds its default network of an earlier start in its
                # data root and has --default-address-pool deletes the host's docker0 (moby's
                # configureNetworking: "Clear stale bridge network", skipped with live restore)
                "--live-restore",
                f"--default-address-pool=base={self._range(f'{16 * i}.0/20')},size=24",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def _wait_engine(self, i: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with contextlib.closing(docker.DockerClient(base_url=self.engines[i])) as client:
                    client.ping()
                return
            except Exception as exc:
                if self._daemons[i].poll() is not None or time.monotonic() > deadline:
                    tail = (self.root / f"e{i}" / "dockerd.log").read_text()[-1500:]
                    raise RuntimeError(f"dockerd of node {i} did not start: {tail}") from exc
                time.sleep(0.2)

    def _load_images(self) -> None:
        """`docker save` once, streamed into `docker load` of every engine in `image_on`."""
        targets = [self.engines[i] for i in self.image_on]
        if not targets:
            return
        processes: list[subprocess.Popen[bytes]] = []
        try:
            for i in self.image_on:
                self._wait_engine(i)
            saved = subprocess.Popen(["docker", "save", self.image], stdout=subprocess.PIPE)
            processes.append(saved)
            loads = [
                subprocess.Popen(
                    ["docker", "-H", host, "load", "-q"],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                )
                for host in targets
            ]
            processes += loads
            assert saved.stdout is not None
            while chunk := saved.stdout.read(1 << 20):
                for load in loads:
                    assert load.stdin is not None
                    load.stdin.write(chunk)
            for load in loads:
                assert load.stdin is not None
                load.stdin.close()
            failures = [
                f"docker load into {host}: {load.stderr.read().decode().strip()}"
                for host, load in zip(targets, loads, strict=True)
                if load.wait() != 0 and load.stderr is not None
            ]
            if saved.wait() != 0:
                failures.append(f"docker save {self.image} failed (is it on the main engine?)")
            self._load_error = "; ".join(failures)
        except Exception as exc:
            self._load_error = f"loading {self.image}: {exc!r}"
        finally:
            for process in processes:  # after a failure: none may outlive the cluster
                if process.poll() is None:
                    process.kill()
                    process.wait()

    def _node_ports(self, node: str) -> dict[str, int]:
        """A node's ports. A worker node started again (`revive_node`, `restart_node`,
        `restart_head`) takes the next of `INCARNATIONS` sets in its range: the GCS's channel to
        the old node manager's address, after a partition, stays in gRPC's reconnect backoff for
        tens of seconds, and its health checks of a new node at the same address failed until
        it declared that node dead too."""
        base = HEAD_PORT_BASE if node == "head" else NODE_PORT_BASE + NODE_PORT_STEP * int(node)
        if node != "head":
            base += INCARNATION_STEP * (self._incarnations.get(node, 0) % INCARNATIONS)
        ports = {flag: base + n for n, flag in enumerate(_PORT_FLAGS)}
        workers = base + 20 if node == "head" else base + 100
        ports.update({"--min-worker-port": workers, "--max-worker-port": workers + 99})
        return ports

    def _start_node(self, node: str | int) -> None:
        """`ray start --block` for "head" or worker node i, in the namespace, as a new session."""
        node = str(node)
        temp_dir = self.root / ("h" if node == "head" else f"n{node}")
        temp_dir.mkdir(exist_ok=True)
        cmd = [
            sys.executable,
            "-m",
            "ray.scripts.scripts",
            "start",
            "--block",
            "--node-ip-address=127.0.0.1",
            f"--temp-dir={temp_dir}",
            f"--object-store-memory={self.object_store_memory}",
            "--disable-usage-stats",
            *(f"{flag}={port}" for flag, port in self._node_ports(node).items()),
        ]
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
        env.update({MARKER_ENV: str(self.root), "RAY_USAGE_STATS_ENABLED": "0", **AUTH_ENV})
        if node == "head":
            cmd += [
                "--head",
                f"--port={GCS_PORT}",
                "--ray-client-server-port=10001",
                "--num-cpus=0",
                "--num-gpus=0",
                # the dashboard serves Ray's state API (`ray list tasks`), which the tests read
                # to prove what Ray shows of a run; on the namespace's loopback only
                "--include-dashboard=true",
                "--dashboard-host=127.0.0.1",
                "--dashboard-port=8265",
            ]
            # a task placed on the head by mistake must fail, not use the main engine
            env.update(HEALTH_CHECK_ENV, DOCKER_HOST=self._no_engine)
            # `ray start --head` refuses to start when the address its temp dir's last start
            # wrote (127.0.0.1:6379, a head killed since) is that of a GCS running anywhere on
            # the machine: its search reads every process's command line, another namespace's
            # cluster's GCS included (a second `make test`; `restart_head` failed so in a fresh
            # clone's run beside another cluster). Ours is a new head: forget the old address.
            (temp_dir / "ray_current_cluster").unlink(missing_ok=True)
        else:
            i = int(node)
            cmd += [
                f"--address={self.address}",
                f"--num-cpus={self.num_cpus}",
                "--num-gpus=0",
                f"--memory={self.memory}",
                f"--resources={json.dumps({self.node_resource(i): 1})}",
            ]
            env["DOCKER_HOST"] = self.engines[i]
            # what the node's Ray workers make in the temporary directory (a task's folder, its
            # kernels' host folders) is node i's alone, and found there (`node_files`)
            self.node_tmp(i).mkdir(exist_ok=True)
            env["TMPDIR"] = str(self.node_tmp(i))
            # and its private folder of locks (locks.private_dir) its own, as on a machine of its
            # own: a node frozen while it held the run's container start lock (`hang_node`)
            # stopped the other node's tasks, which shared it
            self.node_run(i).mkdir(mode=0o700, exist_ok=True)
            env["XDG_RUNTIME_DIR"] = str(self.node_run(i))
        log = open(temp_dir.with_suffix(".log"), "ab")  # noqa: SIM115 - closed by stop()
        self._logs.append(log)
        self._nodes[node] = subprocess.Popen(
            ["ip", "netns", "exec", self.name, *cmd],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )

    def _start_head(self, *, timeout: float = 240, attempts: int = 3) -> None:
        """Start the head and wait until `ray start` says it runs, starting it again when it
        gave up: its own raylet must register with its GCS within 30 s (a constant of
        ray/_private/node.py), which a machine loaded to 15 on 2 cores missed (the head's
        dashboard modules, nine Python processes, start first)."""
        log = self.root / "h.log"
        deadline = time.monotonic() + timeout
        for attempt in range(1, attempts + 1):
            offset = log.stat().st_size if log.exists() else 0
            self._start_node("head")
            while self._nodes["head"].poll() is None and time.monotonic() < deadline:
                with open(log, "rb") as out:
                    out.seek(offset)
                    if b"Ray runtime started" in out.read():
                        self._wait_port(GCS_PORT, 60)
                        return
                time.sleep(0.5)
            self._kill(self._node_pids("head"), signal.SIGKILL)
            self._nodes.pop("head").wait(timeout=30)
            if time.monotonic() >= deadline or attempt == attempts:
                break
        raise RuntimeError(f"the head did not start in {attempts} tries: {self._log_tail('h')}")

    def _wait_port(self, port: int, timeout: float) -> None:
        done = self._ns_sh(sys.executable, "-c", _PORT_SCRIPT, str(port), str(timeout))
        if done.returncode != 0:
            raise RuntimeError(f"{done.stderr.strip()}; head log: {self._log_tail('h')}")

    def _poll_nodes(self, *, want: list[str], dead: str = "", wait: float) -> list[dict[str, Any]]:
        """ray.nodes() from a driver in the namespace, polled up to `wait` s until every resource
        in `want` is on an alive node and node `dead` (an id) is dead."""
        try:
            done = self.run(
                [
                    sys.executable,
                    "-c",
                    _NODES_SCRIPT,
                    json.dumps(want),
                    dead,
                    str(wait),
                    str(CONNECT_WAIT_S),
                ],
                timeout=wait + CONNECT_WAIT_S + 120,
            )
        except subprocess.TimeoutExpired as exc:
            raise RuntimeError(
                f"ray.nodes() did not answer in {exc.timeout:.0f} s: "
                f"{(exc.stderr or b'')[-1500:]!r}; head log: {self._log_tail('h')}; "
                f"GCS log: {self._gcs_log_tail()}"
            ) from None
        found = [line for line in done.stdout.splitlines() if line.startswith("NODES ")]
        if done.returncode != 0 or not found:
            raise RuntimeError(f"ray.nodes() failed: {done.stdout[-1000:]} {done.stderr[-2000:]}")
        nodes: list[dict[str, Any]] = json.loads(found[-1].removeprefix("NODES "))
        return nodes

    def _wait_alive(self, nodes: list[int], *, timeout: float, attempts: int = 3) -> None:
        """Wait until worker `nodes` are alive, starting a node again when its `ray start` gave
        up: its raylet must register with the GCS within 30 s (a constant of ray/_private/node.py),
        which a machine as loaded as two clusters and a test run on 2 cores can miss."""
        deadline = time.monotonic() + timeout
        tries = dict.fromkeys(nodes, 1)
        while True:
            if self._nodes["head"].poll() is not None:
                raise RuntimeError(f"the head node stopped: {self._log_tail('h')}")
            for i in nodes:
                if self._nodes[str(i)].poll() is None:
                    continue
                if tries[i] == attempts:
                    raise RuntimeError(f"node {i} did not start: {self._log_tail(f'n{i}')}")
                tries[i] += 1
                self._kill(self._node_pids(i), signal.SIGKILL)  # what it left of its start
                self._start_node(i)
            left = deadline - time.monotonic()
            want = [self.node_resource(i) for i in nodes]
            alive = self._poll_nodes(want=want, wait=max(0.0, min(15.0, left)))
            if set(want) <= {r for n in alive if n["Alive"] for r in n["Resources"]}:
                return
            if left <= 0:
                logs = {i: self._log_tail(f"n{i}") for i in nodes}
                raise RuntimeError(f"nodes {nodes} not alive after {timeout} s; logs: {logs}")

    def _gcs_log_tail(self) -> str:
        """The end of the head's GCS server log (Ray's session folder under the head's)."""
        with contextlib.suppress(OSError, ValueError):
            (log,) = (self.root / "h").glob("session_latest/logs/gcs_server.out")
            return log.read_text(errors="replace")[-1500:]
        return ""

    def head_log_lines(self, *words: str, last: int = 40) -> str:
        """The last `last` lines of the head's GCS and raylet logs (this session's) that hold
        any of `words`: what a failed test shows of the head's view of its nodes."""
        lines: list[str] = []
        for name in ("gcs_server.out", "raylet.out", "raylet.err"):
            with contextlib.suppress(OSError, ValueError):
                (log,) = (self.root / "h").glob(f"session_latest/logs/{name}")
                hits = [  # not the periodic dumps of event counts
                    line
                    for line in log.read_text(errors="replace").splitlines()
                    if any(w in line for w in words) and line.startswith("[20")
                ]
                lines += [f"{name}: {line[:300]}" for line in hits[-last:]]
        return "\n".join(lines)

    def _log_tail(self, folder: str) -> str:
        with contextlib.suppress(OSError):
            return (self.root / f"{folder}.log").read_text()[-1500:]
        return ""

    # -- stopping --------------------------------------------------------------------------

    def _node_pids(self, i: int | str) -> set[int]:
        """Node i's Ray processes: its session (the raylet, agents and Ray workers: a worker
        makes a process group of its own, but stays in the session), and any process of the
        namespace naming its temp dir or its node manager port. Only of the namespace: every
        cluster uses the same ports, so outside it that port names another cluster's node. Not
        our tasks' watchdogs (pytest_super/executors/ray/watchdog.py, a session of their own):
        on a machine they outlive Ray's processes (`ray stop` ends those by name), and they are
        what removes a killed worker's folders; `stop()` ends them with the namespace."""
        process = self._nodes.get(str(i))
        leader = process.pid if process is not None else -1
        port = self._node_ports(str(i))["--node-manager-port"]
        folder = "h" if i == "head" else f"n{i}"
        marks = (
            f"{self.root}/{folder}/",
            f"--node-manager-port={port}",
            f"--node_manager_port={port}",
        )
        inode = _ns_inode(f"/run/netns/{self.name}")
        found = {leader} if leader > 0 else set()
        for pid, cmdline, _ in _processes():
            if WATCHDOG in cmdline:
                continue
            with contextlib.suppress(OSError):
                if os.getsid(pid) == leader or (
                    inode is not None
                    and any(m in cmdline for m in marks)
                    and _ns_inode(f"/proc/{pid}/ns/net") == inode
                ):
                    found.add(pid)
        return found

    def _ray_pids(self) -> set[int]:
        """The cluster's processes other than engines (dockerd, containerd and shims)."""
        engine = re.compile(r"^(\S*/)?(dockerd|containerd|containerd-shim\S*|docker-proxy) ")
        return {pid for pid in self.pids() if not engine.match(_cmdline(pid) + " ")}

    def _kill(self, pids: set[int], sig: signal.Signals) -> None:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)

    def _empty_engine(self, i: int) -> None:
        """Remove every container and network of engine i: all are ours, the engine being
        private (the backend's task network among them: its host bridge outlives the engine)."""
        try:
            client = docker.DockerClient(base_url=self.engines[i], timeout=30)
            with contextlib.closing(client):
                for container in client.containers.list(all=True):
                    container.remove(force=True)
                for network in client.networks.list():
                    if network.name not in ("bridge", "host", "none"):
                        with contextlib.suppress(docker.errors.APIError):
                            network.remove()
        except docker.errors.DockerException:
            pass  # a broken engine is stopped all the same; stop() sweeps its shims and bridges


def _killpg(processes: Sequence[subprocess.Popen[Any]], sig: signal.Signals) -> None:
    """Signal the process group each of `processes` leads (they were started as new sessions)."""
    for process in processes:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)


def _wait_all(processes: Sequence[subprocess.Popen[Any]], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    for process in processes:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=max(0.0, deadline - time.monotonic()))


def _cmdline(pid: int) -> str:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:200]
    return "(gone)"


def _slot_address(slot: int) -> str:
    """The abstract unix socket (in the host's network namespace) that holds `slot`."""
    return f"\0pytest-super-ray-test-cluster-slot-{slot}"


def _link_exists(name: str) -> bool:
    return _sh("ip", "link", "show", name).returncode == 0


def _mounts_under(root: Path) -> list[str]:
    prefix = f"{root}/"
    with open("/proc/self/mounts") as mounts:
        return [line.split()[1] for line in mounts if line.split()[1].startswith(prefix)]


#: a cluster's name: psr-<xdist worker>-<pid of the process that started it>-<serial>
_NAME = re.compile(r"^psr-[A-Za-z0-9]+-(\d+)-\d+$")


def sweep_orphans() -> list[str]:
    """Stop the clusters whose process is gone (an xdist worker ended by pytest-timeout's thread
    method, a killed pytest): their processes, engines, namespace, bridges, iptables chains,
    mounts and folder, as `stop()` does (a slot another process holds is left alone). The names
    of the clusters stopped."""
    names = {n for n in _sh("ip", "netns", "list").stdout.split() if _NAME.match(n)}
    names |= {p.name for p in Path("/tmp").glob("psr-*") if _NAME.match(p.name)}
    swept = []
    for name in sorted(names):
        match = _NAME.match(name)
        assert match is not None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(int(match.group(1)), 0)
            continue  # its process lives: not an orphan
        orphan = RayTestCluster.__new__(RayTestCluster)
        orphan.name, orphan.root = name, Path("/tmp", name)
        orphan.nodes, orphan.engines = 0, []
        orphan.chains = {"filter": [f"{name}-fwd", f"{name}-in"], "nat": [name]}
        orphan.slot, orphan.bridges, orphan._slot_lock = None, [], None
        with contextlib.suppress(OSError, ValueError):
            slot = int((orphan.root / "slot").read_text())
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            with contextlib.closing(probe):
                probe.bind(_slot_address(slot))  # free: nobody's bridges but the orphan's
                orphan.slot = slot
                orphan.bridges = [f"psr{slot:02d}n{i}" for i in range(MAX_NODES)]
        orphan.engines = [f"unix://{e}/docker.sock" for e in sorted(orphan.root.glob("e[0-9]"))]
        orphan.bridges += [bridge_interface(engine) for engine in orphan.engines]
        orphan._nodes, orphan._daemons, orphan._controllers, orphan._logs = {}, [], [], []
        orphan._started = True
        orphan.stop()
        swept.append(name)
    return swept


def start_ray_cluster(image: str, **options: Any) -> Iterator[RayTestCluster]:
    """A started `RayTestCluster` (options as its constructor's), stopped afterwards and checked
    to have left nothing: the body of a fixture, as `start_second_engine` is."""
    cluster = RayTestCluster(image, **options)
    with cluster:
        yield cluster
    leftovers = cluster.leftovers()
    assert not leftovers, f"the Ray test cluster left {leftovers}"
