"""What an attacking task runs inside its container (shipped into the kernel by test_isolation.py).

Standard library plus pyzmq (ipykernel's own dependency, so in every kernel image). Each probe
returns plain data the test asserts on; none of them addresses anything but what the test names.
"""

from __future__ import annotations

import errno
import os
import resource
import selectors
import socket
import stat
import time


def open_tcp_ports(ip: str, ports: range, *, batch: int = 16384, wait_s: float = 0.5) -> list[int]:
    """Ports of `ip` that accept a TCP connection (non-blocking connects, `batch` at a time, fewer
    when the process may not open that many files). A dropped connect costs its batch `wait_s`,
    so fewer batches are faster: test_isolation.py's spy test took 25.9 s with batches of 2048,
    10.6 s with 16384 (one run each, quiet machine)."""
    files = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if files != resource.RLIM_INFINITY:
        batch = max(1, min(batch, files - 256))
    found: list[int] = []
    todo = list(ports)
    while todo:
        chunk, todo = todo[:batch], todo[batch:]
        pending: dict[socket.socket, int] = {}
        for port in chunk:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setblocking(False)
            code = sock.connect_ex((ip, port))
            if code in (0, errno.EINPROGRESS):
                pending[sock] = port
            else:
                sock.close()
        deadline = time.monotonic() + wait_s
        with selectors.DefaultSelector() as selector:
            for sock in pending:
                selector.register(sock, selectors.EVENT_WRITE)
            while pending and (left := deadline - time.monotonic()) > 0:
                for key, _ in selector.select(left):
                    sock = key.fileobj
                    if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                        found.append(pending[sock])
                    selector.unregister(sock)
                    sock.close()
                    del pending[sock]
        for sock in pending:
            sock.close()
    return sorted(found)


def tcp_connect(ip: str, port: int, timeout: float = 2.0) -> str:
    """ "connected", or the name of the error a connect got."""
    try:
        with socket.create_connection((ip, port), timeout=timeout) as sock:
            sock.sendall(b"probe\n")
        return "connected"
    except OSError as exc:
        return type(exc).__name__ + (f" {errno.errorcode.get(exc.errno, '')}" if exc.errno else "")


def udp_send(ip: str, port: int, payload: bytes = b"probe") -> str:
    """ "sent", or the name of the error sendto got (a sent datagram may still be dropped)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.sendto(payload, (ip, port))
        return "sent"
    except OSError as exc:
        return type(exc).__name__ + (f" {errno.errorcode.get(exc.errno, '')}" if exc.errno else "")


def interfaces() -> list[str]:
    """The network interfaces this container has."""
    return sorted(os.listdir("/sys/class/net"))


def listening_inet_sockets() -> list[str]:
    """TCP sockets in LISTEN state and bound UDP sockets of this network namespace that another
    machine or container could address: those bound to loopback (127.0.0.0/8, ::1; docker's
    embedded DNS is one) are left out, as nothing outside the namespace reaches them."""
    found = []
    for table in ("tcp", "tcp6", "udp", "udp6"):
        try:
            with open(f"/proc/net/{table}") as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            address = fields[1].split(":")[0]
            loopback = address.endswith("7F") or address == "0" * 24 + "01000000"
            if (table.startswith("udp") or fields[3] == "0A") and not loopback:  # 0A: LISTEN
                found.append(f"{table} {fields[1]}")
    return found


def unix_sockets(root: str = "/") -> list[str]:
    """Every unix socket file reachable from `root` (not under /proc or /sys)."""
    found = []
    for folder, dirs, files in os.walk(root):
        if folder in ("/proc", "/sys"):
            dirs[:] = []
            continue
        for name in files:
            path = os.path.join(folder, name)
            try:
                if stat.S_ISSOCK(os.lstat(path).st_mode):
                    found.append(path)
            except OSError:
                pass
    return found


def subscribe(endpoints: list[str], seconds: float) -> list[bytes]:
    """Subscribe to everything at `endpoints` (ZeroMQ SUB, no key) and return what arrives."""
    import zmq

    context = zmq.Context()
    sub = context.socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    sub.setsockopt(zmq.LINGER, 0)
    for endpoint in endpoints:
        sub.connect(endpoint)
    received: list[bytes] = []
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        if sub.poll(int(left * 1000)):
            received.extend(sub.recv_multipart())
    context.destroy(linger=0)
    return received
