"""The `1+1` round trip through JupyterKernel versus a bare jupyter_client, on local kernels.

Run: `.venv/bin/python benchmarks/bench_local_kernel.py [--runs 300]`. Two local ipykernel
processes, one driven by JupyterKernel, one by a bare BlockingKernelClient doing execute + drain
IOPub to idle + shell reply; calls alternate so machine load hits both. Prints the medians, the
difference and the p90s (bench_kernel.py measures the same on Docker kernels).
Always exits 0: it reports, it does not judge.
"""

from __future__ import annotations

import argparse
import statistics
import time
from queue import Empty

from jupyter_client import BlockingKernelClient

from pytest_super.kernels.jupyter.runtime import JupyterKernel
from pytest_super.kernels.local import LocalBox


def bare_round_trip(client: BlockingKernelClient) -> float:
    """Seconds for `1+1` through a bare client: execute, IOPub to idle, the shell reply."""
    started = time.perf_counter()
    msg_id = client.execute("1+1", allow_stdin=False)
    while True:
        try:
            msg = client.iopub_channel.get_msg(timeout=30)
        except Empty as exc:
            raise SystemExit("no idle from the bare client") from exc
        if (
            msg["parent_header"].get("msg_id") == msg_id
            and msg["msg_type"] == "status"
            and msg["content"]["execution_state"] == "idle"
        ):
            break
    client.get_shell_msg(timeout=30)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    runs = parser.parse_args().runs
    ours_box, bare_box = LocalBox(), LocalBox()
    kernel = JupyterKernel(ours_box)
    bare_client = BlockingKernelClient()
    try:
        bare_client.load_connection_info(bare_box.connection_info())
        bare_client.start_channels(hb=False, stdin=False)
        bare_client.wait_for_ready(30)
        ours, bare = [], []
        for _ in range(runs):
            ours.append(kernel.execute("1+1", 30).duration_s)
            bare.append(bare_round_trip(bare_client))
    finally:
        bare_client.stop_channels()
        kernel.close()
        bare_box.remove()
    med_ours, med_bare = statistics.median(ours) * 1000, statistics.median(bare) * 1000
    print(
        f"1+1 round trip, median of {runs}: JupyterKernel {med_ours:.2f} ms, "
        f"bare BlockingKernelClient {med_bare:.2f} ms, difference {med_ours - med_bare:+.2f} ms; "
        f"p90 {statistics.quantiles(ours, n=10)[-1] * 1000:.2f} vs "
        f"{statistics.quantiles(bare, n=10)[-1] * 1000:.2f} ms"
    )


if __name__ == "__main__":
    main()
