"""Runs inside a task container: joins its stdin/stdout to one of the kernel's unix sockets.

`python relay.py SOCKET_PATH`. On a remote engine the kernel's sockets are in a tmpfs of the
container, and the controller reaches each channel through `docker exec` of this program over the
engine's own connection (`relay.EngineRelay`). Standard library only: it runs with the image's
Python, not the harness's. Exits when either side closes.
"""

from __future__ import annotations

import os
import select
import socket
import sys
import time

#: How long to wait for the kernel to create its socket (s): a kernel starts in about 0.7 s here;
#: the harness's own start-up timeout (60 s by default) bounds the rest.
SOCKET_WAIT_S = 60.0
CHUNK = 1 << 16


def connect(path: str) -> socket.socket | None:
    deadline = time.monotonic() + SOCKET_WAIT_S
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(path)
            return sock
        except OSError:
            sock.close()
            if time.monotonic() > deadline:
                return None
            time.sleep(0.02)


def pump(sock: socket.socket) -> None:
    while True:
        watched: list[int | socket.socket] = [0, sock]
        ready, _, _ = select.select(watched, [], [])
        if 0 in ready:
            data = os.read(0, CHUNK)
            if not data:
                return
            sock.sendall(data)
        if sock in ready:
            data = sock.recv(CHUNK)
            if not data:
                return
            view = memoryview(data)
            while view:
                view = view[os.write(1, view) :]


def main(argv: list[str]) -> int:
    sock = connect(argv[1])
    if sock is None:
        return 1
    try:
        pump(sock)
    finally:
        sock.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
