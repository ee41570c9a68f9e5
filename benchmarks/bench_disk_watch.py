"""What watching a task's disk costs the task, on an engine that cannot bound it (overlay2 on ext4).

Run: `.venv/bin/python benchmarks/bench_disk_watch.py [-n 7] [--files 30000]` (needs the engine
and the default image). One kernel gets a writable layer of `--files` small files (about what a
`pip install` of a deep-learning stack leaves), then runs the same workload cell (write, read and
hash 64 MiB in 256 files, 8 times) alternately without and with `DiskWatch` polling it. Prints the medians,
the ratio with/without, and the cost of one poll (the watch's walk of the layer on the host) and
the interval the watch chose (medians).
Always exits 0: it reports, it does not judge.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid

from pytest_super.kernels import cleanup_containers, docker_client, provision_kernel
from pytest_super.kernels.base import KernelSettings
from pytest_super.kernels.docker.diskwatch import DiskWatch
from pytest_super.kernels.docker.image import build_image

POPULATE = """\
import os
os.makedirs('/content/tree', exist_ok=True)
for i in range({files}):
    d = f'/content/tree/{{i // 500}}'
    os.makedirs(d, exist_ok=True)
    with open(f'{{d}}/f{{i}}.py', 'w') as f:
        f.write('x = 1\\n' * 20)
"""
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
    parser.add_argument("--files", type=int, default=30000, help="files in the writable layer")
    args = parser.parse_args(argv)

    image = build_image(offline=True, log=lambda line: None)
    run_id = f"bench-{uuid.uuid4().hex[:8]}"
    settings = KernelSettings(run_id=run_id, worker="bench", image=image, disk_bytes=None)
    client = docker_client(settings)
    without: list[float] = []
    with_watch: list[float] = []
    polls: list[float] = []
    intervals: list[float] = []
    try:
        kernel = provision_kernel(settings, task_id="disk-watch")
        container_id = kernel._box.container_id
        populated = kernel.execute(POPULATE.format(files=args.files), timeout=600)
        assert populated.status == "ok", populated.output
        kernel.execute(WORKLOAD, timeout=120)  # warm up
        for _ in range(args.n):
            without.append(_timed(kernel))
            watch = DiskWatch(client.api)
            stop = watch.watch(container_id, 1 << 50, lambda written, limit: None)
            with_watch.append(_timed(kernel))
            polls.append(watch.last_poll_s)
            intervals.append(watch.interval_s)
            stop()
        layer = client.api.containers(all=True, size=True, filters={"id": [container_id]})
        kernel.close()
    finally:
        cleanup_containers(client, run_id=run_id)

    base, watched = statistics.median(without), statistics.median(with_watch)
    poll, interval = statistics.median(polls), statistics.median(intervals)
    print(
        f"disk watch benchmark: n={args.n}, writable layer of {args.files} files "
        f"({layer[0]['SizeRw'] / 2**20:.0f} MiB), workload: 8 x write+read+hash 64 MiB"
    )
    print(f"{'workload without watch':<30}{base * 1000:>10.1f} ms")
    print(f"{'workload with watch':<30}{watched * 1000:>10.1f} ms")
    print(f"{'one poll (layer walk)':<30}{poll * 1000:>10.1f} ms")
    print(f"{'interval chosen':<30}{interval:>10.2f} s  (duty {poll / interval:.1%})")
    print()
    print(f"with / without watch     {watched / base:5.3f}x")
    return 0


def _timed(kernel) -> float:
    started = time.perf_counter()
    result = kernel.execute(WORKLOAD, timeout=120)
    assert result.status == "ok", result.output
    return time.perf_counter() - started


if __name__ == "__main__":
    sys.exit(main())
