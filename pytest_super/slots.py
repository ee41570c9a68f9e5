"""Bounding the pressure on the Docker engine across xdist workers, with file locks.

Workers are separate processes, so the bounds live in lock files under the run's directory:
`container_slot` holds one of N slot files for as long as a task has a container
(`--super-max-containers`), and `start_lock` lets one worker at a time start a container, so N
workers do not all start theirs in the same second.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def container_slot(lock_dir: Path, slots: int | None, poll_s: float = 0.2) -> Iterator[int | None]:
    """Hold one of `slots` slot files in `lock_dir` (None: no limit). Yields the slot number."""
    if not slots:
        yield None
        return
    lock_dir.mkdir(parents=True, exist_ok=True)
    while True:
        for number in range(slots):
            fd = os.open(lock_dir / f"slot-{number}.lock", os.O_CREAT | os.O_RDWR, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            try:
                yield number
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
            return
        time.sleep(poll_s)


@contextlib.contextmanager
def start_lock(lock_dir: Path) -> Iterator[None]:
    """One container start at a time across the run's workers (the lock dies with its holder)."""
    lock_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_dir / "start.lock", os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
