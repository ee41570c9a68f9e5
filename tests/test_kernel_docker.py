"""The docker kernel backend against the real engine: containers, ports, secrets, limits, cleanup.

Every test runs under its own run id; a fixture checks that no container of that run is left.
The kernel image is the default one, built offline once (cached by its content hash).
"""

from __future__ import annotations

import http.server
import json
import os
import re
import socketserver
import stat
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import docker
import pytest

from pytest_super.errors import EngineUnavailable, ImageMissing
from pytest_super.kernels import provision_kernel
from pytest_super.kernels.base import KernelSettings
from pytest_super.kernels.docker import lease as lease_module
from pytest_super.kernels.docker.backend import container_name
from pytest_super.kernels.docker.cleanup import cleanup_containers
from pytest_super.kernels.docker.engine import docker_client
from pytest_super.kernels.docker.image import build_image
from pytest_super.kernels.docker.lease import LABEL_LEASE, TTL_S, Lease, engine_time
from pytest_super.kernels.docker.settings import docker_options
from pytest_super.process_identity import Holder

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def image() -> str:
    return build_image(offline=True, log=lambda line: None)


@pytest.fixture(scope="module")
def client(image: str) -> docker.DockerClient:
    return docker_client(KernelSettings())


@pytest.fixture
def settings(image: str, client: docker.DockerClient) -> KernelSettings:
    run_id = f"test-{uuid.uuid4().hex[:10]}"
    yield KernelSettings(run_id=run_id, worker="gw7", mem="1g", cpus=1.0, startup_timeout_s=60)
    left = client.containers.list(all=True, filters={"label": f"pytest-super.run={run_id}"})
    names = [c.name for c in left]
    cleanup_containers(client, run_id=run_id)
    assert not names, f"containers left behind by the test: {names}"


@pytest.fixture
def kernel(settings: KernelSettings):
    k = provision_kernel(settings, task_id="demo-task")
    yield k
    k.close()


def _container(client: docker.DockerClient, settings: KernelSettings):
    [container] = client.containers.list(
        all=True, filters={"label": f"pytest-super.run={settings.run_id}"}
    )
    return container


def test_kernel_runs_cells_with_ipython_semantics(kernel) -> None:
    result = kernel.execute("1+1", timeout=30)
    assert (result.status, result.output.strip()) == ("ok", "2")
    assert kernel.execute("!pwd", timeout=30).output.strip() == "/content"
    kernel.execute("%cd /tmp", timeout=30)
    assert kernel.execute("!pwd", timeout=30).output.strip() == "/tmp"
    written = kernel.execute("%%writefile hello.py\nprint('hi from file')\n", timeout=30)
    assert written.status == "ok"
    assert kernel.execute("%run hello.py", timeout=30).output.strip() == "hi from file"
    assert kernel.read_file("/tmp/hello.py") == "print('hi from file')\n"
    version = kernel.execute("import sys; sys.version_info >= (3, 10)", timeout=30)
    assert version.output.strip() == "True"


def test_labels_name_ports_and_limits(kernel, client, settings: KernelSettings) -> None:
    container = _container(client, settings)
    labels = container.labels
    assert labels["pytest-super"] == "1"
    assert labels["pytest-super.run"] == settings.run_id
    assert labels["pytest-super.worker"] == "gw7"
    assert labels["pytest-super.task"] == "demo-task"
    # the pid of the controlling pytest process (under xdist, not this worker's own)
    assert labels["pytest-super.pid"] == os.environ.get(
        "PYTEST_SUPER_CONTROLLER_PID", str(os.getpid())
    )
    assert labels["pytest-super.host"]
    assert re.fullmatch(r"super-demo-task-gw7-[0-9a-f]{6}", container.name)
    assert container.name in kernel.description

    # no port is published or even exposed: the kernel's channels are unix sockets in a private
    # host folder bind-mounted into this container only (docs/security.md)
    assert not container.attrs["NetworkSettings"]["Ports"]
    assert not container.attrs["Config"].get("ExposedPorts")
    box = kernel._box
    assert box.connection_info()["transport"] == "ipc"
    assert stat.S_IMODE(os.stat(box.folder).st_mode) == 0o700

    host = container.attrs["HostConfig"]
    assert host["Init"] is True
    assert host["Privileged"] is False
    assert host["Memory"] == 1024**3
    assert host["NanoCpus"] == 1_000_000_000
    assert host["PidsLimit"] == docker_options(settings).pids_limit == 1024
    assert host["CapDrop"] == ["ALL"]
    assert "no-new-privileges:true" in host["SecurityOpt"]
    assert host["NetworkMode"] == "pytest-super-tasks"
    assert host["Binds"] == [f"{box.channel_dir}:/run/pytest-super:rw"]


def test_container_name_is_docker_legal_and_short() -> None:
    name = container_name("safetybench_configuration,cpu" * 5, "gw12")
    assert len(name) <= 63
    assert re.fullmatch(r"[a-zA-Z0-9][a-zA-Z0-9_.-]+", name)
    assert re.fullmatch(r"super-safetybench_configuration-cpu[a-z_,-]*-gw12-[0-9a-f]{6}", name)
    assert container_name("a/b c", "gw0").startswith("super-a-b-c-gw0-")
    assert container_name("a", "gw0") != container_name("a", "gw0")  # two runs never collide


def test_key_is_not_visible_to_docker_inspect(kernel, client, settings: KernelSettings) -> None:
    box = kernel._box
    key = box.connection_info()["key"]
    assert len(key) >= 32
    inspected = json.dumps(client.api.inspect_container(box.container_id))
    assert key not in inspected
    # the host-side connection file is private
    path = Path(box.connection_file)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert json.loads(path.read_text())["key"] == key
    inside = kernel.execute("!stat -c '%a %U' /etc/pytest-super/kernel.json", timeout=30)
    assert inside.output.strip() == "600 root"


def test_host_environment_does_not_reach_the_container(settings, monkeypatch) -> None:
    monkeypatch.setenv("SUPER_API_KEY", "sk-fake-host-secret-0123456789")
    kernel = provision_kernel(settings, task_id="env")
    try:
        shown = kernel.execute("import os; print(dict(os.environ))\n!env", timeout=30).output
    finally:
        kernel.close()
    assert "SUPER_API_KEY" not in shown
    assert "sk-fake-host-secret" not in shown
    assert "PIP_CERT=/usr/local/share/pytest-super/ca-bundle.crt" in shown


def test_timeout_interrupts_and_keeps_variables(kernel) -> None:
    kernel.execute("x = 41", timeout=30)
    result = kernel.execute("while True: pass", timeout=2)
    assert result.status == "timeout"
    assert not result.still_running
    assert "KeyboardInterrupt" in result.output
    assert kernel.execute("x + 1", timeout=30).output.strip() == "42"
    result = kernel.execute("!sleep 100", timeout=2)
    assert result.status == "timeout"
    assert kernel.execute("x", timeout=30).output.strip() == "41"


def test_dead_kernel_is_reported_and_restarted(kernel) -> None:
    kernel.execute("x = 1\n!echo kept > note.txt", timeout=30)
    result = kernel.execute("import os; os._exit(1)", timeout=30)
    assert result.status == "died"
    assert "exit code 1" in result.output
    assert kernel.execute("1+1", timeout=30).output.strip() == "2"
    assert "NameError" in kernel.execute("x", timeout=30).output
    assert kernel.execute("!cat /content/note.txt", timeout=30).output.strip() == "kept"


def test_restart_keeps_files_and_drops_state(kernel) -> None:
    kernel.execute("y = 5\n!echo there > /content/f.txt", timeout=30)
    kernel.restart()
    assert "NameError" in kernel.execute("y", timeout=30).output
    assert kernel.read_file("/content/f.txt") == "there\n"


def test_large_output_is_capped(settings) -> None:
    settings.output_cap_bytes = 1_000_000
    kernel = provision_kernel(settings, task_id="big-output")
    try:
        result = kernel.execute("for _ in range(50): print('x' * 1_000_000)", timeout=120)
        assert result.status == "ok"
        assert result.truncated
        assert len(result.output.encode()) <= 1_100_000
        assert kernel.execute("1+1", timeout=30).output.strip() == "2"
    finally:
        kernel.close()


@pytest.mark.slow
def test_pip_install_works_behind_the_tls_proxy(kernel) -> None:
    result = kernel.execute("!pip install --no-cache-dir --quiet tomli-w==1.0.0", timeout=180)
    assert result.status == "ok", result.output
    assert "CERTIFICATE_VERIFY_FAILED" not in result.output
    shown = kernel.execute("import tomli_w; print(tomli_w.dumps({'a': 1}))", timeout=30)
    assert shown.output.strip() == "a = 1"


def _make_repo(path: Path) -> str:
    path.mkdir(parents=True)
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    (path / "train.py").write_text("print('training')\n")
    for args in (
        ["init", "-q", "-b", "main"],
        ["add", "."],
        ["commit", "-q", "-m", "first commit"],
    ):
        subprocess.run(["git", *args], cwd=path, env=env, check=True)
    (path / "README.md").write_text("demo\n")
    for args in (["add", "."], ["commit", "-q", "-m", "second commit"]):
        subprocess.run(["git", *args], cwd=path, env=env, check=True)
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=path, capture_output=True, text=True, check=True
    ).stdout.strip()


def test_git_clone_resolves_to_the_read_only_mirror(settings, tmp_path: Path) -> None:
    head = _make_repo(tmp_path / "mirror" / "x")
    settings.git_mirrors = {"https://github.com/super-demo/": str(tmp_path / "mirror")}
    kernel = provision_kernel(settings, task_id="mirror")
    try:
        cloned = kernel.execute("!git clone https://github.com/super-demo/x", timeout=60)
        assert cloned.status == "ok", cloned.output
        log = kernel.execute("!git -C x log --format='%H %s'", timeout=30).output
        assert f"{head} second commit" in log
        assert "first commit" in log
        assert kernel.execute("!python x/train.py", timeout=30).output.strip() == "training"
        denied = kernel.execute("!touch /mirrors/0/x/new 2>&1 || echo DENIED", timeout=30)
        assert "DENIED" in denied.output
    finally:
        kernel.close()
    assert not (tmp_path / "mirror" / "x" / "new").exists()


def test_network_none_has_no_network(settings) -> None:
    settings.network = "none"
    kernel = provision_kernel(settings, task_id="offline")
    try:
        assert kernel.execute("1+1", timeout=30).output.strip() == "2"
        probe = kernel.execute(
            "import socket\n"
            "for target in [('pypi.org', 443), ('151.101.0.223', 443)]:\n"
            "    try:\n"
            "        socket.create_connection(target, timeout=2).close(); print('REACHED', target)\n"
            "    except OSError as exc:\n"
            "        print('blocked', target, type(exc).__name__)\n",
            timeout=60,
        )
        assert "REACHED" not in probe.output
        assert probe.output.count("blocked") == 2
    finally:
        kernel.close()


def test_engine_down_names_the_address_and_the_fix(monkeypatch) -> None:
    settings = KernelSettings(options={"docker_host": "tcp://127.0.0.1:1"})
    with pytest.raises(EngineUnavailable) as caught:
        provision_kernel(settings, task_id="x")
    message = str(caught.value)
    assert "tcp://127.0.0.1:1" in message
    assert "scripts/ensure-docker.sh" in message and "dockerd" in message

    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:1")
    with pytest.raises(EngineUnavailable, match=r"tcp://127\.0\.0\.1:1"):
        provision_kernel(KernelSettings(), task_id="x")


def test_missing_image_names_the_build_command(settings) -> None:
    settings.image = "pytest-super-kernel:no-such-tag"
    with pytest.raises(ImageMissing) as caught:
        provision_kernel(settings, task_id="x")
    assert "pytest-super-kernel:no-such-tag" in str(caught.value)
    assert "pytest-super image build" in str(caught.value)


def _labelled_container(client, image: str, run_id: str, lease_id: str | None):
    labels = {
        "pytest-super": "1",
        "pytest-super.run": run_id,
        "pytest-super.worker": "main",
        "pytest-super.task": "t",
    }
    if lease_id is not None:
        labels[LABEL_LEASE] = lease_id
    return client.containers.create(
        image, command=["sleep", "60"], labels=labels, name=f"super-cleanup-{uuid.uuid4().hex[:8]}"
    )


def test_cleanup_dead_runs_only_then_by_run_id(client, image, settings) -> None:
    """Dead: the lease's holder is a process of this namespace that is gone; a lease of another
    namespace not renewed for longer than TTL_S. Alive: a lease this process renews; one of this
    process not renewed for 10 x TTL_S (issue 29 cause 7: a stopped process is alive; red on
    eb4ffc2, its container was removed); a lease of another namespace renewed just now; no lease
    at all (made before leases existed: removed only by run id)."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    leases = [Lease(client, image) for _ in range(5)]
    dead_lease, alive_lease, foreign_lease, stale_lease, stale_foreign_lease = leases
    here = Holder.of_this_process()
    now = engine_time(client)
    dead_lease.stop_renewing()
    dead_lease.write(now, replace(here, pid=gone.pid))
    foreign_lease.stop_renewing()
    foreign_lease.write(now, replace(here, pid=gone.pid, pid_ns=1))
    stale_lease.stop_renewing()
    stale_lease.write(now - 10 * TTL_S, here)
    stale_foreign_lease.stop_renewing()
    stale_foreign_lease.write(now - 10 * TTL_S, replace(here, pid_ns=1))
    labels = client.api.inspect_container(alive_lease.name)["Config"]["Labels"]
    assert Holder.from_labels(labels) == here  # who holds it: in its labels too
    try:
        dead = _labelled_container(client, image, settings.run_id, dead_lease.id)
        alive = _labelled_container(client, image, settings.run_id, alive_lease.id)
        foreign = _labelled_container(client, image, settings.run_id, foreign_lease.id)
        stale = _labelled_container(client, image, settings.run_id, stale_lease.id)
        stale_foreign = _labelled_container(client, image, settings.run_id, stale_foreign_lease.id)
        legacy = _labelled_container(client, image, settings.run_id, None)

        removed = cleanup_containers(client, dead_runs_only=True)
        assert dead.name in removed and stale_foreign.name in removed
        assert not {alive.name, foreign.name, stale.name, legacy.name} & set(removed)
        names = {c.name for c in client.containers.list(all=True, ignore_removed=True)}
        assert dead_lease.name not in names and stale_foreign_lease.name not in names
        assert {alive_lease.name, foreign_lease.name, stale_lease.name} <= names

        removed = cleanup_containers(client, run_id=settings.run_id)
        assert sorted(removed) == sorted([alive.name, foreign.name, stale.name, legacy.name])
        assert cleanup_containers(client, run_id=settings.run_id) == []
    finally:
        for lease in leases:
            lease.release()


def test_detach_leaves_the_box_running_and_says_how_to_get_in(settings, client) -> None:
    kernel = provision_kernel(settings, task_id="keep")
    box = kernel._box
    how = kernel.detach()
    try:
        assert f"docker exec -it {box.name} bash" in how
        assert f"jupyter console --existing {box.connection_file}" in how
        assert os.path.exists(box.connection_file)
        assert client.api.inspect_container(box.container_id)["State"]["Running"]
    finally:
        box.remove()
    box.remove()  # idempotent
    assert not box.is_alive()
    assert not os.path.exists(box.connection_file)


def test_pip_cache_is_a_named_volume(settings, client) -> None:
    volume = f"pytest-super-test-pip-{uuid.uuid4().hex[:8]}"
    settings.options = {**settings.options, "pip_cache": volume}
    kernel = provision_kernel(settings, task_id="pip-cache")
    try:
        mounts = client.api.inspect_container(kernel._box.container_id)["Mounts"]
        [mount] = [m for m in mounts if m["Type"] == "volume"]
        assert (mount["Type"], mount["Name"], mount["Destination"]) == (
            "volume",
            volume,
            "/root/.cache/pip",
        )
        assert mount["RW"] is True
    finally:
        kernel.close()
        client.volumes.get(volume).remove(force=True)


class _LeaseEngine(socketserver.ThreadingUnixStreamServer):
    """An engine at the HTTP boundary (a unix socket) as a lease's renewal meets it: it answers
    `/_ping`, says "No such container" to the lease's write, and then (`vanish`) is gone at once
    (its socket removed), as an engine that stops between two calls."""

    daemon_threads = True

    def __init__(
        self, path: Path, *, on_write: Callable[[], None] | None = None, vanish: bool = True
    ) -> None:
        """`vanish=False`: the engine stays, and answers anything else with an error."""
        self.path = path
        self.vanish = vanish
        self.seen: list[str] = []
        #: called when the lease's write arrives, before the 404 is sent
        self.on_write = on_write
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # /_ping, with the engine's clock
                server.seen.append(f"GET {self.path}")
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"OK")

            def do_PUT(self) -> None:  # the lease file's archive: its container is gone
                self.answer(404, "No such container: the lease")
                if server.vanish:
                    server.path.unlink()  # the engine goes: the next call finds no socket

            def do_DELETE(self) -> None:
                self.answer(500, "not in this fake")

            def do_POST(self) -> None:
                self.answer(500, "not in this fake")

            def answer(self, status: int, message: str) -> None:
                """Record the call, read its body, answer `status` with the engine's JSON."""
                server.seen.append(f"{self.command} {self.path}")
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.command == "PUT" and server.on_write is not None:
                    server.on_write()
                body = json.dumps({"message": message}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        super().__init__(str(path), Handler)


def test_a_lease_whose_engine_goes_while_it_takes_its_container_back_goes_on_renewing(
    image: str, client: docker.DockerClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its container gone (404), then the engine gone before the container is made again (a
    ConnectionError): the renewing thread logs it and goes on. It ended with the ConnectionError
    unhandled (PytestUnhandledThreadExceptionWarning in a fresh clone's make test, where a
    test's own engine stopped under a live lease)."""
    monkeypatch.setattr(lease_module, "RENEW_S", 0.1)
    died: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: died.append(args.exc_value))
    fake = _LeaseEngine(tmp_path / "engine.sock")
    threading.Thread(target=fake.serve_forever, daemon=True).start()
    lease = Lease(client, image)
    try:
        lease.client = docker.DockerClient(base_url=f"unix://{fake.path}", version="1.41")
        deadline = time.monotonic() + 30
        while not any(s.startswith("PUT") for s in fake.seen) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)  # ten renewals more, each to a socket that is no longer there
        assert any(s.startswith("PUT") for s in fake.seen), fake.seen
        assert not died, died
        assert lease._heartbeat.beating()
    finally:
        fake.shutdown()
        lease.client = client
        lease.release()


def test_a_lease_released_while_a_renewal_is_under_way_is_not_taken_again(
    image: str, client: docker.DockerClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The release comes while a renewal waits for its engine, which then says the lease's
    container is gone (the release removed it): the renewal does not make it again (it did,
    and the new lease container stayed as long as the process)."""
    monkeypatch.setattr(lease_module, "RENEW_S", 0.1)
    lease = Lease(client, image)
    fake = _LeaseEngine(tmp_path / "engine.sock", on_write=lease.stop_renewing, vanish=False)
    threading.Thread(target=fake.serve_forever, daemon=True).start()
    try:
        lease.client = docker.DockerClient(base_url=f"unix://{fake.path}", version="1.41")
        lease._heartbeat.join(30)
        assert not lease._heartbeat.beating()
        puts = [s for s in fake.seen if s.startswith("PUT")]
        assert len(puts) == 1 and fake.seen[-1] == puts[0], fake.seen  # nothing after the 404
    finally:
        fake.shutdown()
        lease.client = client
        lease.release()
