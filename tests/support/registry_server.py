"""A real Docker registry on this host's loopback for the registry tests and benchmark: Debian's
`docker-registry` (distribution 2.x, scripts/ensure-registry.sh installs it), started here with a
config of our own (storage in a temporary folder, http on 127.0.0.1:<free port>); the package's
own service plays no part. The engine talks plain HTTP to a registry on 127.0.0.1 (loopback
registries are insecure-allowed by default), so no TLS is needed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

BINARY = "docker-registry"
CONFIG = """version: 0.1
log:
  level: error
storage:
  filesystem:
    rootdirectory: {root}
  delete:
    enabled: true
http:
  addr: 127.0.0.1:{port}
"""


def free_port() -> int:
    with contextlib.closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def registry_binary() -> str:
    """The registry's binary; skip (fail with CI=true) when it is not installed."""
    found = shutil.which(BINARY) or (
        "/usr/bin/docker-registry" if os.path.exists("/usr/bin/docker-registry") else None
    )
    if found is None:
        reason = "docker-registry is not installed (scripts/ensure-registry.sh installs it)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return found


class RegistryServer:
    """One registry process: `address` is HOST:PORT; `stop()` ends it, `start()` starts it again
    on the same port and storage."""

    def __init__(self, root: Path | None = None, port: int | None = None) -> None:
        self.binary = registry_binary()
        self.folder = Path(root or tempfile.mkdtemp(prefix="pytest-super-registry-"))
        self.port = port or free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.config = self.folder / "config.yml"
        (self.folder / "storage").mkdir(parents=True, exist_ok=True)
        self.config.write_text(CONFIG.format(root=self.folder / "storage", port=self.port))
        self.log = self.folder / "registry.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30) -> RegistryServer:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [self.binary, "serve", str(self.config)],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while not self.answers():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the registry did not start: {self.log.read_text()[-2000:]}")
            time.sleep(0.1)
        return self

    def answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://{self.address}/v2/", timeout=2) as reply:
                return bool(reply.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)


@contextlib.contextmanager
def running_registry() -> Iterator[RegistryServer]:
    server = RegistryServer().start()
    try:
        yield server
    finally:
        server.close()
