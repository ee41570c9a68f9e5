"""What watching a task's disk costs, on an engine that cannot bound it (overlay2 on ext4).

Run: `.venv/bin/python benchmarks/bench_disk_watch.py [-n 7] [--case files|folders|empty]
[--count N] [--idle-s 30]` (needs the engine and the default image). One kernel gets a writable
layer of the case's entries:

- `files` (default 30,000): small files, about what a `pip install` of a deep-learning stack leaves;
- `folders` (default 40,000): sibling folders of `--folder-kib` (64) KiB each: issue 41's walk
  around the watch;
- `empty` (default 600,000): empty files: issue 41's case of 32% of a core and 204 MB.

Then it measures, each against a baseline taken in the same run:
- the task's own work (write, read and hash 64 MiB in 256 files, 8 times), alternately without
  and with `DiskWatch` polling it: the ratio with/without;
- the harness's CPU while the task sleeps for `--idle-s`, without the watch and then with the
  watch's own thread running: the watch's share of one core, and its ratio to WATCH_BUDGET;
- one walk's time (wall and CPU) and its peak of Python memory (tracemalloc), the interval the
  watch chooses after it (from its CPU), and the steady share of a core: walk CPU / (walk +
  interval), against WATCH_BUDGET.
Always exits 0: it reports, it does not judge.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
import tracemalloc
import uuid

import requests.exceptions

from pytest_super.kernels import provision_kernel
from pytest_super.kernels.base import KernelSettings
from pytest_super.kernels.docker.cleanup import cleanup_containers
from pytest_super.kernels.docker.diskwatch import (
    POLL_MAX_S,
    POLL_MIN_S,
    WATCH_BUDGET,
    DiskWatch,
    folder_use,
)
from pytest_super.kernels.docker.engine import docker_client
from pytest_super.kernels.docker.image import build_image

POPULATE = {
    "files": """\
import os
os.makedirs('/content/tree', exist_ok=True)
for i in range({count}):
    d = f'/content/tree/{{i // 500}}'
    os.makedirs(d, exist_ok=True)
    with open(f'{{d}}/f{{i}}.py', 'w') as f:
        f.write('x = 1\\n' * 20)
""",
    "folders": """\
import os
os.makedirs('/content/tree', exist_ok=True)
block = os.urandom({kib} << 10)
for i in range({count}):
    os.mkdir(f'/content/tree/d{{i}}')
    with open(f'/content/tree/d{{i}}/f', 'wb') as f:
        f.write(block)
""",
    "empty": """\
import os
os.makedirs('/content/tree', exist_ok=True)
for i in range({count}):
    d = f'/content/tree/{{i // 10000}}'
    os.makedirs(d, exist_ok=True)
    open(f'{{d}}/e{{i}}', 'w').close()
""",
}
COUNTS = {"files": 30000, "folders": 40000, "empty": 600000}
WORKLOAD = """\
import hashlib, os
os.makedirs('/content/work', exist_ok=True)
block = os.urandom(1 << 18)
h = hashlib.sha256()
for _ in range(8):
    for i in range(256):
        with open(f'/content/work/{i}', 'wb') as f:
            f.write(block)
    for i in range(256):
        with open(f'/content/work/{i}', 'rb') as f:
            h.update(f.read())
print(h.hexdigest()[:8])
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=7, help="rounds of (without, with) the watch")
    parser.add_argument("--case", choices=sorted(POPULATE), default="files")
    parser.add_argument("--count", type=int, default=None, help="entries (default: the case's)")
    parser.add_argument("--folder-kib", type=int, default=64, help="KiB in each folder (folders)")
    parser.add_argument("--idle-s", type=float, default=30.0, help="idle window, each side")
    args = parser.parse_args(argv)
    count = args.count or COUNTS[args.case]

    image = build_image(offline=True, log=lambda line: None)
    run_id = f"bench-{uuid.uuid4().hex[:8]}"
    settings = KernelSettings(run_id=run_id, worker="bench", image=image, disk_bytes=None)
    client = docker_client(settings)
    try:
        kernel = provision_kernel(settings, task_id="disk-watch")
        container_id = kernel._box.container_id
        code = POPULATE[args.case].format(count=count, kib=args.folder_kib)
        populated = kernel.execute(code, timeout=1800)
        assert populated.status == "ok", populated.output
        work = _workload(kernel, client.api, container_id, args.n)
        idle = _idle(client.api, container_id, args.idle_s)
        walk = _one_walk(client.api, container_id)
        layer = client.api.containers(all=True, size=True, filters={"id": [container_id]})
        _report(args, count, layer[0]["SizeRw"], work, idle, walk)
        with contextlib.suppress(requests.exceptions.RequestException):
            kernel.close()  # a big layer may take the engine longer than the client waits
    finally:
        cleanup_containers(client, run_id=run_id)
    return 0


def _report(args, count: int, size_rw: int, work, idle, walk) -> None:  # type: ignore[no-untyped-def]
    print(
        f"disk watch benchmark: case {args.case}, {count:,} entries, n={args.n}, writable layer "
        f"{size_rw / 2**20:.0f} MiB (apparent), idle window {args.idle_s:.0f} s"
    )
    base, watched = work
    print(f"{'workload without watch':<34}{base * 1000:>10.1f} ms")
    print(f"{'workload with watch':<34}{watched * 1000:>10.1f} ms")
    seconds, cpu, peak, interval = walk
    print(f"{'one walk of the layer':<34}{seconds * 1000:>10.1f} ms  (CPU {cpu * 1000:.1f} ms)")
    print(f"{'its peak Python memory':<34}{peak / 2**20:>10.1f} MiB")
    print(f"{'interval chosen after it':<34}{interval:>10.2f} s")
    without_cpu, with_cpu, polls = idle
    share = max(with_cpu - without_cpu, 0.0) / args.idle_s
    print(f"{'harness CPU idle, no watch':<34}{without_cpu:>10.2f} s")
    print(f"{'harness CPU idle, watch running':<34}{with_cpu:>10.2f} s  ({polls} walks)")
    print()
    print(f"with / without watch (workload)  {watched / base:6.3f}x")
    print(f"watch's share of one core        {share:6.1%}")
    print(f"share / budget ({WATCH_BUDGET:.0%})              {share / WATCH_BUDGET:6.2f}x")
    steady = cpu / (seconds + interval)  # a walk, then the interval, over and over
    print(f"steady share (walk CPU / cycle)  {steady:6.1%}")
    print(f"steady share / budget            {steady / WATCH_BUDGET:6.2f}x")


def _workload(kernel, api, container_id: str, n: int) -> tuple[float, float]:
    """Medians of the workload without and with the watch polling (alternately)."""
    kernel.execute(WORKLOAD, timeout=120)  # warm up
    without: list[float] = []
    with_watch: list[float] = []
    for _ in range(n):
        without.append(_timed(kernel))
        watch = DiskWatch(api)
        stop = watch.watch(container_id, 1 << 50, lambda written, limit: None)
        with_watch.append(_timed(kernel))
        stop()
    return statistics.median(without), statistics.median(with_watch)


def _idle(api, container_id: str, window: float) -> tuple[float, float, int]:
    """This process's CPU seconds over `window` while the task sleeps: without a watch, then with
    the watch's own thread running (a new watch: its first walk at once)."""
    started = time.process_time()
    time.sleep(window)
    without = time.process_time() - started
    watch = DiskWatch(api)
    walks = 0
    original = watch.poll

    def counted(only: str | None = None):  # type: ignore[no-untyped-def]
        nonlocal walks
        walks += 1
        return original(only)

    watch.poll = counted  # type: ignore[method-assign]
    started = time.process_time()
    stop = watch.watch(container_id, 1 << 50, lambda written, limit: None)
    time.sleep(window)
    stop()
    return without, time.process_time() - started, walks


def _one_walk(api, container_id: str) -> tuple[float, float, int, float]:
    """One walk of the layer (`folder_use`, what each poll does): its seconds (wall and this
    thread's CPU), its peak Python memory (tracemalloc), and the interval the watch chooses."""
    upper = api.inspect_container(container_id)["GraphDriver"]["Data"]["UpperDir"]
    tracemalloc.start()
    started, cpu = time.perf_counter(), time.thread_time()
    use = folder_use(upper)
    seconds, cpu = time.perf_counter() - started, time.thread_time() - cpu
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert use is not None and use.bytes >= 0, use
    return seconds, cpu, peak, min(max(POLL_MIN_S, cpu / WATCH_BUDGET), POLL_MAX_S)


def _timed(kernel) -> float:
    started = time.perf_counter()
    result = kernel.execute(WORKLOAD, timeout=120)
    assert result.status == "ok", result.output
    return time.perf_counter() - started


if __name__ == "__main__":
    sys.exit(main())
