"""Joining a Ray cluster from the controller (`--super-executor=ray`, `pytest-super image build`
and `cleanup --executor ray`): Ray imported with a hint when it is missing, the address checked
before Ray is asked (Ray itself retries for minutes, whatever answers there), and `ray.init`
called so that the plugin's own signal handling stays in place.

The check, bounded by `CONNECT_TIMEOUT_S` in all, before `ray.init`: one gRPC call through
grpcio (which comes with Ray) with Ray's own protobuf classes, `_cluster_versions`: the GCS's KV
service asked for the entry Ray itself checks at `ray.init` (`InternalKVGet`, namespace
"cluster", key "CLUSTER_METADATA": the cluster's Ray and Python versions).

- The call does not wait for the channel to be ready: it fails with grpc's first failed
  connection attempt, bounded by `TCP_CONNECT_S`, and grpc's account of it is said with the
  address: nothing listening, packets dropped, a listener that does not answer the HTTP/2
  greeting, an HTTP/1 server, anything else that does not speak gRPC (TLS, other bytes).
- A gRPC server that answers but not as the GCS does (UNIMPLEMENTED) is said with grpc's status.
- A mismatch of versions is said with both versions and what to install; Ray's own message
  ("Version mismatch", or a protobuf error between distant versions) points elsewhere.

`ray.init` runs on a thread of its own while the caller's waits for it: Ray's C++ waits kept a
signal from the main thread for 40 s, and on the main thread Ray puts its own SIGTERM handler in
place (`sys.exit` inside the wait: an INTERNALERROR of pytest). So SIGTERM stays the plugin's
KeyboardInterrupt, Ctrl-C is answered at once, and pytest ends the run as interrupted (exit
status 2)."""

from __future__ import annotations

import atexit
import contextlib
import importlib
import importlib.util
import json
import logging
import os
import re
import signal
import sys
import threading
import time
from typing import Any

from pytest_super.errors import SuperError

INSTALL_HINT = 'pip install "pytest-super[ray]"'
#: seconds the address check may take in all (connect, HTTP/2 answer, version read) before the
#: address is said not to answer: a GCS answers within milliseconds, even on a loaded machine
#: within a few seconds
CONNECT_TIMEOUT_S = 10.0
#: seconds of that for grpc's connection attempt (the TCP connection and the server's HTTP/2
#: greeting, its SETTINGS frame): a SYN lost is sent again after 1 s and 3 s, and a host that
#: drops packets is said sooner (pytest's own start takes seconds on a loaded machine, and a
#: wrong address must be said within 30 s of it)
TCP_CONNECT_S = 5.0
#: grpc's channel arguments: one connection attempt bounded by TCP_CONNECT_S (grpc's least
#: connect timeout is `grpc.min_reconnect_backoff_ms`, 20 s by default), none after it
_CHANNEL_OPTIONS = (
    ("grpc.min_reconnect_backoff_ms", int(TCP_CONNECT_S * 1000)),
    ("grpc.initial_reconnect_backoff_ms", int(TCP_CONNECT_S * 1000)),
)
#: seconds `ray.shutdown()` may take after a failed or interrupted `ray.init`
SHUTDOWN_TIMEOUT_S = 3.0
#: where Ray keeps the cluster's versions in its GCS (ray/_common/usage/usage_lib.py
#: put_cluster_metadata, checked by ray/_private/node.py check_version_info; Ray 2.9 to 2.60)
METADATA_NAMESPACE = b"cluster"
METADATA_KEY = b"CLUSTER_METADATA"
_START_ONE = (
    "start one with `ray start --head` or name its address (RAY_ADDRESS, "
    "--super-ray-address HOST:PORT)"
)


class RayUnavailable(SuperError):
    """Ray is not installed, or the cluster cannot be reached: said before any task runs."""


def import_ray() -> Any:  # Any: ray (its module: imported only where a run uses it)
    """The `ray` module, or `RayUnavailable` saying how to install it."""
    try:
        import ray
    except ImportError:
        raise _not_installed() from None
    return ray


def check_ray_installed() -> None:
    """`RayUnavailable` saying how to install Ray when it cannot be imported here, found without
    importing it (the controller leaves Ray to its driver process: executors/ray/driver.py)."""
    try:
        found = importlib.util.find_spec("ray") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise _not_installed()


def _not_installed() -> RayUnavailable:
    return RayUnavailable(
        f"--super-executor=ray needs Ray on this machine and on every node: {INSTALL_HINT}"
    )


def _bootstrap_address(address: str) -> str | None:
    """HOST:PORT of the GCS `address` names ("auto": RAY_ADDRESS or the cluster `ray start`
    made here last, as `ray.init` finds it); None for a Ray client address (ray://) or when Ray
    finds none (its own message then)."""
    if "://" in address:
        return None
    if address == "auto":
        found = os.environ.get("RAY_ADDRESS", "")
        if not found:
            with contextlib.suppress(Exception):
                from ray._private.services import get_ray_address_from_environment

                found = get_ray_address_from_environment("auto", None) or ""
        if not found or "://" in found:
            return None
        return found
    return address


def _unreachable(address: str, what: str) -> RayUnavailable:
    return RayUnavailable(f"--super-ray-address {address}: no Ray cluster answers there: {what}")


def _checked_port(address: str) -> None:
    """`RayUnavailable` unless `address` ends in a port number."""
    port = address.rpartition(":")[2]
    if not port.isdigit():
        raise RayUnavailable(
            f"--super-ray-address {address}: not HOST:PORT (the port is not a number); name the "
            "head's GCS address, e.g. 10.0.0.5:6379"
        )


#: grpc's account of a failed connection attempt, after "last error: <CODE>: <the address>: "
#: (grpcio 1.85: "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:6379:
#: Failed to connect to remote host: Connection refused")
_LAST_ERROR = re.compile(r"last error: [A-Z_]+: (?:(?:ipv4|ipv6|unix):\S+: )?(?P<what>.*)$", re.S)
_HTTP1 = re.compile(r"Trying to connect an http1\.x server \(HTTP status (?P<status>\d+)\)")


def _not_connected(address: str, details: str) -> RayUnavailable:
    """What grpc said of its failed connection to `address`, in the user's terms."""
    found = _LAST_ERROR.search(details)
    what = (found.group("what") if found else details).strip()
    http1 = _HTTP1.search(what)
    if http1:
        status = http1.group("status")
        said = f"an HTTP/1.x server answered (HTTP status {status}), not Ray's GCS (gRPC)"
    elif "connect() timed out" in what or what == "tcp handshaker shutdown":
        # the TCP connection's own timeout, or the attempt's (TCP_CONNECT_S both) first
        said = (
            f"nothing answered the connection within {TCP_CONNECT_S:g} s (packets dropped on the "
            "way: a firewall, a wrong host?)"
        )
    elif "before receiving SETTINGS frame" in what:
        said = (
            "something accepted the connection but did not answer an HTTP/2 (gRPC) greeting "
            f"within {TCP_CONNECT_S:g} s: not Ray's GCS"
        )
    elif what == "Socket closed":
        said = (
            "something accepted the connection and closed it without a word, not Ray's GCS (gRPC)"
        )
    elif what.startswith("Failed parsing HTTP/2") or "Connection reset" in what:
        said = f"something answered that does not speak gRPC ({what}), not Ray's GCS (gRPC)"
    else:
        said = what.removeprefix("Failed to connect to remote host: ")
    return _unreachable(address, f"{said}; {_START_ONE}")


def _cluster_versions(address: str, deadline: float) -> tuple[str, str] | None:
    """(Ray version, Python version) the cluster at `address` runs, as its GCS keeps them for
    `ray.init`'s own check; None when the GCS holds none. `RayUnavailable` saying what is there
    instead when no connection is made within `TCP_CONNECT_S` (nothing listening, packets
    dropped, a listener that does not speak gRPC), when the gRPC server there is not Ray's GCS,
    or when it does not answer by `deadline`."""
    # no type stubs for grpc and Ray's generated modules (both come with Ray)
    grpc: Any = importlib.import_module("grpc")  # Any: grpc (no stubs)
    gcs_service_pb2: Any = importlib.import_module(  # Any: Ray's generated protobuf (no stubs)
        "ray.core.generated.gcs_service_pb2"
    )
    gcs_service_pb2_grpc: Any = importlib.import_module(  # Any: Ray's generated gRPC (no stubs)
        "ray.core.generated.gcs_service_pb2_grpc"
    )

    request = gcs_service_pb2.InternalKVGetRequest(key=METADATA_KEY, namespace=METADATA_NAMESPACE)
    with grpc.insecure_channel(address, options=_CHANNEL_OPTIONS) as channel:
        stub = gcs_service_pb2_grpc.InternalKVGcsServiceStub(channel)
        try:
            # not wait_for_ready: the call fails with the first failed connection attempt
            reply = stub.InternalKVGet(
                request, timeout=max(deadline - time.monotonic(), 0.5), wait_for_ready=False
            )
        except grpc.RpcError as exc:
            raise _rpc_failed(grpc, address, exc) from None
    if reply.status.code != 0 or not reply.value:
        return None
    try:
        metadata = json.loads(reply.value)
        return str(metadata["ray_version"]), str(metadata["python_version"])
    except (ValueError, KeyError, TypeError):
        return None


def _rpc_failed(grpc: Any, address: str, exc: Exception) -> RayUnavailable:  # Any: grpc (no stubs)
    code = exc.code() if isinstance(exc, grpc.Call) else None
    details = str(exc.details() if isinstance(exc, grpc.Call) else exc)
    if code == grpc.StatusCode.UNAVAILABLE:  # no connection made (or the name did not resolve)
        return _not_connected(address, details)
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return _unreachable(
            address,
            f"nothing answered Ray's request within {CONNECT_TIMEOUT_S:g} s: not Ray's GCS; "
            f"{_START_ONE}",
        )
    return _unreachable(
        address,
        f"a gRPC server answered but not as Ray's GCS does ({code}: {details}); {_START_ONE}",
    )


def _check_versions(
    address: str,
    ray: Any,  # Any: ray (its module, imported at run time only)
    versions: tuple[str, str] | None,
) -> None:
    """The same test as `ray.init`'s (Ray exactly, Python at RAY_DEFAULT_PYTHON_VERSION_MATCH_LEVEL),
    said with both versions and what to install here."""
    if versions is None:
        return
    cluster_ray, cluster_python = versions
    here_ray, here_python = str(ray.__version__), ".".join(map(str, sys.version_info[:3]))
    level = 2 if os.environ.get("RAY_DEFAULT_PYTHON_VERSION_MATCH_LEVEL") == "minor" else 3
    python_matches = cluster_python.split(".")[:level] == here_python.split(".")[:level]
    if cluster_ray == here_ray and python_matches:
        return
    said = (
        f"--super-ray-address {address}: the cluster runs Ray {cluster_ray} on Python "
        f"{cluster_python}, this machine Ray {here_ray} on Python {here_python}; a Ray driver "
        "must match the cluster"
    )
    if cluster_ray != here_ray:
        said += f': install the cluster\'s Ray here: pip install "ray[default]=={cluster_ray}"'
        if not python_matches:
            said += f", in a Python {cluster_python} environment"
    else:
        said += f": run pytest with Python {cluster_python} (a venv of that Python, with {INSTALL_HINT})"
    raise RayUnavailable(said)


def check_address(
    ray: Any,  # Any: ray (its module, imported at run time only)
    address: str,
) -> None:
    """`RayUnavailable` within `CONNECT_TIMEOUT_S` when no Ray cluster of this machine's Ray
    and Python versions answers at `address` (see the module's docstring)."""
    gcs = _bootstrap_address(address)
    if gcs is None:
        return
    _checked_port(gcs)
    deadline = time.monotonic() + CONNECT_TIMEOUT_S
    _check_versions(gcs, ray, _cluster_versions(gcs, deadline))


def _shutdown(ray: Any) -> None:  # Any: ray (its module, imported at run time only)
    """`ray.shutdown()` bounded (with no GCS behind it, it waits), and Ray's exit hook gone."""
    done = threading.Thread(
        target=_quiet_shutdown,
        args=(ray,),
        name="pytest-super-ray-shutdown",
        daemon=True,
    )
    done.start()
    done.join(SHUTDOWN_TIMEOUT_S)
    with contextlib.suppress(Exception):
        atexit.unregister(ray.shutdown)


def _quiet_shutdown(ray: Any) -> None:  # Any: ray (its module, imported at run time only)
    with contextlib.suppress(Exception):
        ray.shutdown()


def _no_sigterm_warning(record: logging.LogRecord) -> bool:
    """Ray's warning that it put no SIGTERM handler in place: on purpose (see `connect`)."""
    return "SIGTERM handler is not set" not in record.getMessage()


def _take_back_sigterm() -> None:
    """Put Python's SIGTERM handler back in place of the one Ray's C++ core installs as it joins
    (absl's failure-signal handler: it printed "*** SIGTERM received ***" and the process ended
    by SIGABRT, exit status -6, after the run had stopped cleanly as interrupted)."""
    if threading.current_thread() is not threading.main_thread():
        return
    handler = signal.getsignal(signal.SIGTERM)
    if handler is not None:  # None: set from outside Python, nothing of ours to put back
        signal.signal(signal.SIGTERM, handler)


def connect(
    ray: Any,  # Any: ray (its module, imported at run time only)
    address: str,
    namespace: str,
) -> None:
    """Join the cluster at `address` as a driver; `RayUnavailable` when no Ray cluster of this
    machine's versions answers there; KeyboardInterrupt when SIGTERM or Ctrl-C came meanwhile."""
    check_address(ray, address)
    failed: list[BaseException] = []

    def join() -> None:
        try:
            ray.init(
                address=address,
                log_to_driver=False,
                configure_logging=False,
                namespace=namespace,
            )
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            failed.append(exc)

    # On a thread of its own: Ray's C++ waits (tens of seconds for a GCS that does not finish
    # the handshake) keep signals from the waiting thread, and Ray puts no SIGTERM handler of
    # its own in place off the main thread (the plugin's, SIGTERM as Ctrl-C, stays)
    joining = threading.Thread(target=join, name="pytest-super-ray-init", daemon=True)
    ray_worker_log = logging.getLogger("ray._private.worker")
    ray_worker_log.addFilter(_no_sigterm_warning)
    joining.start()
    try:
        while joining.is_alive():
            joining.join(0.2)
    except KeyboardInterrupt:
        with contextlib.suppress(Exception):
            atexit.unregister(ray.shutdown)  # it would wait for the GCS at the interpreter's end
        raise KeyboardInterrupt(f"interrupted while joining the Ray cluster at {address}") from None
    finally:
        ray_worker_log.removeFilter(_no_sigterm_warning)
    _take_back_sigterm()
    if failed:
        _shutdown(ray)
        exc = failed[0]
        if not isinstance(exc, Exception):  # SystemExit, KeyboardInterrupt inside Ray
            raise KeyboardInterrupt(f"interrupted while joining the Ray cluster at {address}")
        raise RayUnavailable(
            f"--super-ray-address {address}: cannot reach a Ray cluster there "
            f"({type(exc).__name__}: {exc}); {_START_ONE}"
        ) from None


def import_what_shutdown_imports() -> None:
    """`ray.shutdown()` first imports Ray's compiled-graph modules (`ray.dag`, about forty) to
    shut down compiled graphs, of which a run has none: 0.04-0.06 s on an idle machine, several
    times that on a busy one, at the end of every run and of every Ctrl-C (where a py-spy
    recording of an interrupted run found it in the shutdown). Imported while the run starts,
    they are not on that path."""
    with contextlib.suppress(Exception):
        importlib.import_module("ray.dag.compiled_dag_node")
