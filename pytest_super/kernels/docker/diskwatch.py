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
that took `t` seconds of CPU the next comes `t / WATCH_BUDGET` later, within [POLL_MIN_S,
POLL_MAX_S], so watching takes about WATCH_BUDGET of one core unless a poll takes more than
POLL_MAX_S * WATCH_BUDGET (15 s). A long interval does not let a filler run: every POLL_MIN_S a
statvfs of each file system under a box (`filling`) compares how much it grew since the box's
last walk with what the box had left under its limits, and walks at once (not sooner than
max(POLL_MIN_S, t) after the last walk) when the box could be over them. So a filler overshoots
by what it writes in about a second (at 430 MB/s, the rate seen here, about 0.5 GB), unless as
much is deleted elsewhere on the same file system meanwhile: then by up to what was freed, within
POLL_MAX_S (the host's disk does not fill: the file system did not grow). `benchmarks/bench_disk_watch.py` measures the overhead on a task's own work and the
watch's share of a core against WATCH_BUDGET, with 30,000 files, 40,000 folders and 600,000
empty files in the layer.

A size is never taken as small because it could not be read: a layer neither walked here nor
sized by the engine (which reports -1 when its own walk fails, e.g. past PATH_MAX) stops the task
(`UNKNOWN`).
"""

from __future__ import annotations

import errno
import os
import stat
import threading
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import docker
import docker.errors
import requests.exceptions

from pytest_super.errors import SuperWarning

#: Shortest time between two polls (s): bounds the overshoot of a fast writer (see above).
POLL_MIN_S = 1.0
#: Longest time between two walks (s) while no file system under a watched box grows toward its
#: limits (the fill check, `DiskWatch.filling`, walks at once when one does). Only a fill hidden
#: from that check, by others deleting as much on the same file system meanwhile, waits this
#: long; it cannot fill the host's disk (the file system did not grow), only overshoot the box's
#: share by what was freed. A walk costing more than POLL_MAX_S * WATCH_BUDGET of CPU (15 s;
#: 600,000 empty files cost 15.3 s on this loaded machine, `benchmarks/bench_disk_watch.py`) is
#: the only case the watch takes more than its budget.
POLL_MAX_S = 300.0
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
    #: why the size is UNKNOWN (what the walk could not read), and whether that was this host's
    #: limit (open files, memory: an environment error) rather than the layer's doing (disk_limit)
    why: str = ""
    environment: bool = False

    def __add__(self, other: DiskUse) -> DiskUse:
        if UNKNOWN in (self.bytes, other.bytes):
            unknown = self if self.bytes == UNKNOWN else other
            return DiskUse(UNKNOWN, None, unknown.why, unknown.environment)
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

    def __init__(self, api: docker.APIClient) -> None:
        self._api = api
        self._watched: dict[str, _Watched] = {}
        self._upper: dict[str, str | None] = {}  # container id -> its UpperDir on this host
        self._warned = False
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        #: CPU seconds the last poll took and the interval chosen after it (for the benchmark)
        self.last_poll_s = 0.0
        self.interval_s = POLL_MIN_S
        #: per box: its use at its last walk, and its file systems' use (bytes, inodes) then
        self._last_use: dict[str, DiskUse] = {}
        self._marks: dict[str, dict[int, tuple[int, int]]] = {}
        #: walks started early because a file system filled toward a box's limit (benchmark)
        self.early_polls = 0

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
            self._last_use.pop(container_id, None)
            self._marks.pop(container_id, None)

    def _paths(self, container_id: str, entry: _Watched) -> list[str]:
        upper = self._upper.get(container_id)
        return [upper, *entry.host_dirs] if upper else []

    def filling(self) -> bool:
        """The cheap check between walks (one statvfs per file system of a box): has a file
        system under a box grown, since the box's last walk, by more than the box had left under
        its limits (bytes or inodes)? Then the box could be over them: walk now. A box the walk
        could not measure, or of a remote engine, is left to the interval."""
        with self._lock:
            watched = dict(self._watched)
        for container_id, entry in watched.items():
            last, mark = self._last_use.get(container_id), self._marks.get(container_id)
            if last is None or mark is None or last.bytes == UNKNOWN:
                continue
            now = _fs_used(self._paths(container_id, entry))
            if now is None:
                continue
            for device, (used_bytes, used_inodes) in now.items():  # each file system on its own:
                if device not in mark:  # what is freed on one hides no growth on another
                    continue
                if used_bytes - mark[device][0] > entry.limits.bytes - last.bytes:
                    return True
                left_inodes = None if last.inodes is None else entry.limits.inodes - last.inodes
                if left_inodes is not None and used_inodes - mark[device][1] > left_inodes:
                    return True
        return False

    def poll(self, only: str | None = None) -> dict[str, DiskUse]:
        """Measure every watched container once (or only the one with id `only`), stop those over
        their limits; what each takes, by id."""
        with self._lock:
            watched = dict(self._watched)
        if only is not None:
            watched = {only: watched[only]} if only in watched else {}
        if not watched:
            return {}
        started = time.thread_time()  # the walk's CPU, not the wait for a busy host's cores
        for container_id, entry in watched.items():  # before the walk: what it misses counts
            mark = _fs_used(self._paths(container_id, entry))
            if mark is not None:
                self._marks[container_id] = mark
        uses = self._layer_uses(list(watched))
        for container_id, entry in watched.items():
            if container_id not in uses:
                continue  # gone from the engine: the box's own liveness check will tell
            for folder in entry.host_dirs:  # one that cannot be opened is gone with its box
                uses[container_id] += folder_use(folder) or DiskUse(0, 0)
        if only is None:
            self.last_poll_s = time.thread_time() - started
            self.interval_s = min(max(POLL_MIN_S, self.last_poll_s / WATCH_BUDGET), POLL_MAX_S)
        self._last_use.update(uses)
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
            self._wait()

    def _wait(self) -> None:
        """Until the interval is over, or sooner (not before max(POLL_MIN_S, the last walk's
        time): at most half a core) when a file system under a box fills toward its limits."""
        now = time.monotonic()
        due, soonest = now + self.interval_s, now + max(POLL_MIN_S, self.last_poll_s)
        while time.monotonic() < due:
            self._wake.wait(min(POLL_MIN_S, max(due - time.monotonic(), 0.0)))
            with self._lock:
                if not self._watched:
                    return
            if time.monotonic() >= soonest and self.filling():
                self.early_polls += 1
                return


def _fs_used(paths: list[str]) -> dict[int, tuple[int, int]] | None:
    """(bytes, inodes) in use on each file system holding `paths`, by device; None when one
    cannot be asked (gone with its box)."""
    used: dict[int, tuple[int, int]] = {}
    try:
        for path in paths:
            device = os.stat(path).st_dev
            if device not in used:
                fs = os.statvfs(path)
                used[device] = ((fs.f_blocks - fs.f_bfree) * fs.f_frsize, fs.f_files - fs.f_ffree)
    except OSError:
        return None
    return used or None


#: folders a walk holds open at once, however wide or deep the tree: the deepest ones of the
#: path being walked; an ancestor closed for this is opened again (by its name, checked to be
#: the same folder) when the walk comes back to it
MAX_OPEN_DIRS = 32
_CWD = getattr(os, "AT_FDCWD", -100)  # an absolute path ignores it
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: an entry gone or replaced (by a file or a symlink) between its listing and its opening: the
#: layer changed under the walk, which counts it as it finds it
_GONE = frozenset({errno.ENOENT, errno.ENOTDIR, errno.ELOOP})
#: failures that are this host's limits (open files, memory), not the layer's doing
_HOST_LIMITS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})


class Unmeasurable(Exception):
    """A walk that could not count everything: never taken as a small size."""

    def __init__(self, path: str, exc: OSError) -> None:
        self.environment = exc.errno in _HOST_LIMITS
        super().__init__(f"{os.strerror(exc.errno or 0) or exc} (errno {exc.errno}) under {path}")


@dataclass
class _Frame:
    """A folder on the walk's path: its name in its parent, its identity, its descriptor (None
    when closed to bound the open files) and its sub-folders not walked yet."""

    name: str
    key: tuple[int, int]
    fd: int | None
    pending: list[tuple[str, tuple[int, int]]] = field(default_factory=list)


@dataclass
class _Tally:
    blocks: int = 0
    inodes: int = 0
    linked: set[tuple[int, int]] = field(default_factory=set)  # files of several names

    def add(self, info: os.stat_result) -> None:
        if info.st_nlink > 1 and not stat.S_ISDIR(info.st_mode):
            key = (info.st_dev, info.st_ino)
            if key in self.linked:
                return  # another name of a file counted already
            self.linked.add(key)
        self.blocks += info.st_blocks * 512
        self.inodes += 1


def folder_use(path: str) -> DiskUse | None:
    """The blocks and inodes used under `path`, the folder itself included (symlinks not
    followed, each inode once, entries gone meanwhile skipped); None when `path` is not there.
    Walked depth first through directory descriptors, so a path of any depth is counted, with at
    most MAX_OPEN_DIRS (+2: a listing, a parent opened by `..`) descriptors open. What cannot be read (a permission, a
    host limit) is `UNKNOWN`, saying why: a size is never small because it could not be read."""
    try:
        top = os.open(path, _DIR_FLAGS)
    except OSError as exc:
        if exc.errno in _GONE:
            return None
        return _unknown(Unmeasurable(path, exc))
    try:
        return _walk(top, path)
    except Unmeasurable as exc:
        return _unknown(exc)


def _unknown(exc: Unmeasurable) -> DiskUse:
    return DiskUse(UNKNOWN, None, why=str(exc), environment=exc.environment)


def _walk(top: int, path: str) -> DiskUse:
    tally = _Tally()
    info = os.fstat(top)
    tally.add(info)
    frames = [_Frame(path, (info.st_dev, info.st_ino), top)]
    try:
        frames[0].pending = _scan(top, path, tally)
        while frames:
            frame = frames[-1]
            if not frame.pending:
                frames.pop()
                if frame.fd is not None:
                    if frames and frames[-1].fd is None:  # its parent, closed: by `..`
                        frames[-1].fd = _open_child(frame.fd, "..", frames[-1].key, path)
                    os.close(frame.fd)
                continue
            name, key = frame.pending.pop()
            fd = _open_child(_reopened(frames, path), name, key, path)
            if fd is None:
                continue
            frames.append(_Frame(name, key, fd))
            _close_ancestors(frames)
            frames[-1].pending = _scan(fd, path, tally)
    finally:
        for frame in frames:
            if frame.fd is not None:
                os.close(frame.fd)
    return DiskUse(tally.blocks, tally.inodes)


def _scan(fd: int, path: str, tally: _Tally) -> list[tuple[str, tuple[int, int]]]:
    """Count one folder's entries; its sub-folders, to walk next."""
    folders = []
    try:
        with os.scandir(fd) as entries:
            for entry in entries:
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError as exc:
                    if exc.errno in _GONE:
                        continue
                    raise
                tally.add(info)
                if stat.S_ISDIR(info.st_mode):
                    folders.append((entry.name, (info.st_dev, info.st_ino)))
    except OSError as exc:
        if exc.errno in _GONE:
            return []
        raise Unmeasurable(path, exc) from exc
    return folders


def _open_child(parent: int | None, name: str, key: tuple[int, int], path: str) -> int | None:
    """The sub-folder `name` of `parent`, if it is still the folder listed (`key`)."""
    if parent is None:
        return None
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
    except OSError as exc:
        if exc.errno in _GONE:
            return None
        raise Unmeasurable(path, exc) from exc
    info = os.fstat(fd)
    if (info.st_dev, info.st_ino) != key:  # replaced by another folder since it was listed
        os.close(fd)
        return None
    return fd


def _close_ancestors(frames: list[_Frame]) -> None:
    """Keep only the MAX_OPEN_DIRS deepest folders of the path open."""
    if len(frames) > MAX_OPEN_DIRS:
        frame = frames[-MAX_OPEN_DIRS - 1]
        if frame.fd is not None:
            os.close(frame.fd)
            frame.fd = None


def _reopened(frames: list[_Frame], path: str) -> int | None:
    """The descriptor of the deepest frame, opened again (with the closed ones above it, down
    from the deepest one still open) when it was closed; None when one of them is gone."""
    if frames[-1].fd is not None:
        return frames[-1].fd
    if frames[0].fd is None:  # the top itself was closed: opened again by its path
        frames[0].fd = _open_child(_CWD, path, frames[0].key, path)
        if frames[0].fd is None:
            for frame in frames:
                frame.pending.clear()
            return None
    first = max(i for i, frame in enumerate(frames) if frame.fd is not None) + 1
    for i in range(first, len(frames)):
        fd = _open_child(frames[i - 1].fd, frames[i].name, frames[i].key, path)
        if fd is None:
            frames[i].pending.clear()  # gone: nothing more to walk in it (or below)
            for later in frames[i + 1 :]:
                later.pending.clear()
            return None
        frames[i].fd = fd
        if i - MAX_OPEN_DIRS >= 0 and frames[i - MAX_OPEN_DIRS].fd is not None:
            os.close(frames[i - MAX_OPEN_DIRS].fd)  # type: ignore[arg-type]
            frames[i - MAX_OPEN_DIRS].fd = None
    return frames[-1].fd


_watches: dict[str, DiskWatch] = {}
_watches_lock = threading.Lock()


def disk_watch(api: docker.APIClient, address: str) -> DiskWatch:
    """The process's watch of the engine at `address`."""
    with _watches_lock:
        if address not in _watches:
            _watches[address] = DiskWatch(api)
        return _watches[address]
