"""Watching what task containers write, on engines that cannot bound it (`DiskWatch`).

overlay2 on ext4 (Debian's engine, this project's CI) has no per-container size limit: a task
wrote 5 GiB in 12 s and could fill the host's disk. So one thread per engine polls the size of
every watched container's writable layer (one `GET /containers/json?size=1` for all of them: the
engine walks each layer) plus the host folders the container may write to (its channel folder),
and stops a box that goes over its limit.

Cost: the engine's walk grows with the number of files in the layers, so the interval adapts: after
a poll that took `t` seconds the next comes `t / WATCH_BUDGET` later, within [POLL_MIN_S,
POLL_MAX_S], so watching takes about WATCH_BUDGET of one core unless a poll takes longer than
POLL_MAX_S * WATCH_BUDGET. `benchmarks/bench_disk_watch.py` measures the overhead on a task's own
work. A filler is stopped within about one interval: it may overshoot by what it writes in that
time (at 430 MB/s, the rate seen here, about 0.5 GB at 1 s, 2 GB at POLL_MAX_S).

A size is never taken as small because it could not be read. The engine reports a layer's size as
-1 when its own walk fails (a task made 20 nested folders of 250-character names, past PATH_MAX,
then wrote 400 MB beside them): the watch then measures the layer's folder on the host itself
(`GraphDriver.Data.UpperDir`, walked folder by folder through directory descriptors, so no path
is ever too long), and a size it cannot measure either stops the task (`UNKNOWN`). Host folders
are walked the same way: a deep path there is counted, not skipped.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import docker.errors
import requests.exceptions

#: Shortest time between two polls (s): bounds the overshoot of a fast writer (see above).
POLL_MIN_S = 1.0
#: Longest time between two polls (s), however slow a poll: bounds the overshoot on a busy engine
#: (a poll took 0.38-0.64 s here with 30,000 files in a layer at load average 15).
POLL_MAX_S = 5.0
#: Share of one core the watch aims to take (the engine's walk plus ours).
WATCH_BUDGET = 0.05

StopBox = Callable[[int, int], None]  # (bytes written or UNKNOWN, limit)
#: the size of a container whose disk use neither the engine nor the watch could measure
UNKNOWN = -1


@dataclass
class _Watched:
    limit: int
    stop: StopBox
    host_dirs: tuple[str, ...] = field(default_factory=tuple)


class DiskWatch:
    """Polls the watched containers of one engine in a daemon thread while any is watched."""

    def __init__(self, api: Any) -> None:
        self._api = api
        self._watched: dict[str, _Watched] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        #: seconds the last poll took and the interval chosen after it (for the benchmark)
        self.last_poll_s = 0.0
        self.interval_s = POLL_MIN_S

    def watch(
        self, container_id: str, limit: int, stop: StopBox, *, host_dirs: Iterable[str] = ()
    ) -> Callable[[], None]:
        """Watch a container; `stop(written, limit)` is called once if it writes over `limit`.

        Returns the function that ends the watch (call it when the box is removed or kept).
        """
        with self._lock:
            self._watched[container_id] = _Watched(limit, stop, tuple(host_dirs))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="pytest-super-disk-watch", daemon=True
                )
                self._thread.start()
        return lambda: self.unwatch(container_id)

    def unwatch(self, container_id: str) -> None:
        with self._lock:
            self._watched.pop(container_id, None)

    def poll(self, only: str | None = None) -> dict[str, int]:
        """Measure every watched container once (or only the one with id `only`), stop those over
        their limit; bytes per id."""
        with self._lock:
            watched = dict(self._watched)
        if only is not None:
            watched = {only: watched[only]} if only in watched else {}
        if not watched:
            return {}
        started = time.perf_counter()
        sizes = self._layer_sizes(list(watched))
        for container_id, entry in watched.items():
            if sizes.get(container_id) == UNKNOWN:
                continue
            sizes[container_id] = sizes.get(container_id, 0) + sum(
                folder_bytes(d) for d in entry.host_dirs
            )
        if only is None:
            self.last_poll_s = time.perf_counter() - started
            self.interval_s = min(max(POLL_MIN_S, self.last_poll_s / WATCH_BUDGET), POLL_MAX_S)
        for container_id, entry in watched.items():
            if sizes[container_id] == UNKNOWN or sizes[container_id] > entry.limit:
                with self._lock:  # the background poll and a box's own check may both see it
                    if self._watched.pop(container_id, None) is None:
                        continue
                entry.stop(sizes[container_id], entry.limit)
        return sizes

    def _layer_sizes(self, ids: list[str]) -> dict[str, int]:
        try:
            listed = self._api.containers(all=True, size=True, filters={"id": ids})
        except (docker.errors.APIError, requests.exceptions.ConnectionError):
            return {}  # the engine is busy or gone: the boxes' own liveness checks will tell
        sizes = {c["Id"]: int(c.get("SizeRw") or 0) for c in listed}
        for container_id, size in sizes.items():
            if size < 0:  # the engine's walk failed: never "small"
                sizes[container_id] = self._upper_dir_bytes(container_id)
        return sizes

    def _upper_dir_bytes(self, container_id: str) -> int:
        """The container's writable layer measured on this host (overlay2's UpperDir); UNKNOWN
        when the engine does not say where it is or it is not on this host."""
        try:
            info = self._api.inspect_container(container_id)
        except (docker.errors.APIError, requests.exceptions.RequestException):
            return UNKNOWN
        upper = ((info.get("GraphDriver") or {}).get("Data") or {}).get("UpperDir")
        if not upper or not os.path.isdir(upper):
            return UNKNOWN
        return folder_bytes(upper)

    def _run(self) -> None:
        while True:
            with self._lock:
                if not self._watched:
                    self._thread = None
                    return
            self.poll()
            self._wake.wait(self.interval_s)


def folder_bytes(path: str) -> int:
    """Disk blocks used under `path` (symlinks not followed; vanished entries skipped). Walked
    through directory descriptors, one level at a time, so a path of any depth is counted."""
    try:
        top = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return 0
    total = 0
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
                    total += info.st_blocks * 512
                    if entry.is_dir(follow_symlinks=False):
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
    return total


_watches: dict[str, DiskWatch] = {}
_watches_lock = threading.Lock()


def disk_watch(api: Any, address: str) -> DiskWatch:
    """The process's watch of the engine at `address`."""
    with _watches_lock:
        if address not in _watches:
            _watches[address] = DiskWatch(api)
        return _watches[address]
