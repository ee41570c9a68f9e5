"""Bounding the pressure on the Docker engine across xdist workers, with file locks.

Workers are separate processes, so the bounds live in lock files under the run's directory:
`take_slot` holds one of N slot files for as long as a container lives, from before it is
created until its removal finished (`--super-max-containers`; a task that waits for one comes
before a kernel made ahead), and `start_lock` lets one worker at
a time start a container, so N workers do not all start theirs in the same second.

The lock folder must be ours alone and every lock file a regular file (`pytest_super.locks`): a
FIFO or symlink planted at a lock's name is replaced, never opened through.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from pytest_super.locks import held_lock, open_lock_file, secure_folder


class Slot:
    """One held slot file (or none, when there is no cap). `release` is safe to call twice and
    from any thread: a container's slot is freed by whoever finished removing it."""

    def __init__(self, fd: int | None = None, number: int | None = None) -> None:
        self.number = number
        self._fd = fd
        self._lock = threading.Lock()

    def release(self) -> None:
        with self._lock:
            fd, self._fd = self._fd, None
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


def take_slot(
    lock_dir: Path, slots: int | None, *, wait: bool = True, poll_s: float = 0.2
) -> Slot | None:
    """Hold one of `slots` slot files in `lock_dir` (None: no cap, a slot that holds nothing).

    wait=True: poll until one is free; while polling, a `waiting-*.lock` file of this caller is
    held, so that takers who do not wait stand back. wait=False (a kernel made ahead): None when
    all are taken or anyone is waiting: a slot goes to a task that needs it now first.
    """
    if not slots:
        return Slot()
    secure_folder(lock_dir)
    if not wait and someone_waits(lock_dir):
        return None
    waiting: tuple[int, Path] | None = None
    try:
        while True:
            slot = _free_slot(lock_dir, slots)
            if slot is not None or not wait:
                return slot
            if waiting is None:
                waiting = _announce_waiting(lock_dir)
            time.sleep(poll_s)
    finally:
        if waiting is not None:
            fd, path = waiting
            path.unlink(missing_ok=True)
            os.close(fd)  # releases the lock


def _free_slot(lock_dir: Path, slots: int) -> Slot | None:
    for number in range(slots):
        fd = open_lock_file(lock_dir, f"slot-{number}.lock")
        assert fd is not None  # made when missing
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        return Slot(fd, number)
    return None


def _announce_waiting(lock_dir: Path) -> tuple[int, Path]:
    path = lock_dir / f"waiting-{os.getpid()}-{threading.get_ident()}.lock"
    fd = open_lock_file(lock_dir, path.name)
    assert fd is not None  # made when missing
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd, path


def someone_waits(lock_dir: Path) -> bool:
    """Is any taker of the run waiting for a slot? (A waiting file whose lock is free is the
    leftover of a killed process: it counts for nothing.)"""
    for path in lock_dir.glob("waiting-*.lock"):
        fd = open_lock_file(lock_dir, path.name, create=False)
        if fd is None:  # gone meanwhile, or not a lock file of ours: no one waits there
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
    return False


@contextlib.contextmanager
def start_lock(lock_dir: Path) -> Iterator[None]:
    """One container start at a time across the run's workers (the lock dies with its holder)."""
    secure_folder(lock_dir)
    with held_lock(lock_dir, "start.lock"):
        yield
