"""Watching what task containers write, on engines that cannot bound it (`DiskWatch`).

overlay2 on ext4 (Debian's engine, this project's CI) has no per-container size limit: a task
wrote 5 GiB in 12 s and could fill the host's disk. So one thread per engine polls what every
watched container takes from the disk and stops a box that goes over its limits.

What is measured: the container's writable layer on the host (overlay2's
`GraphDriver.Data.UpperDir`) plus the host folders the container may write to (its channel
folder), walked here folder by folder through directory descriptors (so no path is ever too long,
symlinks are not followed), counting

- the blocks allocated (`st_blocks` x 512) of every file, folder, symlink and whiteout, each inode
  once (hard links are one file): a sparse file counts what it holds, not its apparent size, and
  a folder counts its own blocks (100,000 empty folders take 391 MiB);
- the inodes, against a limit of their own: one per `INODE_BYTES` (4 KiB) of the disk limit
  (16,384 under --super-disk=64m, 5.2 million under the default 20g). Any file that holds data
  takes at least one 4 KiB block, so the byte limit binds first for those; the inode limit stops
  what takes no blocks (empty files, symlinks, whiteouts) before it exhausts the host's inodes.

The engine's own size of the layer (`SizeRw` of `GET /containers/json?size=1`) is no bound of
either: it leaves folders out and counts apparent sizes (a 1 TiB sparse file holding nothing
ended a task as disk_limit). It is used only where the layer is not on this host (a remote
engine: its UpperDir is a path on another machine), with no inode count: there the watch keeps
those two faults.

Cost: a walk grows with the number of entries in the layer, so the interval adapts: after a poll
that took `t` seconds the next comes `t / WATCH_BUDGET` later, within [POLL_MIN_S, POLL_MAX_S], so
watching takes about WATCH_BUDGET of one core unless a poll takes longer than
POLL_MAX_S * WATCH_BUDGET. `benchmarks/bench_disk_watch.py` measures the overhead on a task's own
work. A filler is stopped within about one interval: it may overshoot by what it writes in that
time (at 430 MB/s, the rate seen here, about 0.5 GB at 1 s, 2 GB at POLL_MAX_S).

A size is never taken as small because it could not be read: a layer neither walked here nor
sized by the engine (which reports -1 when its own walk fails, e.g. past PATH_MAX) stops the task
(`UNKNOWN`).
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import docker.errors
import requests.exceptions

from pytest_super.errors import SuperWarning

#: Shortest time between two polls (s): bounds the overshoot of a fast writer (see above).
POLL_MIN_S = 1.0
#: Longest time between two polls (s), however slow a poll: bounds the overshoot on a busy host
#: (the engine's own walk took 0.38-0.64 s here with 30,000 files in a layer at load average 15;
#: this watch's walk of such a layer took 0.10-0.23 s, `benchmarks/bench_disk_watch.py`).
POLL_MAX_S = 5.0
#: Share of one core the watch aims to take.
WATCH_BUDGET = 0.05
#: Bytes of the disk limit per inode a box may use (its inode limit is disk limit / this).
INODE_BYTES = 4096

#: the size of a container whose disk use neither the engine nor the watch could measure
UNKNOWN = -1


class DiskWatchWarning(SuperWarning):
    """The watch cannot walk the containers' layers here and falls back to the engine's sizes."""


@dataclass(frozen=True)
class DiskUse:
    """What a box takes from the disk: bytes of allocated blocks (or UNKNOWN), inodes (None where
    only the engine's size could be had)."""

    bytes: int
    inodes: int | None = 0

    def __add__(self, other: DiskUse) -> DiskUse:
        if UNKNOWN in (self.bytes, other.bytes):
            return DiskUse(UNKNOWN, None)
        if self.inodes is None or other.inodes is None:
            return DiskUse(self.bytes + other.bytes, None)
        return DiskUse(self.bytes + other.bytes, self.inodes + other.inodes)


@dataclass(frozen=True)
class DiskLimits:
    bytes: int
    inodes: int

    def exceeded_by(self, use: DiskUse) -> bool:
        return (
            use.bytes == UNKNOWN
            or use.bytes > self.bytes
            or (use.inodes is not None and use.inodes > self.inodes)
        )


def inode_limit(disk_bytes: int) -> int:
    """The inodes a box may use under a disk limit of `disk_bytes` (at least 1,024)."""
    return max(disk_bytes // INODE_BYTES, 1024)


StopBox = Callable[[DiskUse, DiskLimits], None]


@dataclass
class _Watched:
    limits: DiskLimits
    stop: StopBox
    host_dirs: tuple[str, ...] = field(default_factory=tuple)


class DiskWatch:
    """Polls the watched containers of one engine in a daemon thread while any is watched."""

    def __init__(self, api: Any) -> None:
        self._api = api
        self._watched: dict[str, _Watched] = {}
        self._upper: dict[str, str | None] = {}  # container id -> its UpperDir on this host
        self._warned = False
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        #: seconds the last poll took and the interval chosen after it (for the benchmark)
        self.last_poll_s = 0.0
        self.interval_s = POLL_MIN_S

    def watch(
        self, container_id: str, limit: int, stop: StopBox, *, host_dirs: Iterable[str] = ()
    ) -> Callable[[], None]:
        """Watch a container; `stop(use, limits)` is called once if it takes more than `limit`
        bytes or `inode_limit(limit)` inodes.

        Returns the function that ends the watch (call it when the box is removed or kept).
        """
        limits = DiskLimits(limit, inode_limit(limit))
        if self._upper_dir(container_id) is None:
            self._warn_engine_sizes()
        with self._lock:
            self._watched[container_id] = _Watched(limits, stop, tuple(host_dirs))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="pytest-super-disk-watch", daemon=True
                )
                self._thread.start()
        return lambda: self.unwatch(container_id)

    def _warn_engine_sizes(self) -> None:
        """Say once per engine that its layers are measured by the engine's sizes only."""
        if self._warned:
            return
        self._warned = True
        warnings.warn(
            "the disk watch cannot read the containers' writable layers on this host (the "
            "engine runs elsewhere, or this process may not read its data root: run as root to "
            "fix); it uses the engine's sizes, which leave folders out and count sparse files "
            "by their apparent size, and no inode limit (see docs/security.md)",
            DiskWatchWarning,
            stacklevel=4,
        )

    def unwatch(self, container_id: str) -> None:
        with self._lock:
            self._watched.pop(container_id, None)
            self._upper.pop(container_id, None)

    def poll(self, only: str | None = None) -> dict[str, DiskUse]:
        """Measure every watched container once (or only the one with id `only`), stop those over
        their limits; what each takes, by id."""
        with self._lock:
            watched = dict(self._watched)
        if only is not None:
            watched = {only: watched[only]} if only in watched else {}
        if not watched:
            return {}
        started = time.perf_counter()
        uses = self._layer_uses(list(watched))
        for container_id, entry in watched.items():
            if container_id not in uses:
                continue  # gone from the engine: the box's own liveness check will tell
            for folder in entry.host_dirs:  # one that cannot be opened is gone with its box
                uses[container_id] += folder_use(folder) or DiskUse(0, 0)
        if only is None:
            self.last_poll_s = time.perf_counter() - started
            self.interval_s = min(max(POLL_MIN_S, self.last_poll_s / WATCH_BUDGET), POLL_MAX_S)
        for container_id, use in uses.items():
            entry = watched[container_id]
            if entry.limits.exceeded_by(use):
                with self._lock:  # the background poll and a box's own check may both see it
                    if self._watched.pop(container_id, None) is None:
                        continue
                entry.stop(use, entry.limits)
        return uses

    def _layer_uses(self, ids: list[str]) -> dict[str, DiskUse]:
        """Each container's writable layer: walked here, else sized by the engine."""
        uses: dict[str, DiskUse] = {}
        remote: list[str] = []
        for container_id in ids:
            upper = self._upper_dir(container_id)
            if upper is None:
                remote.append(container_id)
                continue
            use = folder_use(upper)
            if use is None:  # gone with its container? the engine says (or says -1: UNKNOWN)
                remote.append(container_id)
                continue
            uses[container_id] = use
        if remote:
            uses.update(self._engine_sizes(remote))
        return uses

    def _upper_dir(self, container_id: str) -> str | None:
        """The container's writable layer on this host (overlay2's UpperDir, asked once); None
        when the engine does not say or it is not a folder here (a remote engine's)."""
        if container_id in self._upper:
            return self._upper.get(container_id)  # (unwatched meanwhile: None)
        try:
            info = self._api.inspect_container(container_id)
        except (docker.errors.APIError, requests.exceptions.RequestException):
            return None  # not remembered: asked again next time
        upper = ((info.get("GraphDriver") or {}).get("Data") or {}).get("UpperDir")
        found = upper if upper and os.path.isdir(upper) else None
        self._upper[container_id] = found
        return found

    def _engine_sizes(self, ids: list[str]) -> dict[str, DiskUse]:
        """The engine's sizes of the layers (apparent sizes, folders left out, no inodes): only
        for layers not on this host."""
        try:
            listed = self._api.containers(all=True, size=True, filters={"id": ids})
        except (docker.errors.APIError, requests.exceptions.ConnectionError):
            return {}  # the engine is busy or gone: the boxes' own liveness checks will tell
        uses = {}
        for c in listed:
            size = int(c.get("SizeRw") or 0)
            uses[c["Id"]] = DiskUse(size if size >= 0 else UNKNOWN, None)  # -1: never "small"
        return uses

    def _run(self) -> None:
        while True:
            with self._lock:
                if not self._watched:
                    self._thread = None
                    return
            self.poll()
            self._wake.wait(self.interval_s)


def folder_use(path: str) -> DiskUse | None:
    """The blocks and inodes used under `path`, the folder itself included (symlinks not
    followed, each inode once, vanished entries skipped); None when `path` is not a folder that
    can be opened. Walked through directory descriptors, one level at a time, so a path of any
    depth is counted."""
    try:
        top = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return None
    info = os.fstat(top)
    seen = {(info.st_dev, info.st_ino)}
    total = info.st_blocks * 512
    stack = [top]
    while stack:
        fd = stack.pop()
        try:
            with os.scandir(fd) as entries:
                for entry in entries:
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    if (info.st_dev, info.st_ino) not in seen:
                        seen.add((info.st_dev, info.st_ino))
                        total += info.st_blocks * 512
                    if stat.S_ISDIR(info.st_mode):
                        with contextlib.suppress(OSError):
                            stack.append(
                                os.open(
                                    entry.name,
                                    os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW,
                                    dir_fd=fd,
                                )
                            )
        except OSError:
            pass
        finally:
            os.close(fd)
    return DiskUse(total, len(seen))


_watches: dict[str, DiskWatch] = {}
_watches_lock = threading.Lock()


def disk_watch(api: Any, address: str) -> DiskWatch:
    """The process's watch of the engine at `address`."""
    with _watches_lock:
        if address not in _watches:
            _watches[address] = DiskWatch(api)
        return _watches[address]
