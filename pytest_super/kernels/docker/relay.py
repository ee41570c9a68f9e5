"""Reaching a kernel on a remote engine through the engine's own connection (`EngineRelay`).

The kernel's sockets are in a tmpfs inside the container and no port is published anywhere. For
each channel the controller listens on a unix socket in the box's private host folder; each
connection jupyter_client makes there becomes one `docker exec` of `channel_relay.py` in the
container, its stdin/stdout joined to the kernel's socket, carried by the engine's API connection
(ssh for `ssh://`, TLS for `tcp://` with DOCKER_TLS_VERIFY). So the kernel is as private as the
engine itself: whoever can reach its channels can already `docker exec` into the box.

ZeroMQ reconnects on its own when a relay ends (a kernel restart ends them all).
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from importlib import resources

import docker
import docker.errors
import requests.exceptions
from docker.utils.socket import frames_iter

#: where `channel_relay.py` is copied in the container
RELAY_IN_CONTAINER = "/etc/pytest-super/relay.py"


def relay_source() -> bytes:
    """The in-container program, shipped with the connection file."""
    return resources.files("pytest_super.kernels.inside").joinpath("channel_relay.py").read_bytes()


class EngineRelay:
    """Host-side unix sockets `<host_dir>/<name>` joined to `<container_dir>/<name>` in the box."""

    def __init__(
        self,
        api: docker.APIClient,
        container_id: str,
        host_dir: str,
        container_dir: str,
        names: list[str],
    ) -> None:
        self._api = api
        self._container_id = container_id
        self._closed = False
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        os.mkdir(host_dir, 0o700)
        self._listeners: list[socket.socket] = []
        for name in names:
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(os.path.join(host_dir, name))
            listener.listen(8)
            self._listeners.append(listener)
            threading.Thread(
                target=self._accept,
                args=(listener, f"{container_dir}/{name}"),
                name=f"pytest-super-relay-{name}",
                daemon=True,
            ).start()

    def close(self) -> None:
        """Stop listening and drop every open channel (the execs end with the container)."""
        with self._lock:
            self._closed = True
            sockets = [*self._listeners, *self._open]
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _accept(self, listener: socket.socket, target: str) -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return  # closed
            with self._lock:
                if self._closed:
                    conn.close()
                    return
                self._open.add(conn)
            threading.Thread(target=self._carry, args=(conn, target), daemon=True).start()

    def _carry(self, conn: socket.socket, target: str) -> None:
        stream = None
        try:
            exec_id = self._api.exec_create(
                self._container_id,
                ["python", RELAY_IN_CONTAINER, target],
                stdin=True,
                stdout=True,
                stderr=False,
            )["Id"]
            stream = self._api.exec_start(exec_id, socket=True)
            raw = getattr(stream, "_sock", stream)
            threading.Thread(target=_upstream, args=(conn, raw), daemon=True).start()
            # types-docker leaves frames_iter unannotated
            for _, data in frames_iter(stream, tty=False):  # type: ignore[no-untyped-call]
                conn.sendall(data)
        except (OSError, docker.errors.APIError, requests.exceptions.RequestException):
            pass  # the container stopped or is restarting: ZeroMQ will connect again
        finally:
            with self._lock:
                self._open.discard(conn)
            with contextlib.suppress(OSError):
                conn.close()
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


def _upstream(conn: socket.socket, raw: socket.socket) -> None:
    """What jupyter_client sends goes to the relay's stdin; its end closes the exec's input."""
    try:
        while data := conn.recv(1 << 16):
            raw.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            raw.shutdown(socket.SHUT_WR)
