"""`--super-ray-address` pointing where no Ray cluster of this machine's versions answers: a usage
error (exit status 4) within 30 s that names the address and what answered; SIGTERM or Ctrl-C while
joining ends the run as interrupted (exit status 2), never with an INTERNALERROR.

No cluster is needed: what answers is a real server of the test's own on 127.0.0.1 (Python's HTTP
server, a gRPC server answering Ray's KV request for the cluster's versions as a GCS would), or a
port whose packets are dropped (an iptables DROP rule in a network namespace of the test's own,
`unshare -n` with only loopback up)."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import pytest

from tests.support.projects import make_project, task_yaml

ray = pytest.importorskip("ray")

ONE_TASK = {"expert/a": task_yaml("a", "print('{\"x\": 1}')")}
RAY_RUN = ("-m", "pytest", "-p", "no:cacheprovider", "--super-agent=gold", "--super-executor=ray")
#: the requirement: a wrong address is said within this many seconds of pytest's start
FAST_S = 30
#: a port nothing of the machine uses inside the test's own network namespace
DROPPED_PORT = 6379


def _pytest(project: Path, address: str, *, prefix: tuple[str, ...] = ()) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*prefix, sys.executable, *RAY_RUN, f"--super-ray-address={address}"],
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def _finish(proc: subprocess.Popen[str], timeout: float = 120) -> tuple[int, str]:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        raise AssertionError(f"pytest did not end in {timeout} s:\n{out[-3000:]}") from None
    return proc.returncode, out


def _no_results(project: Path) -> None:
    reports = project / "reports"
    assert not reports.exists() or not any(reports.iterdir()), list(reports.iterdir())


# -- servers of the test's own -------------------------------------------------------------------
@pytest.fixture
def http_server() -> Iterator[str]:
    """Python's own HTTP server on 127.0.0.1 (it answers HTTP/2's preface with a 505 page)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


class FakeGcs:
    """A gRPC server on 127.0.0.1 answering Ray's KV request for the cluster's versions (the
    entry `ray.init` checks: namespace "cluster", key "CLUSTER_METADATA") as a GCS would; every
    other request of Ray's stays unanswered (UNIMPLEMENTED), so `ray.init` waits there."""

    def __init__(self, ray_version: str, python_version: str) -> None:
        import grpc
        from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc

        self.asked = threading.Event()
        self.requests: list[tuple[bytes, bytes]] = []
        value = json.dumps({"ray_version": ray_version, "python_version": python_version})
        fake = self

        class KV(gcs_service_pb2_grpc.InternalKVGcsServiceServicer):  # type: ignore[misc]
            def InternalKVGet(self, request: Any, context: Any) -> Any:  # noqa: N802 - gRPC's
                fake.requests.append((request.namespace, request.key))
                fake.asked.set()
                if (request.namespace, request.key) != (b"cluster", b"CLUSTER_METADATA"):
                    return gcs_service_pb2.InternalKVGetReply()
                return gcs_service_pb2.InternalKVGetReply(value=value.encode())

        self.server = grpc.server(futures.ThreadPoolExecutor(4))
        gcs_service_pb2_grpc.add_InternalKVGcsServiceServicer_to_server(KV(), self.server)
        self.address = f"127.0.0.1:{self.server.add_insecure_port('127.0.0.1:0')}"
        self.server.start()

    def stop(self) -> None:
        self.server.stop(grace=None)


@pytest.fixture
def fake_gcs() -> Iterator[Any]:
    made: list[FakeGcs] = []

    def make(ray_version: str, python_version: str) -> FakeGcs:
        made.append(FakeGcs(ray_version, python_version))
        return made[-1]

    yield make
    for gcs in made:
        gcs.stop()


def _dropping_namespace() -> tuple[str, ...]:
    """The command prefix that runs a program in a network namespace of its own, only loopback
    up, where packets to DROPPED_PORT are dropped (root, `unshare`, `ip`, `iptables`)."""
    missing = [tool for tool in ("unshare", "ip", "iptables") if shutil.which(tool) is None]
    if os.geteuid() != 0 or missing:
        why = f"needs root and {', '.join(missing) or 'unshare, ip, iptables'}"
        if os.environ.get("CI") == "true":
            pytest.fail(f"a port that drops packets {why}")
        pytest.skip(f"a port that drops packets {why}")
    setup = (
        f'ip link set lo up && iptables -A INPUT -p tcp --dport {DROPPED_PORT} -j DROP && exec "$@"'
    )
    return ("unshare", "-n", "sh", "-c", setup, "sh")


# -- wrong addresses -----------------------------------------------------------------------------
def test_an_http_server_at_the_address_is_a_usage_error_naming_it(tmp_path, http_server):
    project = make_project(tmp_path, ONE_TASK)
    started = time.monotonic()
    code, out = _finish(_pytest(project, http_server))
    took = time.monotonic() - started
    assert code == 4, out[-3000:]
    assert (  # grpc's account of what answered (an HTTP/0.9-style page: no status line)
        f"--super-ray-address {http_server}: no Ray cluster answers there: something answered "
        "that does not speak gRPC (Failed parsing HTTP/2 (Expected SETTINGS frame as the first "
        "frame, got frame type 79)), not Ray's GCS (gRPC)"
    ) in out, out[-3000:]
    assert took < FAST_S, took
    assert "INTERNALERROR" not in out
    _no_results(project)


# -- the address check alone (connect.check_address: grpcio, no frame of our own) --------------
@contextlib.contextmanager
def _listener(answer: Any) -> Iterator[str]:
    """A TCP listener on 127.0.0.1 that hands each connection to `answer` on a thread."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=answer, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        server.close()


def _check_fails(address: str) -> tuple[str, float]:
    from pytest_super.executors.ray.connect import RayUnavailable, check_address

    started = time.monotonic()
    with pytest.raises(RayUnavailable) as caught:
        check_address(ray, address)
    return str(caught.value), time.monotonic() - started


def _silent(conn: socket.socket) -> None:
    with conn:
        conn.recv(1 << 16)  # reads the greeting, answers nothing
        time.sleep(30)


def _http1(conn: socket.socket) -> None:
    """What nginx answers a request it cannot read: a status line, then the connection closed."""
    with conn:
        conn.recv(1 << 16)
        conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")


def _tls(certificate: tuple[str, str]) -> Any:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(*certificate)

    def answer(conn: socket.socket) -> None:
        with contextlib.suppress(OSError), context.wrap_socket(conn, server_side=True):
            pass  # the handshake fails: a gRPC client's greeting is not a TLS hello

    return answer


@pytest.fixture
def certificate(tmp_path) -> tuple[str, str]:
    """A self-signed certificate and its key (openssl)."""
    if shutil.which("openssl") is None:
        pytest.skip("needs openssl")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key)]
        + ["-out", str(cert), "-days", "1", "-subj", "/CN=localhost"],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return str(cert), str(key)


def test_a_silent_listener_is_said_within_the_connection_attempt() -> None:
    from pytest_super.executors.ray.connect import TCP_CONNECT_S

    with _listener(_silent) as address:
        said, took = _check_fails(address)
        assert said == (
            f"--super-ray-address {address}: no Ray cluster answers there: something accepted the "
            f"connection but did not answer an HTTP/2 (gRPC) greeting within {TCP_CONNECT_S:g} s: "
            "not Ray's GCS; start one with `ray start --head` or name its address (RAY_ADDRESS, "
            "--super-ray-address HOST:PORT)"
        )
        assert took < TCP_CONNECT_S + 5, took


def test_an_http1_server_is_said_with_its_status() -> None:
    with _listener(_http1) as address:
        said, took = _check_fails(address)
        assert (
            f"--super-ray-address {address}: no Ray cluster answers there: an HTTP/1.x server "
            "answered (HTTP status 400), not Ray's GCS (gRPC); start one"
        ) in said, said


def test_a_tls_listener_is_said_not_to_speak_grpc(certificate) -> None:
    with _listener(_tls(certificate)) as address:
        said, took = _check_fails(address)
        assert said.startswith(
            f"--super-ray-address {address}: no Ray cluster answers there: something "
        ), said
        assert "not Ray's GCS (gRPC); start one" in said, said


def test_a_closed_port_is_said_at_once() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        address = f"127.0.0.1:{server.getsockname()[1]}"
    said, took = _check_fails(address)
    assert said == (
        f"--super-ray-address {address}: no Ray cluster answers there: Connection refused; start "
        "one with `ray start --head` or name its address (RAY_ADDRESS, --super-ray-address "
        "HOST:PORT)"
    )


def test_the_address_check_writes_no_protocol_frame_of_its_own() -> None:
    """Issue 45 item 6: grpcio speaks HTTP/2 and gRPC; connect.py neither opens a socket nor
    holds a frame."""
    from pytest_super.executors.ray import connect

    source = Path(connect.__file__).read_text()
    assert "import socket" not in source
    assert "PRI * HTTP/2.0" not in source


def test_a_grpc_server_that_is_not_rays_gcs_is_a_usage_error(tmp_path):
    import grpc

    server = grpc.server(futures.ThreadPoolExecutor(2))  # no service at all
    address = f"127.0.0.1:{server.add_insecure_port('127.0.0.1:0')}"
    server.start()
    try:
        project = make_project(tmp_path, ONE_TASK)
        started = time.monotonic()
        code, out = _finish(_pytest(project, address))
    finally:
        server.stop(grace=None)
    assert code == 4, out[-3000:]
    assert f"--super-ray-address {address}: no Ray cluster answers there: a gRPC server " in out
    assert "UNIMPLEMENTED" in out, out[-3000:]
    assert time.monotonic() - started < FAST_S


def test_a_port_that_drops_packets_is_a_usage_error_within_30_s(tmp_path):
    prefix = _dropping_namespace()
    project = make_project(tmp_path, ONE_TASK)
    address = f"127.0.0.1:{DROPPED_PORT}"
    started = time.monotonic()
    code, out = _finish(_pytest(project, address, prefix=prefix))
    took = time.monotonic() - started
    assert code == 4, out[-3000:]
    assert (
        f"--super-ray-address {address}: no Ray cluster answers there: nothing answered the "
        "connection within 5 s (packets dropped"
    ) in out, out[-3000:]
    assert took < FAST_S, took
    _no_results(project)


def test_a_cluster_of_another_ray_version_names_both_and_the_pip_command(tmp_path, fake_gcs):
    here_python = ".".join(map(str, sys.version_info[:3]))
    gcs = fake_gcs("2.9.3", here_python)
    project = make_project(tmp_path, ONE_TASK)
    started = time.monotonic()
    code, out = _finish(_pytest(project, gcs.address))
    assert code == 4, out[-3000:]
    assert (
        f"--super-ray-address {gcs.address}: the cluster runs Ray 2.9.3 on Python {here_python}, "
        f"this machine Ray {ray.__version__} on Python {here_python}; a Ray driver must match "
        'the cluster: install the cluster\'s Ray here: pip install "ray[default]==2.9.3"'
    ) in out, out[-3000:]
    assert time.monotonic() - started < FAST_S
    assert gcs.requests == [(b"cluster", b"CLUSTER_METADATA")]  # asked before ray.init, once
    _no_results(project)


def test_a_cluster_of_another_python_names_both(tmp_path, fake_gcs):
    gcs = fake_gcs(ray.__version__, "3.8.1")
    project = make_project(tmp_path, ONE_TASK)
    code, out = _finish(_pytest(project, gcs.address))
    assert code == 4, out[-3000:]
    assert f"the cluster runs Ray {ray.__version__} on Python 3.8.1" in out, out[-3000:]
    assert "run pytest with Python 3.8.1" in out


# -- signals while joining -----------------------------------------------------------------------
def _interrupted_cleanly(code: int, out: str) -> None:
    assert code == 2, out[-3000:]  # pytest's "interrupted"
    assert "INTERNALERROR" not in out and "SystemExit" not in out, out[-3000:]
    assert "Traceback" not in out, out[-3000:]


def _wait_connecting(proc: subprocess.Popen[str], port: int, timeout: float = 120) -> None:
    """Until `proc` waits for its connection to `port` (a socket of its network namespace in
    SYN_SENT: the address check's connect, packets dropped; grpc connects to an IPv4 address from
    an IPv6 socket, listed in tcp6)."""
    tables = [Path(f"/proc/{proc.pid}/net/{name}") for name in ("tcp", "tcp6")]
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        assert proc.poll() is None, _finish(proc)[1][-3000:]
        with contextlib.suppress(OSError):
            lines = [line for table in tables for line in table.read_text().splitlines()[1:]]
            for line in lines:
                fields = line.split()
                if fields[2].endswith(f":{port:04X}") and fields[3] == "02":
                    return
        time.sleep(0.2)
    raise AssertionError(f"pytest never tried to connect to port {port} in {timeout} s")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_while_the_address_is_checked_ends_the_run_cleanly(tmp_path, sig):
    """The check waits on a dropping port (up to 5 s): the signal arrives in that wait."""
    prefix = _dropping_namespace()
    project = make_project(tmp_path, ONE_TASK)
    proc = _pytest(project, f"127.0.0.1:{DROPPED_PORT}", prefix=prefix)
    _wait_connecting(proc, DROPPED_PORT)
    os.killpg(proc.pid, sig)
    code, out = _finish(proc)
    _interrupted_cleanly(code, out)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_inside_ray_init_ends_the_run_cleanly(tmp_path, fake_gcs, sig):
    """A GCS of this machine's versions that answers nothing else: the check passes and
    `ray.init` waits (Ray's own SIGTERM handler in place); the signal arrives there."""
    gcs = fake_gcs(ray.__version__, ".".join(map(str, sys.version_info[:3])))
    project = make_project(tmp_path, ONE_TASK)
    proc = _pytest(project, gcs.address)
    assert gcs.asked.wait(60), "pytest never asked the GCS for the cluster's versions"
    time.sleep(3)  # past the check, inside ray.init
    assert proc.poll() is None, _finish(proc)[1][-3000:]
    started = time.monotonic()
    os.killpg(proc.pid, sig)
    code, out = _finish(proc)
    _interrupted_cleanly(code, out)
    print(f"{sig.name} inside ray.init: ended in {time.monotonic() - started:.1f} s")
