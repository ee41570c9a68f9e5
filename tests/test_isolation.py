"""Isolation, tried as an attacker would, on the real engine (issue 12; docs/security.md).

A task must see nothing of another task, of the host, or of the next run:
- a spy task scans and subscribes to another running task's kernel and reads nothing, on the local
  engine and on a second engine reached as a remote one is (through the engine's connection);
- with network "none" no TCP or UDP leaves the task, to the host's bridge addresses included;
  with "bridge" the task reaches the package registries but not the host's own services;
- a task that writes past --super-disk is stopped and recorded with exit status disk_limit;
- a task of an untrusted agent cannot plant anything in the shared pip cache;
- nothing a run made is left on the host, and `pytest-super cleanup` removes what a killed run left.

Test servers bind only the host's own bridge addresses (listed from the engine); probes address
only those, the containers these tests made, and pypi.org (the package registry).
"""

from __future__ import annotations

import ast
import contextlib
import ipaddress
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from pytest_super.errors import ImageMissing
from pytest_super.kernels import provision_kernel
from pytest_super.kernels.base import Kernel, KernelSettings
from pytest_super.kernels.docker.cleanup import (
    cleanup_containers,
    cleanup_host_folders,
    make_host_folder,
    remove_host_folder,
)
from pytest_super.kernels.docker.engine import engine_address
from pytest_super.kernels.docker.hostguard import input_rule
from pytest_super.kernels.docker.lease import LABEL_LEASE_RUN
from pytest_super.kernels.docker.network import TASK_NETWORK, bridge_interface, task_network
from tests.support.projects import (  # the helpers of the scale tests: same projects, same processes
    PytestRun,
    make_project,
    only_run_dir,
    results,
    task_yaml,
)
from tests.support.second_engine import SECOND_HOST

pytestmark = pytest.mark.docker


PROBES = (Path(__file__).parent / "support" / "isolation_probes.py").read_text()


# -- helpers -------------------------------------------------------------------------------------
def armed(kernel: Kernel) -> Kernel:
    """Ship the attacker's probes into the kernel."""
    kernel.write_file("/tmp/isolation_probes.py", PROBES)
    loaded = kernel.execute(
        "import sys; sys.path.insert(0, '/tmp'); import isolation_probes as probes", timeout=60
    )
    assert loaded.status == "ok", loaded.output
    return kernel


def probe(kernel: Kernel, call: str, timeout: float = 120) -> Any:
    """Run `probes.<call>` in the kernel and return its value."""
    result = kernel.execute(f"print(repr(probes.{call}))", timeout=timeout)
    assert result.status == "ok", result.output
    return ast.literal_eval(result.output.strip().splitlines()[-1])


def container_of(kernel: Kernel) -> str:
    return kernel._box.container_id  # type: ignore[attr-defined]


def task_address(client: docker.DockerClient, kernel: Kernel) -> str:
    networks = client.api.inspect_container(container_of(kernel))["NetworkSettings"]["Networks"]
    return networks[TASK_NETWORK]["IPAddress"]


def gateway(client: docker.DockerClient, network: str) -> str:
    """The host's address on `network` (docker's default bridge lists only its subnet: .1)."""
    [config] = client.api.inspect_network(network)["IPAM"]["Config"]
    return config.get("Gateway") or str(next(ipaddress.ip_network(config["Subnet"]).hosts()))


class HostServers:
    """A TCP listener and a UDP socket on each of the host's bridge `addresses`; what they got."""

    def __init__(self, addresses: list[str]) -> None:
        self.tcp: dict[str, socket.socket] = {}
        self.udp: dict[str, socket.socket] = {}
        self.got: list[str] = []
        for address in addresses:
            listener = socket.create_server((address, 0))
            listener.settimeout(0.2)
            self.tcp[address] = listener
            datagram = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            datagram.bind((address, 0))
            datagram.settimeout(0.2)
            self.udp[address] = datagram
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def targets(self) -> list[tuple[str, str, int]]:
        return [("tcp", a, s.getsockname()[1]) for a, s in self.tcp.items()] + [
            ("udp", a, s.getsockname()[1]) for a, s in self.udp.items()
        ]

    def _serve(self) -> None:
        while not self._stop.is_set():
            for address, listener in self.tcp.items():
                with contextlib.suppress(OSError):
                    conn, peer = listener.accept()
                    self.got.append(f"tcp {address} from {peer}")
                    conn.close()
            for address, datagram in self.udp.items():
                with contextlib.suppress(OSError):
                    data, peer = datagram.recvfrom(100)
                    self.got.append(f"udp {address} from {peer}: {data!r}")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        for sock in [*self.tcp.values(), *self.udp.values()]:
            sock.close()


@pytest.fixture
def settings(image: str, engine: docker.DockerClient) -> Iterator[KernelSettings]:
    run_id = f"test-iso-{uuid.uuid4().hex[:10]}"
    yield KernelSettings(run_id=run_id, worker="iso", mem="1g", cpus=1.0, image=image)
    left = engine.containers.list(all=True, filters={"label": f"pytest-super.run={run_id}"})
    cleanup_containers(engine, run_id=run_id)
    assert not left, f"containers left behind by the test: {[c.name for c in left]}"


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A temporary directory short enough to hold the boxes' sockets (see host_folder_root)."""
    path = Path(tempfile.mkdtemp(prefix="iso-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def host_servers(engine: docker.DockerClient) -> Iterator[HostServers]:
    """Servers on the host's addresses on docker0 and on the task bridge (nothing else)."""
    task_network(engine, engine_address(None), "bridge")  # make sure its gateway exists
    servers = HostServers([gateway(engine, "bridge"), gateway(engine, TASK_NETWORK)])
    yield servers
    servers.close()


# -- 1. a spy task reads nothing of another task's kernel ----------------------------------------
@pytest.mark.parametrize("where", ["local engine", "second engine via the engine's connection"])
def test_a_spy_task_reads_nothing_of_another_tasks_kernel(settings, engine, request, where):
    client = engine
    if where != "local engine":
        client = request.getfixturevalue("second_engine")
        settings.options = {**settings.options, "docker_host": SECOND_HOST, "channel": "relay"}
    secret = f"SECRET-{uuid.uuid4().hex}"
    victim = provision_kernel(settings, task_id="victim")
    spy = None
    try:
        running = victim.execute(
            f"import time\nfor _ in range(1200):\n    print({secret!r}, flush=True)\n"
            "    time.sleep(0.05)",
            timeout=0.5,
            interrupt_on_timeout=False,
        )
        assert running.still_running, running
        spy = armed(provision_kernel(settings, task_id="spy"))
        victim_ip = task_address(client, victim)
        host_ip = gateway(client, TASK_NETWORK)
        # nothing of the victim listens on any port, so a scan of all of them finds nothing
        assert probe(spy, f"open_tcp_ports({victim_ip!r}, range(1, 65536))", 300) == []
        # not even where its kernel used to listen, nor on the host: subscribing reads nothing
        endpoints = [
            f"tcp://{ip}:{port}" for ip in (victim_ip, host_ip) for port in range(50001, 50006)
        ]
        assert probe(spy, f"subscribe({endpoints!r}, 3.0)") == []
        # the only kernel sockets the spy can find are its own
        own = probe(spy, "unix_sockets('/')")
        assert sorted(own) == [f"/run/pytest-super/kernel-{p}" for p in range(50001, 50006)]
        # meanwhile the victim was printing its secret all along, to its controller only
        rest = victim.interrupt()
        assert secret in running.output + rest.output
        assert probe(armed(victim), "listening_inet_sockets()") == []
        # and no port of either box is published on the engine's host
        for kernel in (victim, spy):
            attrs = client.api.inspect_container(container_of(kernel))
            assert not attrs["NetworkSettings"]["Ports"], attrs["NetworkSettings"]["Ports"]
            assert not attrs["Config"].get("ExposedPorts")
    finally:
        victim.close()
        if spy is not None:
            spy.close()


def test_the_port_scan_finds_a_listening_port_in_a_batch_larger_than_the_file_limit():
    """The spy's scan above can fail: a port that listens is found, and a batch larger than the
    process's limit of open files is cut to it instead of failing to open sockets."""
    import resource

    from tests.support.isolation_probes import open_tcp_ports

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    limit = len(os.listdir("/proc/self/fd")) + 512  # this process may open 512 more files
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
    try:
        with socket.socket() as server:
            server.bind(("127.0.0.1", 0))
            server.listen()
            port = server.getsockname()[1]
            ports = range(max(1, port - 3000), min(65536, port + 3000))
            assert port in open_tcp_ports("127.0.0.1", ports, batch=4 * limit)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


# -- 2. network "none": no TCP or UDP leaves the task ---------------------------------------------
def test_network_none_lets_no_connection_out_while_the_controller_drives_the_kernel(
    settings, host_servers
):
    settings.network = "none"
    kernel = armed(provision_kernel(settings, task_id="offline"))
    try:
        assert probe(kernel, "interfaces()") == ["lo"]
        for kind, address, port in host_servers.targets():
            if kind == "tcp":
                assert probe(kernel, f"tcp_connect({address!r}, {port})") != "connected"
            else:
                assert probe(kernel, f"udp_send({address!r}, {port})") != "sent"
        time.sleep(0.5)
        assert host_servers.got == []
        # the controller still drives it: cells, interrupts, a restart
        assert kernel.execute("1+1", timeout=30).output.strip() == "2"
        stopped = kernel.execute("import time\ntime.sleep(60)", timeout=1)
        assert stopped.status == "timeout" and "KeyboardInterrupt" in stopped.output
        kernel.restart()
        assert kernel.execute("2+2", timeout=30).output.strip() == "4"
    finally:
        kernel.close()


# -- 3. network "bridge": the registries, not the host's services ---------------------------------
def test_bridge_reaches_the_package_registry_but_not_the_hosts_services(
    settings, engine, host_servers
):
    kernel = armed(provision_kernel(settings, task_id="online"))
    try:
        # the harness runs as root with iptables here, so it must have guarded the host
        rule = input_rule(bridge_interface(engine_address(None)))
        assert subprocess.run(["iptables", "-w", "-C", *rule], check=False).returncode == 0
        for kind, address, port in host_servers.targets():
            if kind == "tcp":
                assert probe(kernel, f"tcp_connect({address!r}, {port}, 3.0)") != "connected"
            else:
                probe(kernel, f"udp_send({address!r}, {port})")
        time.sleep(0.5)
        assert host_servers.got == []
        assert probe(kernel, "tcp_connect('pypi.org', 443, 10.0)") == "connected"
    finally:
        kernel.close()


# -- 4. a disk filler is stopped and recorded -----------------------------------------------------
def filler(chunks: int, pause_s: float) -> str:
    """A cell writing `chunks` of 8 MiB, pausing `pause_s` after each, then saying so."""
    return (
        "import os, time\nchunk = os.urandom(8 << 20)\nwith open('/content/fill', 'wb') as f:\n"
        f"    for _ in range({chunks}):\n        f.write(chunk)\n        f.flush()\n"
        f"        time.sleep({pause_s})\nprint('wrote {chunks * 8} MiB')"
    )


#: 1 GiB over about 13 s (0.1 s a chunk): longer than the watch's longest interval (POLL_MAX_S),
#: so the watch stops it while it writes. (At full speed, 430 MB/s here, it was done in 2.5 s,
#: between two polls: the case of the next test.)
SLOW_FILLER = filler(128, 0.1)
#: 256 MiB at full speed, then the cell ends: most likely before any poll saw it.
FAST_FILLER = filler(32, 0)


def run_filler(project_dir: Path, engine: Any, short_tmp: Path, cell: str) -> dict:
    make_project(project_dir, {"expert/filler": task_yaml("filler", cell)})
    run = PytestRun(
        project_dir,
        "tasks",
        "--super-agent=gold",
        "--super-disk=64m",
        "-p",
        "no:cacheprovider",
        env={"TMPDIR": str(short_tmp)},
    )
    code = run.wait(300)
    assert code == 1, run.output()
    [line] = results(only_run_dir(project_dir))
    assert (line["outcome"], line["exit_status"]) == ("failed", "disk_limit"), line
    trajectory = json.loads(Path(line["trajectory"]).with_suffix(".json").read_text())
    assert trajectory["info"]["exit_status"] == "disk_limit"
    assert "over the limit of 64.0 MiB (--super-disk)" in trajectory["info"]["detail"]
    run_id = only_run_dir(project_dir).name
    assert engine.containers.list(all=True, filters={"label": f"pytest-super.run={run_id}"}) == []
    assert list(short_tmp.iterdir()) == [], "the run left host folders behind"
    return trajectory


def test_a_disk_filler_is_stopped_with_exit_status_disk_limit(project_dir, engine, short_tmp):
    trajectory = run_filler(project_dir, engine, short_tmp, SLOW_FILLER)
    assert "wrote 1024 MiB" not in json.dumps(trajectory["steps"])  # stopped while it wrote


def test_a_filler_done_between_two_polls_still_ends_with_disk_limit(project_dir, engine, short_tmp):
    """The episode's end measures the disk once more: a writer that finished before the
    background watch looked is not let off."""
    run_filler(project_dir, engine, short_tmp, FAST_FILLER)


# -- 5. an untrusted task cannot poison the pip cache ---------------------------------------------
PLANT = """Thought: plant a file in pip's cache.
Action: execute
<content>
!mkdir -p /root/.cache/pip && echo evil > /root/.cache/pip/{name} && ls /root/.cache/pip
"""
SUBMIT = """Thought: done.
Action: submit
<content>
{"x": 1}
"""


def test_an_untrusted_agent_cannot_poison_the_pip_cache(
    project_dir, engine, image, openai_server, monkeypatch
):
    volume = f"pytest-super-test-pip-{uuid.uuid4().hex[:8]}"
    engine.volumes.create(volume)
    try:
        monkeypatch.setenv("SUPER_API_KEY", "sk-test")
        make_project(project_dir, {"expert/plant": task_yaml("plant", "print('{\"x\": 1}')")})
        openai_server.script([PLANT.format(name="POISON"), SUBMIT])
        run = PytestRun(
            project_dir,
            "tasks",
            "--super-agent=react-super",
            "--super-model=gpt-4o",
            f"--super-base-url={openai_server.base_url}",
            f"--super-pip-cache={volume}",
            "-p",
            "no:cacheprovider",
        )
        assert run.wait(300) == 0, run.output()
        assert f"pip cache volume {volume!r} not mounted" in run.output()
        assert "POISON" in openai_server.requests[1].prompt_text  # the agent's plant "worked"
        # ... in its own container only; a trusted (gold) run shares the cache
        trusted = task_yaml("trusted", "!echo ok > /root/.cache/pip/TRUSTED", "print('{\"x\": 1}')")
        make_project(project_dir, {"expert/plant": trusted})
        code = PytestRun(
            project_dir, "tasks", "--super-agent=gold", f"--super-pip-cache={volume}"
        ).wait(300)
        assert code == 0
        listing = engine.containers.run(
            image, ["ls", "-A", "/cache"], volumes={volume: {"bind": "/cache"}}, remove=True
        )
        assert listing.decode().split() == ["TRUSTED"]
    finally:
        engine.volumes.get(volume).remove(force=True)


# -- 6. nothing of a run is left on the host ------------------------------------------------------
def test_every_exit_path_removes_the_boxes_host_folder(settings, engine, monkeypatch, short_tmp):
    monkeypatch.setattr(tempfile, "tempdir", str(short_tmp))
    kernel = provision_kernel(settings, task_id="tidy")
    folder = Path(kernel._box.folder)  # type: ignore[attr-defined]
    assert folder.parent == short_tmp
    assert sorted(p.name for p in folder.iterdir()) == ["ipc", "kernel.json", "owner.json"]
    kernel.close()
    assert list(short_tmp.iterdir()) == []
    kept = provision_kernel(settings, task_id="kept")
    kept.detach()  # --super-keep: the folder stays with its box (the connection file is in it)
    assert len(list(short_tmp.iterdir())) == 1
    cleanup_containers(engine, run_id=settings.run_id)
    assert list(short_tmp.iterdir()) == []
    settings.image = "pytest-super-kernel:no-such-tag"
    with pytest.raises(ImageMissing):
        provision_kernel(settings, task_id="no-image")
    assert list(short_tmp.iterdir()) == []


def test_another_engine_of_this_host_leaves_a_live_boxs_folder_alone(settings, second_engine):
    """Two engines on one host may report one ID (Docker 20.10 takes it from the shared
    /etc/docker/key.json): a run on the second engine once removed a live box's folder of the
    first, its kernel's sockets with it, while cleaning up at its start."""
    kernel = provision_kernel(settings, task_id="neighbour")
    try:
        folder = Path(kernel._box.folder)  # type: ignore[attr-defined]
        assert str(folder) not in cleanup_host_folders(second_engine)
        assert (folder / "ipc").is_dir()
        assert kernel.execute("1+1", timeout=30).output.strip() == "2"
    finally:
        kernel.close()
    assert not folder.exists()


def test_a_long_temporary_directory_still_holds_no_socket_path_too_long(
    settings, monkeypatch, tmp_path
):
    long_tmp = tmp_path / ("x" * 80)
    long_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(long_tmp))
    kernel = provision_kernel(settings, task_id="long-tmp")
    try:
        folder = Path(kernel._box.folder)  # type: ignore[attr-defined]
        assert folder.parent == Path("/tmp")
        assert kernel.execute("1+1", timeout=30).output.strip() == "2"
    finally:
        kernel.close()
    assert not folder.exists()


KILLED_RUN = """\
import sys, time
from pytest_super.kernels import provision_kernel
from pytest_super.kernels.base import KernelSettings
kernel = provision_kernel(KernelSettings(run_id=sys.argv[1], image=sys.argv[2]), task_id="killed")
print(kernel._box.folder, flush=True)
time.sleep(600)
"""


def _cleanup_command(run_id: str, env: dict[str, str]) -> None:
    """`pytest-super cleanup --run RUN_ID`, as a user types it after a killed run."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest_super.cli", "cleanup", "--run", run_id],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_cleanup_removes_what_a_killed_run_left(engine, image, short_tmp):
    run_id = f"test-iso-{uuid.uuid4().hex[:10]}"
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_SUPER_CONTROLLER_PID"}
    env["TMPDIR"] = str(short_tmp)
    # without the dead man's switch, so that the engine's reaper does not remove the killed
    # run's containers before `cleanup --run` (tests/test_dead_man_switch.py tests the switch)
    env["PYTEST_SUPER_DEAD_MAN_SWITCH"] = "off"
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_RUN, run_id, image],
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )
    try:
        folder = Path(proc.stdout.readline().strip())
        assert (folder / "kernel.json").exists()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    assert engine.containers.list(all=True, filters={"label": f"pytest-super.run={run_id}"})
    _cleanup_command(run_id, env)
    assert engine.containers.list(all=True, filters={"label": f"pytest-super.run={run_id}"}) == []
    assert list(short_tmp.iterdir()) == [], "the killed run's key folder is still there"
    leases = engine.containers.list(all=True, filters={"label": f"{LABEL_LEASE_RUN}={run_id}"})
    assert leases == [], "the killed run's lease is still there"


# the child: a box started for real, the process killed (SIGKILL) as its container is created:
# its folder is made, its owner file names the maker, no container or key exists yet
KILLED_MID_START = """\
import os, signal, sys
from pytest_super.kernels import provision_kernel
from pytest_super.kernels.base import KernelSettings

def kill(frame, event, arg):
    if event == "call" and frame.f_code.co_name == "_create_leased_container":
        print(os.listdir(os.environ["TMPDIR"]), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)

sys.setprofile(kill)
provision_kernel(KernelSettings(run_id=sys.argv[1], image=sys.argv[2]), task_id="mid-start")
"""


def test_a_folder_whose_maker_was_killed_mid_start_is_removed_at_once(
    engine, image, short_tmp, monkeypatch
):
    """Issue 42: a run's clean-up left the key folder of a worker ended while it started a box
    (make test-all beside four busy loops, test_attack_round5_inputs.py's stubborn workers): the
    folder held no owner file until its container existed, seconds later on a loaded engine, and
    one without is kept for 60 s as a start that may still be under way. Now the folder names its
    maker from the start, and a clean-up removes it once that process is provably gone."""
    run_id = f"test-iso-{uuid.uuid4().hex[:10]}"
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_SUPER_CONTROLLER_PID"}
    env["TMPDIR"] = str(short_tmp)
    env["PYTEST_SUPER_DEAD_MAN_SWITCH"] = "off"
    done = subprocess.run(
        [sys.executable, "-c", KILLED_MID_START, run_id, image],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr[-3000:]
    (folder,) = short_tmp.iterdir()
    assert done.stdout.strip() == repr([folder.name])
    assert sorted(p.name for p in folder.iterdir()) == ["ipc", "owner.json"]
    assert "engine" not in json.loads((folder / "owner.json").read_text())
    # a start under way in a live process (this one) is left alone, however young
    monkeypatch.setattr(tempfile, "tempdir", str(short_tmp))
    live = Path(make_host_folder())
    _cleanup_command(run_id, env)
    assert sorted(short_tmp.iterdir()) == [live], "the killed start's key folder is still there"
    assert str(live) not in cleanup_host_folders(engine)
    remove_host_folder(str(live))


def test_a_maker_in_another_pid_namespace_is_judged_by_the_folders_age(
    engine, short_tmp, monkeypatch
):
    """A maker this process cannot judge (its pid names nothing here) is neither gone nor alive:
    its folder is a crashed start once older than a minute, as a folder without an owner file."""
    from pytest_super.kernels.docker.cleanup import MAKER, UNOWNED_FOLDER_GRACE_S
    from pytest_super.process_identity import LABEL_HOLDER_PID_NS

    monkeypatch.setattr(tempfile, "tempdir", str(short_tmp))
    folder = Path(make_host_folder())
    owner = json.loads((folder / "owner.json").read_text())
    owner[MAKER][LABEL_HOLDER_PID_NS] = "1"  # not this process's namespace
    (folder / "owner.json").write_text(json.dumps(owner))
    (folder / "ipc").mkdir()
    assert str(folder) not in cleanup_host_folders(engine)  # young: a start that may be under way
    long_ago = time.time() - UNOWNED_FOLDER_GRACE_S - 5
    os.utime(folder, (long_ago, long_ago))
    assert str(folder) in cleanup_host_folders(engine)
    assert not folder.exists()


def test_a_bad_disk_size_is_refused_with_what_to_write(pytester: pytest.Pytester):
    result = pytester.runpytest_subprocess("--super-disk=lots")
    assert result.ret != 0
    result.stderr.fnmatch_lines(
        ["*--super-disk 'lots': expected a size from 1m to 1024t such as 20g or 500m, or none*"]
    )
