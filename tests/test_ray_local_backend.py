"""The Ray executor runs with any kernel backend its nodes can run (issue 45 item 2): the demo's
SUPER tasks on a Ray cluster whose node has no Docker engine at all, with `--super-backend=local`.

The cluster (a head that offers the CPUs) and the controller run in a PID and network namespace
of their own (`unshare --pid --fork --mount-proc -n`: only loopback; every process in it dies with
it), with DOCKER_HOST naming a socket where nothing answers: a node that asked Docker for anything
(an image, a ping, a clean-up) would fail the task. The node's files go to folders of the test's,
which must be empty afterwards."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.support.second_engine import _cannot_start_second_engine

ROOT = Path(__file__).resolve().parent.parent
#: the demo's SUPER tasks (LMR-Bench's need images of their own, which the local backend cannot make)
DEMO = ("tasks/expert", "tasks/auto")

SCRIPT = """
set -u
ip link set lo up
export RAY_USAGE_STATS_ENABLED=0 DOCKER_HOST="unix://$WHERE/no-engine-here.sock"
export TMPDIR="$WHERE/tmp" XDG_RUNTIME_DIR="$WHERE/run"
mkdir -p "$TMPDIR" "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
"$BIN/ray" start --head --block --port=46379 --num-cpus=4 --memory=8589934592 \\
    --temp-dir="$WHERE/ray" --include-dashboard=false --disable-usage-stats \\
    > "$WHERE/ray.log" 2>&1 &
for _ in $(seq 120); do
    "$BIN/python" -c "import socket; socket.create_connection(('127.0.0.1', 46379), 1)" \\
        2>/dev/null && break
    sleep 1
done
"$BIN/python" -m pytest -p no:cacheprovider -p no:randomly -q --super-agent=gold \\
    --super-executor=ray --super-backend=local --super-ray-address=127.0.0.1:46379 \\
    --super-report-dir="$WHERE/reports" "$@"
"""


@pytest.mark.long  # a Ray head started, then seven demo tasks: about two minutes on two cores
def test_the_ray_executor_runs_the_demo_with_the_local_backend_on_a_node_without_docker() -> None:
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("ip") is None:
        _cannot_start_second_engine("a Ray cluster of its own needs root, unshare and ip")
    where = Path("/tmp", f"psr-local-{uuid.uuid4().hex[:8]}")  # short: Ray's socket paths
    where.mkdir()
    try:
        done = subprocess.run(
            ["unshare", "--pid", "--fork", "--mount-proc", "-n", "bash", "-c", SCRIPT, "run"]
            + list(DEMO),
            cwd=ROOT,
            env={**os.environ, "WHERE": str(where), "BIN": str(Path(sys.executable).parent)},
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        output = done.stdout[-5000:] + done.stderr[-3000:]
        assert done.returncode == 0, output
        (run_dir,) = (where / "reports").iterdir()
        records = [json.loads(line) for line in (run_dir / "results.jsonl").open()]
        demo = sorted(path.stem for folder in DEMO for path in (ROOT / folder).glob("*.yaml"))
        assert sorted(r["task_id"] for r in records) == demo
        assert {r["outcome"] for r in records} == {"passed"}, records
        assert all(r["node"] and r["image"] == "(local kernel)" for r in records), records
        # nothing of the run is left on the node: no task folder, no start-lock folder
        assert sorted(p.name for p in (where / "tmp").iterdir() if "pytest-super" in p.name) == []
        locks = where / "run" / "pytest-super" / "locks"
        assert (
            not locks.is_dir()
            or [p.name for p in locks.iterdir() if p.name.startswith("ray-")] == []
        )
    finally:
        shutil.rmtree(where, ignore_errors=True)
