"""The Ray test cluster of tests/support/ray_cluster.py works as the Ray backend's tests assume.

On the session's cluster (tests/support/ray_fixtures.py: a head and two worker nodes in a network
namespace of its own with no route out, each node with its own Docker engine holding the kernel
image, in the host's network namespace, whose containers reach PyPI as the main engine's do), and
one small cluster of its own started beside it, then stopped and checked to leave nothing.
`test_kill_node` starts the killed node again. Every Ray driver here is a `python -c` run inside
the namespace (the test process itself is outside it), so its functions travel to the workers by
value.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import docker
import docker.errors
import pytest

from pytest_super.kernels.docker.network import TASK_NETWORK, bridge_interface
from tests.support.ray_cluster import SLOT_BASE, RayTestCluster
from tests.support.ray_fixtures import CLUSTER_TESTS

pytestmark = CLUSTER_TESTS

HOST_LISTENERS = ["ss", "-ltnupH"]

#: A driver: a task pinned to node argv[1] by its resource starts a container of image argv[2]
#: on the engine DOCKER_HOST names there, waits for it, removes it and says what it saw.
_CONTAINER_SCRIPT = """
import json, os, sys, docker, ray

@ray.remote(num_cpus=1, resources={sys.argv[1]: 1})
def run_container(image):
    client = docker.from_env()
    container = client.containers.run(
        image, ["python", "-c", "print('hello from the node')"], detach=True, network_mode="none"
    )
    status = container.wait(timeout=60)["StatusCode"]
    output = container.logs().decode().strip()
    container.remove(force=True)
    return {
        "docker_host": os.environ["DOCKER_HOST"],
        "root_dir": client.info()["DockerRootDir"],
        "status": status,
        "output": output,
        "left": [c.id for c in client.containers.list(all=True, filters={"id": container.id})],
    }

ray.init(logging_level="ERROR")
print("RESULT", json.dumps(ray.get(run_container.remote(sys.argv[2]))))
"""

#: Run in a container on a node's task network: fetch PyPI's page of pip (through the host's
#: proxy, trusting the host's CA bundle the image holds), then knock on port 9 of the network's
#: gateway (the host), which the cluster's INPUT rule must drop rather than let refuse.
_EGRESS_PROGRAM = """
import socket, sys, urllib.request
urllib.request.urlopen('https://pypi.org/simple/pip/', timeout=20)
print('pypi: ok')
try:
    socket.create_connection((sys.argv[1], 9), timeout=3).close()
    print('host: open')
except ConnectionRefusedError:
    print('host: refused')
except OSError:
    print('host: dropped')
"""

#: A driver: a task pinned to node argv[1] starts a container of image argv[2] on its engine's
#: task network, made as the backend makes it (`task_network`), running argv[3]; says what it saw.
_EGRESS_SCRIPT = """
import json, os, sys, time, docker, ray

@ray.remote(num_cpus=1, resources={sys.argv[1]: 1})
def reach_out(image, program):
    from pytest_super.kernels.docker.network import task_network
    client = docker.from_env()
    network = task_network(client, os.environ["DOCKER_HOST"], "bridge")
    (ipam,) = client.networks.get(network).attrs["IPAM"]["Config"]
    started = time.monotonic()
    container = client.containers.run(
        image, ["python3", "-c", program, ipam["Gateway"]], detach=True, network_mode=network
    )
    status = container.wait(timeout=120)["StatusCode"]
    output = container.logs().decode().strip()
    container.remove(force=True)
    return {
        "network": network,
        "subnet": ipam["Subnet"],
        "status": status,
        "output": output,
        "seconds": time.monotonic() - started,
    }

ray.init(logging_level="ERROR")
print("RESULT", json.dumps(ray.get(reach_out.remote(sys.argv[2], sys.argv[3]))))
"""

#: A driver: a task pinned to node argv[1] writes its pid to file argv[2], then runs until file
#: argv[3] exists (at most 120 s) and says whether it saw it.
_HOLD_SCRIPT = """
import json, os, sys, time, ray

@ray.remote(num_cpus=1, resources={sys.argv[1]: 1})
def hold(started, release):
    with open(started, "w") as file:
        file.write(str(os.getpid()))
    deadline = time.monotonic() + 120
    while not os.path.exists(release) and time.monotonic() < deadline:
        time.sleep(0.1)
    return {"released": os.path.exists(release), "docker_host": os.environ["DOCKER_HOST"]}

ray.init(logging_level="ERROR")
print("RESULT", json.dumps(ray.get(hold.remote(sys.argv[2], sys.argv[3]))))
"""


def _listeners(cmd: list[str]) -> set[tuple[str, str, frozenset[int]]]:
    """(protocol, local address, owner pids) of every listening TCP and bound UDP socket."""
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    found = set()
    for line in out.splitlines():
        fields = line.split()
        pids = frozenset(int(p) for p in re.findall(r"pid=(\d+)", line))
        found.add((fields[0], fields[4], pids))
    return found


def _is_loopback(local: str) -> bool:
    host = local.rsplit(":", 1)[0].strip("[]").split("%")[0]
    if host in ("*", "0.0.0.0", "::"):
        return False
    address = ipaddress.ip_address(host)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


#: the command line of an engine's process (not Ray's)
ENGINE_PROCESS = re.compile(r"^(\S*/)?(dockerd|containerd|containerd-shim\S*|docker-proxy) ")


def _cmdline(pid: int) -> str:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    return ""


def _net_namespace(pid: int) -> int | None:
    """The inode of the network namespace of process `pid` (None once it is gone)."""
    with contextlib.suppress(OSError):
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    return None


def _is_wildcard(local: str) -> bool:
    return local.rsplit(":", 1)[0].strip("[]") in ("*", "0.0.0.0", "::")


def _driver(cluster: RayTestCluster, script: str, *args: str) -> dict[str, object]:
    done = cluster.run([sys.executable, "-c", script, *args], timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    return _result(done.stdout)


def _result(stdout: str) -> dict[str, object]:
    """The JSON a driver printed after "RESULT " (Ray may print other lines)."""
    lines = [line for line in stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, stdout[-3000:]
    result: dict[str, object] = json.loads(lines[-1].removeprefix("RESULT "))
    return result


def test_each_node_runs_containers_on_its_own_engine(cluster: RayTestCluster, image: str) -> None:
    for i, engine in enumerate(cluster.engines):
        seen = _driver(cluster, _CONTAINER_SCRIPT, cluster.node_resource(i), image)
        assert seen["docker_host"] == engine
        assert seen["root_dir"] == f"{cluster.root}/e{i}/data"
        assert (seen["status"], seen["output"], seen["left"]) == (0, "hello from the node", [])
        client = docker.DockerClient(base_url=engine)
        try:  # the driver saw its container removed ("left"); the image is the node's own
            assert client.images.get(image)
        finally:
            client.close()


def test_a_container_on_a_node_reaches_pypi(cluster: RayTestCluster, image: str) -> None:
    """A container a task on node 0 starts on the backend's task network of its engine fetches
    from PyPI (name resolution by Docker's embedded DNS, and the cluster's masquerade), and cannot
    reach the host; its network's subnet and bridge are the node's own, on the host."""
    seen = _driver(cluster, _EGRESS_SCRIPT, cluster.node_resource(0), image, _EGRESS_PROGRAM)
    print(f"a container of node 0 fetched from PyPI in {seen['seconds']:.1f} s")
    assert (seen["status"], seen["output"]) == (0, "pypi: ok\nhost: dropped"), seen
    assert seen["network"] == TASK_NETWORK
    assert cluster.slot is not None
    node_0_pool = ipaddress.IPv4Network(f"10.{SLOT_BASE + cluster.slot}.0.0/20")
    assert ipaddress.IPv4Network(str(seen["subnet"])).subnet_of(node_0_pool)
    bridge = bridge_interface(cluster.engines[0])
    on_host = subprocess.run(["ip", "-o", "addr", "show", "dev", bridge], capture_output=True)
    assert str(seen["subnet"]).rsplit(".", 1)[0] in on_host.stdout.decode()
    in_namespace = subprocess.run(
        ["ip", "-n", cluster.name, "link", "show", bridge], capture_output=True
    )
    assert in_namespace.returncode != 0


def test_a_second_cluster_beside_it_and_its_stop_leaves_nothing(
    cluster: RayTestCluster, image: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another cluster on the same fixed ports runs at once (each namespace has its own ports);
    killing its node 0 leaves ours, on the same node manager port, alone, and so does a new head
    of its own (`ray start --head` beside our GCS of the same address); `image_on=[]` leaves
    its engine without the image; and its `stop()` leaves nothing: no process, namespace,
    bridge, iptables chain, engine or folder. It starts where the home folder holds a Ray token
    (~/.ray/auth_token, which any local `ray.init()` writes): its nodes and drivers still agree
    (`AUTH_ENV`; without it every `ray.nodes()` failed with InvalidAuthToken)."""
    home = tmp_path / "home"
    (home / ".ray").mkdir(parents=True)
    (home / ".ray" / "auth_token").write_text("0" * 64)
    monkeypatch.setenv("HOME", str(home))
    other = RayTestCluster(image, nodes=1, image_on=[])
    with other:
        assert (other.address, other.name != cluster.name) == (cluster.address, True)
        ours, theirs = cluster.node_ids(), other.node_ids()
        assert set(theirs) == {"head", other.node_resource(0)}
        assert set(ours) == {"head", cluster.node_resource(0), cluster.node_resource(1)}
        assert not set(ours.values()) & set(theirs.values())
        client = docker.DockerClient(base_url=other.engines[0])
        try:
            assert client.images.list() == []
        finally:
            client.close()
        other.kill_node(0)
        assert cluster.node_ids() == ours
        # its head restarted while ours runs (whose GCS has the same address, in our namespace)
        other.restart_head()
        restarted = other.node_ids()
        assert set(restarted) == {"head", other.node_resource(0)}
        assert restarted["head"] != theirs["head"]
        assert cluster.node_ids() == ours
        started = time.monotonic()
    print(f"Ray test cluster stopped in {time.monotonic() - started:.1f} s")
    assert other.leftovers() == []
    assert cluster.node_ids() == ours
    pattern = re.escape(f"{other.root}/")
    assert subprocess.run(["pgrep", "-f", pattern], capture_output=True).stdout == b""
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert other.name not in namespaces
    task_bridges = [bridge_interface(engine) for engine in other.engines]
    for bridge in other.bridges + task_bridges:
        assert subprocess.run(["ip", "link", "show", bridge], capture_output=True).returncode != 0
    for table, chains in other.chains.items():
        rules = subprocess.run(["iptables", "-w", "-t", table, "-S"], capture_output=True).stdout
        assert not set(chains) & set(rules.decode().split())
    for engine in other.engines:
        with contextlib.suppress(docker.errors.DockerException):
            docker.DockerClient(base_url=engine).ping()
            pytest.fail(f"the engine at {engine} still answers")
    assert not other.root.exists()


def test_nothing_listens_beyond_loopback(cluster: RayTestCluster) -> None:
    """Every Ray process is in the namespace; the engines (dockerd, containerd, shims) are in
    the host's, where none of them listens on any port: dockerd has only its unix socket."""
    pids = cluster.pids()
    namespace = os.stat(f"/run/netns/{cluster.name}").st_ino
    host = os.stat("/proc/self/ns/net").st_ino
    where = {p: n for p in pids if (n := _net_namespace(p)) is not None}
    engines = {p for p in where if ENGINE_PROCESS.match(_cmdline(p))}
    dockerds = [p for p in engines if _cmdline(p).split()[0].endswith("dockerd")]
    assert len(dockerds) == len(cluster.engines)
    assert {where[p] for p in engines} == {host}
    ray_pids = set(where) - engines
    assert len(ray_pids) > 10
    assert [(p, _cmdline(p)) for p in ray_pids if where[p] != namespace] == []
    assert [s for s in _listeners(HOST_LISTENERS) if s[2] & pids] == []  # none of the cluster's
    inside = _listeners(["ip", "netns", "exec", cluster.name, *HOST_LISTENERS])
    managers = [str(cluster._node_ports(str(i))["--node-manager-port"]) for i in range(2)]
    assert {"6379", *managers} <= {local.rsplit(":", 1)[1] for _, local, _ in inside}
    links = subprocess.run(
        ["ip", "-n", cluster.name, "-o", "link", "show"], capture_output=True, text=True
    ).stdout
    only_lo = [line.split(":")[1].strip() for line in links.splitlines()] == ["lo"]
    assert only_lo, links  # the engines' bridges are on the host
    exposed = [s for s in inside if not (_is_loopback(s[1]) or _is_wildcard(s[1]))]
    assert exposed == []
    routes = subprocess.run(
        ["ip", "-n", cluster.name, "route", "show", "default"], capture_output=True, text=True
    )
    assert routes.stdout.strip() == ""  # nothing can leave the namespace


def test_kill_node(cluster: RayTestCluster, tmp_path: Path) -> None:
    started, release = tmp_path / "started", tmp_path / "release"
    holder = cluster.popen(
        [sys.executable, "-c", _HOLD_SCRIPT, cluster.node_resource(0), str(started), str(release)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not started.exists():
        assert holder.poll() is None, holder.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "the task on node 0 did not start"
        time.sleep(0.1)
    old_ids = cluster.node_ids()

    seconds = cluster.kill_node(1)

    print(f"the head reported node 1 dead {seconds:.1f} s after SIGKILL")
    assert seconds < 30
    dead = {n["NodeID"] for n in cluster.nodes_info() if not n["Alive"]}
    assert old_ids[cluster.node_resource(1)] in dead
    assert cluster.node_ids() == {k: v for k, v in old_ids.items() if k != cluster.node_resource(1)}
    node_1 = re.escape(f"{cluster.root}/n1/")
    assert subprocess.run(["pgrep", "-f", node_1], capture_output=True).stdout == b""
    assert holder.poll() is None  # node 0 still runs the task
    release.touch()
    out, err = holder.communicate(timeout=60)
    assert holder.returncode == 0, err[-3000:]
    assert _result(out) == {
        "released": True,
        "docker_host": cluster.engines[0],
    }

    cluster.restart_node(1)
    assert cluster.node_resource(1) in cluster.node_ids()
